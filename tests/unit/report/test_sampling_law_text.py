"""The T > 0 lossless section from a hand-made lossless_sampling table: absent without it, one sentence for a T=0
run, and otherwise the table and the sentences built from its own numbers."""

from types import SimpleNamespace

import pandas as pd

from analysis.sampling_law import COLUMNS, NAME
from report import sampling_law as section
from report.tex import escape


def _row(arm, kind, planted=False, p=0.4, verdict="pass", accepted=0.4, impossible=0):
    return {"arm": arm, "kind": kind, "sampling": "t0.7-p0.95", "temperature": 0.7, "top_p": 0.95, "top_k": None,
            "planted": planted, "prompts": 4, "prompt_ids": "a b c d", "draws": 1200, "k": 3, "bins": 74, "df": 70,
            "statistic": 70.0, "p_value": p, "alpha": 0.0125, "detectable_w": 0.192, "detectable_shift": 0.053,
            "accepted_share": float("nan") if kind == "ar" else accepted, "impossible": impossible,
            "verdict": verdict, "seconds": 10.0}


def _analysis(tmp_path, rows):
    (tmp_path / "tables").mkdir(exist_ok=True)
    if rows is not None:
        pd.DataFrame(rows, columns=COLUMNS).to_parquet(tmp_path / "tables" / f"{NAME}.parquet", index=False)
    return SimpleNamespace(run=SimpleNamespace(path=tmp_path))


def test_absent_and_empty(tmp_path):
    assert section.context(_analysis(tmp_path, None)) is None
    ctx = section.context(_analysis(tmp_path, []))
    assert ctx["empty"] and "T=0 only" in ctx["note"]


def test_a_passing_run_with_its_caught_bug(tmp_path):
    rows = [_row("ar", "ar"), _row("linear-b16", "linear", accepted=0.05), _row("chain-b15", "chain"),
            _row("tree-b15-k8", "tree", accepted=0.88),
            _row("tree-b15-k8", "tree", planted=True, p=0.0, verdict="fail", accepted=1.0)]
    ctx = section.context(_analysis(tmp_path, rows))
    assert escape("tree-b15-k8") + " (planted bug)" in ctx["table"] and r"$<10^{-300}$" in ctx["table"]
    assert escape("T=0.7, top-p 0.95") in ctx["table"] and "&0.0125&" in ctx["table"]
    assert "none rejected" in ctx["verdict"] and "was rejected at the same N" in ctx["verdict"]
    assert r"w \ge 0.192" in ctx["detects"] and "5.3 points" in ctx["detects"]
    assert "0.05 split over the 4" in ctx["detects"]
    assert "after the first 3 tokens" in ctx["cannot"] and "batching" in ctx["cannot"]
    assert f"For {escape('linear-b16')} fewer than 10\\%" in ctx["cannot"]          # its drafts were rarely accepted
    assert "spec\\_verify\\_ct" in ctx["sglang"] and "reference engine only" in ctx["sglang"]


def test_a_failing_row_is_named(tmp_path):
    rows = [_row("ar", "ar"), _row("tree-b15-k8", "tree", p=1e-5, verdict="fail", impossible=2),
            _row("chain-b15", "chain", p=1.0, verdict="n/a")]
    ctx = section.context(_analysis(tmp_path, rows))
    assert ctx["verdict"].startswith(f"Rejected: {escape('tree-b15-k8')} at {escape('T=0.7, top-p 0.95')}")
    assert "2 impossible draws" in ctx["verdict"] and r"1.0\times10^{-5}" in ctx["verdict"]
    assert f"Untested (every draw in one bin, df 0): {escape('chain-b15')}" in ctx["verdict"]


def test_a_setting_reads_as_the_profile_writes_it():
    # top_k comes back from a table as None, NaN (a float column) or a float
    assert section._setting(_row("ar", "ar")) == "T=0.7, top-p 0.95"
    assert section._setting({"temperature": 1.0, "top_p": 1.0, "top_k": 50.0}) == "T=1, top-k 50"
    assert section._setting({"temperature": 0.7, "top_p": 1.0, "top_k": float("nan")}) == "T=0.7"
