"""TeX escaping and number formatting."""

import pytest

from report.tex import breakable, ci, environment, escape, num, with_ci


@pytest.mark.parametrize("raw, tex", [
    ("a_b", r"a\_b"), ("50%", r"50\%"), ("R&D", r"R\&D"), ("#1", r"\#1"), ("$x$", r"\$x\$"),
    ("{x}", r"\{x\}"), ("a\\b", r"a\textbackslash{}b"), ("~^", r"\textasciitilde{}\textasciicircum{}"),
    ("--", "-{}-{}"), ("``''", r"\textasciigrave{}\textasciigrave{}\textquotesingle{}\textquotesingle{}"),
    ("é", "é"), ("中", r"\textless{}U+4E2D\textgreater{}"), ("\x07", r"\textless{}U+0007\textgreater{}"),
    ("a\nb", "a b"), ("[x]", "{[}x{]}"),
])
def test_escape(raw, tex):
    assert escape(raw) == tex


def test_template_escapes_values_but_not_marked_tex():
    env = environment()
    out = env.from_string(r"\section{((( title )))} ((( n|num(1) ))) ((( band )))").render(
        title="50%_{x}", n=12345.67, band=ci(1.0, 2.0))
    assert out == r"\section{50\%\_\{x\}} 12\,345.7 1.00--2.00"


def test_numbers():
    assert num(float("nan")) == "--"
    assert with_ci(1.5, 1.2, 1.8) == "1.50 [1.20--1.80]"
    assert with_ci(1.5, float("nan"), float("nan")) == "1.50"
    assert breakable("abcdefgh", 4) == r"abcd\allowbreak{}efgh"


def test_a_web_address_is_a_url_never_split_by_hand():
    from report.tex import url
    assert str(url("https://github.com/Rancy-Wang/sglang")) == r"\url{https://github.com/Rancy-Wang/sglang}"
    assert str(url("https://x.org/a%20b#frag")) == r"\url{https://x.org/a\%20b\#frag}"
    assert str(url("https://x.org/{evil}\\")) == r"\url{https://x.org/evil}"
    assert r"\url" not in str(url("not recorded"))
