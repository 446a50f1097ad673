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

from analysis.analyze import Analysis  # noqa: E402
from analysis.ingest import dense  # noqa: E402

plt.rcParams.update({"pdf.fonttype": 42, "font.size": 8, "axes.grid": True, "grid.alpha": 0.3,
                     "figure.dpi": 100, "savefig.bbox": "tight", "legend.fontsize": 7})


def _save(fig, path: Path) -> Path:
    fig.savefig(path, format="pdf")
    plt.close(fig)
    return path


def _label(s: str) -> str:
    # matplotlib reads $...$ as mathtext: keep user strings literal
    return str(s).replace("$", r"\$")


def _arms(a: Analysis) -> list[str]:
    return [arm.id for arm in a.run.profile.arms]


def colour(a: Analysis, arm: str) -> str:
    """The arm's colour: matplotlib's default cycle at the arm's place in the profile, the same in every figure
    (a figure that skips arms, as the acceptance ones skip ar, must not shift the others' colours)."""
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    ids = _arms(a)
    return cycle[(ids.index(arm) if arm in ids else len(ids)) % len(cycle)]


def _speculative(a: Analysis) -> list:
    return [x for x in a.run.profile.arms if x.kind != "ar"]


def throughput(a: Analysis) -> Figure:
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    s = a.summary
    for arm in _arms(a):
        d = s[s["arm"] == arm].sort_values("concurrency")
        if d.empty:
            continue
        err = _err(d["throughput"], d["throughput_t_lo"], d["throughput_t_hi"])
        ax.errorbar(d["concurrency"], d["throughput"], yerr=err, marker="o", ms=3, capsize=2, label=_label(arm),
                    color=colour(a, arm))
    ax.set(xscale="log", xlabel="concurrency C", ylabel="aggregate output tok/s",
           title="Throughput (mean over repetitions, Student-t 95% bars)")
    _ticks(ax, s)
    ax.legend()
    return fig


def latency(a: Analysis) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.6), layout="constrained")
    s = a.summary
    for ax, (col, title) in zip(axes, (("ttft_mean", "TTFT"), ("tpot_mean", "TPOT")), strict=True):
        for arm in _arms(a):
            d = s[s["arm"] == arm].sort_values("concurrency")
            if d.empty:
                continue
            err = _err(1e3 * d[col], 1e3 * d[f"{col}_t_lo"], 1e3 * d[f"{col}_t_hi"])
            ax.errorbar(d["concurrency"], 1e3 * d[col], yerr=err, marker="o", ms=3, capsize=2, label=_label(arm),
                        color=colour(a, arm))
        ax.set(xscale="log", xlabel="concurrency C", ylabel=f"mean {title} (ms)", title=title)
        _ticks(ax, s)
    axes[0].legend()
    return fig


def acceptance(a: Analysis) -> Figure:
    """Per arm: per-request τ histogram and commit-length histogram (steps)."""
    r = a.requests
    arms = [x.id for x in _speculative(a)]
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.6), layout="constrained")
    for arm in arms:
        m = r[(r["arm"] == arm) & r["ok"] & ~r["warmup"].astype(bool)]
        tau = m["tau"].dropna()
        if len(tau):
            axes[0].hist(tau, bins=30, histtype="step", label=_label(arm), color=colour(a, arm))
        hist = _commit_hist(m)
        if hist is not None and hist.sum() > 0:
            x = np.arange(len(hist))
            axes[1].plot(x, hist / hist.sum(), marker="o", ms=2, label=_label(arm), color=colour(a, arm))
    axes[0].set(xlabel="per-request tau (completion tokens / verify steps)", ylabel="requests",
                title="tau per request")
    axes[1].set(xlabel="commit length (tokens per verify step)", ylabel="share of steps",
                title="commit length")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    return fig


def eager_twins(a: Analysis) -> bool:
    """Whether two speculative arms differ only in CUDA graphs (on in one, off in the other)."""
    p = a.run.profile
    seen: dict[str, set[bool]] = {}
    for arm in _speculative(a):
        same = repr(sorted(arm.model_dump(exclude={"id", "cuda_graphs"}).items()))
        seen.setdefault(same, set()).add(p.cuda_graphs(arm))
    return any(len(graphs) == 2 for graphs in seen.values())


def tau_panels(a: Analysis) -> list[tuple[str, list[str]]]:
    """(title, arm ids) per panel: graphs on and off apart where the profile has eager twins, whose τ should
    match: in one panel each twin would hide the other."""
    arms = _speculative(a)
    if not eager_twins(a):
        return [("", [x.id for x in arms])]
    p = a.run.profile
    return [(f"CUDA graphs {word}", [x.id for x in arms if p.cuda_graphs(x) == on])
            for word, on in (("on", True), ("off", False))]


DODGE = 1.04   # x factor between neighbouring arms on the log C axis


