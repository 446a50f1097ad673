"""Per-category ratios from hand-made request records: every pair the speedups table compares (spec over
spec too), its interval and both sides' τ, the few mark below stats.MIN_TAIL; and the verdict flips."""

import numpy as np
import pandas as pd
import pytest
from handrun import MS, T0, profile, rec

from analysis import compare, ingest, metrics, stats
from analysis.analyze import SLIM
from ddbench.records import CellStatus
from ddbench.results import write_json_atomic, write_text_atomic

ARMS = [{"id": "ar", "kind": "ar"}, {"id": "linear-b4", "kind": "linear", "block_size": 4},
        {"id": "chain-b4", "kind": "chain", "block_size": 4},
        {"id": "tree-b4-k2", "kind": "tree", "block_size": 4, "budget": 4, "topk": 2}]
# speed of each arm (1/E2E of the same request, relative to ar) per category, and verify steps per 8 tokens
SPEED = {"ar": {"code": 1.0, "json": 1.0, "chat": 1.0}, "linear-b4": {"code": 2.0, "json": 2.0, "chat": 2.0},
         "chain-b4": {"code": 2.0, "json": 1.6, "chat": 2.0}, "tree-b4-k2": {"code": 2.5, "json": 2.5, "chat": 2.5}}
STEPS = {"ar": None, "linear-b4": 4, "chain-b4": 4, "tree-b4-k2": 2}
# requests per category per arm: code at the floor, json one below it, chat a single request
COUNT = {"code": stats.MIN_TAIL, "json": stats.MIN_TAIL - 1, "chat": 1}


def _records(arm: str) -> list:
    out, t = [], 0.0
    for cat, k in COUNT.items():
        for i in range(k):
            e2e = (300 + 5 * i) / SPEED[arm][cat]      # the same request set on every arm, a little spread
            spec = {"spec_verify_ct": STEPS[arm]} if STEPS[arm] else None
            out.append(rec(arm, f"{cat}{i}", t, [(t + e2e / 2, "a", 1), (t + e2e, " b c d e f g h", 7)], t + e2e,
                           8, spec=spec, prompt=f"{cat}{i}", category=cat))
            t += e2e + 1
    return out


def _categories(tmp_path) -> pd.DataFrame:
    prof = profile(arms=ARMS)
    run = tmp_path / prof.name / "r1"
    for arm in SPEED:
        records = _records(arm)
        cell = run / arm / "c1-r1"
        write_text_atomic(cell / "requests-h-1.jsonl", "".join(r.model_dump_json() + "\n" for r in records))
        st = CellStatus(arm=arm, concurrency=1, repetition=1, status="ok", started_unix=1.8e9, ended_unix=1.8e9 + 20,
                        window_start_ns=T0, window_end_ns=T0 + 20_000 * MS, requests=len(records), errors=0)
        write_json_atomic(cell / "status.json", st.model_dump(mode="json"))
    write_json_atomic(run / "manifest.json", {"profile": prof.model_dump(mode="json"), "profile_digest": prof.digest(),
                                              "prompt_set_digest": "ab" * 32})
    r = ingest.load(run)
    kinds = {a.id: a.kind for a in r.profile.arms}
    req, cells = metrics.mark_window(metrics.per_request(r.requests, r.chunks, kinds), r.cells)
    cells, boots = metrics.per_cell(req[SLIM], metrics.chunk_gaps(r.chunks), cells, kinds, b=400, seed=0)
    return compare.per_category(r, req[SLIM], cells, boots)


@pytest.fixture
def cats(tmp_path):
    return _categories(tmp_path).set_index(["arm", "baseline", "concurrency", "category"])


def test_every_pair_of_the_speedups_table_per_category(cats):
    pairs = sorted(set(zip(cats.index.get_level_values("arm"), cats.index.get_level_values("baseline"), strict=True)))
    assert pairs == sorted([("linear-b4", "ar"), ("chain-b4", "ar"), ("chain-b4", "linear-b4"), ("tree-b4-k2", "ar"),
                            ("tree-b4-k2", "linear-b4"), ("tree-b4-k2", "chain-b4")])
    assert cats.loc[("tree-b4-k2", "chain-b4", 1, "code"), "baseline_kind"] == "chain"
    assert len(cats) == 6 * len(COUNT)       # every category of every pair, the thin ones too


@pytest.mark.parametrize("arm,base,cat,ratio", [("tree-b4-k2", "linear-b4", "code", 1.25),
                                                ("chain-b4", "linear-b4", "json", 0.8),
                                                ("tree-b4-k2", "chain-b4", "json", 2.5 / 1.6),
                                                ("tree-b4-k2", "ar", "code", 2.5)])
