"""Comparisons between arms, only at matched conditions.

A pair of (arm, concurrency) measurements may be compared only when everything but the arm
under study is equal: profile settings, model pair (by path, and by contents where the manifests
record them), prompt set (by hash), max_tokens and temperature as actually sent, concurrency and
runtime switches. Anything else raises
MismatchError naming the condition that differs: acceptance shifts with concurrency and prompt
mix, so a ratio across conditions answers no question.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis import metrics, stats
from analysis.ingest import Run


class MismatchError(ValueError):
    pass


def conditions(run: Run, arm_id: str, concurrency: int) -> dict[str, object]:
    """Everything that must be equal for a comparison, as measured and as configured."""
    p = run.profile
    arm = p.arm(arm_id)
    sent = _sent(run).get((arm_id, concurrency), {"max_tokens": (), "temperature": ()})
    w, rt = p.workload, p.runtime
    return {
        "backend": p.backend.kind, "backend version": p.backend.version, "image": p.backend.image,
        "target model": p.models.target, "drafter": p.models.drafter,
        "target weights": run.manifest.weights("target"), "drafter weights": run.manifest.weights("drafter"),
        "device": p.placement.device, "GPUs": len(p.placement.gpus), "tensor parallel": p.placement.tp_size,
        "prompt set": run.manifest.prompt_set_digest or w.prompt_set, "categories": tuple(sorted(w.categories)),
        "max_tokens": sent["max_tokens"] or (w.max_tokens,),
        "temperature": sent["temperature"] or (w.temperature,),
        "top_p": w.top_p, "top_k": w.top_k, "ignore_eos": w.ignore_eos,
        "load mode": p.load.mode, "rate": p.load.rate, "concurrency": concurrency,
        "dtype": rt.dtype, "attention backend": rt.attention_backend, "overlap scheduler": rt.overlap_scheduler,
        "page size": rt.page_size, "cuda graphs": p.cuda_graphs(arm), "max running requests": rt.max_running_requests,
        "runtime env": tuple(sorted(rt.env.items())), "runtime args": tuple(rt.extra_args),
        "arm env": tuple(sorted(arm.env.items())), "arm args": tuple(arm.extra_args),
    }


def _sent(run: Run) -> dict:
    """max_tokens and temperature as the measured requests of each (arm, C) really sent them."""
    if "sent" not in run.cache:
        r = run.requests[["arm", "concurrency", "warmup", "max_tokens", "temperature"]]
        r = r[~r["warmup"].astype(bool)]
        run.cache["sent"] = {
            (str(a), int(c)): {k: tuple(sorted(g[k].unique().tolist())) for k in ("max_tokens", "temperature")}
            for (a, c), g in r.groupby(["arm", "concurrency"], observed=True)}
    return run.cache["sent"]


def require_matched(a: dict, b: dict, what: str, vary: tuple[str, ...] = ()) -> None:
    diff = [k for k in a if k not in vary and a[k] != b.get(k)]
    if diff:
        because = "; ".join(f"{k} differs ({a[k]!r} vs {b.get(k)!r})" for k in diff)
        raise MismatchError(f"refusing to compare {what}: {because}")


def _ok_cells(cells: pd.DataFrame, arm: str, c: int) -> pd.DataFrame:
    return cells[(cells["arm"] == arm) & (cells["concurrency"] == c) & (cells["status"] == "ok")]


@dataclass
class Side:
    """One side of a comparison: a run, its per-cell table and bootstraps, an arm."""

    run: Run
    cells: pd.DataFrame
    boots: dict
    arm: str

    def pooled(self, c: int) -> tuple[pd.DataFrame, list[metrics.Boot]]:
        ok = _ok_cells(self.cells, self.arm, c)
        return ok, [self.boots[(self.arm, c, int(r))] for r in ok["repetition"]]


def speedup(x: Side, y: Side, c: int, vary: tuple[str, ...] = ()) -> dict:
    """Throughput of arm X over arm Y at concurrency c (and the TPOT ratio Y/X at c = 1), pooled
    over the repetitions that finished ok, with bootstrap CIs. The runs of X and Y may differ."""
    ax, ay = x.arm, y.arm
    require_matched(conditions(x.run, ax, c), conditions(y.run, ay, c), f"{ax} with {ay} at C={c}", vary)
    (cx, bx), (cy, by) = x.pooled(c), y.pooled(c)
    if cx.empty or cy.empty:
        missing = ax if cx.empty else ay
        raise MismatchError(f"refusing to compare {ax} with {ay} at C={c}: {missing} has no cell that finished ok")
    thr_x = cx["tokens"].sum() / cx["window_s"].sum()
    thr_y = cy["tokens"].sum() / cy["window_s"].sum()
    reps = metrics.throughput_replicates(thr_x, bx) / metrics.throughput_replicates(thr_y, by)
    out = {"arm": ax, "baseline": ay, "concurrency": c, "throughput": thr_x, "baseline_throughput": thr_y,
           "speedup": thr_x / thr_y, "reps": len(cx), "baseline_reps": len(cy)}
    out["speedup_lo"], out["speedup_hi"] = stats.interval(reps)
    out["tpot_ratio"] = out["tpot_ratio_lo"] = out["tpot_ratio_hi"] = float("nan")
    if c == 1:
        px, rx = metrics.ratio(bx, "tpot_sum", "tpot_n")
        py, ry = metrics.ratio(by, "tpot_sum", "tpot_n")
        out["tpot_ratio"] = py / px
        out["tpot_ratio_lo"], out["tpot_ratio_hi"] = stats.interval(ry / rx)
    return out


def baseline_for(run: Run, arm_id: str, kind: str) -> list[str]:
    """Candidate baselines of a kind for an arm, the same drafter block size first."""
    arm = run.profile.arm(arm_id)
    cands = [a for a in run.profile.arms if a.kind == kind and a.id != arm_id]
    cands.sort(key=lambda a: (a.block_size != arm.block_size, a.id))
    return [a.id for a in cands]


def speedups(run: Run, cells: pd.DataFrame, boots: dict) -> tuple[pd.DataFrame, list[str]]:
    """Every arm against the ar arm and against the linear arm, at every concurrency.
    Returns the table and the refusals (why a pair was not compared)."""
    rows, refusals = [], []
    for arm in (a for a in run.profile.arms if a.kind != "ar"):
        for kind in ("ar", "linear"):
            if arm.kind == kind:
                continue
            for c in run.profile.load.concurrency:
                why = None
                for base in baseline_for(run, arm.id, kind):
                    try:
                        rows.append({**speedup(Side(run, cells, boots, arm.id), Side(run, cells, boots, base), c),
                                     "baseline_kind": kind})
                        why = None
                        break
                    except MismatchError as e:
                        why = why or str(e)
                if why:
                    refusals.append(why)
    return pd.DataFrame(rows), refusals


def decomposition(run: Run, cells: pd.DataFrame, boots: dict) -> tuple[pd.DataFrame, list[str]]:
    """throughput(tree)/throughput(chain) = τ(tree)/τ(chain) × step time(chain)/step time(tree),
    on pooled repetitions, for each tree arm against the chain arm of the same block size."""
    rows, refusals = [], []
    chains = {a.block_size: a for a in run.profile.arms if a.kind == "chain"}
    for tree in (a for a in run.profile.arms if a.kind == "tree"):
        chain = chains.get(tree.block_size)
        if chain is None:
            refusals.append(f"no chain arm with block size {tree.block_size} to decompose {tree.id} against")
            continue
        for c in run.profile.load.concurrency:
            try:
                require_matched(conditions(run, tree.id, c), conditions(run, chain.id, c),
                                f"{tree.id} with {chain.id} at C={c}")
            except MismatchError as e:
                refusals.append(str(e))
                continue
            (ct, bt), (ch, bh) = Side(run, cells, boots, tree.id).pooled(c), Side(run, cells, boots, chain.id).pooled(c)
            if ct.empty or ch.empty:
                refusals.append(f"no finished cells to decompose {tree.id} against {chain.id} at C={c}")
                continue
            tau_t, rt = metrics.ratio(bt, "step_tokens", "steps")
            tau_h, rh = metrics.ratio(bh, "step_tokens", "steps")
            step_t = ct["window_s"].sum() * c / ct["steps"].sum()
            step_h = ch["window_s"].sum() * c / ch["steps"].sum()
            thr_t = ct["tokens"].sum() / ct["window_s"].sum()
            thr_h = ch["tokens"].sum() / ch["window_s"].sum()
            lo, hi = stats.interval(rt / rh)
            rows.append({"tree": tree.id, "chain": chain.id, "concurrency": c, "throughput_ratio": thr_t / thr_h,
                         "tau_tree": tau_t, "tau_chain": tau_h, "tau_ratio": tau_t / tau_h,
                         "tau_ratio_lo": lo, "tau_ratio_hi": hi,
                         "step_ms_tree": 1e3 * step_t, "step_ms_chain": 1e3 * step_h,
                         "step_time_ratio": step_h / step_t, "product": (tau_t / tau_h) * (step_h / step_t)})
    return pd.DataFrame(rows), refusals


def per_category(run: Run, req: pd.DataFrame, cells: pd.DataFrame, boots: dict) -> pd.DataFrame:
    """Per prompt category: each speculative arm's mean request output rate (N / E2E) over the ar
    arm's, with a bootstrap CI, and the arm's token-weighted τ in that category."""
    rows = []
    ar = [a.id for a in run.profile.arms if a.kind == "ar"]
    m = req["ok"].to_numpy(dtype=bool) & ~req["warmup"].to_numpy(dtype=bool)
    tau = (req[m].groupby(["arm", "concurrency", "category"], observed=True)[["n_tokens", "verify_steps"]].sum())
    for arm in (a for a in run.profile.arms if a.kind != "ar"):
        for c in run.profile.load.concurrency:
            base = next((x for x in ar if _matched(run, arm.id, x, c)), None)
            if base is None:
                continue
            (cx, bx), (cy, by) = Side(run, cells, boots, arm.id).pooled(c), Side(run, cells, boots, base).pooled(c)
            if cx.empty or cy.empty:
                continue
            for cat in sorted(req["category"].astype(str).unique()):
                px, rx = metrics.ratio(bx, f"rate_sum:{cat}", f"rate_n:{cat}")
                py, ry = metrics.ratio(by, f"rate_sum:{cat}", f"rate_n:{cat}")
                nx = sum(b.sums(f"rate_n:{cat}")[0] for b in bx)
                ny = sum(b.sums(f"rate_n:{cat}")[0] for b in by)
                if nx < 2 or ny < 2:
                    continue
                lo, hi = stats.interval(rx / ry)
                t = tau.loc[(arm.id, c, cat)] if (arm.id, c, cat) in tau.index else None
                rows.append({"arm": arm.id, "baseline": base, "concurrency": c, "category": cat,
                             "n": int(nx), "baseline_n": int(ny), "speedup": px / py, "speedup_lo": lo,
                             "speedup_hi": hi, "tau": (t["n_tokens"] / t["verify_steps"]
                                                       if t is not None and t["verify_steps"] > 0 else float("nan"))})
    return pd.DataFrame(rows)


def _matched(run: Run, a: str, b: str, c: int) -> bool:
    try:
        require_matched(conditions(run, a, c), conditions(run, b, c), f"{a} with {b}")
        return True
    except MismatchError:
        return False
