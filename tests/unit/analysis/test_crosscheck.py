"""Cross-check of two runs (SGLang-like against reference-engine-like) on the hand-computed run of
handrun.py, each number worked out here by hand; and how compare_with is resolved or refused."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from handrun import MS, T0, hand_records, profile, rec, write_hand_run

from analysis.__main__ import main as analysis_main
from analysis.analyze import analyze
from analysis.saved import write as write_tables
from analysis.trust import crosscheck
from analysis.trust.crosscheck import CrossCheckError

SGLANG = {"kind": "sglang", "runtime": "local", "version": "0.5.15"}
WORDS = ["a", "b", "c", "d", "e", "f", "x", "y"]


@pytest.fixture
def target(tmp_path):
    """A target directory with a whitespace word tokenizer: one token per word of the hand texts."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    d = tmp_path / "target"
    d.mkdir()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["<unk>"] + WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(d / "tokenizer.json"))
    return str(d)


def _other_records():
    """The reference-engine side: ar's request B ends 'x y' instead of 'c d'; tree's request F took
    2 verify steps instead of 3."""
    ar, tree = hand_records()
    ar[2] = rec("ar", "B", 300, [(350, "", 0), (420, "a", 1), (480, " b", 1), (520, " x", 1), (600, " y", 1)], 620, 4)
    tree[1].spec = {**tree[1].spec, "spec_verify_ct": 2}
    return ar, tree


def _pair(tmp_path, target, other_prof=None, **this_over):
    """(this run: SGLang-like, other run: reference-engine-like); ar's window in the other run is 2 s."""
    other = write_hand_run(tmp_path / "ref", prof=other_prof or profile(models={"target": target, "drafter": "d"}),
                           ar=_other_records()[0], tree=_other_records()[1])
    status = other / "ar" / "c1-r1" / "status.json"
    st = json.loads(status.read_text())
    st["window_end_ns"] = T0 + 2000 * MS
    status.write_text(json.dumps(st))
    over = {"backend": SGLANG, "models": {"target": target, "drafter": "d"}, "compare_with": str(other)}
    over.update(this_over)
    this = write_hand_run(tmp_path / "sgl", prof=profile(**over))
    return this, other


def test_hand_computed_table(tmp_path, target):
    this, _ = _pair(tmp_path, target)
    a = analyze(this, bootstrap=50)
    x = a.crosscheck
    rows = x.arms.set_index("arm")
    assert list(rows.index) == ["ar", "tree-b4-k2"]
    ar, tree = rows.loc["ar"], rows.loc["tree-b4-k2"]
    # τ: ar 1 by definition; tree (4 + 6) / (1 + 3) = 2.5 here, (4 + 6) / (1 + 2) = 10/3 there
    assert ar["tau_this"] == ar["tau_other"] == 1 and ar["tau_gap_pct"] == 0
    assert tree["tau_this"] == pytest.approx(2.5) and tree["tau_other"] == pytest.approx(10 / 3)
    assert tree["tau_gap_pct"] == pytest.approx(-25.0)
    assert not tree["tau_within_tolerance"] and ar["tau_within_tolerance"]
    assert tree["n_this"] == tree["n_other"] == 2
    # outputs: A 'a b c d' both sides; B 'a b c d' vs 'a b x y' -> common prefix 'a b ' (4 chars, 2 words)
    assert (ar["pairs"], ar["identical"], ar["agreement_rate"]) == (2, 1, 0.5)
    assert ar["prefix_chars_mean"] == pytest.approx((7 + 4) / 2)
    assert ar["prefix_fraction_mean"] == pytest.approx((1 + 4 / 7) / 2)
    assert ar["prefix_tokens_mean"] == pytest.approx((4 + 2) / 2)
    assert ar["differing_prompts"] == "p1"
    assert (tree["pairs"], tree["identical"], tree["agreement_rate"]) == (2, 2, 1.0)
    assert tree["prefix_tokens_mean"] == pytest.approx((4 + 6) / 2)
    # no /metrics scrape and no log in the hand run: the server's own τ is not there to read
    assert tree["tau_server_this"] != tree["tau_server_this"]
    # throughput at C=1: ar 8 tokens in 1 s here, in 2 s there; tree 10 tokens in 1 s on both
    thr = x.throughput.set_index("arm")
    assert thr.loc["ar", "throughput_this"] == pytest.approx(8)
    assert thr.loc["ar", "throughput_other"] == pytest.approx(4)
    assert thr.loc["ar", "ratio"] == pytest.approx(2.0)
    assert thr.loc["tree-b4-k2", "ratio"] == pytest.approx(1.0)
    sides = x.sides.set_index("side")
    assert sides.loc["this", "label"] == "SGLang 0.5.15" and sides.loc["other", "label"] == "reference engine"
    assert sides.loc["this", "backend"] == "sglang" and sides.loc["other", "backend"] == "refengine"
    assert x.notes == []