def test_spec_over_spec_ratio_interval_and_both_taus(cats, arm, base, cat, ratio):
    r = cats.loc[(arm, base, 1, cat)]
    # the mean of rates of the same request set, scaled: the pooled ratio is the planted one exactly
    assert r["speedup"] == pytest.approx(ratio, rel=1e-9)
    assert r["speedup_lo"] < r["speedup"] < r["speedup_hi"]
    assert r["verdict"] == compare.verdict(r["speedup_lo"], r["speedup_hi"]) == ("faster" if ratio > 1 else "slower")
    assert r["tau"] == pytest.approx(8 / STEPS[arm])
    assert r["baseline_tau"] == pytest.approx(8 / STEPS[base] if STEPS[base] else 1.0)   # ar: 1 by definition


def test_a_category_under_the_percentile_floor_is_kept_and_marked_few(cats):
    t = cats.xs(("tree-b4-k2", "linear-b4", 1), level=["arm", "baseline", "concurrency"])
    assert t.loc["code", "n"] == t.loc["code", "baseline_n"] == stats.MIN_TAIL and not t.loc["code", "few"]
    assert t.loc["json", "n"] == stats.MIN_TAIL - 1 and t.loc["json", "few"]
    assert np.isfinite(t.loc["json", "speedup_lo"])            # marked, not emptied
    # one request a side: kept, marked, a ratio but no interval and so no verdict
    assert t.loc["chat", "few"] and t.loc["chat", "n"] == 1
    assert t.loc["chat", "speedup"] == pytest.approx(1.25)
    assert np.isnan(t.loc["chat", "speedup_lo"]) and t.loc["chat", "verdict"] == "no interval"


def _row(cat, lo, hi, arm="tree-b4-k2", base="linear-b4", c=1, n=50):
    return {"arm": arm, "baseline": base, "concurrency": c, "category": cat, "n": n, "baseline_n": n,
            "few": n < stats.MIN_TAIL, "speedup": np.sqrt(lo * hi) if lo == lo else 1.0, "speedup_lo": lo,
            "speedup_hi": hi, "verdict": compare.verdict(lo, hi)}


def _overall(lo, hi, arm="tree-b4-k2", base="linear-b4", c=1):
    return {"arm": arm, "baseline": base, "concurrency": c, "speedup": np.sqrt(lo * hi), "speedup_lo": lo,
            "speedup_hi": hi, "verdict": compare.verdict(lo, hi)}


def test_flips_are_read_off_the_verdict_definition():
    nan = float("nan")
    cats = pd.DataFrame([_row("code", 1.10, 1.30),      # faster, as overall: not a flip
                         _row("json", 0.80, 0.95),      # slower under an overall faster: a flip, opposite
                         _row("chat", 0.90, 1.20),      # holds 1: within noise, not faster: a flip, not opposite
                         _row("edge", 1.00, 1.20),      # lo = 1 is not above 1: within noise, a flip
                         _row("thin", 0.70, 0.90, n=3),  # few: listed, with its mark
                         _row("none", nan, nan),         # no interval: no verdict to differ
                         _row("code", 1.10, 1.30, c=4),  # within noise overall at C=4: faster is a flip
                         _row("code", 0.90, 1.10, base="ar")])   # no overall row for this pair: nothing to differ
    overall = pd.DataFrame([_overall(1.05, 1.15), _overall(0.98, 1.04, c=4)])
    assert [overall["verdict"][0], overall["verdict"][1]] == ["faster", "within noise"]
    f = compare.category_flips(cats, overall).set_index(["concurrency", "category"])
    assert sorted(f.index) == [(1, "chat"), (1, "edge"), (1, "json"), (1, "thin"), (4, "code")]
    assert f.loc[(1, "chat"), "verdict"] == "within noise" and f.loc[(1, "chat"), "overall_verdict"] == "faster"
    assert f["opposite"].to_dict() == {(1, "chat"): False, (1, "edge"): False, (1, "json"): True, (1, "thin"): True,
                                       (4, "code"): False}
    assert f.loc[(1, "thin"), "few"] and not f.loc[(1, "json"), "few"]
    assert f.loc[(4, "code"), "overall_lo"] == 0.98


def test_no_flip_tables_are_empty_not_missing():
    empty = compare.category_flips(pd.DataFrame(), pd.DataFrame())
    assert empty.empty and {"category", "verdict", "overall_verdict", "opposite"} <= set(empty.columns)


def test_flips_on_the_synthetic_run(synth_analysis):
    f = compare.category_flips(synth_analysis.categories, synth_analysis.speedups)
    assert (f["verdict"] != f["overall_verdict"]).all()
    s = synth_analysis.speedups.set_index(["arm", "baseline", "concurrency"])
    for r in f.itertuples():
        assert s.loc[(r.arm, r.baseline, r.concurrency), "verdict"] == r.overall_verdict
