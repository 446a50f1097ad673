"""The report's cost section: what a step costs against the GPU's physical limit, and where the run's ratios sit
beside the papers' — for a twin run (a model pair of a real shape; refengine/twin.py). A run of the shipped
pair on a GPU gets one sentence instead: its steps are launch overhead, so its timings do not transfer."""

from __future__ import annotations

import pandas as pd
from markupsafe import Markup

from analysis.diagnose.bandwidth import PAPERS, ar_bandwidth, step_by_context
from report.front import ablated, is_ablation
from report.tables import latex
from report.tex import escape, num


def twin(a) -> dict | None:
    t = a.run.manifest.models.get("twin")
    return t if isinstance(t, dict) else None


def _gpu(a) -> str:
    gpus = a.run.manifest.host.gpus
    return str(gpus[0].get("name", "")) if gpus and isinstance(gpus[0], dict) else ""


def bandwidth(a) -> Markup | None:
    t = twin(a)
    # an ablation arm (ar-no-overlap) is never the AR a deployment runs: its steps stay out of the bandwidth
    deployable = a.cells[~a.cells["arm"].map(lambda x: is_ablation(a, x))]
    b = ar_bandwidth(deployable, t.get("numbers") if t else None, _gpu(a), a.run.profile.runtime.dtype)
    if b is None:
        return None
    share = (f"{num(100 * b['share'], 0)}\\% of the {escape(b['gpu'])}'s {num(b['peak_tb_s'], 2)} TB/s peak "
             f"(the floor is {num(1e3 * b['floor_s'], 2)} ms)") if b["peak_tb_s"] else "no peak recorded for this GPU"
    return Markup(f"AR at C=1 reads {num(b['bytes'] / 1e9, 2)} GB of target weights a step (the shape's layers and "
                  f"LM head in {escape(a.run.profile.runtime.dtype)}; the embedding table is a lookup) in "
                  f"{num(1e3 * b['step_s'], 2)} ms (mean of {b['cells']} cells): {num(b['achieved_tb_s'], 2)} TB/s, "
                  f"{share}.") + _by_context(a, deployable)


def _by_context(a, deployable: pd.DataFrame) -> Markup:
    """How AR's step moves with the context, so that a reader can carry its tokens/s to other reply lengths."""
    arms = sorted(deployable.loc[deployable["kind"] == "ar", "arm"].unique())
    steps = step_by_context(a.run.log, arms)
    if len(steps) < 2:
        return Markup("")
    first, last = steps.iloc[0], steps.iloc[-1]
    return Markup(f" Its step grows with the context the attention reads: {num(first['step_ms'], 2)} ms below "
                  f"{int(first['hi'])} tokens, {num(last['step_ms'], 2)} ms from {int(last['lo'])} on, or "
                  f"{1e3 / first['step_ms']:.0f} and {1e3 / last['step_ms']:.0f} tokens/s (SGLang's decode log "
                  f"at C=1).")


def papers(a) -> Markup:
    """Each arm's τ and speedup over AR at each C of this run, then the published Qwen3-8B figures."""
    s, cells = a.speedups, a.cells
    rows = []
    ok = cells[cells["status"] == "ok"]
    for (c, arm), g in ok.groupby(["concurrency", "arm"], sort=False):
        over = s[(s["arm"] == arm) & (s["baseline_kind"] == "ar") & (s["concurrency"] == c)]
        if len(over) > 1:   # against deployable AR, not against the ablation beside it
            over = over[~ablated(over)]
        ratio = num(over["speedup"].iloc[0]) if len(over) else Markup("1.00" if g["kind"].iloc[0] == "ar" else "--")
        rows.append({"source": Markup("this run"), "arm": Markup(escape(arm)), "C": int(c),
                     "$\\tau$": num(g["tau"].mean()), "over AR": ratio})
    rows.sort(key=lambda r: r["C"])
    rows += [{"source": Markup(escape(p["source"])), "arm": Markup(escape(p["arm"])), "C": p["c"],
              "$\\tau$": num(p["tau"]), "over AR": num(p["over_ar"])} for p in PAPERS]
    return latex(pd.DataFrame(rows), align="llrrr")


def context(a) -> dict | None:
    if a.run.profile.placement.device != "cuda":
        return None
    if twin(a) is None:
        return {"twin": False}
    return {"twin": True, "shape": Markup(escape(twin(a).get("shape", "?"))), "bandwidth": bandwidth(a),
            "papers": papers(a)}