def test_tables_are_written_and_removed(tmp_path, target):
    this, other = _pair(tmp_path, target)
    write_tables(analyze(this, bootstrap=20))
    t = this / "tables"
    for name in crosscheck.TABLE_NAMES:
        assert (t / f"{name}.csv").is_file() and (t / f"{name}.parquet").is_file()
    assert "tree-b4-k2" in (t / "crosscheck.csv").read_text()
    for pq in t.glob("*.parquet"):   # every table reads back with pandas, the per-request lists too
        pd.read_parquet(pq)
    hist = pd.read_parquet(t / "requests.parquet")["spec_accepted_depth_histogram"].dropna()
    assert len(hist) and all(isinstance(v, (list, np.ndarray)) for v in hist)
    # analysed alone (the other run has no compare_with): no cross-check table, and none left over
    shutil.copytree(t, other / "tables")
    a = analyze(other, bootstrap=20)
    assert a.crosscheck is None
    write_tables(a)
    assert not list((other / "tables").glob("crosscheck*"))


def test_missing_arm_is_noted_not_compared(tmp_path, target):
    only_ar = profile(models={"target": target, "drafter": "d"}, arms=[{"id": "ar", "kind": "ar"}])
    this, other = _pair(tmp_path, target, other_prof=only_ar)
    shutil.rmtree(other / "tree-b4-k2")
    x = analyze(this, bootstrap=20).crosscheck
    assert list(x.arms["arm"]) == ["ar"] and list(x.throughput["arm"]) == ["ar"]
    assert ("arm(s) only in this run, nothing of the same kind, block, budget, top-k, CUDA graphs and sampling in "
            "the other, not compared: tree-b4-k2") in x.notes


def test_arm_of_another_shape_is_not_paired_even_under_the_same_id(tmp_path, target):
    arms = [{"id": "ar", "kind": "ar"}, {"id": "tree-b4-k2", "kind": "tree", "block_size": 4, "budget": 4, "topk": 3}]
    this, _ = _pair(tmp_path, target, other_prof=profile(models={"target": target, "drafter": "d"}, arms=arms))
    x = analyze(this, bootstrap=20).crosscheck
    assert list(x.arms["arm"]) == ["ar"] and list(x.throughput["arm"]) == ["ar"]
    assert any("only in this run" in n and n.endswith("tree-b4-k2") for n in x.notes)
    assert any("only in the other run" in n and n.endswith("tree-b4-k2") for n in x.notes)


def test_arms_are_paired_by_what_they_are_not_by_id(tmp_path, target):
    arms = [{"id": "ar", "kind": "ar"}, {"id": "ddtree-4", "kind": "tree", "block_size": 4, "budget": 4, "topk": 2}]
    other = profile(models={"target": target, "drafter": "d"}, arms=arms)
    this, other_dir = _pair(tmp_path, target, other_prof=other)
    (other_dir / "tree-b4-k2").rename(other_dir / "ddtree-4")
    for f in (other_dir / "ddtree-4").rglob("requests-*.jsonl"):
        f.write_text(f.read_text().replace('"arm": "tree-b4-k2"', '"arm": "ddtree-4"')
                     .replace('"arm":"tree-b4-k2"', '"arm":"ddtree-4"'))
    for f in (other_dir / "ddtree-4").rglob("status.json"):
        f.write_text(f.read_text().replace("tree-b4-k2", "ddtree-4"))
    x = analyze(this, bootstrap=20).crosscheck
    tree = x.arms.set_index("arm").loc["tree-b4-k2"]
    assert tree["arm_other"] == "ddtree-4" and tree["tau_other"] == tree["tau_other"]


