"""Render the LaTeX report of a run and build it with latexmk into RUN/report.pdf."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from markupsafe import Markup

from analysis.outcome import Analysis
from analysis.trust import stability
from analysis.trust.kinds import Kind, of
from ddbench.core import budget, schedule
from ddbench.core.profile import is_random_source
from ddbench.core.prompts import sources
from ddbench.core.results import NOTES, write_bytes_atomic
from report import (
    budgets,
    cost,
    crosscheck,
    external,
    figures,
    front,
    headroom,
    sampling_law,
    summary,
    tables,
    temperature,
    triage,
    verdict,
)
from report.tex import breakable, environment, escape, url


class BuildError(RuntimeError):
    pass


def _model(name: str, digest: str | None) -> str:
    return name if digest is None else breakable(f"{name}, contents sha256 {digest[:16]}")


def _prompt_set(prompt_set: str | list[str], m) -> str:
    """The sources as the profile names them, a package source with the version the run read."""
    recorded = (m.model_extra or {}).get("prompt_sources") or []
    versions = {r["source"]: r["version"] for r in recorded if "version" in r}
    return ", ".join(f"{s} {versions[s]}" if s in versions else s for s in sources(prompt_set))


# SPEED-Bench (arXiv 2604.09557): random-token prompts overstate speculative acceptance by about 23%
RANDOM_CAVEAT = ("Prompts of random tokens: they overstate speculative acceptance, by about 23% in SPEED-Bench's "
                 "measurement (arXiv 2604.09557), so this run's acceptance and speedups are likely higher than real "
                 "prompts would give; read them as an upper bound.")


def workload_notes(w) -> list[str]:
    """Method notes the workload calls for, decided from the profile the run recorded: the random-prompt caveat
    when any source was random."""
    return [RANDOM_CAVEAT] if any(is_random_source(s) for s in sources(w.prompt_set)) else []


def rounds_units(load) -> str:
    """What a rounds unit is at each level: one request per user, or a block of load.unit_s seconds."""
    return "; ".join(f"C={c}: " + (f"a {load.unit_seconds(c):g} s block, each user sending back to back"
                                   if load.unit_seconds(c) else "one request per user") for c in load.concurrency)


def rec(v):
    return "not recorded" if v in (None, "", []) else v


def cpu_line(host) -> str:
    """The CPU's name, its family/model id where recorded (one name can cover two chip generations), cores."""
    return f"{rec(host.cpu)}" + (f" ({host.cpu_id})" if host.cpu_id else "") + f", {rec(host.cores)} cores"


