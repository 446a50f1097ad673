"""The report's figures, as vector PDF through matplotlib (Agg, no display needed).

Each builder takes the analysis and returns its Figure, so that tests can read what it drew; draw() saves it.
Every per-arm series takes its colour from colour(), so an arm looks the same in every figure of a report."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from analysis import triage as tr  # noqa: E402
from analysis.estimate.standings import MIN_BUDGETS, Family, budget_families  # noqa: E402
from analysis.outcome import Analysis  # noqa: E402
from analysis.read.ingest import dense  # noqa: E402

# The report places a figure at its natural size (never scaled up; scaled down only past the text width), so 8 pt
# here is 8 pt on the page: no text smaller than MIN_FONT, no figure wider than MAX_WIDTH inches.
MIN_FONT, MAX_WIDTH = 8.0, 6.7
plt.rcParams.update({"pdf.fonttype": 42, "font.size": MIN_FONT, "axes.grid": True, "grid.alpha": 0.3,
                     "figure.dpi": 100, "savefig.bbox": "tight", "legend.fontsize": MIN_FONT,
                     "xtick.labelsize": MIN_FONT, "ytick.labelsize": MIN_FONT, "axes.labelsize": MIN_FONT,
                     "axes.titlesize": 9, "figure.titlesize": 9})


class NoData(Exception):
    """A figure with nothing to draw: the report omits it and prints the reason, one sentence."""


def _width(w: float) -> float:
    return min(w, MAX_WIDTH)


def _save(fig, path: Path) -> Path:
    fig.savefig(path, format="pdf")
    plt.close(fig)
    return path


def _label(s: str) -> str:
    # matplotlib reads $...$ as mathtext: keep user strings literal
    return str(s).replace("$", r"\$")


def _arms(a: Analysis) -> list[str]:
    return [arm.id for arm in a.run.profile.arms]


def _base(arm) -> str:
    """The arm a measured arm ('<arm>@<label>') measures under one sampling setting; an arm is its own."""
    return getattr(arm, "server", arm.id)


def colour(a: Analysis, arm: str) -> str:
    """The arm's colour: matplotlib's default cycle at its base arm's place in the profile, the same in every figure
    (a figure that skips arms, as the acceptance ones skip ar, must not shift the others' colours; an arm measured
    under several sampling settings keeps one colour, so that it can be followed across them). `arm` may be a
    measured arm's id or its base arm's."""
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    arms = a.run.profile.arms
    bases = list(dict.fromkeys(_base(x) for x in arms))
    base = next((_base(x) for x in arms if x.id == arm), arm)
    return cycle[(bases.index(base) if base in bases else len(bases)) % len(cycle)]


def _speculative(a: Analysis) -> list:
    return [x for x in a.run.profile.arms if x.kind != "ar"]


def _base_label(a: Analysis, arm: str) -> str:
    """A legend entry: the base arm (the panel's title names the setting)."""
    return _label(_base(a.run.profile.arm(arm)))


def throughput(a: Analysis) -> Figure:
    if a.summary.empty:
        raise NoData("no arm finished a cell, so there is no throughput to plot")
    if a.summary["concurrency"].nunique() == 1:
        return ratios(a)
    s, groups = a.summary, panels(a, a.run.profile.arms)
    fig, axes = _grid(len(groups), 3.3, 2.4, sharey=_one_setting(a, groups))
    for ax, (title, arms) in zip(axes, groups, strict=True):
        for arm in arms:
            d = s[s["arm"] == arm].sort_values("concurrency")
            if d.empty:
                continue
            err = _err(d["throughput"], d["throughput_t_lo"], d["throughput_t_hi"])
            ax.errorbar(d["concurrency"], d["throughput"], yerr=err, marker="o", ms=3, capsize=2,
                        label=_base_label(a, arm), color=colour(a, arm))
        ax.set(xscale="log", xlabel="concurrency C", ylabel="aggregate output tok/s", title=title)
        _ticks(ax, s)
    fig.suptitle("Throughput (mean over repetitions, Student-t 95% bars)")
    _legend_below(fig)
    return fig


def ratios(a: Analysis) -> Figure:
    """With one concurrency: every speculative arm's throughput over AR (and trees and chains over their linear
    arm) as a dot with its 95% interval from repetition pairs, a line at 1; higher is better."""
    s = a.speedups
    if s.empty:
        raise NoData("no ratio between arms was computed (one arm, or no matched pair)")
    s = s[s["baseline_kind"].isin(("ar", "linear"))]
    s = s.assign(_o=s["arm"].map({x.id: i for i, x in enumerate(a.run.profile.arms)})).sort_values(
        ["baseline_kind", "_o"])
    c = int(s["concurrency"].iloc[0])
    fig, ax = plt.subplots(figsize=(_width(5.6), 0.3 * len(s) + 1.1), layout="constrained")
    y = np.arange(len(s))[::-1]
    for yi, r in zip(y, s.itertuples(), strict=True):
        lo, hi = r.speedup_lo, r.speedup_hi
        xerr = _err([r.speedup], [lo], [hi]) if np.isfinite(lo) and np.isfinite(hi) else None
        ax.errorbar([r.speedup], [yi], xerr=xerr, fmt="o", ms=4, capsize=2, color=colour(a, r.arm))
    ax.axvline(1, color="black", lw=0.8)
    ax.set_yticks(y, [_label(f"{r.arm} / {r.baseline}") for r in s.itertuples()])
    tpot = a.run.profile.load.mode == "open"   # open loop: the headline ratio is TPOT's (compare.speedup)
    ax.set(xlabel=("TPOT ratio, reference / arm" if tpot else "output throughput ratio") + " (higher is better)",
           title=f"{'TPOT' if tpot else 'Throughput'} ratios at C={c} (repetition pairs, 95% CI)")
    return fig


def latency(a: Analysis) -> Figure:
    """TTFT and TPOT against C, a row per panel (sampling setting, graphs switch)."""
    s, groups = a.summary, panels(a, a.run.profile.arms)
    if s.empty or s["concurrency"].nunique() == 1:
        raise NoData("with one concurrency there is no latency curve: the latency percentiles per arm are in the "
                     "deployment table on page 1")
    fig, axes = plt.subplots(len(groups), 2, figsize=(6.4, 2.3 * len(groups) + 0.6), layout="constrained",
                             squeeze=False)
    for row, (name, arms) in zip(axes, groups, strict=True):
        for ax, (col, title) in zip(row, (("ttft_mean", "TTFT"), ("tpot_mean", "TPOT")), strict=True):
            for arm in arms:
                d = s[s["arm"] == arm].sort_values("concurrency")
                if d.empty:
                    continue
                err = _err(1e3 * d[col], 1e3 * d[f"{col}_t_lo"], 1e3 * d[f"{col}_t_hi"])
                ax.errorbar(d["concurrency"], 1e3 * d[col], yerr=err, marker="o", ms=3, capsize=2,
                            label=_base_label(a, arm), color=colour(a, arm))
            ax.set(xscale="log", xlabel="concurrency C", ylabel=f"mean {title} (ms)",
                   title=f"{title}, {name}" if name else title)
            _ticks(ax, s)
    _legend_below(fig)
    return fig


def rates(a: Analysis) -> Figure:
    """An open-loop rate sweep: each arm's achieved rate (beside the line of a server that keeps up), its mean
    TTFT and mean TPOT, against the offered rate; a hollow marker where the arm saturated (served under 95%)."""
    r = a.rates
    if r is None or r.empty:
        raise NoData("the run offered no rates (closed loop): load.rate takes a list to sweep")
    fig, axes = plt.subplots(1, 3, figsize=(_width(7.0), 2.4), layout="constrained")
    for base, d in r.groupby("base", sort=False):
        d = d.sort_values("offered_rate")
        c = colour(a, d["arm"].iloc[0])
        for ax, col, scale in zip(axes, ("achieved_rate", "ttft_mean", "tpot_mean"), (1, 1e3, 1e3), strict=True):
            ax.plot(d["offered_rate"], scale * d[col], color=c, lw=1,
                    label=_label(base) if col == "achieved_rate" else None)
            sat = d["saturated"].astype(bool)
            ax.scatter(d.loc[~sat, "offered_rate"], scale * d.loc[~sat, col], color=c, s=12)
            ax.scatter(d.loc[sat, "offered_rate"], scale * d.loc[sat, col], facecolors="none", edgecolors=c, s=16)
    offered = sorted(r["offered_rate"].unique())
    axes[0].plot(offered, offered, color="black", lw=0.6, ls=":")
    for ax, ylabel in zip(axes, ("achieved rate (req/s)", "mean TTFT (ms)", "mean TPOT (ms)"), strict=True):
        ax.set(xscale="log", xlabel="offered rate (req/s)", ylabel=ylabel)
        ax.set_xticks(offered, [f"{q:g}" for q in offered], minor=False)
        ax.xaxis.set_minor_locator(plt.NullLocator())
    axes[0].set_yscale("log")
    axes[0].set_yticks(offered, [f"{q:g}" for q in offered])
    axes[0].yaxis.set_minor_locator(plt.NullLocator())
    fig.suptitle("Against offered load (dotted: achieved = offered; hollow: saturated, under 95% of arrivals served)")
    _legend_below(fig)
    return fig


def acceptance(a: Analysis) -> Figure:
    """Per arm: per-request τ histogram and commit-length histogram (steps); a kind of panel no arm has data for
    is left out (SGLang returns no per-request τ; a server without a commit histogram has none)."""
    r, groups = a.requests, tau_panels(a)
    data = []
    for name, arms in groups:
        row = []
        for arm in arms:
            m = r[(r["arm"] == arm) & r["ok"] & ~r["warmup"].astype(bool)]
            tau = m["tau"].dropna()
            hist = _commit_hist(m)
            row.append((arm, tau, hist if hist is not None and hist.sum() > 0 else None))
        data.append((name, row))
    has_tau = any(len(t) for _, row in data for _, t, _ in row)
    has_commit = any(h is not None for _, row in data for _, _, h in row)
    if not has_tau and not has_commit:
        raise NoData(acceptance_missing(a))
    cols = [k for k, on in (("tau", has_tau), ("commit", has_commit)) if on]
    fig, axes = plt.subplots(len(groups), len(cols), figsize=(_width(3.2 * len(cols) + 0.2), 2.3 * len(groups) + 0.6),
                             layout="constrained", squeeze=False)
    for row_axes, (name, row) in zip(axes, data, strict=True):
        ax = dict(zip(cols, row_axes, strict=True))
        for arm, tau, hist in row:
            if "tau" in ax and len(tau):
                ax["tau"].hist(tau, bins=30, histtype="step", label=_base_label(a, arm), color=colour(a, arm))
            if "commit" in ax and hist is not None:
                x = np.arange(len(hist))
                ax["commit"].plot(x, hist / hist.sum(), marker="o", ms=2, label=_base_label(a, arm),
                                  color=colour(a, arm))
        suffix = f", {name}" if name else ""
        if "tau" in ax:
            ax["tau"].set(xlabel="per-request tau (tokens / verify steps)", ylabel="requests",
                          title="tau per request" + suffix)
        if "commit" in ax:
            ax["commit"].set(xlabel="commit length (tokens per verify step)", ylabel="share of steps",
                             title="commit length" + suffix)
    _legend_below(fig)
    return fig


def acceptance_missing(a: Analysis) -> str:
    """Why the per-request acceptance histograms are not drawn."""
    if not _speculative(a):
        return "the run has no speculative arm"
    if a.run.profile.backend.kind == "sglang":
        return ("SGLang returns no per-request verify-step counts or commit-length histograms here, so the "
                "per-request tau and commit-length histograms are omitted; each cell's tau is the server's own count "
                "(the table above)")
    return "no request carries verify-step counts or a commit-length histogram"


def eager_twins(a: Analysis) -> bool:
    """Whether two speculative arms differ only in CUDA graphs (on in one, off in the other)."""
    p = a.run.profile
    seen: dict[str, set[bool]] = {}
    for arm in _speculative(a):
        # a measured arm's base differs between twins as its id does; its sampling setting keeps them per setting
        same = repr(sorted(arm.model_dump(exclude={"id", "cuda_graphs", "base"}).items()))
        seen.setdefault(same, set()).add(p.cuda_graphs(arm))
    return any(len(graphs) == 2 for graphs in seen.values())


def panels(a: Analysis, arms: list) -> list[tuple[str, list[str]]]:
    """(title, arm ids) per panel: one per sampling setting (arms of two settings never compare, and a base arm
    keeps its colour in both), and graphs on and off apart where the profile has eager twins, whose τ should
    match: in one panel each twin would hide the other."""
    p = a.run.profile
    sets = list(dict.fromkeys(p.sampling_for(x.id) for x in arms))
    graphs = [("on", True), ("off", False)] if eager_twins(a) else [("", None)]
    out = []
    for setting in sets:
        for word, on in graphs:
            ids = [x.id for x in arms if p.sampling_for(x.id) == setting and on in (None, p.cuda_graphs(x))]
            title = ", ".join(([setting.text] if len(sets) > 1 else []) + ([f"CUDA graphs {word}"] if word else []))
            if ids:
                out.append((title, ids))
    return out or [("", [])]


def tau_panels(a: Analysis) -> list[tuple[str, list[str]]]:
    return panels(a, _speculative(a))


def _one_setting(a: Analysis, groups) -> bool:
    """Whether the panels are of one sampling setting: graphs on and off then share a scale (their τ should
    match); τ at T=0 and T=0.7 would crush each other on one."""
    p = a.run.profile
    return len({p.sampling_for(x) for _, ids in groups for x in ids}) <= 1


def _grid(n: int, width: float, height: float, **kw):
    """n panels, at most 2 a row, constrained layout (the legend goes below them all)."""
    cols = min(n, 2)
    rows = -(-n // cols)
    # one panel alone is half the text wide, so that two such figures sit side by side at their natural size
    fig, axes = plt.subplots(rows, cols, figsize=(_width(width * cols + (0.6 if cols > 1 else 0)), height * rows + 0.6),
                             layout="constrained", squeeze=False, **kw)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


DODGE = 1.04   # x factor between neighbouring arms on the log C axis


def _dodge(i: int, n: int) -> float:
    """The i-th of n arms' x offset, centred on C: arms of equal τ (a chain and its linear arm, top-k 1) would
    otherwise draw on top of each other and one would vanish."""
    return DODGE ** (i - (n - 1) / 2)


def tau_concurrency(a: Analysis) -> Figure:
    """τ per speculative arm against C, across repetitions with its Student-t 95% interval."""
    s, groups = a.summary, tau_panels(a)
    fig, axes = _grid(len(groups), 3.3, 2.4, sharey=_one_setting(a, groups))
    for ax, (title, arms) in zip(axes, groups, strict=True):
        for i, arm in enumerate(arms):
            d = s[s["arm"] == arm].dropna(subset=["tau"]).sort_values("concurrency") if len(s) else s
            if len(d):
                ax.errorbar(d["concurrency"] * _dodge(i, len(arms)), d["tau"], marker="o", ms=3, capsize=2,
                            yerr=_err(d["tau"], d["tau_t_lo"], d["tau_t_hi"]), label=_base_label(a, arm),
                            color=colour(a, arm))
        ax.set(xscale="log", xlabel="concurrency C", ylabel="tau (tokens per verify step)", title=title)
        _ticks(ax, s)
    fig.suptitle("Acceptance across concurrency (geometric mean over repetitions, Student-t 95% bars)")
    if not any(ax.get_legend_handles_labels()[0] for ax in axes):
        plt.close(fig)
        raise NoData("no speculative arm has a tau")
    _legend_below(fig)   # below the axes: a legend inside would sit on the points of some C
    return fig


def by_position(a: Analysis) -> Figure:
    """Per panel of arms, at the lowest C each has: the chance draft position i is accepted once i-1 was."""
    t, groups = a.by_position, tau_panels(a)
    if t is None or t.empty:
        raise NoData("no request carries a histogram of its verify steps by accepted depth"
                     + (" (SGLang records one only with the step-stats patch on)"
                        if a.run.profile.backend.kind == "sglang" else ""))
    fig, axes = _grid(len(groups), 3.3, 2.4, sharey=True)
    for ax, (title, arms) in zip(axes, groups, strict=True):
        for arm in arms:
            d = t[t["arm"] == arm]
            if d.empty:
                continue
            d = d[(d["concurrency"] == d["concurrency"].min()) & (d["position"] > 0)]
            ax.plot(d["position"], d["p_accept"], marker="o", ms=2.5, label=_base_label(a, arm),
                    color=colour(a, arm))
        ax.set(xlabel="draft position i", ylabel="P(i accepted | i-1 accepted)", ylim=(0, 1.02),
               title=title or "acceptance by position")
    fig.suptitle("Acceptance per draft position (lowest C of each arm; tables/acceptance_by_position.csv)")
    if not any(ax.get_legend_handles_labels()[0] for ax in axes):
        plt.close(fig)
        raise NoData("no speculative arm has a depth histogram")
    _legend_below(fig)
    return fig


def _commit_hist(m: pd.DataFrame) -> np.ndarray | None:
    """Summed commit-length histogram: ours when present, else SGLang's accepted-drafts one shifted by one."""
    for col, shift in (("spec_commit_length_histogram", 0), ("spec_correct_drafts_histogram", 1)):
        h, present = dense(m[col])
        if present.any():
            return np.concatenate([np.zeros(shift), h[present].sum(axis=0)])
    return None


def categories(a: Analysis) -> Figure:
    d = a.categories
    d = d[d["baseline_kind"] == "ar"] if "baseline_kind" in d else d  # the figure is each arm over ar
    if d.empty:
        raise NoData("no arm has a matched ar baseline per category")
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    c = int(d["concurrency"].min())
    d = d[d["concurrency"] == c]
    cats = sorted(d["category"].unique())
    arms = [x for x in _arms(a) if x in set(d["arm"])]
    width = 0.8 / max(len(arms), 1)
    for i, arm in enumerate(arms):
        e = d[d["arm"] == arm].set_index("category").reindex(cats)
        x = np.arange(len(cats)) + i * width
        ax.bar(x, e["speedup"], width, yerr=_err(e["speedup"], e["speedup_lo"], e["speedup_hi"]), capsize=2,
               label=_label(arm), color=colour(a, arm))
    ax.axhline(1, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(cats)) + width * (len(arms) - 1) / 2, [_label(x) for x in cats])
    # not the request output rate: compare.per_category scales it by occupancy, so categories average to throughput
    ax.set(ylabel="speedup over ar (category throughput)",
           title=f"Speedup per category at C={c} (paired by repetition, 95% CI)")
    _legend_below(fig)
    return fig


def pareto(a: Analysis) -> Figure:
    cells, groups = a.cells[a.cells["status"] == "ok"], panels(a, a.run.profile.arms)
    g = cells.groupby(["arm", "concurrency"], as_index=False)[["output_rate_mean", "throughput"]].mean()
    fig, axes = _grid(len(groups), 3.3, 2.6)
    for ax, (title, arms) in zip(axes, groups, strict=True):
        for arm in arms:
            d = g[g["arm"] == arm].sort_values("concurrency")
            if d.empty:
                continue
            ax.plot(d["throughput"], d["output_rate_mean"], marker="o", ms=3, label=_base_label(a, arm),
                    color=colour(a, arm))
            for row in d.itertuples() if g["concurrency"].nunique() > 1 else ():   # one C: the title says it
                ax.annotate(f"C={row.concurrency}", (row.throughput, row.output_rate_mean), fontsize=MIN_FONT,
                            xytext=(2, 2), textcoords="offset points")
        ax.set(xlabel="aggregate output tok/s", ylabel="tok/s per user (N / E2E)", title=title)
    cs = sorted(int(c) for c in g["concurrency"].unique())
    fig.suptitle("Per-user speed vs aggregate throughput" + (f" at C={cs[0]}" if len(cs) == 1 else ""))
    _legend_below(fig)
    return fig


def telemetry(a: Analysis) -> Figure:
    t = a.run.telemetry
    if t.empty or "t_unix" not in t:
        raise NoData("the run recorded no telemetry")
    t0 = t["t_unix"].min()
    panels_ = []
    for src, col, label in (("gpu", "temperature_c", "GPU temperature (C)"), ("gpu", "sm_clock_mhz", "SM clock (MHz)")):
        d = t[(t.get("source") == src)] if "source" in t else t
        if col in d and not d[col].isna().all():
            panels_.append((d, col, label))
    if not panels_:
        raise NoData("the run recorded no GPU temperature or clock (no GPU, or no GPU telemetry)")
    fig, axes = plt.subplots(1, len(panels_), figsize=(_width(3.2 * len(panels_) + 0.2), 2.4), layout="constrained",
                             squeeze=False)
    for ax, (d, col, label) in zip(axes[0], panels_, strict=True):
        for arm in _arms(a):
            e = d[d["arm"] == arm]
            if len(e):
                ax.plot(e["t_unix"] - t0, e[col], ".", ms=1.5, label=_label(arm), color=colour(a, arm))
        ax.set(xlabel="seconds since first sample", ylabel=label)
    _legend_below(fig)
    return fig


def _err(y, lo, hi):
    y, lo, hi = (np.asarray(v, dtype=float) for v in (y, lo, hi))
    return np.vstack([np.nan_to_num(y - lo), np.nan_to_num(hi - y)]).clip(min=0)


def _ticks(ax, s: pd.DataFrame) -> None:
    cs = sorted(s["concurrency"].unique()) if len(s) else []
    if cs:
        ax.set_xticks(cs, [str(c) for c in cs])
        ax.minorticks_off()


# ---- sampling settings: which measured arm is which base arm under which setting ---------------------------

def settings(a: Analysis) -> list:
    """The run's sampling settings, in profile order (one: the profile's single setting)."""
    return a.run.profile.workload.settings()


def measured_ids(a: Analysis) -> dict[tuple[str, str], str]:
    """(base arm, sampling label) -> the measured arm's id; with one setting, (arm, label) -> arm."""
    p = a.run.profile
    return {(_base(x), p.sampling_for(x.id).label): x.id for x in p.arms}


def _same_setting(a: Analysis, x: str, y: str) -> bool:
    """Whether two measured arms ran under one sampling setting: a T=0 cell never pairs with a T=0.7 cell."""
    p = a.run.profile
    return p.sampling_for(x).label == p.sampling_for(y).label


# ---- budget families (analysis.estimate.standings): τ and throughput against the budget ---------------------------

CHAIN_DODGE = 1.08   # x factor the chain moves left by where a tree has its budget (B = L-1)

BUDGET_ROWS = (("tau", "tau (tokens per verify step)"), ("throughput", "output tok/s"))


def _row(s: pd.DataFrame, arm: str) -> dict | None:
    d = s[s["arm"] == arm]
    return d.iloc[0].to_dict() if len(d) else None


def _budget_panel(ax, a: Analysis, fam: Family, s: pd.DataFrame, metric: str) -> None:
    """One C, one metric: the trees' points in their arms' colours on a grey curve, the chain at L-1 (square), the
    linear arm as a dashed line with its interval as a band."""
    lo, hi = f"{metric}_t_lo", f"{metric}_t_hi"
    curve = []
    for t in fam.trees:
        r = _row(s, t.id)
        if r is None or not np.isfinite(r[metric]):
            continue
        ax.errorbar([t.budget], [r[metric]], yerr=_err([r[metric]], [r[lo]], [r[hi]]), fmt="o", ms=4, capsize=2,
                    color=colour(a, t.id), label=_label(_base(t)), zorder=3)
        curve.append((t.budget, r[metric]))
    if len(curve) > 1:
        ax.plot(*zip(*curve, strict=True), color="0.75", lw=0.9, zorder=2)   # light: an arm's colour may be grey
    r = _row(s, fam.chain.id) if fam.chain is not None else None
    if r is not None and np.isfinite(r[metric]):
        b = fam.block_size - 1
        x = b / CHAIN_DODGE if b in fam.budgets else b
        ax.errorbar([x], [r[metric]], yerr=_err([r[metric]], [r[lo]], [r[hi]]), fmt="s", ms=4, capsize=2,
                    color=colour(a, fam.chain.id), label=_label(f"{_base(fam.chain)} (chain, B = L-1)"), zorder=3)
    r = _row(s, fam.linear.id) if fam.linear is not None else None
    if r is not None and np.isfinite(r[metric]):
        c = colour(a, fam.linear.id)
        ax.axhline(r[metric], color=c, ls="--", lw=1, label=_label(f"{_base(fam.linear)} (linear)"), zorder=1)
        if np.isfinite(r[lo]) and np.isfinite(r[hi]):
            ax.axhspan(r[lo], r[hi], color=c, alpha=0.12, lw=0, zorder=0)


def budget_curve(a: Analysis) -> Figure:
    """τ and throughput against the tree budget B, per budget family (a row pair each), one column per C."""
    fams = budget_families(a)
    if not fams:
        raise NoData(f"no budget family: fewer than {MIN_BUDGETS} tree budgets at one block size")
    s = a.summary
    cs = sorted(int(c) for c in s["concurrency"].unique()) if len(s) else []
    cs = cs or [None]
    fig = plt.figure(figsize=(_width(2.2 * len(cs) + 1.0), 3.3 * len(fams) + 0.6), layout="constrained")
    for sub, fam in zip(fig.subfigures(len(fams), 1, squeeze=False)[:, 0], fams, strict=True):
        axes = sub.subplots(len(BUDGET_ROWS), len(cs), sharex=True, squeeze=False)
        ticks = sorted({*fam.budgets, *([fam.block_size - 1] if fam.chain is not None else [])})
        for j, c in enumerate(cs):
            at = s[s["concurrency"] == c] if c is not None else s
            for i, (metric, ylabel) in enumerate(BUDGET_ROWS):
                ax = axes[i][j]
                _budget_panel(ax, a, fam, at, metric)
                ax.set_xscale("log", base=2)
                ax.set_xticks(ticks, [str(b) for b in ticks])
                ax.minorticks_off()
                if i == 0:
                    ax.set_title(f"C={c}")
                if j == 0:
                    ax.set_ylabel(ylabel)
                if i == len(BUDGET_ROWS) - 1:
                    ax.set_xlabel("tree budget B")
            axes[0][j].sharey(axes[0][0])      # one τ scale per family; throughput keeps each C's own
        sub.suptitle(_label(fam.title), fontsize=MIN_FONT)
    fig.suptitle("Which budget: tau and throughput against B (geometric mean over repetitions, Student-t 95% bars; "
                 "dashed: the linear arm, band: its 95% interval)", fontsize=MIN_FONT)
    _legend_below(fig, order=lambda label: 2 if "(linear)" in label else 1 if "(chain" in label else 0)
    return fig


def _legend_below(fig, order=None) -> None:
    """One legend for the whole figure, one entry per label, below the axes (inside it would sit on points)."""
    seen: dict[str, object] = {}
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    labels = sorted(seen, key=order) if order else list(seen)   # sorted() is stable: the rest keep drawing order
    if labels:
        fig.legend([seen[x] for x in labels], labels, loc="outside lower center", ncol=min(len(labels), 5),
                   frameon=False)


# ---- τ against the sampling temperature, per base arm --------------------------------------------------------

def _temperature_x(sets: list) -> tuple[list[float], list[str]]:
    """x position and tick label per setting: the temperature, or the setting's place where two share a T."""
    temps = [s.temperature for s in sets]
    labels = ["0" if s.greedy else s.text.removeprefix("T=").replace(", ", "\n") for s in sets]
    if len(set(temps)) == len(temps):
        return temps, labels
    return list(range(len(sets))), labels


def _temperature_panels(a: Analysis) -> list[tuple[str, list[str]]]:
    """(title, base arm ids) per row: panels() of one setting's arms (every arm runs under each setting), so graphs
    on and off apart where the profile has eager twins."""
    p = a.run.profile
    first = p.sampling_for(p.arms[0].id)
    arms = [x for x in _speculative(a) if p.sampling_for(x.id) == first]
    return [(title, [_base(p.arm(i)) for i in ids]) for title, ids in panels(a, arms)]


def tau_temperature(a: Analysis) -> Figure:
    """τ of each speculative base arm against the sampling temperature, one panel per C (and graphs switch)."""
    sets = settings(a)
    rows = _temperature_panels(a)
    if len(sets) < 2 or not any(arms for _, arms in rows):
        raise NoData("one sampling setting: no temperature axis" if len(sets) < 2 else "no speculative arm measured")
    s, ids = a.summary, measured_ids(a)
    cs = sorted(int(c) for c in s["concurrency"].unique()) if len(s) else [None]
    xs, ticks = _temperature_x(sets)
    step = 0.02 * ((max(xs) - min(xs)) or 1)     # arms of equal τ (a chain and its linear arm) would hide each other
    fig, axes = plt.subplots(len(rows), len(cs), figsize=(_width(2.3 * len(cs) + 1.0), 2.3 * len(rows) + 1.1),
                             sharey=True, squeeze=False, layout="constrained")
    for i, (title, arms) in enumerate(rows):
        for j, c in enumerate(cs):
            ax, at = axes[i][j], (s[s["concurrency"] == c] if c is not None else s)
            for k, base in enumerate(arms):
                pts = [(x, r) for x, st in zip(xs, sets, strict=True)
                       if (r := _row(at, ids.get((base, st.label), ""))) is not None and np.isfinite(r["tau"])]
                if not pts:
                    continue
                x = np.array([p for p, _ in pts]) + step * (k - (len(arms) - 1) / 2)
                y, lo, hi = ([r[m] for _, r in pts] for m in ("tau", "tau_t_lo", "tau_t_hi"))
                ax.errorbar(x, y, yerr=_err(y, lo, hi), marker="o", ms=3, capsize=2, label=_label(base),
                            color=colour(a, base))
            ax.set_xticks(xs, ticks)
            ax.minorticks_off()
            ax.set_title(", ".join(t for t in (title, f"C={c}") if t))
            if i == len(rows) - 1:
                ax.set_xlabel("sampling temperature T")
        axes[i][0].set_ylabel("tau (tokens per verify step)")
    fig.suptitle("Acceptance against temperature (geometric mean over repetitions, Student-t 95% bars).\n"
                 "Not a matched comparison of arm with arm: one arm across T keeps its prompts and load,\n"
                 "but its acceptance changes with T by design; arms are compared at one T", fontsize=MIN_FONT)
    _legend_below(fig)
    return fig


def triage(a: Analysis) -> Figure:
    """ECDFs on a log axis: the top-1/top-2 gap at every position of the ar references, and the margin of
    each distinct divergence; the threshold as a line (the divergence triage, analysis.triage)."""
    t = a.triage
    if t is None or t.divergences.empty:
        raise NoData("no output differs from its reference: nothing to triage")
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    floor = 1e-4
    if len(t.position_gaps):
        _ecdf(ax, t.position_gaps, floor, f"gap, every position of the ar outputs (n={len(t.position_gaps)})", "-")
    d = t.divergences
    for verdict, style in ((tr.TIE, "--"), (tr.FAILURE, ":")):
        m = d.loc[d["verdict"] == verdict, "margin"].dropna().to_numpy(dtype=float)
        if len(m):
            _ecdf(ax, m, floor, _label(f"margin, divergences: {verdict} (n={len(m)})"), style, marker=".")
    ax.axvline(t.threshold, color="black", lw=0.8)
    ax.annotate(f"threshold {t.threshold:g}", (t.threshold, 0.5), xytext=(3, 0), textcoords="offset points",
                fontsize=MIN_FONT)
    ax.set(xscale="log", xlabel="fp32 logit gap / margin", ylabel="share at or below",
           title="Target's fp32 logit gap: all positions vs the divergences")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1, frameon=False)
    return fig