def test_different_drafter_is_refused_naming_it(tmp_path, target):
    this, _ = _pair(tmp_path, target, other_prof=profile(models={"target": target, "drafter": "d2"}))
    x = analyze(this, bootstrap=20).crosscheck
    assert x.throughput.empty and x.arms["tau_this"].isna().all()
    assert ("refusing to compare tree-b4-k2 across the two runs at C=1: drafter differs ('d' vs 'd2')"
            in x.notes)


def test_same_drafter_path_with_other_weights_is_refused(tmp_path, target):
    this, other = _pair(tmp_path, target)
    for run, digest in ((this, "a" * 64), (other, "b" * 64)):
        m = json.loads((run / "manifest.json").read_text())
        m["models"] = {"drafter": {"path": "d", "sha256": digest, "files": {}}}
        (run / "manifest.json").write_text(json.dumps(m))
    x = analyze(this, bootstrap=20).crosscheck
    assert x.throughput.empty and x.arms["tau_this"].isna().all()
    assert any("drafter weights differ" in n and "'aaaa" in n for n in x.notes), x.notes


def test_backend_switches_may_differ(tmp_path, target):
    this, _ = _pair(tmp_path, target, runtime={"attention_backend": "triton", "page_size": 1,
                                               "extra_args": ["--sampling-backend", "pytorch"]})
    x = analyze(this, bootstrap=20).crosscheck
    assert x.arms["tau_this"].notna().all() and len(x.throughput) == 2


def test_no_compare_with_means_no_crosscheck(hand_run):
    assert analyze(hand_run, bootstrap=20).crosscheck is None


def test_bad_compare_with_names_the_field(tmp_path):
    run = write_hand_run(tmp_path, prof=profile(compare_with="results/no-such-profile-here"))
    with pytest.raises(CrossCheckError, match=r"manifest\.json: profile\.compare_with 'results/no-such-profile-here': "
                                              r".*no-such-profile-here is not a directory"):
        analyze(run, bootstrap=20)


def test_cli_reports_a_bad_compare_with(hand_run, tmp_path, capsys):
    assert analysis_main([str(hand_run), "--compare-with", str(tmp_path / "nope"), "--bootstrap", "20"]) == 2
    err = capsys.readouterr().err
    assert "--compare-with" in err and "is not a directory" in err


def test_cli_prints_the_crosscheck(tmp_path, target, capsys):
    this, other = _pair(tmp_path, target, compare_with=None)
    assert analysis_main([str(this), "--compare-with", str(other), "--bootstrap", "20"]) == 0
    out = capsys.readouterr().out
    assert "cross-check: A = SGLang 0.5.15 (this run), B = reference engine" in out
    assert "tau  2.50 vs  3.33 (-25.0%, from requests)  outputs identical 2/2" in out


def _scrape(cell, generated, verifies):
    """/metrics before and after a cell: the server's own counters, differenced over it."""
    counts = (("metrics-before.prom", (100, 40)), ("metrics-after.prom", (100 + generated, 40 + verifies)))
    for name, (gen, ver) in counts:
        (cell / name).write_text(f"sglang:generation_tokens_total{{model_name=\"m\"}} {gen}\n"
                                 f"sglang:spec_verify_calls_total{{model_name=\"m\"}} {ver}\n")


