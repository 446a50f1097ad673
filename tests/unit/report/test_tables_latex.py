"""The report's tables as pylatex writes them: booktabs rules, a longtable's header on every page, and
hostile text escaped once, in its cell, without breaking the row around it."""

import re

import pandas as pd
import pytest
from markupsafe import Markup
from pylatex.errors import TableRowSizeError

from report import tables

HOSTILE = "[x] a_b%c&d#e$f {br}\\~^ é中😀 --``''\"<>| ctl\x07\n"
ESCAPED = (r"{[}x{]} a\_b\%c\&d\#e\$f \{br\}\textbackslash{}\textasciitilde{}\textasciicircum{} "
           r"é\textless{}U+4E2D\textgreater{}\textless{}U+1F600\textgreater{} -{}-{}"
           r"\textasciigrave{}\textasciigrave{}\textquotesingle{}\textquotesingle{}"
           r"\textquotedbl{}\textless{}\textgreater{}\textbar{} ctl\textless{}U+0007\textgreater{} ")


def _checks(name: str) -> pd.DataFrame:
    return pd.DataFrame([{"status": "fail", "check": name, "scope": "ar@1/1", "evidence": name},
                         {"status": "pass", "check": "other", "scope": "run", "evidence": "fine"}])


def _cells(line: str) -> int:
    """Columns in one row: the ampersands TeX reads as separators, plus one."""
    return len(re.findall(r"(?<!\\)&", line)) + 1


def _plain_tex(tex: str) -> bool:
    """Only printable Latin-1 and newlines: nothing for inputenc to refuse."""
    return all(c == "\n" or " " <= c <= "~" or "\xa0" <= c <= "\xff" for c in tex)


def test_a_hostile_string_is_escaped_once_in_a_longtable():
    tex = str(tables.checks(_checks(HOSTILE)))
    assert tex.count(ESCAPED) == 2 and _plain_tex(tex)
    row = next(ln for ln in tex.splitlines() if ESCAPED in ln)
    assert _cells(row) == 4 and row.endswith("\\\\%")
    assert tex.startswith(r"\begin{longtable}{@{}lp{3.6cm}p{3.2cm}p{8.4cm}@{}}")
    head, body = tex.split(r"\endlastfoot")
    # the header and its rules repeat on each page; each page but the last says the table goes on
    assert re.search(r"\\toprule%\n&check&scope&evidence\\\\%\n\\midrule%\n\\endhead", head)
    assert r"\multicolumn{4}{r}{\emph{continued on the next page}}\\%" + "\n\\endfoot%\n" in head
    assert body.index(ESCAPED) < body.index(r"\bottomrule") < body.index(r"\end{longtable}")


def test_a_hostile_string_is_escaped_in_a_tabular_even_first_in_its_row():
    tex = str(tables.check_counts(_checks(HOSTILE).iloc[::-1]))
    # a tabular is boxed to the text width: never wider than the line
    assert tex.startswith(r"\adjustbox{max width=\linewidth}{\begin{tabular}{@{}p{11cm}rrr@{}}%"
                          + "\n\\toprule%\ncheck&passed&failed&n/a\\\\%\n\\midrule%\n")
    # braced, the leading [ cannot be read as the optional argument of the \\ before it
    assert "\\\\%\n" + ESCAPED + "&0&1&0\\\\" in tex
    assert _plain_tex(tex) and tex.rstrip().endswith("\\bottomrule%\n%\n\\end{tabular}}")


def test_cells_and_headers_are_taken_as_tex():
    df = pd.DataFrame([[Markup(r"$\tau$"), Markup("1.00 [0.90--1.10]")]], columns=[Markup(r"\%"), Markup("b")])
    assert "\\%&b\\\\%\n\\midrule%\n$\\tau$&1.00 [0.90--1.10]\\\\" in str(tables.latex(df))


def test_align_must_match_the_columns_and_an_empty_frame_says_none():
    df = pd.DataFrame([["a", "1"]], columns=["x", "y"])
    assert str(tables.latex(df)).startswith(r"\adjustbox{max width=\linewidth}{\begin{tabular}{@{}lr@{}}")
    with pytest.raises(TableRowSizeError):
        tables.latex(df, "lrr")
    assert tables.latex(df.iloc[:0]) == r"\emph{(none)}"


def test_the_ratio_table_shows_the_repetitions_interval_beside_a_widened_one():
    row = {"within_lo": 1.364, "within_hi": 1.56, "between_sd": 0.054, "between_n": 4}
    assert str(tables._between(row)) == "1.364--1.560 (5.4)"
    for alone in ({**row, "between_sd": float("nan"), "between_n": 1}, {**row, "between_sd": 0.0}, {}):
        assert str(tables._between(alone)) == "--"


def test_gpu_busy_is_one_row_per_measured_arm_in_profile_order_and_absent_without_samples():
    from types import SimpleNamespace

    arms = [SimpleNamespace(id=i) for i in ("ar", "linear-b16")]
    run = SimpleNamespace(profile=SimpleNamespace(measured_arms=lambda: arms))
    band = pd.DataFrame([{"arm": a, "concurrency": c, "repetition": r, "gpu_busy_pct": u}
                         for a, c, r, u in [("linear-b16", 1, 1, 60), ("linear-b16", 1, 2, 64), ("ar", 1, 1, 80),
                                            ("ar", 1, 2, 82), ("ar", 8, 1, 70), ("linear-b16", 8, 1, 50)]])
    cells = pd.DataFrame({"window_source": ["status"] * len(band)})
    tex = str(tables.gpu_busy(SimpleNamespace(gpu_band=band, run=run, cells=cells)))
    rows = [ln for ln in tex.splitlines() if ln.split("&")[0].strip() in ("ar", "linear-{}b16")]
    assert [r.split("&")[0].strip() for r in rows] == ["ar", "linear-{}b16"]
    assert [re.findall(r"\d+", c)[0] for c in rows[0].split("&")[1:]] == ["81", "70"]
    assert [re.findall(r"\d+", c)[0] for c in rows[1].split("&")[1:]] == ["62", "50"]
    assert tables.gpu_busy(SimpleNamespace(gpu_band=band.assign(gpu_busy_pct=float("nan")), run=run,
                                           cells=cells)) is None
    assert tables.gpu_busy(SimpleNamespace(gpu_band=pd.DataFrame(), run=run, cells=cells)) is None
    # rounds: every arm of a stretch shares its telemetry, so a per-arm share would be the stretch's
    rounds = cells.assign(window_source="busy")
    assert tables.gpu_busy(SimpleNamespace(gpu_band=band, run=run, cells=rounds)) is None