def _ecdf(ax, values, floor, label, style, marker=None):
    x = np.sort(np.maximum(np.asarray(values, dtype=float), floor))
    if len(x):
        ax.step(x, np.arange(1, len(x) + 1) / len(x), style, where="post", label=label, marker=marker, ms=3)


def blank(fig: Figure) -> list:
    """The visible panels of a figure without data (no line, marker, bar or band drawn)."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison
            and not (ax.lines or ax.collections or ax.patches or ax.images)]


def empty(fig: Figure) -> bool:
    """Whether a figure has a visible panel without data."""
    return bool(blank(fig))


ALL = {"throughput": throughput, "latency": latency, "rates": rates, "acceptance": acceptance,
       "by_position": by_position,
       "tau_concurrency": tau_concurrency, "categories": categories, "pareto": pareto, "telemetry": telemetry,
       "triage": triage, "budget_curve": budget_curve, "tau_temperature": tau_temperature}


def draw(name: str, a: Analysis, out: Path) -> Path:
    return _save(ALL[name](a), out / f"{name}.pdf")


HALF = 3.42   # inches: half the report's text width, a figure no wider sits beside another at its natural size


def draw_all(a: Analysis, out: Path) -> tuple[dict[str, Path], dict[str, str], set[str]]:
    """Every figure that has data, saved as PDF; for each one left out, the sentence that says why; and the names
    of those narrow enough to sit two in a row."""
    out.mkdir(parents=True, exist_ok=True)
    drawn, omitted, narrow = {}, {}, set()
    for name, builder in ALL.items():
        try:
            fig = builder(a)
        except NoData as e:
            omitted[name] = str(e)
            continue
        gone = blank(fig)
        if len(gone) == len([ax for ax in fig.axes if ax.get_visible() and ax.axison]):
            plt.close(fig)
            omitted[name] = "no panel of it would have had data"
            continue
        for ax in gone:    # a panel without data is left out, not drawn as empty axes
            ax.set_visible(False)
        if fig.get_size_inches()[0] <= HALF:
            narrow.add(name)
        drawn[name] = _save(fig, out / f"{name}.pdf")
    return drawn, omitted, narrow