def test_records_without_spec_details_compare_both_servers_own_tau(tmp_path, target):
    """SGLang 0.5.15 returns no per-request spec details: τ is then compared as each server's own
    count over the same cells on both sides, not the client's τ of one side against the other's."""
    this, other = _pair(tmp_path, target)
    records = this / "tree-b4-k2" / "c1-r1" / "requests-h-1.jsonl"
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    records.write_text("".join(json.dumps({**x, "spec": None}) + "\n" for x in lines))
    _scrape(this / "tree-b4-k2" / "c1-r1", 30, 10)
    _scrape(other / "tree-b4-k2" / "c1-r1", 30, 9)
    a = analyze(this, bootstrap=20)
    tree = a.crosscheck.arms.set_index("arm").loc["tree-b4-k2"]
    assert tree["tau_basis"] == "server"
    # the run's own summary and cells take the server's tau where the records carry none
    row = a.summary.set_index("arm").loc["tree-b4-k2"]
    assert row["pooled_tau"] == pytest.approx(3.0) and row["server_tau"] == pytest.approx(3.0)
    cell = a.cells.set_index(["arm", "concurrency", "repetition"]).loc[("tree-b4-k2", 1, 1)]
    assert cell["tau_source"].startswith("server: /metrics") and cell["steps"] == pytest.approx(cell["tokens"] / 3)
    assert "/metrics counters" in row["server_tau_source"]
    assert (tree["tau_this"], tree["tau_other"]) == (pytest.approx(3.0), pytest.approx(30 / 9))
    assert tree["tau_gap_pct"] == pytest.approx(-10.0) and not tree["tau_within_tolerance"]
    assert "no spec_verify_ct" in tree["note"] and "server" in tree["note"]
    # without the servers' counters on both sides there is nothing like-for-like to compare
    (other / "tree-b4-k2" / "c1-r1" / "metrics-after.prom").unlink()
    tree = analyze(this, bootstrap=20).crosscheck.arms.set_index("arm").loc["tree-b4-k2"]
    assert tree["tau_gap_pct"] != tree["tau_gap_pct"] and tree["tau_basis"] != "server"


def _fake_run(d, ended="2026-01-01T00:00:00+00:00", tables=False):
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"ended": ended}))
    if tables:
        (d / "tables").mkdir()
    return d


def test_profile_dir_resolves_to_newest_finished_run(tmp_path):
    root = tmp_path / "results" / "h200-tiny"
    _fake_run(root / "20261101T000000Z-aaaaaa")
    newest_done = _fake_run(root / "20261102T000000Z-bbbbbb", ended=None, tables=True)
    _fake_run(root / "20261103T000000Z-cccccc", ended=None)        # still running (or killed)
    (root / "notes").mkdir()
    assert crosscheck.locate(tmp_path / "this", None, root) == newest_done
    assert crosscheck.locate(tmp_path / "this", None, newest_done) == newest_done


def test_relative_compare_with_is_from_the_repo_root(tmp_path, monkeypatch):
    import ddbench.core.profile
    monkeypatch.setattr(ddbench.core.profile, "REPO_ROOT", tmp_path)
    run = _fake_run(tmp_path / "results" / "h200-tiny" / "20261101T000000Z-aaaaaa")
    assert crosscheck.locate(tmp_path / "x", "results/h200-tiny", None) == run


@pytest.mark.parametrize("make, match", [
    (lambda root: root.mkdir(parents=True), "holds no manifest.json and no run directory with one"),
    (lambda root: _fake_run(root / "20261101T000000Z-aaaaaa", ended=None), "none of the 1 run"),
])
def test_unusable_compare_with_is_refused(tmp_path, make, match):
    root = tmp_path / "results" / "p"
    make(root)
    with pytest.raises(CrossCheckError, match=match):
        crosscheck.locate(tmp_path / "this", str(root), None)


def test_compare_with_itself_is_refused(hand_run):
    with pytest.raises(CrossCheckError, match="is this run itself"):
        crosscheck.locate(hand_run, None, hand_run)


def test_tau_over_another_prompt_mix_is_not_judged(tmp_path, target):
    """τ varies by prompt: when the other run's tree cell sent another prompt in place of one, the gap is
    reported but not held against the tolerance."""
    this, _ = _pair(tmp_path, target)
    ar, tree = _other_records()
    f2 = rec("tree-b4-k2", "F", 700, [(800, "a", 1), (840, " b c", 2), (880, " d e", 2), (940, " f", 1)], 950, 6,
             spec=tree[1].spec, prompt="p2")
    other = write_hand_run(tmp_path / "ref2", prof=profile(models={"target": target, "drafter": "d"}),
                           ar=ar, tree=[tree[1], f2])
    row = analyze(this, bootstrap=20, compare_with=other).crosscheck.arms.set_index("arm").loc["tree-b4-k2"]
    assert row["same_prompt_mix"] is False or row["same_prompt_mix"] == False  # noqa: E712
    assert row["tau_within_tolerance"] is None or pd.isna(row["tau_within_tolerance"])
    assert "different prompt mixes (2 requests over 1 prompts here, 2 requests over 2 prompts there)" in row["note"]


