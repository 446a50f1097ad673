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

import numpy as np
import pandas as pd

from analysis.estimate import metrics, stats
from analysis.read.ingest import Run
from ddbench.core.prompts import prompt_set_label


class MismatchError(ValueError):
    pass


def conditions(run: Run, arm_id: str, concurrency: int) -> dict[str, object]:
    """Everything that must be equal for a comparison, as measured and as configured."""
    p = run.profile
    arm = p.arm(arm_id)
    sent = _sent(run).get((arm_id, concurrency), {"max_tokens": (), "temperature": ()})
    w, rt, s = p.workload, p.runtime, p.sampling_for(arm_id)
    return {
        "backend": p.backend.kind, "backend version": p.backend.version, "image": p.backend.image,
        "target model": p.models.target, "drafter": p.models.drafter,
        "target weights": run.manifest.weights("target"), "drafter weights": run.manifest.weights("drafter"),
        "device": p.placement.device, "GPUs": len(p.placement.gpus), "tensor parallel": p.placement.tp_size,
        "prompt set": run.manifest.prompt_set_digest or prompt_set_label(w.prompt_set),
        "categories": tuple(sorted(w.categories)),
        "max_tokens": sent["max_tokens"] or (w.max_tokens,),
        "temperature": sent["temperature"] or (s.temperature,),
        "top_p": s.top_p, "top_k": s.top_k, "ignore_eos": w.ignore_eos,
        "load mode": p.load.mode, "rate": p.load_for(arm_id).rate, "concurrency": concurrency,
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


def ok_cells(cells: pd.DataFrame, arm: str, c: int) -> pd.DataFrame:
    return cells[(cells["arm"] == arm) & (cells["concurrency"] == c) & (cells["status"] == "ok")]


@dataclass
class Side:
    """One side of a comparison: a run, its per-cell table and bootstraps, an arm."""

    run: Run
    cells: pd.DataFrame
    boots: dict
    arm: str

    def pooled(self, c: int) -> tuple[pd.DataFrame, list[metrics.Boot]]:
        ok = ok_cells(self.cells, self.arm, c)
        return ok, [self.boots[(self.arm, c, int(r))] for r in ok["repetition"]]


def verdict(lo: float, hi: float) -> str:
    """What a ratio's 95% interval supports: 'faster', 'slower', or 'within noise'."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "no interval"
    return "faster" if lo > 1 else "slower" if hi < 1 else "within noise"


def ratio_stats(x: pd.DataFrame, y: pd.DataFrame, column: str, paired: bool) -> dict:
    """X/Y of one per-cell column from repetitions: paired by repetition within a run (cells adjacent
    in time), unpaired across runs. Adds the mean time between the paired cells (X minus Y, s),
    which is what a linear drift of the host would add to the ratio."""
    if paired:
        both = x.merge(y, on="repetition", how="inner", suffixes=("_x", "_y"))
        out = stats.paired_log_ratio(both[f"{column}_x"], both[f"{column}_y"])
        if "started_unix" in x and len(both):
            out["dt_mean_s"] = float((metrics.mid_unix(both, "_x") - metrics.mid_unix(both, "_y")).mean())
        else:
            out["dt_mean_s"] = float("nan")
    else:
        out = stats.unpaired_log_ratio(x[column], y[column])
        out["dt_mean_s"] = float("nan")
    out["verdict"] = verdict(out["ratio_lo"], out["ratio_hi"])
    return out


def speedup(x: Side, y: Side, c: int, vary: tuple[str, ...] = ()) -> dict:
    """Throughput of arm X over arm Y at concurrency c, and the TPOT ratio Y/X at c = 1; in an open-loop cell,
    where the offered rate, not the arm, sets throughput, the TPOT ratio Y/X is the headline (metric 'tpot').

    The ratio and its 95% interval come from the repetitions: per repetition pair in one run (the two
    cells ran next to each other), on the log scale, with a sign test, each side's noise sd and the
    minimum detectable effect; across two runs, from the two sets of repetitions (unpaired). The
    pooled ratio with a bootstrap over requests within cells is kept beside it as a secondary view:
    it sees request noise only, not the host's drift between cells."""
    ax, ay = x.arm, y.arm
    require_matched(conditions(x.run, ax, c), conditions(y.run, ay, c), f"{ax} with {ay} at C={c}", vary)
    (cx, bx), (cy, by) = x.pooled(c), y.pooled(c)
    if cx.empty or cy.empty:
        missing = ax if cx.empty else ay
        raise MismatchError(f"refusing to compare {ax} with {ay} at C={c}: {missing} has no cell that finished ok")
    paired = x.run is y.run
    thr_x = cx["tokens"].sum() / cx["window_s"].sum()
    thr_y = cy["tokens"].sum() / cy["window_s"].sum()
    open_loop = x.run.profile.load_for(ax).rate is not None
    tpot = ratio_stats(cy, cx, "tpot_mean", paired) if c == 1 or open_loop else None
    if tpot is not None and open_loop:
        # below saturation the offered rate, not the arm, sets throughput: what the arm changes is how fast each
        # request streams, so the headline is the baseline's TPOT over the arm's (higher is better, as throughput)
        r = {**tpot, "sd_x": tpot["sd_y"], "sd_y": tpot["sd_x"], "dt_mean_s": -tpot["dt_mean_s"]}
    else:
        r = ratio_stats(cx, cy, "throughput", paired)
    out = {"arm": ax, "baseline": ay, "concurrency": c, "metric": "tpot" if open_loop else "throughput",
           "throughput": thr_x, "baseline_throughput": thr_y,
           "speedup": r["ratio"], "speedup_lo": r["ratio_lo"], "speedup_hi": r["ratio_hi"], "verdict": r["verdict"],
           "paired": paired, "pairs": r["pairs"], "sign_p": r["sign_p"], "wins": r["wins"], "sd_arm": r["sd_x"],
           "sd_baseline": r["sd_y"], "sd_pair": r["sd_pair"], "mde": r["mde"], "n_to_resolve": r["n_to_resolve"],
           "dt_mean_s": r["dt_mean_s"], "reps": len(cx), "baseline_reps": len(cy),
           "pooled_speedup": thr_x / thr_y}
    reps = metrics.throughput_replicates(thr_x, bx) / metrics.throughput_replicates(thr_y, by)
    out["boot_lo"], out["boot_hi"] = stats.interval(reps)
    for k in ("", "_lo", "_hi"):
        out[f"tpot_ratio{k}"] = tpot[f"ratio{k}"] if tpot is not None else float("nan")
    return out


def with_between_runs(speedups: pd.DataFrame, between: pd.DataFrame) -> pd.DataFrame:
    """The headline interval of each ratio that other runs of the plan have measured: its repetitions' interval
    widened by the between-run sd those runs show (stats.with_between_sd; the DerSimonian-Laird estimate over
    this run and them, 0 where they agree within noise), and its verdict read from that. A state of the host that
    lasts a whole run moves every repetition of it alike, so only other runs see it; the repetitions' own
    interval is kept as within_lo, within_hi and within_verdict, and between_n counts the runs behind between_sd
    (1: this run alone, and the two intervals are one)."""
    s = speedups.copy()
    if s.empty:
        return s
    s["within_lo"], s["within_hi"], s["within_verdict"] = s["speedup_lo"], s["speedup_hi"], s["verdict"]
    s["between_sd"], s["between_n"] = np.nan, 1
    if between.empty:
        return s
    key = ["arm", "baseline", "concurrency"]
    b = s[key].merge(between[[*key, "between_sd", "runs"]], on=key, how="left")
    seen = np.isfinite(b["between_sd"].astype(float)).to_numpy()
    s.loc[seen, "between_sd"] = b.loc[seen, "between_sd"].to_numpy(dtype=float)
    s.loc[seen, "between_n"] = b.loc[seen, "runs"].to_numpy(dtype=int)
    for i in s.index[seen]:
        lo, hi = stats.with_between_sd(s.at[i, "speedup"], s.at[i, "within_lo"], s.at[i, "within_hi"],
                                       s.at[i, "between_sd"])
        s.loc[i, ["speedup_lo", "speedup_hi", "verdict"]] = [lo, hi, verdict(lo, hi)]
    return s


# what each kind of arm is compared against
BASELINES = {"linear": ("ar",), "chain": ("ar", "linear"), "tree": ("ar", "linear", "chain")}


def baseline_for(run: Run, arm_id: str, kind: str) -> list[str]:
    """Candidate baselines of a kind for an arm, under its sampling setting, the same drafter block size first."""
    p = run.profile
    arm, setting = p.arm(arm_id), p.sampling_for(arm_id)
    cands = [a for a in p.arms if a.kind == kind and a.id != arm_id and p.sampling_for(a.id) == setting]
    cands.sort(key=lambda a: (a.block_size != arm.block_size, a.id))
    return [a.id for a in cands]


def speedups(run: Run, cells: pd.DataFrame, boots: dict) -> tuple[pd.DataFrame, list[str]]:
    """Every speculative arm against the ar arm, trees and chains against the linear arm, trees against
    the chain, at every concurrency. Returns the table and the refusals (why a pair was not compared)."""
    rows, refusals = [], []
    p = run.profile
    for arm in p.arms:
        # every arm against the deployable baseline of each kind it is compared with and, beside it, each
        # ablation of that kind; an ablation arm (ar-no-overlap, linear-b16-no-overlap) also against the
        # deployable arm of its own kind (what the switch is worth), and against the arms that hold the same
        # switch (the comparison as the ablated path runs it)
        kinds = BASELINES.get(arm.kind, ())
        for kind in (arm.kind, *kinds) if arm.ablation else kinds:
            bases = baseline_for(run, arm.id, kind)
            deployable = [b for b in bases if not p.arm(b).ablation]
            ablations = [b for b in bases
                         if p.arm(b).ablation and (not arm.ablation or p.arm(b).ablation == arm.ablation)]
            for c in run.profile.load.concurrency:
                for group in (deployable, *([b] for b in ablations)):
                    why = None
                    for base in group:   # the first of the group that compares
                        try:
                            rows.append({**speedup(Side(run, cells, boots, arm.id), Side(run, cells, boots, base), c),
                                         "baseline_kind": kind,
                                         "ablation": bool(arm.ablation or p.arm(base).ablation)})
                            why = None
                            break
                        except MismatchError as e:
                            why = why or str(e)
                    if why:
                        refusals.append(why)
    return pd.DataFrame(rows), refusals


def decomposition(run: Run, cells: pd.DataFrame, boots: dict) -> tuple[pd.DataFrame, list[str]]:
    """throughput(X)/throughput(Y) = τ(X)/τ(Y) × step time(Y)/step time(X), per repetition pair, for each
    tree against the chain and the linear arm of its block size, and each chain against the linear arm:
    "the tree accepts more" apart from "the tree costs more per step". Each factor's interval comes
    from the pairs; the identity holds exactly per cell, and so for the geometric means."""
    rows, refusals = [], []
    p = run.profile
    refs = {(a.kind, a.block_size, p.cuda_graphs(a), p.sampling_for(a.id)): a
            for a in p.arms if a.kind in ("chain", "linear")}
    for x in (a for a in p.arms if a.kind in ("tree", "chain")):
        for ref_kind in ("chain", "linear") if x.kind == "tree" else ("linear",):
            y = refs.get((ref_kind, x.block_size, p.cuda_graphs(x), p.sampling_for(x.id)))
            if y is None:
                refusals.append(f"no {ref_kind} arm with block size {x.block_size} and the same CUDA graphs "
                                f"switch to decompose {x.id} against")
                continue
            for c in run.profile.load.concurrency:
                try:
                    require_matched(conditions(run, x.id, c), conditions(run, y.id, c), f"{x.id} with {y.id} at C={c}")
                except MismatchError as e:
                    refusals.append(str(e))
                    continue
                cx, cy = ok_cells(cells, x.id, c), ok_cells(cells, y.id, c)
                if cx.empty or cy.empty:
                    refusals.append(f"no finished cells to decompose {x.id} against {y.id} at C={c}")
                    continue
                thr = ratio_stats(cx, cy, "throughput", True)
                tau = ratio_stats(cx, cy, "tau", True)
                step = ratio_stats(cy, cx, "step_time_s", True)
                rows.append({"arm": x.id, "reference": y.id, "reference_kind": ref_kind, "concurrency": c,
                             "pairs": thr["pairs"], "throughput_ratio": thr["ratio"],
                             "throughput_ratio_lo": thr["ratio_lo"], "throughput_ratio_hi": thr["ratio_hi"],
                             "tau_arm": float(cx["tokens"].sum() / cx["steps"].sum()),
                             "tau_reference": float(cy["tokens"].sum() / cy["steps"].sum()),
                             "tau_ratio": tau["ratio"], "tau_ratio_lo": tau["ratio_lo"],
                             "tau_ratio_hi": tau["ratio_hi"],
                             "step_ms_arm": 1e3 * float(cx["window_s"].sum() * c / cx["steps"].sum()),
                             "step_ms_reference": 1e3 * float(cy["window_s"].sum() * c / cy["steps"].sum()),
                             "step_time_ratio": step["ratio"], "step_time_ratio_lo": step["ratio_lo"],
                             "step_time_ratio_hi": step["ratio_hi"], "product": tau["ratio"] * step["ratio"]})
    return pd.DataFrame(rows), refusals


def per_category(run: Run, req: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Per prompt category, at every concurrency: each speculative arm's throughput in that category over its
    baseline's, for the same pairs the speedups table compares (every speculative arm over ar, trees and chains over
    the linear arm, trees over the chain; baseline_for's choice, matched conditions), paired by repetition as the
    headline ratios.

    A category's throughput in one cell is (Σ N / Σ E2E over its requests) × (Σ E2E / W over all of them), over
    the requests throughput counts (ok, measured, finished inside the window): the rate at which the server emits
    tokens for a busy request of that category, at the cell's occupancy. Its E2E-weighted mean over the categories
    is the cell's throughput Σ N / W exactly, so a ratio that were the same in every category would equal the
    headline ratio in each: a category that differs differs in speed, not in what is measured. The category's share
    of the window, Σ N_cat / W, would not measure its own speed: in a closed loop each user goes on to the next
    prompt whatever its category, so how many of a category's requests finish inside the window moves with how
    fast all categories ran. The ratio and its 95% interval are stats.paired_log_ratio over the repetitions both
    cells of a pair ran (cells adjacent in time), with its verdict, MDE and the pairs that would resolve it; beside
    it the token-weighted τ of both sides over the same requests. A category with fewer than stats.MIN_TAIL requests
    on either side is kept and marked few: too few to read, the floor a percentile's tail needs."""
    sums = category_sums(req, cells)
    cats = sorted(req["category"].astype(str).unique())
    rows = []
    for arm in (a for a in run.profile.arms if a.kind != "ar"):
        for kind in BASELINES[arm.kind]:
            for c in run.profile.load.concurrency:
                for base in baseline_for(run, arm.id, kind):     # the first matched one with cells, as speedups()
                    x, y = ok_cells(cells, arm.id, c), ok_cells(cells, base, c)
                    if not _matched(run, arm.id, base, c) or x.empty or y.empty:
                        continue
                    reps = sorted(set(x["repetition"]) & set(y["repetition"]))
                    rows += [{"arm": arm.id, "baseline": base, "baseline_kind": kind, "concurrency": c, **r}
                             for r in category_ratios(sums, arm.id, base, c, reps, cats)]
                    break
    return pd.DataFrame(rows, columns=CATEGORY_COLUMNS)


CATEGORY_COLUMNS = ["arm", "baseline", "baseline_kind", "concurrency", "category", "n", "baseline_n", "few", "pairs",
                    "speedup", "speedup_lo", "speedup_hi", "verdict", "sign_p", "mde", "n_to_resolve", "tau",
                    "baseline_tau"]


def category_sums(req: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Per (arm, C, repetition, category): requests, Σ N and Σ E2E over the requests throughput counts, the cell's
    occupancy (Σ E2E of all of them / window), and Σ verify steps with the tokens of the requests that report them
    (for τ)."""
    r = req[req["in_window"].to_numpy(dtype=bool)]
    steps = r["verify_steps"].to_numpy(dtype=float)
    has = np.nan_to_num(steps) > 0
    n = r["n_tokens"].to_numpy(dtype=float)
    frame = pd.DataFrame({"arm": r["arm"].astype(str).to_numpy(), "concurrency": r["concurrency"].to_numpy(),
                          "repetition": r["repetition"].to_numpy(), "category": r["category"].astype(str).to_numpy(),
                          "n": 1, "tokens": n, "busy_s": r["e2e_s"].to_numpy(dtype=float),
                          "steps": np.where(has, steps, 0.0), "step_tokens": np.where(has, n, 0.0)})
    cell = ["arm", "concurrency", "repetition"]
    out = frame.groupby([*cell, "category"], as_index=False).sum()
    w = cells[cell].assign(arm=cells["arm"].astype(str), window_s=cells["window_s"].to_numpy(dtype=float))
    busy = out.groupby(cell, as_index=False)["busy_s"].sum().merge(w, on=cell, how="left")
    busy["occupancy"] = busy["busy_s"] / busy["window_s"]
    return out.merge(busy[[*cell, "occupancy"]], on=cell, how="left")


def category_ratios(sums: pd.DataFrame, ax: str, ay: str, c: int, reps: list, cats: list[str]) -> list[dict]:
    """X/Y of the category's throughput (Σ N / Σ E2E × occupancy), paired by repetition over reps, for every category
    in cats (one that either side lacks in some repetition is paired over the rest); n per side over the paired
    repetitions, few, the verdict of the interval, and each side's τ over the same requests."""
    def side(arm):
        s = sums[(sums["arm"] == arm) & (sums["concurrency"] == c) & sums["repetition"].isin(reps)]
        return {cat: g.set_index("repetition") for cat, g in s.groupby("category")}
    sx, sy = side(ax), side(ay)
    empty = sums.iloc[:0].set_index("repetition")
    out = []
    for cat in cats:
        x, y = sx.get(cat, empty), sy.get(cat, empty)
        both = x.merge(y, how="inner", left_index=True, right_index=True, suffixes=("_x", "_y"))
        r = stats.paired_log_ratio(both["tokens_x"] / both["busy_s_x"] * both["occupancy_x"],
                                   both["tokens_y"] / both["busy_s_y"] * both["occupancy_y"])
        nx, ny = int(both["n_x"].sum()), int(both["n_y"].sum())
        out.append({"category": cat, "n": nx, "baseline_n": ny, "few": min(nx, ny) < stats.MIN_TAIL,
                    "pairs": r["pairs"], "speedup": r["ratio"], "speedup_lo": r["ratio_lo"],
                    "speedup_hi": r["ratio_hi"],
                    "verdict": verdict(r["ratio_lo"], r["ratio_hi"]), "sign_p": r["sign_p"], "mde": r["mde"],
                    "n_to_resolve": r["n_to_resolve"], "tau": _tau(both, "_x"), "baseline_tau": _tau(both, "_y")})
    return out


def _tau(both: pd.DataFrame, suffix: str) -> float:
    steps = both[f"steps{suffix}"].sum()
    return float(both[f"step_tokens{suffix}"].sum() / steps) if steps > 0 else float("nan")


FLIP_COLUMNS = ["arm", "baseline", "concurrency", "category", "n", "baseline_n", "few", "pairs", "speedup",
                "speedup_lo", "speedup_hi", "verdict", "overall_speedup", "overall_lo", "overall_hi", "overall_verdict",
                "overall_n_to_resolve", "opposite"]


def category_flips(categories: pd.DataFrame, speedups: pd.DataFrame) -> pd.DataFrame:
    """The categories whose verdict contradicts the overall verdict of the same ratio (arm over baseline) at the same
    concurrency, in the speedups table: opposite, when one interval lies above 1 and the other below; or resolved,
    when the category's interval excludes 1 where the overall one holds it. A category within noise under an overall
    'faster' is no flip: its interval holds the overall answer as well as 1, so it says less, not something else.
    Rows without an interval ('no interval') have no verdict to contradict and are left out; categories marked few
    are kept, with their mark."""
    if categories.empty or speedups.empty:
        return pd.DataFrame(columns=FLIP_COLUMNS)
    key = ["arm", "baseline", "concurrency"]
    overall = speedups[[*key, "speedup", "speedup_lo", "speedup_hi", "verdict", "n_to_resolve"]].rename(columns={
        "speedup": "overall_speedup", "speedup_lo": "overall_lo", "speedup_hi": "overall_hi",
        "verdict": "overall_verdict", "n_to_resolve": "overall_n_to_resolve"})
    m = categories.merge(overall, on=key, how="inner")
    sided = ("faster", "slower")
    opposite = m["verdict"].isin(sided) & m["overall_verdict"].isin(sided) & (m["verdict"] != m["overall_verdict"])
    resolved = m["verdict"].isin(sided) & (m["overall_verdict"] == "within noise")
    m = m[opposite | resolved].assign(opposite=opposite[opposite | resolved])
    return m[FLIP_COLUMNS].reset_index(drop=True)


def _matched(run: Run, a: str, b: str, c: int) -> bool:
    try:
        require_matched(conditions(run, a, c), conditions(run, b, c), f"{a} with {b}")
        return True
    except MismatchError:
        return False
