"""TeX text: escaping every user string, formatting numbers, and the jinja2 environment.

Templates use ((( var ))), ((* block *)) and ((= comment =)) so that TeX's own braces and
percent signs never look like template syntax. Every value is escaped on the way in:
autoescape calls escape() on anything not marked safe with Safe()."""

from __future__ import annotations

import math
from pathlib import Path

import jinja2
from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"

_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
            "%": r"\%", "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}",
            "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}", '"': r"\textquotedbl{}",
            "'": r"\textquotesingle{}", "`": r"\textasciigrave{}", "-": "-{}",
            # braced, a bracket right after \\ or \item is text, not their optional argument
            "[": "{[}", "]": "{]}"}


# Not pylatex.utils.escape_latex: it keeps the `` '' << >> ligatures, passes control characters and
# non-Latin-1 text through (inputenc stops the build on them) and writes a newline as \newline.
def escape(value) -> str:
    """Any value as TeX that typesets it literally: specials escaped, ligatures (-- `` '') broken,
    control characters and characters outside Latin-1 shown as <U+XXXX>, so no input breaks the build."""
    out = []
    for ch in str(value):
        code = ord(ch)
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch in "\n\t\r":
            out.append(" ")
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0 or code > 0xFF or code == 0xAD:
            out.append(rf"\textless{{}}U+{code:04X}\textgreater{{}}")
        else:
            out.append(ch)
    return "".join(out)


def breakable(value, every: int = 16) -> Markup:
    """A long token (digest, path) that may break across lines."""
    s = str(value)
    return Markup(r"\allowbreak{}".join(escape(s[i:i + every]) for i in range(0, len(s), every)))


def url(value) -> Markup:
    """A web address as \\url (xurl breaks it anywhere, a break never splits it into two words), or escaped text
    when it is not one. In \\url's argument only % and # need a backslash; braces and backslashes cannot be
    typeset there and are dropped."""
    s = str(value)
    if not s.startswith(("http://", "https://")):
        return breakable(s)
    s = "".join(ch for ch in s if ch not in "{}\\" and 0x20 < ord(ch) < 0x7F)
    return Markup(r"\url{" + s.replace("%", r"\%").replace("#", r"\#") + "}")


Safe = Markup    # TeX written by us, not to be escaped again


def missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x, digits: int = 2) -> Markup:
    """A number as TeX (thin-space thousands); '--' when there is none."""
    if missing(x):
        return Markup("--")
    return Markup(f"{float(x):,.{digits}f}".replace(",", r"\,"))


def ci(lo, hi, digits: int = 2) -> Markup:
    """A 95% interval as 'lo--hi', empty when there is none."""
    if missing(lo) or missing(hi):
        return Markup("")
    if lo < 0 or hi < 0:  # an en dash between signed numbers reads as a minus
        return Markup(f"{num(lo, digits)} to {num(hi, digits)}")
    return Markup(f"{num(lo, digits)}--{num(hi, digits)}")


def with_ci(x, lo, hi, digits: int = 2) -> Markup:
    """'x [lo--hi]' for tables."""
    band = ci(lo, hi, digits)
    return Markup(f"{num(x, digits)} [{band}]" if band else str(num(x, digits)))


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), block_start_string="((*", block_end_string="*))",
        variable_start_string="(((", variable_end_string=")))", comment_start_string="((=",
        comment_end_string="=))", line_statement_prefix=None, trim_blocks=True, lstrip_blocks=True,
        autoescape=False, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters.update(e=escape, num=num, ci=ci, breakable=breakable, url=url)
    env.finalize = lambda v: v if isinstance(v, Markup) else escape(v)
    return env


def drift_pct(x: float) -> str:
    """A drift in % of throughput, signed; beyond ±100% it says so rather than print an exponential's tail."""
    if not math.isfinite(x):
        return "--"
    return f"{x:+.2f}\\%" if abs(x) < 100 else (r"$>$+100\%" if x > 0 else r"$-$100\%")
