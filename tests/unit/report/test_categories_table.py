"""The per-category table: spec-over-spec rows beside the ratios over ar, τ of both sides, the few mark."""

from types import SimpleNamespace

import pandas as pd

from analysis.estimate import compare, stats
from report import tables

COLS = compare.CATEGORY_COLUMNS


def _row(arm, base, kind, cat, n, lo, hi):
    return {"arm": arm, "baseline": base, "baseline_kind": kind, "concurrency": 1, "category": cat, "n": n,
            "baseline_n": n, "few": n < stats.MIN_TAIL, "pairs": 4, "speedup": (lo * hi) ** 0.5, "speedup_lo": lo,
            "speedup_hi": hi, "verdict": compare.verdict(lo, hi), "sign_p": 0.125, "mde": 0.05, "n_to_resolve": None,
            "tau": 6.5, "baseline_tau": 5.25 if kind != "ar" else 1.0}


def _analysis(rows):
    return SimpleNamespace(categories=pd.DataFrame(rows, columns=COLS))


ROWS = [_row("tree-b15-k8", "ar", "ar", "code", 40, 1.3, 1.5),
        _row("tree-b15-k8", "linear-b16", "linear", "code", 40, 1.02, 1.2),
        _row("tree-b15-k8", "linear-b16", "linear", "json", stats.MIN_TAIL - 1, 0.9, 1.3)]


def test_spec_over_spec_rows_with_both_taus_and_verdicts():
    tex = str(tables.categories(_analysis(ROWS)))
    assert "linear-{}b16" in tex and "chain" not in tex
    assert "6.50 / 5.25" in tex and "6.50 / 1.00" in tex
    assert "faster" in tex and "within noise" in tex


def test_a_thin_category_is_marked_and_the_mark_explained():
    tex = str(tables.categories(_analysis(ROWS)))
    assert f"{stats.MIN_TAIL - 1} / {stats.MIN_TAIL - 1}{tables.FEW}" in tex
    assert tex.count(str(tables.FEW)) == 1
    assert f"under {stats.MIN_TAIL} requests on a side" in tex


def test_no_mark_and_no_note_without_a_thin_category():
    tex = str(tables.categories(_analysis(ROWS[:2])))
    assert str(tables.FEW) not in tex and "requests on a side" not in tex


def test_kinds_picks_the_baselines():
    tex = str(tables.categories(_analysis(ROWS), kinds=("linear",)))
    assert "6.50 / 1.00" not in tex and "6.50 / 5.25" in tex
    assert str(tables.categories(_analysis([]))) == r"\emph{(none)}"