def context(a: Analysis, figs: dict[str, Path], omitted: dict[str, str] | None = None) -> dict:
    m, p = a.run.manifest, a.run.profile
    host = m.host
    gpus = ", ".join(str(g.get("name", g)) if isinstance(g, dict) else str(g) for g in host.gpus) or "none"
    backend = (f"{p.backend.kind} ({p.backend.runtime}), version {rec(p.backend.version)}"
               if p.backend.kind != "external" else "external: servers the user runs, not started by ddbench")
    setup = [("backend", backend),
             ("target model", _model(rec(p.models.target), m.weights("target"))),
             ("drafter", _model(rec(p.models.drafter), m.weights("drafter"))),
             ("placement", f"{p.placement.device}, tensor parallel {p.placement.tp_size}"),
             ("CPU", cpu_line(host)),
             ("memory", f"{host.memory_bytes / 2**30:.0f} GiB" if host.memory_bytes else "not recorded"),
             ("GPUs", gpus), ("driver", rec(host.driver)), ("OS", rec(host.os)),
             ("git", breakable(f"{rec(m.git.sha)}" + (" (dirty tree)" if m.git.dirty else ""))),
             ("profile digest", breakable(rec(m.profile_digest))),
             ("prompt set", breakable(_prompt_set(p.workload.prompt_set, m))),
             ("prompt-set digest", breakable(rec(m.prompt_set_digest))),
             ("workload", p.workload.lengths_text),
             ("sampling", "; ".join(x.text for x in p.workload.settings())),
             ("load", f"{p.load.mode} loop, C in {p.load.concurrency}, {p.load.repetitions} repetition(s), "
                      f"{p.load.warmup_requests} warmup request(s) per user"
                      + (f", {w}" if (w := schedule.warm_up_text(p, _planned_mode(a))) else "")
                      + (f"; {stopped}" if (stopped := budget.text((m.model_extra or {}).get("budget"))) else "")),
             ("started / ended", f"{rec(m.started)} / {rec(m.ended)}"),
             ("seeds", str(m.seeds or "not recorded"))]
    images = m.images.items() if isinstance(m.images, dict) else [(str(i), str(v)) for i, v in enumerate(m.images)]
    arms = [{"id": x.id, "text": _arm_text(a, x)} for x in p.arms]
    windows = a.cells["window_source"].value_counts().to_dict()
    derived = windows.get("derived", 0)
    window_note = ("from status.json for every cell" if not derived else
                   f"from status.json; for {derived} cell(s) without one, derived from the first measured send "
                   f"to the last measured end, marked $^*$")
    failures = a.checks[a.checks["status"] == "fail"]
    levels = [{"c": c, "throughput": tables.throughput(a, c), "latency": tables.latency(a, c),
               "repetitions": tables.repetitions(a, c)}
              for c in p.load.concurrency]
    return {
        "profile_name": p.name, "run_id": a.run.path.name, "nothing": None,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "synthetic": bool(getattr(m, "synthetic", False) or (m.model_extra or {}).get("synthetic")),
        "summary": summary.sentences(a), "setup": setup, "arms": arms, "images": list(images),
        "packages": ", ".join(f"{k} {v}" for k, v in sorted(m.packages.items())) or "not recorded",
        "window_note": Markup(window_note), "percentile_rule": "; ".join(tables.percentile_rule()),
        "bootstrap": a.bootstrap,
        "refusals": a.refusals, "workload_notes": workload_notes(p.workload), "levels": levels,
        "fig": {k: Markup(v.name) for k, v in figs.items()},
        "omitted": {k: Markup(escape(v)) for k, v in (omitted or {}).items()}, "front": front.context(a),
        "checks_summary": tables.checks_summary(a.checks),
        "acceptance": tables.acceptance(a), "decomposition": tables.decomposition(a),
        "gpu_busy": tables.gpu_busy(a), "rounds": tables.rounds(a), "rounds_units": rounds_units(p.load),
        "gpu_time": tables.gpu_time(a),
        "host_profile": tables.host_profile(a), "rate_wins": tables.rate_wins(a),
        "goodput": tables.goodput(a), "warmups": tables.warmups(a), "prefill": tables.prefill(a),
        "tau_concurrency": {"note": summary.tau_across_concurrency(a),
                            "width": 0.9 if len(figures.tau_panels(a)) > 1 else 0.62},
        "categories": tables.categories(a), "lossless": tables.lossless(a), "lossless_note": a.lossless_note,
        "failures_count": len(failures),
        "profile_lines": _profile_lines(p.model_dump(mode="json")),
        "crosscheck": crosscheck.context(a), "notes": notes(a.run.path),
        "triage": triage.context(a), "headroom": headroom.context(a), "cost": cost.context(a),
        "verdict": verdict.context(a),
        "budgets": budgets.context(a), "temperature": temperature.context(a),
        "sampling_law": sampling_law.context(a), "external": external.context(a),
        "headline": tables.speedups(a), "drift": tables.drift(a), "gpu_band": tables.gpu_band(a),
        "host_cpu": tables.host_cpu(a), "foreign_share": f"{100 * stability.FOREIGN_SHARE:g}",
        "order": tables.schedule(a), "ddtree_build": _ddtree_build(a), "clock_band": f"{100 * stability.CLOCK_BAND:g}",
        "power_band": f"{100 * stability.POWER_BAND:g}", **_schedule(a),
    }


def _ddtree_build(a: Analysis) -> dict | None:
    """The SGLang DDTree build that served the run: its source, the overlay check, its stage costs."""
    if a.run.profile.backend.ddtree != "fork":
        return None
    source = a.run.manifest.sglang_build
    picks = ", ".join(f"{p.get('repo', '').removeprefix('https://github.com/')}@{str(p.get('commit'))[:9]}"
                      for p in source.get("cherry_picks") or [])
    overlay = of(a.checks, Kind.OVERLAY)
    return {"source": Markup(f"{url(source.get('repo', 'not recorded'))} at commit "
                             f"\\texttt{{{breakable(source.get('commit', '?'))}}}"),
            "picks": picks or "none", "head": breakable(str(source.get("head", "not recorded"))),
            "overlay_status": overlay["status"].iloc[0] if len(overlay) else "n/a",
            "overlay": overlay["evidence"].iloc[0] if len(overlay) else "no overlay check",
            "stage_cost": tables.stage_cost(a), "has_stage_cost": not a.stage_cost.empty}


def _planned_mode(a: Analysis) -> str | None:
    return ((a.run.manifest.model_extra or {}).get("schedule") or {}).get("mode")


def _schedule(a: Analysis) -> dict:
    """How the run ordered its cells: from the manifest where it says, else from the cells' start times."""
    sched = (a.run.manifest.model_extra or {}).get("schedule") or {}
    mode = sched.get("mode") or "arm-major"
    why = sched.get("why") or "the run predates the schedule record; its cells ran arm by arm"
    ups = sched.get("bring_ups")
    return {"schedule_mode": mode, "schedule_why": why, "requests_note": requests_note(a.requests),
            "schedule_note": f"{ups} server start(s)" if ups is not None else "order below from the cells' start times"}


