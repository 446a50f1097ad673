"""The report's check of losslessness at T > 0: on the reference engine, the law of the first k sampled tokens of each
arm against the exact AR law, a G-test per (arm, setting) with its stated power, and a planted bug that must fail.

The table comes from `python -m analysis.sampling_law RUN_DIR` (offline, fp32 on the CPU, the run's own pair and
prompt set); the section is left out when it is absent.

What stands for this check on SGLang, where the server samples inside its own kernels and returns no per-token
distribution: acceptance is measured and its accounting cross-checked (the client's tau against the server's
spec_verify_ct, commit length = accepted depth + 1 per request and per server-log line, the accepted-draft histograms
summing to the verify steps and the accepted drafts), and each arm's mean output length stays within 10% of AR's under
the same sampling, which says something only when EOS is honoured (with ignore_eos every request runs to max_tokens).
None of these tests the law of the sampled tokens: a verify that accepts a draft without sampling the target raises
tau and passes every one of them, unless it moves output length by 10%. At T > 0 the law is tested on the reference
engine only, so a claim of lossless sampling is about that implementation of the algorithm, not about SGLang's."""

from __future__ import annotations

import pandas as pd
from markupsafe import Markup

from analysis.estimate.stats import POWER
from analysis.outcome import Analysis
from ddbench.core.profile import Sampling
from ddbench.core.results import SAMPLING_LAW_TABLE as NAME
from report.tables import _h, latex
from report.tex import escape, num

SGLANG = Markup(escape(" ".join(__doc__.split("\n\n")[2].split())))
LOW_ACCEPTANCE = 0.1   # below this share of first steps accepting a draft, the walk past the root is barely tested


def _read(a: Analysis) -> pd.DataFrame | None:
    base = a.run.path / "tables" / NAME
    for suffix, read in ((".parquet", pd.read_parquet), (".csv", pd.read_csv)):
        if base.with_suffix(suffix).is_file():
            return read(base.with_suffix(suffix))
    return None


def _p(x) -> Markup:
    """A p-value: three significant digits, and '< 10^-k' below what a double holds."""
    x = float(x)
    if x == 0:
        return Markup(r"$<10^{-300}$")
    if x < 1e-3:
        mant, exp = f"{x:.1e}".split("e")
        return Markup(f"${mant}\\times10^{{{int(exp)}}}$")
    return Markup(f"{x:.3f}")


def _setting(r) -> str:
    # a table read back holds no top-k as None or NaN (a float column once any row has one)
    top_k = None if pd.isna(r["top_k"]) else int(r["top_k"])
    return Sampling(temperature=float(r["temperature"]), top_p=float(r["top_p"]), top_k=top_k).text


def _arm(r) -> Markup:
    return Markup(f"{escape(r['arm'])} (planted bug)" if r["planted"] else escape(r["arm"]))


def table(t: pd.DataFrame) -> Markup:
    # prompts and draws are one per table: the detects sentence gives them
    rows = [{"arm": _arm(r), "sampling": escape(_setting(r)), "df": int(r["df"]), "G": num(r["statistic"], 1),
             "p": _p(r["p_value"]),
             "$\\alpha$": Markup(f"{float(r['alpha']):.3g}"), "$w_{80}$": num(r["detectable_w"], 3),
             "shift (pts)": num(100 * r["detectable_shift"], 1),
             "accepted (\\%)": Markup("--") if r["kind"] == "ar" else num(100 * r["accepted_share"], 0),
             "verdict": escape(r["verdict"] + (f" ({int(r['impossible'])} impossible)" if r["impossible"] else ""))}
            for r in t.to_dict("records")]
    df = pd.DataFrame(rows)
    df.columns = _h(*df.columns)
    return latex(df, "ll" + "r" * (len(df.columns) - 3) + "l")