def _dodge(i: int, n: int) -> float:
    """The i-th of n arms' x offset, centred on C: arms of equal τ (a chain and its linear arm, top-k 1) would
    otherwise draw on top of each other and one would vanish."""
    return DODGE ** (i - (n - 1) / 2)


def tau_concurrency(a: Analysis) -> Figure:
    """τ per speculative arm against C, across repetitions with its Student-t 95% interval."""
    s, panels = a.summary, tau_panels(a)
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels) + 1.0, 2.8), layout="constrained",
                             sharey=True, squeeze=False)
    for ax, (title, arms) in zip(axes[0], panels, strict=True):
        for i, arm in enumerate(arms):
            d = s[s["arm"] == arm].dropna(subset=["tau"]).sort_values("concurrency") if len(s) else s
            if len(d):
                ax.errorbar(d["concurrency"] * _dodge(i, len(arms)), d["tau"], marker="o", ms=3, capsize=2,
                            yerr=_err(d["tau"], d["tau_t_lo"], d["tau_t_hi"]), label=_label(arm),
                            color=colour(a, arm))
        ax.set(xscale="log", xlabel="concurrency C", title=title)
        _ticks(ax, s)
    axes[0][0].set_ylabel("tau (tokens per verify step)")
    fig.suptitle("Acceptance across concurrency (geometric mean over repetitions, Student-t 95% bars)", fontsize=8)
    handles = [h for ax in axes[0] for h in ax.get_legend_handles_labels()[0]]
    if handles:
        # below the axes: a legend inside would sit on the points of some C
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4), frameon=False)
    else:
        axes[0][0].text(0.5, 0.5, "no speculative arm measured", ha="center", transform=axes[0][0].transAxes)
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
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    if d.empty:
        ax.text(0.5, 0.5, "no matched ar baseline", ha="center", transform=ax.transAxes)
        return fig
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
    ax.set(ylabel="speedup over ar (request output rate)", title=f"Speedup per category at C={c} (95% CI)")
    ax.legend()
    return fig


def pareto(a: Analysis) -> Figure:
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    cells = a.cells[a.cells["status"] == "ok"]
    g = cells.groupby(["arm", "concurrency"], as_index=False)[["output_rate_mean", "throughput"]].mean()
    for arm in _arms(a):
        d = g[g["arm"] == arm].sort_values("concurrency")
        if d.empty:
            continue
        ax.plot(d["throughput"], d["output_rate_mean"], marker="o", ms=3, label=_label(arm), color=colour(a, arm))
        for row in d.itertuples():
            ax.annotate(f"C={row.concurrency}", (row.throughput, row.output_rate_mean), fontsize=6,
                        xytext=(2, 2), textcoords="offset points")
    ax.set(xlabel="aggregate output tok/s", ylabel="tok/s per user (N / E2E)",
           title="Per-user speed vs aggregate throughput")
    ax.legend()
    return fig


def telemetry(a: Analysis) -> Figure:
    t = a.run.telemetry
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.4), layout="constrained")
    if t.empty or "t_unix" not in t:
        for ax in axes:
            ax.text(0.5, 0.5, "no telemetry recorded", ha="center", transform=ax.transAxes)
        return fig
    t0 = t["t_unix"].min()
    for ax, (src, col, label) in zip(axes, (("gpu", "temperature_c", "GPU temperature (C)"),
                                            ("gpu", "sm_clock_mhz", "SM clock (MHz)")), strict=True):
        d = t[(t.get("source") == src)] if "source" in t else t
        if col not in d or d[col].isna().all():
            ax.text(0.5, 0.5, f"no {label}", ha="center", transform=ax.transAxes)
            continue
        for arm in _arms(a):
            e = d[d["arm"] == arm]
            if len(e):
                ax.plot(e["t_unix"] - t0, e[col], ".", ms=1.5, label=_label(arm), color=colour(a, arm))
        ax.set(xlabel="seconds since first sample", ylabel=label)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(markerscale=4)
    return fig


def _err(y, lo, hi):
    y, lo, hi = (np.asarray(v, dtype=float) for v in (y, lo, hi))
    return np.vstack([np.nan_to_num(y - lo), np.nan_to_num(hi - y)]).clip(min=0)


def _ticks(ax, s: pd.DataFrame) -> None:
    cs = sorted(s["concurrency"].unique()) if len(s) else []
    if cs:
        ax.set_xticks(cs, [str(c) for c in cs])
        ax.minorticks_off()


def triage(a: Analysis) -> Figure:
    from report.triage import draw  # the divergence triage draws its own (report/triage.py)
    return draw(a)


ALL = {"throughput": throughput, "latency": latency, "acceptance": acceptance,
       "tau_concurrency": tau_concurrency, "categories": categories, "pareto": pareto, "telemetry": telemetry,
       "triage": triage}


def draw(name: str, a: Analysis, out: Path) -> Path:
    return _save(ALL[name](a), out / f"{name}.pdf")


def draw_all(a: Analysis, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    return {name: draw(name, a, out) for name in ALL}