def requests_note(requests: pd.DataFrame) -> str:
    """Which prompts the measured requests of a cell sent, per C, as the records show: how many distinct ones
    (of all the run sent), and whether every repetition of an arm's cell sent the same ones. Where repetitions
    drew other prompts, the repetitions' spread holds the prompt mix, not only the host."""
    m = requests[~requests["warmup"].astype(bool)]
    if m.empty:
        return "no measured request"
    sets = m.groupby(["arm", "concurrency", "repetition"], observed=True)["prompt_id"].agg(lambda s: tuple(sorted(s)))
    parts = []
    for c, g in sets.groupby(level="concurrency"):
        distinct = int(np.median([len(set(t)) for t in g]))
        same = all(v.nunique() == 1 for _, v in g.groupby(level="arm"))
        parts.append(f"at C={c} a cell sends {distinct} distinct prompts, "
                     + ("the same in every repetition" if same else "a different mix in other repetitions"))
    return f"{'; '.join(parts)} (of {m['prompt_id'].nunique()} the run sent)"


def notes(run_path: Path) -> list[str]:
    """The paragraphs of the run's notes.md, if someone wrote one (blank lines separate them)."""
    path = Path(run_path) / NOTES
    if not path.is_file():
        return []
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")) if p.strip()]


def _arm_text(a: Analysis, arm) -> str:
    p = a.run.profile
    parts = {"ar": "no speculation", "linear": f"DFlash block drafting, block {arm.block_size}",
             "chain": f"DDTree chain, block {arm.block_size}, budget {arm.tree_budget}, top-k 1",
             "tree": f"DDTree tree, block {arm.block_size}, budget {arm.budget}, top-k {arm.topk}"}[arm.kind]
    if p.backend.kind == "external":   # what the profile says the server does: ddbench set none of it
        return f"{parts} (as the profile declares it); server {arm.url}"
    return f"{parts}; CUDA graphs {'on' if p.cuda_graphs(arm) else 'off'}"


def _profile_lines(d: dict) -> list[tuple[int, str]]:
    text = yaml.safe_dump(d, sort_keys=False, width=90, allow_unicode=True)
    return [((len(line) - len(line.lstrip(" "))) // 2, line.strip()) for line in text.splitlines()]


def nothing_measured(a: Analysis) -> list[dict] | None:
    """Per arm, its cells and the distinct reasons they failed, when no cell of the run finished ok; else None."""
    c = a.cells
    if not c.empty and (c["status"] == "ok").any():
        return None
    rows = []
    for arm in [x.id for x in a.run.profile.arms]:
        mine = c[c["arm"] == arm] if not c.empty else c
        reasons = list(dict.fromkeys(str(r) for r in mine.get("reason", pd.Series(dtype=object)).dropna()))
        rows.append({"arm": arm, "cells": len(mine), "reasons": "; ".join(reasons) or "no cell ran"})
    return rows


def render(a: Analysis, build_dir: Path) -> Path:
    template = environment().get_template("report.tex.j2")
    if (nothing := nothing_measured(a)) is not None:   # page 1 alone: the rest of the report needs a measured cell
        tex = template.render(profile_name=a.run.profile.name, run_id=str(a.run.path),
                              date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), front={"header": front.header(a)},
                              external=external.context(a), nothing=nothing)
    else:
        figs, omitted, narrow = figures.draw_all(a, build_dir)
        tex = template.render(**context(a, figs, omitted), narrow=narrow)
    path = build_dir / "report.tex"
    path.write_text(tex)
    return path


def latexmk(tex: Path, timeout: int = 300) -> Path:
    if not shutil.which("latexmk"):
        raise BuildError("latexmk not found: install latexmk and texlive-latex-extra (see README)")
    cmd = ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error", tex.name]
    proc = subprocess.run(cmd, cwd=tex.parent, capture_output=True, text=True, errors="replace", timeout=timeout)
    pdf = tex.with_suffix(".pdf")
    if proc.returncode != 0 or not pdf.is_file():
        log = tex.with_suffix(".log")
        tail = log.read_text(errors="replace")[-3000:] if log.is_file() else proc.stdout[-3000:]
        errors = [line for line in tail.splitlines() if line.startswith(("!", str(tex.name) + ":")) or ".tex:" in line]
        raise BuildError(f"latexmk failed on {tex} (exit {proc.returncode}):\n" + "\n".join(errors[:10] or [tail]))
    return pdf


def build(a: Analysis, out: Path | None = None, keep: Path | None = None) -> tuple[Path, float]:
    """Render, compile, and place the PDF atomically (RUN/report.pdf by default). Returns (path, seconds)."""
    t0 = time.perf_counter()
    out = out or a.run.path / "report.pdf"
    with tempfile.TemporaryDirectory(prefix="ddbench-report-") as tmp:
        work = Path(keep) if keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        pdf = latexmk(render(a, work))
        write_bytes_atomic(out, pdf.read_bytes())
    return out, time.perf_counter() - t0


__all__ = ["build", "render", "latexmk", "BuildError", "escape"]
