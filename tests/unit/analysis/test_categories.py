"""Per-category ratios from hand-made request records over three repetitions: every pair the speedups table
compares (spec over spec too), paired by repetition like the headline ratios, with interval, verdict and both
sides' τ; the few mark below stats.MIN_TAIL; the identity with the cell's throughput; and the verdict flips."""

import numpy as np
import pandas as pd
import pytest
from handrun import MS, T0, profile, rec

from analysis.analyze import SLIM
from analysis.estimate import compare, metrics, stats
from analysis.read import ingest
from ddbench.core.records import CellStatus, RequestRecord
from ddbench.core.results import cell_name, write_json_atomic, write_text_atomic

ARMS = [{"id": "ar", "kind": "ar"}, {"id": "linear-b4", "kind": "linear", "block_size": 4},
        {"id": "chain-b4", "kind": "chain", "block_size": 4},
        {"id": "tree-b4-k2", "kind": "tree", "block_size": 4, "budget": 4, "topk": 2}]
# speed of each arm (1/E2E of the same request, relative to ar) per category, and verify steps per 8 tokens
SPEED = {"ar": {"code": 1.0, "json": 1.0, "chat": 1.0, "rare": 1.0},
         "linear-b4": {"code": 2.0, "json": 2.0, "chat": 2.0, "rare": 2.0},
         "chain-b4": {"code": 2.0, "json": 1.6, "chat": 2.0, "rare": 2.0},
         "tree-b4-k2": {"code": 2.5, "json": 2.5, "chat": 2.5, "rare": 2.5}}
STEPS = {"ar": None, "linear-b4": 4, "chain-b4": 4, "tree-b4-k2": 2}
REPS = 3
# one cell's speed per repetition (the host's noise, the same for all of its categories): geometric mean 1 per arm,
# so a pooled ratio is the planted one exactly, and every pair has a spread, so an interval
JITTER = {"ar": (1.0, 1.0, 1.0), "linear-b4": (1.03, 1 / 1.03, 1.0), "chain-b4": (1 / 1.03, 1.03, 1.0),
          "tree-b4-k2": (1.02, 1.0, 1 / 1.02)}