def test_tau_split_by_output_agreement_where_records_carry_verify_counts(tmp_path, target):
    this, _ = _pair(tmp_path, target)
    row = analyze(this, bootstrap=20).crosscheck.arms.set_index("arm").loc["tree-b4-k2"]
    # both sides carry per-request counts here, and both tree pairs agree: (4 + 6) tokens over (1 + 3) steps
    assert row["identical"] == 2 and row["pairs"] == 2
    assert row["tau_this_where_identical"] == pytest.approx(10 / 4) and pd.isna(row["tau_this_where_differing"])
    assert row["tau_other_where_identical"] == pytest.approx(10 / 3)


def _chunk_pair(tmp_path, target, verifies):
    """This side (SGLang-like) with no spec details, a warmup request in its tree cell, and /metrics counting
    `verifies` verify calls over the cell; the other side's F parts from this side's after 'a b c'."""
    this, other = _pair(tmp_path, target)
    cell = this / "tree-b4-k2" / "c1-r1"
    lines = [json.loads(x) for x in (cell / "requests-h-1.jsonl").read_text().splitlines()]
    # warmup: prefill chunk + 2 verify steps; E 1 step, F 3 steps: 6 in all
    warm = json.loads(rec("tree-b4-k2", "w", -500, [(-400, "a", 1), (-350, " b", 1), (-300, " c", 1)], -290, 3,
                          warmup=True).model_dump_json())
    (cell / "requests-h-1.jsonl").write_text("".join(json.dumps({**x, "spec": None}) + "\n" for x in [warm, *lines]))
    _scrape(cell, 13, verifies)
    ocell = other / "tree-b4-k2" / "c1-r1"
    olines = [json.loads(x) for x in (ocell / "requests-h-1.jsonl").read_text().splitlines()]
    olines[1]["chunks"][2]["text"] = " x y"
    (ocell / "requests-h-1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in olines))
    _scrape(ocell, 10, 3)
    return this


def test_tau_split_with_steps_from_stream_chunks_where_metrics_agree(tmp_path, target):
    """No spec_verify_ct: a request's verify steps are its content chunks − 1, taken where the cell's sum over
    all its requests, warmup included (2 + 1 + 3), equals the /metrics verify calls differenced over it."""
    row = analyze(_chunk_pair(tmp_path, target, 6), bootstrap=20).crosscheck.arms.set_index("arm").loc["tree-b4-k2"]
    assert row["tau_basis"] == "server" and (row["pairs"], row["identical"], row["split_pairs"]) == (2, 1, 2)
    # E identical: 4 tokens / 1 step on both; F differs: 6 / 3 here (4 chunks), 6 / 2 there (spec_verify_ct)
    assert row["tau_this_where_identical"] == pytest.approx(4.0) and row["tau_other_where_identical"] == 4.0
    assert row["tau_this_where_differing"] == pytest.approx(2.0) and row["tau_other_where_differing"] == 3.0
    assert row["split_steps_this"] == "steps from stream chunks, equal to /metrics in 1 of 1 cells"
    assert row["split_steps_other"] == "spec_verify_ct"
    assert "this run: steps from stream chunks, equal to /metrics in 1 of 1 cells" in row["note"]


def test_steps_from_stream_chunks_refused_where_metrics_disagree(tmp_path, target):
    """7 verify calls on /metrics against 6 chunks past the first: the chunks are not taken as steps; the other
    side is split alone, over all pairs."""
    row = analyze(_chunk_pair(tmp_path, target, 7), bootstrap=20).crosscheck.arms.set_index("arm").loc["tree-b4-k2"]
    assert pd.isna(row["tau_this_where_identical"]) and pd.isna(row["tau_this_where_differing"])
    assert row["tau_other_where_identical"] == 4.0 and row["tau_other_where_differing"] == 3.0
    assert row["split_pairs"] == 2
    assert row["split_steps_this"] == "steps from stream chunks, equal to /metrics in 0 of 1 cells"
    assert "equal to /metrics in 0 of 1 cells, not split" in row["note"]