def _verdict(t: pd.DataFrame) -> Markup:
    real, bug = t[~t["planted"]], t[t["planted"]]
    bad, untested = real[real["verdict"] == "fail"], real[real["verdict"] == "n/a"]
    if bad.empty:
        head = (f"No arm's first {int(t['k'].iloc[0])} tokens depart from the AR law at a setting checked "
                f"({len(real)} rows, none rejected).")
    else:
        head = ("Rejected: " + "; ".join(f"{escape(r['arm'])} at {escape(_setting(r))} (p {_p(r['p_value'])}"
                                         + (f", {int(r['impossible'])} impossible draws" if r["impossible"] else "")
                                         + ")" for r in bad.to_dict("records")) + ".")
    if len(untested):
        head += (" Untested (every draw in one bin, df 0): "
                 + ", ".join(f"{escape(r['arm'])} at {escape(_setting(r))}" for r in untested.to_dict("records")) + ".")
    if bug.empty:
        return Markup(head)
    caught = bug["verdict"].eq("fail").all()
    tail = (f" The planted bug (a drafted child accepted whenever it is in the target's support, instead of "
            f"following the target's sample) was {'rejected' if caught else 'NOT rejected'} at the same N: "
            + ", ".join(f"{escape(r['arm'])} at {escape(_setting(r))}, p {_p(r['p_value'])}"
                        for r in bug.to_dict("records")) + ".")
    return Markup(head + tail)


def _detects(t: pd.DataFrame) -> Markup:
    real = t[~t["planted"]]
    w, shift = real["detectable_w"].max(), real["detectable_shift"].max()
    family = float(real["alpha"].max()) * len(real)
    return Markup(
        f"Each row is a G-test of the joint law of the first {int(t['k'].iloc[0])} tokens on "
        f"{int(real['prompts'].max())} prompts of the run's set (those whose law is the least deterministic at that "
        f"setting), {int(real['draws'].max())} seeded draws spread over them, one request at a time; the prompts' "
        f"G statistics are summed. $\\alpha$ per row is the family's {family:g} split over the {len(real)} rows "
        f"(Bonferroni). At that $\\alpha$, N and df a row detects with {POWER:.0%} power a bias of Cohen's "
        f"$w \\ge {num(w, 3)}$: for instance {num(100 * shift, 1)} points of probability moved from each prompt's "
        f"likeliest outcome to its second. A single draw the exact law gives probability 0 (outside the top-p or "
        f"top-k support) fails a row whatever its p.".replace("%", r"\%"))


def _cannot(t: pd.DataFrame) -> Markup:
    k = int(t["k"].iloc[0])
    spec = t[(~t["planted"]) & (t["kind"] != "ar")]
    low = spec[spec["accepted_share"] < LOW_ACCEPTANCE]
    out = (f"It cannot see a bias smaller than that $w$; one that appears only after the first {k} tokens (deeper "
           f"in a sequence, after many steps, a long KV cache or a stop token); one under batching (C$>$1: every "
           f"draw here is a request alone) or on other prompts; one of the GPU, bf16 or CUDA-graph path (it runs fp32 "
           f"eager on the CPU); nor any bias of SGLang's sampler, which it never runs. The walk past the root is "
           f"exercised only in the draws whose first step accepted a draft (the accepted column).")
    if len(low):
        out += (" For " + ", ".join(escape(a) for a in low["arm"]) + f" fewer than {LOW_ACCEPTANCE:.0%} of first "
                "steps accepted a draft: there the test checks little more than the root's sample.").replace("%", r"\%")
    return Markup(out)


def context(a: Analysis) -> dict | None:
    """What the template's section needs, or None when the run has no lossless_sampling table. An empty table (a
    run at T = 0 only) gives a one-sentence section."""
    t = _read(a)
    if t is None:
        return None
    if t.empty:
        return {"empty": True, "note": Markup("The run samples at T=0 only: no T$>$0 law was checked."),
                "sglang": SGLANG}
    return {"empty": False, "table": table(t), "verdict": _verdict(t), "detects": _detects(t),
            "cannot": _cannot(t), "sglang": SGLANG}