# requests per category per cell: code reaches the floor over the repetitions, json stays one short of it, chat is
# a single request a cell, rare one request in the first repetition only (one pair: no interval)
COUNT = {"code": -(-stats.MIN_TAIL // REPS), "json": (stats.MIN_TAIL - 1) // REPS, "chat": 1, "rare": 0}


def _records(arm: str, rep: int, gap_ms: float) -> list:
    """One cell's requests, timed in whole nanoseconds (the jitter makes fractions of one)."""
    out, t = [], 0
    counts = {**COUNT, "rare": 1 if rep == 1 else 0}
    for cat, k in counts.items():
        for i in range(k):
            # the same request set on every arm, a little spread
            e2e = round((300 + 5 * i) * MS / (SPEED[arm][cat] * JITTER[arm][rep - 1]))
            spec = {"spec_verify_ct": STEPS[arm]} if STEPS[arm] else None
            d = rec(arm, f"{cat}{i}-{rep}", 0, [], 0, 8, spec=spec, prompt=f"{cat}{i}", category=cat).model_dump()
            d.update(repetition=rep, send_ns=T0 + t, end_ns=T0 + t + e2e,
                     chunks=[{"t_ns": T0 + t + e2e // 2, "text": "a", "tokens": 1},
                             {"t_ns": T0 + t + e2e, "text": " b c d e f g h", "tokens": 7}])
            out.append(RequestRecord.model_validate(d))
            t += e2e + round(gap_ms * MS)
    return out


def _run(tmp_path, gap_ms: float = 0.0):
    """The run's Run, requests and cells; gap_ms idles each user between requests (occupancy below C)."""
    prof = profile(arms=ARMS)
    run = tmp_path / prof.name / "r1"
    for rep in range(1, REPS + 1):
        for arm in SPEED:
            records = _records(arm, rep, gap_ms)
            cell = run / arm / cell_name(1, rep)
            write_text_atomic(cell / "requests-h-1.jsonl", "".join(r.model_dump_json() + "\n" for r in records))
            end = max(r.end_ns for r in records) + round(gap_ms * MS)
            st = CellStatus(arm=arm, concurrency=1, repetition=rep, status="ok", started_unix=1.8e9 + 100 * rep,
                            ended_unix=1.8e9 + 100 * rep + 20, window_start_ns=T0, window_end_ns=end,
                            requests=len(records), errors=0)
            write_json_atomic(cell / "status.json", st.model_dump(mode="json"))
    write_json_atomic(run / "manifest.json", {"profile": prof.model_dump(mode="json"), "profile_digest": prof.digest(),
                                              "prompt_set_digest": "ab" * 32})
    r = ingest.load(run)
    kinds = {a.id: a.kind for a in r.profile.arms}
    req, cells = metrics.mark_window(metrics.per_request(r.requests, r.chunks, kinds), r.cells)
    cells, boots = metrics.per_cell(req[SLIM], metrics.chunk_gaps(r.chunks), cells, kinds, b=100, seed=0)
    return r, req[SLIM], cells, boots


@pytest.fixture
def cats(tmp_path):
    r, req, cells, _ = _run(tmp_path)
    return compare.per_category(r, req, cells).set_index(["arm", "baseline", "concurrency", "category"])


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
def test_ratio_paired_by_repetition_with_interval_and_both_taus(cats, arm, base, cat, ratio):
    r = cats.loc[(arm, base, 1, cat)]
    # the jitter's geometric mean is 1 per arm: the paired geometric mean is the planted ratio exactly
    assert r["speedup"] == pytest.approx(ratio, rel=1e-6)     # 1e-6: the records' whole nanoseconds
    assert r["pairs"] == REPS
    assert r["speedup_lo"] < r["speedup"] < r["speedup_hi"]
    assert r["verdict"] == compare.verdict(r["speedup_lo"], r["speedup_hi"]) == ("faster" if ratio > 1 else "slower")
    assert r["tau"] == pytest.approx(8 / STEPS[arm])
    assert r["baseline_tau"] == pytest.approx(8 / STEPS[base] if STEPS[base] else 1.0)   # ar: 1 by definition


def test_the_interval_is_the_pairs_not_the_requests(cats):
    # per repetition the ratio is the planted one times the two cells' jitter: paired_log_ratio over those
    r = cats.loc[("tree-b4-k2", "linear-b4", 1, "code")]
    per_rep = [1.25 * JITTER["tree-b4-k2"][i] / JITTER["linear-b4"][i] for i in range(REPS)]
    want = stats.paired_log_ratio(per_rep, [1.0] * REPS)
    assert (r["speedup_lo"], r["speedup_hi"]) == pytest.approx((want["ratio_lo"], want["ratio_hi"]), rel=1e-6)
    assert r["mde"] == pytest.approx(want["mde"], rel=1e-4)


def test_a_ratio_that_holds_one_is_within_noise_with_the_pairs_to_resolve_it(cats):
    r = cats.loc[("chain-b4", "linear-b4", 1, "code")]      # the same speed: 1 with the two cells' jitter
    assert r["speedup_lo"] < 1 < r["speedup_hi"] and r["verdict"] == "within noise"
    assert r["n_to_resolve"] is None or r["n_to_resolve"] != r["n_to_resolve"] or r["n_to_resolve"] > REPS


def test_a_category_under_the_percentile_floor_is_kept_and_marked_few(cats):
    t = cats.xs(("tree-b4-k2", "linear-b4", 1), level=["arm", "baseline", "concurrency"])
    assert t.loc["code", "n"] == t.loc["code", "baseline_n"] == REPS * COUNT["code"] >= stats.MIN_TAIL
    assert not t.loc["code", "few"]
    assert t.loc["json", "n"] == REPS * COUNT["json"] < stats.MIN_TAIL and t.loc["json", "few"]
    assert np.isfinite(t.loc["json", "speedup_lo"]) and t.loc["json", "verdict"] == "faster"   # marked, not emptied
    # one request in one repetition: kept, marked, a ratio from one pair but no interval and so no verdict
    assert t.loc["rare", "few"] and t.loc["rare", "n"] == 1 and t.loc["rare", "pairs"] == 1
    assert t.loc["rare", "speedup"] == pytest.approx(1.25 * 1.02 / 1.03, rel=1e-6)
    assert np.isnan(t.loc["rare", "speedup_lo"]) and t.loc["rare", "verdict"] == "no interval"


def test_like_for_like_with_the_headline_ratio_when_users_idle(tmp_path):
    # users idle between requests, so each cell's occupancy is below C and differs by arm: a category's ratio
    # must still be the headline throughput ratio wherever every category shares one speed ratio
    r, req, cells, boots = _run(tmp_path, gap_ms=120.0)
    c = compare.per_category(r, req, cells).set_index(["arm", "baseline", "category"])
    s, _ = compare.speedups(r, cells, boots)
    head = s.set_index(["arm", "baseline"]).loc[("tree-b4-k2", "linear-b4")]
    for cat in ("code", "json", "chat"):
        row = c.loc[("tree-b4-k2", "linear-b4", cat)]
        assert row["speedup"] == pytest.approx(head["speedup"], rel=1e-9)
        assert (row["speedup_lo"], row["speedup_hi"]) == pytest.approx((head["speedup_lo"], head["speedup_hi"]),
                                                                       rel=1e-9)
    # the bare rate ratio (Σ N / Σ E2E, no occupancy) is the speed ratio, not the headline ratio, here
    assert head["speedup"] != pytest.approx(2.5 / 2.0, rel=1e-2)


def test_category_throughputs_weigh_up_to_the_cell_throughput(tmp_path):
    r, req, cells, _ = _run(tmp_path, gap_ms=120.0)
    s = compare.category_sums(req, cells)
    s = s.assign(thr=s["tokens"] / s["busy_s"] * s["occupancy"])
    mean = s.groupby(["arm", "concurrency", "repetition"]).apply(
        lambda d: (d["thr"] * d["busy_s"]).sum() / d["busy_s"].sum())
    thr = cells.set_index(["arm", "concurrency", "repetition"])["throughput"]
    assert np.allclose(mean.loc[thr.index].to_numpy(), thr.to_numpy(), rtol=1e-12)


def _row(cat, lo, hi, arm="tree-b4-k2", base="linear-b4", c=1, n=50):
    return {"arm": arm, "baseline": base, "concurrency": c, "category": cat, "n": n, "baseline_n": n,
            "few": n < stats.MIN_TAIL, "pairs": 4, "speedup": np.sqrt(lo * hi) if lo == lo else 1.0,
            "speedup_lo": lo, "speedup_hi": hi, "verdict": compare.verdict(lo, hi)}


def _overall(lo, hi, arm="tree-b4-k2", base="linear-b4", c=1, n_to_resolve=None):
    return {"arm": arm, "baseline": base, "concurrency": c, "speedup": np.sqrt(lo * hi), "speedup_lo": lo,
            "speedup_hi": hi, "verdict": compare.verdict(lo, hi), "n_to_resolve": n_to_resolve}


def test_flips_are_opposite_sides_or_resolved_under_noise():
    nan = float("nan")
    cats = pd.DataFrame([_row("code", 1.10, 1.30),      # faster, as overall: not a flip
                         _row("json", 0.80, 0.95),      # slower under an overall faster: opposite
                         _row("chat", 0.90, 1.20),      # holds 1 under an overall faster: says less, not a flip
                         _row("edge", 1.00, 1.20),      # lo = 1 is not above 1: within noise, not a flip
                         _row("thin", 0.70, 0.90, n=3),  # few: listed, with its mark
                         _row("none", nan, nan),         # no interval: no verdict to differ
                         _row("code", 1.10, 1.30, c=4),  # faster where overall is within noise at C=4: resolved
                         _row("chat", 0.95, 1.05, c=4),  # within noise as overall: not a flip
                         _row("code", 0.90, 1.10, base="ar")])   # no overall row for this pair: nothing to differ
    overall = pd.DataFrame([_overall(1.05, 1.15), _overall(0.98, 1.04, c=4, n_to_resolve=40)])
    assert [overall["verdict"][0], overall["verdict"][1]] == ["faster", "within noise"]
    f = compare.category_flips(cats, overall).set_index(["concurrency", "category"])
    assert sorted(f.index) == [(1, "json"), (1, "thin"), (4, "code")]
    assert f["opposite"].to_dict() == {(1, "json"): True, (1, "thin"): True, (4, "code"): False}
    assert f.loc[(1, "thin"), "few"] and not f.loc[(1, "json"), "few"]
    assert f.loc[(4, "code"), "overall_lo"] == 0.98 and f.loc[(4, "code"), "overall_n_to_resolve"] == 40


def test_no_flip_tables_are_empty_not_missing():
    empty = compare.category_flips(pd.DataFrame(), pd.DataFrame())
    assert empty.empty and {"category", "verdict", "overall_verdict", "opposite"} <= set(empty.columns)


def test_flips_on_the_synthetic_run(synth_analysis):
    f = compare.category_flips(synth_analysis.categories, synth_analysis.speedups)
    sided = {"faster", "slower"}
    assert f["verdict"].isin(sided).all()
    s = synth_analysis.speedups.set_index(["arm", "baseline", "concurrency"])
    for r in f.itertuples():
        overall = s.loc[(r.arm, r.baseline, r.concurrency), "verdict"]
        assert overall == r.overall_verdict and overall != r.verdict
        assert r.opposite == (overall in sided)
