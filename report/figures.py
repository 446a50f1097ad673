"""The report's figures, as vector PDF through matplotlib (Agg, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

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


def throughput(a: Analysis, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    s = a.summary
    for arm in _arms(a):
        d = s[s["arm"] == arm].sort_values("concurrency")
        if d.empty:
            continue
        err = _err(d["throughput"], d["throughput_t_lo"], d["throughput_t_hi"])
        ax.errorbar(d["concurrency"], d["throughput"], yerr=err, marker="o", ms=3, capsize=2, label=_label(arm))
    ax.set(xscale="log", xlabel="concurrency C", ylabel="aggregate output tok/s",
           title="Throughput (mean over repetitions, Student-t 95% bars)")
    _ticks(ax, s)
    ax.legend()
    return _save(fig, path)


def latency(a: Analysis, path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.6), layout="constrained")
    s = a.summary
    for ax, (col, title) in zip(axes, (("ttft_mean", "TTFT"), ("tpot_mean", "TPOT")), strict=True):
        for arm in _arms(a):
            d = s[s["arm"] == arm].sort_values("concurrency")
            if d.empty:
                continue
            err = _err(1e3 * d[col], 1e3 * d[f"{col}_t_lo"], 1e3 * d[f"{col}_t_hi"])
            ax.errorbar(d["concurrency"], 1e3 * d[col], yerr=err, marker="o", ms=3, capsize=2, label=_label(arm))
        ax.set(xscale="log", xlabel="concurrency C", ylabel=f"mean {title} (ms)", title=title)
        _ticks(ax, s)
    axes[0].legend()
    return _save(fig, path)


def acceptance(a: Analysis, path: Path) -> Path:
    """Per arm: per-request τ histogram and commit-length histogram (steps)."""
    r = a.requests
    arms = [x.id for x in a.run.profile.arms if x.kind != "ar"]
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.6), layout="constrained")
    for arm in arms:
        m = r[(r["arm"] == arm) & r["ok"] & ~r["warmup"].astype(bool)]
        tau = m["tau"].dropna()
        if len(tau):
            axes[0].hist(tau, bins=30, histtype="step", label=_label(arm))
        hist = _commit_hist(m)
        if hist is not None and hist.sum() > 0:
            x = np.arange(len(hist))
            axes[1].plot(x, hist / hist.sum(), marker="o", ms=2, label=_label(arm))
    axes[0].set(xlabel="per-request tau (completion tokens / verify steps)", ylabel="requests",
                title="tau per request")
    axes[1].set(xlabel="commit length (tokens per verify step)", ylabel="share of steps",
                title="commit length")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    return _save(fig, path)


def _commit_hist(m: pd.DataFrame) -> np.ndarray | None:
    """Summed commit-length histogram: ours when present, else SGLang's accepted-drafts one shifted by one."""
    for col, shift in (("spec_commit_length_histogram", 0), ("spec_correct_drafts_histogram", 1)):
        h, present = dense(m[col])
        if present.any():
            return np.concatenate([np.zeros(shift), h[present].sum(axis=0)])
    return None


def categories(a: Analysis, path: Path) -> Path:
    d = a.categories
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    if d.empty:
        ax.text(0.5, 0.5, "no matched ar baseline", ha="center", transform=ax.transAxes)
        return _save(fig, path)
    c = int(d["concurrency"].min())
    d = d[d["concurrency"] == c]
    cats = sorted(d["category"].unique())
    arms = [x for x in _arms(a) if x in set(d["arm"])]
    width = 0.8 / max(len(arms), 1)
    for i, arm in enumerate(arms):
        e = d[d["arm"] == arm].set_index("category").reindex(cats)
        x = np.arange(len(cats)) + i * width
        ax.bar(x, e["speedup"], width, yerr=_err(e["speedup"], e["speedup_lo"], e["speedup_hi"]), capsize=2,
               label=_label(arm))
    ax.axhline(1, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(cats)) + width * (len(arms) - 1) / 2, [_label(x) for x in cats])
    ax.set(ylabel="speedup over ar (request output rate)", title=f"Speedup per category at C={c} (95% CI)")
    ax.legend()
    return _save(fig, path)


def pareto(a: Analysis, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    cells = a.cells[a.cells["status"] == "ok"]
    g = cells.groupby(["arm", "concurrency"], as_index=False)[["output_rate_mean", "throughput"]].mean()
    for arm in _arms(a):
        d = g[g["arm"] == arm].sort_values("concurrency")
        if d.empty:
            continue
        ax.plot(d["throughput"], d["output_rate_mean"], marker="o", ms=3, label=_label(arm))
        for row in d.itertuples():
            ax.annotate(f"C={row.concurrency}", (row.throughput, row.output_rate_mean), fontsize=6,
                        xytext=(2, 2), textcoords="offset points")
    ax.set(xlabel="aggregate output tok/s", ylabel="tok/s per user (N / E2E)",
           title="Per-user speed vs aggregate throughput")
    ax.legend()
    return _save(fig, path)


def telemetry(a: Analysis, path: Path) -> Path:
    t = a.run.telemetry
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.4), layout="constrained")
    if t.empty or "t_unix" not in t:
        for ax in axes:
            ax.text(0.5, 0.5, "no telemetry recorded", ha="center", transform=ax.transAxes)
        return _save(fig, path)
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
                ax.plot(e["t_unix"] - t0, e[col], ".", ms=1.5, label=_label(arm))
        ax.set(xlabel="seconds since first sample", ylabel=label)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(markerscale=4)
    return _save(fig, path)


def _err(y, lo, hi):
    y, lo, hi = (np.asarray(v, dtype=float) for v in (y, lo, hi))
    return np.vstack([np.nan_to_num(y - lo), np.nan_to_num(hi - y)]).clip(min=0)


def _ticks(ax, s: pd.DataFrame) -> None:
    cs = sorted(s["concurrency"].unique()) if len(s) else []
    if cs:
        ax.set_xticks(cs, [str(c) for c in cs])
        ax.minorticks_off()


def triage(a: Analysis, path: Path) -> Path:
    from report.triage import figure  # the divergence triage draws its own (report/triage.py)
    return figure(a, path)


ALL = {"throughput": throughput, "latency": latency, "acceptance": acceptance, "categories": categories,
       "pareto": pareto, "telemetry": telemetry, "triage": triage}


def draw_all(a: Analysis, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    return {name: f(a, out / f"{name}.pdf") for name, f in ALL.items()}
