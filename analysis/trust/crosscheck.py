"""Cross-check of one run against another run of the same experiment on another backend
(SGLang against the reference engine): per arm, τ at T=0 and C=1, greedy-output agreement, and
throughput side by side.

Both sides go through the same code: τ is the token-weighted Σ N / Σ verify steps of
analysis.estimate.metrics over the requests' spec_verify_ct (sglext spec_tokens_details), beside the
τ the server itself reports (/metrics counters or log lines, analysis.trust.checks.server_tau).
Where one side's records carry no spec_verify_ct (SGLang 0.5.15's OpenAI API returns no
per-request spec details), both sides are compared by their servers' own τ over the same
cells instead (tau_basis "server"), never one estimator against the other.
Such a side's τ can still be split by greedy-output agreement: streaming, a server sends one content
chunk per verify step after the first (prefill) one, so a request's verify steps are content_chunks − 1,
taken only in the C=1 cells where Σ (content_chunks − 1) over all the cell's requests (warmup included)
equals the server's /metrics verify-call count differenced over the cell (_chunk_steps).
Only the backend and the switches that only one server has may differ; the model pair,
workload, load plan, dtype, device and CUDA graphs must match (analysis.estimate.compare's rule), or
the arm is refused with the condition named.

Records carry streamed text, not token ids: outputs are compared as text, and the shared
prefix is measured in characters and, where the target's tokenizer.json is at hand, in tokens
of the prefix text retokenized (a cross-check: a prefix cut inside a token can count one off).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.estimate import compare, metrics, stats
from analysis.estimate.compare import MismatchError, Side
from analysis.outcome import TABLE_NAMES, Analysis, CrossCheck  # noqa: F401  (the types live in outcome; re-exported)
from analysis.read.manifest import twin
from analysis.triage import TriageUnavailable, twin_source
from analysis.trust import checks
from ddbench.core import prom
from ddbench.core.profile import repo_path
from ddbench.core.results import MANIFEST, TABLES, read_json

TAU_TOLERANCE = 0.05     # the same algorithm on two engines: τ should agree within a few percent
CHUNK_TOLERANCE = 0.005  # Σ (content_chunks − 1) of a cell against its /metrics verify calls
# conditions of analysis.estimate.compare that may differ between the two sides: the backend under study and
# the server switches that only one backend has (the reference engine has no attention backends)
VARY = ("backend", "backend version", "image", "attention backend", "overlap scheduler", "page size",
        "max running requests", "runtime env", "runtime args", "arm env", "arm args")
# what differs between a twin and the pair it was built from: their predictions are the same (refengine/twin.py)
MODEL_KEYS = ("target model", "drafter", "target weights", "drafter weights")
TWIN_NOTE = ("one run's twin was built from the other run's pair (every recorded file's digest): the same "
             "predictions at another model's cost, so outputs and tau compare, and tok/s is cost against cost")
ARM_COLUMNS = [
    "arm", "arm_other", "kind", "what", "temperature", "tau_basis", "tau_this", "tau_this_lo", "tau_this_hi",
    "tau_other", "tau_other_lo", "tau_other_hi",
    "tau_gap_pct", "tau_gap_pct_lo", "tau_gap_pct_hi", "same_prompt_mix", "tau_within_tolerance", "tau_server_this",
    "tau_server_this_source", "tau_server_other", "tau_server_other_source", "n_this", "n_other",
    "pairs", "identical", "agreement_rate", "prefix_chars_mean", "prefix_fraction_mean", "prefix_tokens_mean",
    "unpaired_this", "unpaired_other", "differing_prompts", "tau_this_where_identical", "tau_this_where_differing",
    "tau_other_where_identical", "tau_other_where_differing", "split_pairs", "split_steps_this",
    "split_steps_other", "note"]
VERDICT_COLUMNS = ["arm", "reference", "arm_other", "reference_other", "concurrency", "ratio_this", "tau_ratio_this",
                   "step_cost_this", "ratio_other", "tau_ratio_other", "step_cost_other"]
THROUGHPUT_COLUMNS = ["arm", "arm_other", "concurrency", "throughput_this", "throughput_other", "ratio", "ratio_lo",
                      "ratio_hi", "tpot_ratio", "tpot_ratio_lo", "tpot_ratio_hi", "reps_this", "reps_other"]


class CrossCheckError(ValueError):
    """A compare_with that names no usable run; the message names the field it came from."""


# ---------------------------------------------------------------------------------------------------
# which run to compare with

def locate(run_path: Path, compare_with: str | None, override: str | os.PathLike | None) -> Path | None:
    """The run to cross-check against: the override (a command-line path) if given, else the
    profile's compare_with (relative to the repository root), else None."""
    if override is not None:
        where, target = "--compare-with", Path(override)
    elif compare_with is not None:
        where, target = f"{run_path / MANIFEST}: profile.compare_with", repo_path(compare_with)
    else:
        return None
    shown = override if override is not None else compare_with
    other = _run_in(target, f"{where} '{shown}'")
    if other.resolve() == Path(run_path).resolve():
        raise CrossCheckError(f"{where} '{shown}' is this run itself: name another run to cross-check against")
    return other


def _run_in(path: Path, where: str) -> Path:
    """path itself when it is a run directory, else its newest finished run (run ids sort by start time)."""
    if not path.is_dir():
        raise CrossCheckError(f"{where}: {path} is not a directory (a run directory, or a profile's results "
                              f"directory such as results/h200-tiny)")
    if (path / MANIFEST).is_file():
        return path
    runs = sorted((d for d in path.iterdir() if d.is_dir() and (d / MANIFEST).is_file()), key=lambda d: d.name)
    if not runs:
        raise CrossCheckError(f"{where}: {path} holds no {MANIFEST} and no run directory with one")
    done = [d for d in runs if _finished(d)]
    if not done:
        raise CrossCheckError(f"{where}: none of the {len(runs)} run(s) in {path} has finished (no {TABLES}/, and "
                              f"no 'ended' in {MANIFEST}): {', '.join(d.name for d in runs)}")
    return done[-1]


def _finished(run: Path) -> bool:
    """Analysed already, or its sweep ended without being interrupted."""
    if (run / TABLES).is_dir():
        return True
    try:
        m = read_json(run / MANIFEST)
    except ValueError:
        return False
    return isinstance(m, dict) and bool(m.get("ended")) and not m.get("interrupted")


# ---------------------------------------------------------------------------------------------------
# the comparison

def what(profile, arm_id: str) -> tuple:
    """What an arm is, whatever its id: kind, drafter block, tree budget, top-k, CUDA graphs, sampling setting."""
    a = profile.arm(arm_id)
    return a.kind, a.block_size, a.tree_budget, a.tree_topk, profile.cuda_graphs(a), profile.sampling_for(arm_id).label


def describe(shape: tuple) -> str:
    kind, block, budget, topk, graphs, sampling = shape
    parts = [kind] + ([f"block {block}"] if block else []) + ([f"budget {budget}, top-k {topk}"] if kind == "tree"
                                                                else [])
    return ", ".join(parts) + ("" if graphs else ", graphs off") + ("" if sampling == "t0" else f", {sampling}")


def pair_arms(this: Analysis, other: Analysis, notes: list[str]) -> list[tuple[str, str]]:
    """(arm in this run, arm in the other) for each arm both runs have, paired by what it is, not by id."""
    theirs: dict[tuple, str] = {}
    for a in other.run.profile.arms:
        theirs.setdefault(what(other.run.profile, a.id), a.id)
    pairs, mine = [], set()
    for a in this.run.profile.arms:
        shape = what(this.run.profile, a.id)
        if shape in theirs and shape not in mine:
            pairs.append((a.id, theirs[shape]))
            mine.add(shape)
    lonely = [(w, sorted(a.id for a in run.profile.arms if what(run.profile, a.id) not in mine))
              for w, run in (("this run", this.run), ("the other run", other.run))]
    for w, only in lonely:
        if only:
            notes.append(f"arm(s) only in {w}, nothing of the same kind, block, budget, top-k, CUDA graphs and "
                         f"sampling in the other, not compared: {', '.join(only)}")
    if not pairs:
        notes.append("the two runs have no arm of the same kind, block, budget, top-k, CUDA graphs and sampling")
    return pairs


def twin_of(a, b) -> bool:
    """Whether run a served a twin built from the very pair run b served: every file b recorded of its target
    and drafter is, by digest, the file the twin recorded of its source pair."""
    rec = twin(a.manifest)
    if rec is None:
        return False
    pair, theirs = rec.get("pair") or {}, getattr(b.manifest, "models", None) or {}
    files = {r: (theirs.get(r) or {}).get("files") for r in ("target", "drafter")}
    return all(f and all((pair.get(r) or {}).get(name) == sha for name, sha in f.items()) for r, f in files.items())


def cross_check(this: Analysis, other: Analysis) -> CrossCheck:
    notes: list[str] = []
    twin_side = "this" if twin_of(this.run, other.run) else "other" if twin_of(other.run, this.run) else None
    twin = twin_side is not None
    if twin:
        notes.append(TWIN_NOTE)
    vary = VARY + (MODEL_KEYS if twin else ())
    pairs = pair_arms(this, other, notes)
    levels = sorted(set(this.run.profile.load.concurrency) & set(other.run.profile.load.concurrency))
    if 1 not in levels:
        notes.append("C=1 is not in both load plans: no tau and no output agreement")
    tok = _tokenizer(this.run, notes)
    rows, thr = [], []
    for ax, ay in pairs:
        row = {"arm": ax, "arm_other": ay, "kind": this.run.profile.arm(ax).kind,
               "what": describe(what(this.run.profile, ax))}
        matched = _matched_levels(this, other, ax, ay, levels, notes, vary)
        if 1 in matched:
            x, y = _measured_c1(this, ax), _measured_c1(other, ay)
            x, sx = _steps(this, ax, x)
            y, sy = _steps(other, ay, y)
            parts = [_tau(this, other, ax, ay, x, y), _agreement(x, y, tok, sx, sy)]
            for part in parts:
                row.update(part)
            row["note"] = "; ".join(p["note"] for p in parts if p.get("note")) or None
        elif 1 in levels:
            row["note"] = "conditions differ at C=1 (see the notes)"
        rows.append(row)
        thr.extend(_throughput(this, other, ax, ay, matched, notes, vary))
    arms = pd.DataFrame(rows, columns=ARM_COLUMNS)
    verdicts = _verdicts(this, other, pairs) if twin else pd.DataFrame(columns=VERDICT_COLUMNS)
    return CrossCheck(_sides(this, other), arms, pd.DataFrame(thr, columns=THROUGHPUT_COLUMNS), notes,
                      twin_side, verdicts)


def _verdicts(this: Analysis, other: Analysis, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """Each decomposed ratio (a tree over its chain or linear arm) that both runs measured at the same C, both
    sides' factors beside each other: a twin and its pair make the same predictions at two costs, so where
    their verdicts part, the factors say whether acceptance or the step did it. Step cost is the arm's step
    over its reference's (the inverse of the decomposition's step-time ratio)."""
    ids = dict(pairs)
    theirs = other.decomposition
    if this.decomposition.empty or theirs.empty:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    theirs = theirs.set_index(["arm", "reference", "concurrency"])
    rows = []
    for r in this.decomposition.itertuples():
        key = (ids.get(r.arm), ids.get(r.reference), r.concurrency)
        if key[0] is None or key[1] is None or key not in theirs.index:
            continue
        o = theirs.loc[key]
        rows.append({"arm": r.arm, "reference": r.reference, "arm_other": key[0], "reference_other": key[1],
                     "concurrency": r.concurrency, "ratio_this": r.throughput_ratio, "tau_ratio_this": r.tau_ratio,
                     "step_cost_this": 1 / r.step_time_ratio, "ratio_other": o["throughput_ratio"],
                     "tau_ratio_other": o["tau_ratio"], "step_cost_other": 1 / o["step_time_ratio"]})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def _matched_levels(this: Analysis, other: Analysis, ax: str, ay: str, levels: list[int],
                    notes: list[str], vary: tuple[str, ...] = VARY) -> list[int]:
    """The concurrency levels at which the arm ran under matched conditions on both sides; one
    note per distinct reason for the others (naming the levels it applies to)."""
    refused: dict[str, list[int]] = {}
    ok = []
    for c in levels:
        try:
            compare.require_matched(compare.conditions(this.run, ax, c), compare.conditions(other.run, ay, c),
                                    "", vary)
            ok.append(c)
        except MismatchError as e:
            refused.setdefault(str(e).split(": ", 1)[1], []).append(c)
    for because, cs in refused.items():
        notes.append(f"refusing to compare {_both(ax, ay)} across the two runs at C={', '.join(map(str, cs))}: "
                     f"{because}")
    return ok


def _both(ax: str, ay: str) -> str:
    return ax if ax == ay else f"{ax} (this run) with {ay} (the other)"


def _ok_c1(a: Analysis, arm: str) -> tuple[pd.DataFrame, list[metrics.Boot]]:
    return Side(a.run, a.cells, a.boots, arm).pooled(1)


def _tau(this: Analysis, other: Analysis, ax: str, ay: str, x: pd.DataFrame, y: pd.DataFrame) -> dict:
    """Token-weighted τ at C=1 pooled over the repetitions that finished ok, each side with its
    bootstrap interval, and the relative gap this/other − 1 with the interval of the ratio; judged against
    the tolerance only when x and y (the two arms' measured C=1 requests) sent the same prompt mix."""
    (cx, bx), (cy, by) = _ok_c1(this, ax), _ok_c1(other, ay)
    # as sent; the conditions matched, so the other side sent the same
    sent = compare.conditions(this.run, ax, 1)["temperature"]
    out: dict = {"n_this": int(cx["n"].sum()), "n_other": int(cy["n"].sum()), "temperature": float(max(sent))}
    if cx.empty or cy.empty:
        out["note"] = f"no cell at C=1 finished ok in {'this run' if cx.empty else 'the other run'}"
        return out
    tx, rx = metrics.ratio(bx, "step_tokens", "steps")
    ty, ry = metrics.ratio(by, "step_tokens", "steps")
    for side, a, arm, c in (("this", this, ax, cx), ("other", other, ay, cy)):
        reps = [int(r) for r in c["repetition"]]
        out[f"tau_server_{side}"], out[f"tau_server_{side}_source"] = checks.server_tau(a.run, arm, 1, reps)
    sx, sy = out["tau_server_this"], out["tau_server_other"]
    if np.isfinite(tx) and np.isfinite(ty):
        out["tau_basis"] = "requests"
        out["tau_this"], (out["tau_this_lo"], out["tau_this_hi"]) = tx, stats.interval(rx)
        out["tau_other"], (out["tau_other_lo"], out["tau_other_hi"]) = ty, stats.interval(ry)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["tau_gap_pct_lo"], out["tau_gap_pct_hi"] = stats.interval(100 * (rx / ry - 1))
    else:
        missing = " and ".join(w for w, t in (("this run", tx), ("the other run", ty)) if not np.isfinite(t))
        out["note"] = f"tau not measured per request in {missing}: its records carry no spec_verify_ct"
        if not (np.isfinite(sx) and np.isfinite(sy)):
            return out
        # one estimator on both sides, or none: each server's own count over the same C=1 cells
        # (their warmup requests included), without a request-level interval
        out["tau_basis"], tx, ty = "server", sx, sy
        out["tau_this"], out["tau_other"] = tx, ty
        out["note"] += "; compared as each server's own tau over the same cells"
    out["tau_gap_pct"] = 100 * (tx / ty - 1)
    # τ varies from prompt to prompt far more than 5%: judged only over the same prompts in the same proportions
    out["same_prompt_mix"] = _prompt_mix(x).equals(_prompt_mix(y))
    if out["same_prompt_mix"]:
        out["tau_within_tolerance"] = bool(abs(tx / ty - 1) <= TAU_TOLERANCE)
    else:
        out["note"] = "; ".join(filter(None, [out.get("note"), (
            "not judged against the tolerance: the two runs' C=1 cells sent different prompt mixes "
            f"({_mix_text(x)} here, {_mix_text(y)} there)")]))
    return out


def _prompt_mix(r: pd.DataFrame) -> pd.Series:
    """Each prompt's share of an arm's measured C=1 requests (_measured_c1)."""
    counts = r["prompt_id"].value_counts()
    return (counts / counts.sum()).sort_index().round(12)


def _mix_text(r: pd.DataFrame) -> str:
    return f"{len(r)} requests over {r['prompt_id'].nunique()} prompts"


def _measured_c1(a: Analysis, arm: str) -> pd.DataFrame:
    """Measured requests of the arm's ok C=1 cells that completed, each keyed by (repetition,
    prompt, occurrence of that prompt in the cell in send order)."""
    ok_reps = a.cells[(a.cells["arm"] == arm) & (a.cells["concurrency"] == 1) & (a.cells["status"] == "ok")]
    r = a.requests
    r = r[(r["arm"] == arm) & (r["concurrency"] == 1) & ~r["warmup"].astype(bool) & r["ok"].astype(bool)
          & r["repetition"].isin(ok_reps["repetition"].tolist())]
    cols = ["repetition", "prompt_id", "send_ns", "temperature", "text"]
    r = r[cols + [c for c in ("n_tokens", "spec_verify_ct", "content_chunks") if c in r.columns]].copy()
    r["prompt_id"] = r["prompt_id"].astype(str)
    r = r.sort_values(["repetition", "send_ns"], kind="stable")
    r["occurrence"] = r.groupby(["repetition", "prompt_id"]).cumcount()
    return r


def _steps(a: Analysis, arm: str, r: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The arm's measured C=1 requests (_measured_c1) with a 'steps' column of per-request verify steps, and
    where they came from (None: no steps). spec_verify_ct where every request carries it; else
    content_chunks − 1 in the cells where _chunk_steps verified it against /metrics (nan in the others)."""
    r = r.copy()
    r["steps"] = np.nan
    if "spec_verify_ct" in r.columns and len(r) and r["spec_verify_ct"].notna().all():
        r["steps"] = r["spec_verify_ct"].astype(float)
        return r, "spec_verify_ct"
    # ar: τ is 1 by definition, and the server counts no verify calls to check the chunks against
    if "content_chunks" not in r.columns or r.empty or a.run.profile.arm(arm).kind == "ar":
        return r, None
    reps = sorted({int(v) for v in r["repetition"]})
    ok = _chunk_steps(a, arm, reps)
    if not ok and a.run.server.empty:
        return r, None
    use = r["repetition"].isin(ok)
    r.loc[use, "steps"] = (r.loc[use, "content_chunks"].astype(float) - 1).clip(lower=0)
    return r, f"steps from stream chunks, equal to /metrics in {len(ok)} of {len(reps)} cells"


def _chunk_steps(a: Analysis, arm: str, reps: list[int]) -> list[int]:
    """The repetitions of the arm's C=1 cells where Σ (content_chunks − 1) over all the cell's requests (warmup
    and failed ones included: the counters are differenced over the whole cell) equals the server's
    /metrics verify calls differenced over the cell (within CHUNK_TOLERANCE)."""
    s = a.run.server
    if s.empty or "content_chunks" not in a.requests.columns:
        return []
    s = s[(s["arm"] == arm) & (s["concurrency"] == 1) & (s["metric"] == prom.VERIFY_CALLS)]
    req = a.requests[(a.requests["arm"] == arm) & (a.requests["concurrency"] == 1)]
    ok = []
    for rep in reps:
        ver = s.loc[s["repetition"] == rep, "delta"]
        if len(ver) != 1 or not np.isfinite(float(ver.iloc[0])) or float(ver.iloc[0]) <= 0:
            continue
        chunks = req.loc[req["repetition"] == rep, "content_chunks"].astype(float)
        if chunks.isna().any():
            continue
        steps = (chunks - 1).clip(lower=0).sum()
        if abs(steps - float(ver.iloc[0])) <= CHUNK_TOLERANCE * float(ver.iloc[0]):
            ok.append(rep)
    return ok


def _agreement(x: pd.DataFrame, y: pd.DataFrame, tok, sx: str | None = None, sy: str | None = None) -> dict:
    """Greedy-output agreement of two arms' measured C=1 requests (_measured_c1, with _steps), paired by
    repetition, prompt and occurrence; sx and sy say where each side's steps came from (_steps)."""
    key = ["repetition", "prompt_id", "occurrence"]
    m = x.merge(y, on=key, suffixes=("_this", "_other"), how="inner")
    out = {"pairs": len(m), "unpaired_this": len(x) - len(m), "unpaired_other": len(y) - len(m)}
    if m.empty:
        return out
    if (m["temperature_this"] != 0).any() or (m["temperature_other"] != 0).any():
        out["note"] = "sampling at temperature > 0: outputs may differ by design, agreement not computed"
        return out
    a, b = m["text_this"].astype(str).tolist(), m["text_other"].astype(str).tolist()
    same = [u == v for u, v in zip(a, b, strict=True)]
    prefix = [os.path.commonprefix([u, v]) for u, v in zip(a, b, strict=True)]
    out["identical"] = sum(same)
    out["agreement_rate"] = sum(same) / len(m)
    out["prefix_chars_mean"] = float(np.mean([len(p) for p in prefix]))
    out["prefix_fraction_mean"] = float(np.mean([len(p) / max(len(u), len(v), 1)
                                                 for p, u, v in zip(prefix, a, b, strict=True)]))
    if tok is not None:
        out["prefix_tokens_mean"] = float(np.mean([len(tok.encode(p, add_special_tokens=False).ids)
                                                   for p in prefix]))
    # τ follows the text generated: where the two engines' outputs part (bf16 near-ties), each side's τ is
    # over different tokens. A side with per-request verify steps shows how far that alone moves it; where both
    # have them, both are split over the same pairs (those with steps on both sides).
    out["split_steps_this"], out["split_steps_other"] = sx, sy
    sides = [side for side in ("this", "other") if f"steps_{side}" in m.columns and m[f"steps_{side}"].notna().any()]
    if sides:
        usable = np.logical_and.reduce([m[f"steps_{side}"].notna().to_numpy() for side in sides])
        same_v = np.array(same, dtype=bool)
        out["split_pairs"] = int(usable.sum())
        for side in sides:
            for label, pick in (("identical", usable & same_v), ("differing", usable & ~same_v)):
                rows = m[pick]
                steps = rows[f"steps_{side}"].astype(float).sum()
                out[f"tau_{side}_where_{label}"] = rows[f"n_tokens_{side}"].sum() / steps if steps else np.nan
        if out["split_pairs"] < len(m):
            out["note"] = (f"tau split by output agreement over {out['split_pairs']} of {len(m)} pairs (the others' "
                           f"cells have no verified verify steps)")
    for side, src in (("this", sx), ("other", sy)):
        if src and src.startswith("steps from stream chunks"):
            where = "this run" if side == "this" else "the other run"
            out["note"] = "; ".join(filter(None, [out.get("note"), f"{where}: {src}" + (
                "" if side in sides else ", not split")]))
    bad = sorted({p for p, s in zip(m["prompt_id"], same, strict=True) if not s})
    out["differing_prompts"] = ", ".join(bad[:5]) + (f" (+{len(bad) - 5} more)" if len(bad) > 5 else "")
    return out


def _tokenizer(run, notes: list[str]):
    """The target's tokenizer.json through the tokenizers package, or None (with a note saying why); a twin's
    where it is served from, else its source pair's, which it copies (analysis.triage.twin_source)."""
    ref = run.profile.models.tokenizer or run.profile.models.target
    path = repo_path(ref) / "tokenizer.json"
    if not path.is_file():
        try:
            source = twin_source(run)
        except TriageUnavailable:
            source = None
        path = source / "tokenizer.json" if source is not None else path
    if not path.is_file():
        notes.append(f"common prefix not counted in tokens: no tokenizer.json at {path} (characters only)")
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        notes.append("common prefix not counted in tokens: the tokenizers package is not installed")
        return None
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # a file the package cannot read leaves the character counts standing
        notes.append(f"common prefix not counted in tokens: {path}: {type(e).__name__}: {e}")
        return None


def _throughput(this: Analysis, other: Analysis, ax: str, ay: str, levels: list[int],
                notes: list[str], vary: tuple[str, ...] = VARY) -> list[dict]:
    """Output tok/s of the arm on both sides at each matched level, and this/other with its CI."""
    rows = []
    for c in levels:
        try:
            s = compare.speedup(Side(this.run, this.cells, this.boots, ax),
                                Side(other.run, other.cells, other.boots, ay), c, vary)
        except MismatchError as e:    # conditions matched: what is left is a side with no ok cell
            notes.append(str(e).replace(f"{ax} with {ay}", f"{ax} (this run) with {ay} (other run)", 1))
            continue
        rows.append({"arm": ax, "arm_other": ay, "concurrency": c, "throughput_this": s["throughput"],
                     "throughput_other": s["baseline_throughput"], "ratio": s["speedup"], "ratio_lo": s["speedup_lo"],
                     "ratio_hi": s["speedup_hi"], "tpot_ratio": s["tpot_ratio"], "tpot_ratio_lo": s["tpot_ratio_lo"],
                     "tpot_ratio_hi": s["tpot_ratio_hi"], "reps_this": s["reps"], "reps_other": s["baseline_reps"]})
    return rows


def _sides(this: Analysis, other: Analysis) -> pd.DataFrame:
    rows = [_side("this", this), _side("other", other)]
    if rows[0]["label"] == rows[1]["label"]:    # same backend on both sides: tell them apart by run
        key = "run_id" if rows[0]["run_id"] != rows[1]["run_id"] else "path"
        for r in rows:
            r["label"] += f" ({r[key]})"
    return pd.DataFrame(rows)


def _side(name: str, a: Analysis) -> dict:
    m, p = a.run.manifest, a.run.profile
    pk = m.packages
    version = pk.get("sglang") or p.backend.version
    label = f"SGLang {version}" if p.backend.kind == "sglang" and version else \
        "SGLang" if p.backend.kind == "sglang" else "external servers" if p.backend.kind == "external" else \
        "reference engine"
    images = m.images.items() if isinstance(m.images, dict) else enumerate(m.images)
    try:
        path = a.run.path.resolve().relative_to(repo_path(".").resolve())
    except ValueError:
        path = a.run.path
    return {"side": name, "label": label, "backend": p.backend.kind, "runtime": p.backend.runtime,
            "version": version, "image": p.backend.image, "profile": p.name, "run_id": a.run.path.name,
            "path": str(path), "git_sha": m.git.sha, "git_dirty": m.git.dirty,
            "gpus": ", ".join(str(g.get("name", g)) if isinstance(g, dict) else str(g) for g in m.host.gpus),
            "dtype": p.runtime.dtype, "packages": ", ".join(f"{k} {v}" for k, v in sorted(pk.items())),
            "images": ", ".join(f"{k}: {v}" for k, v in images)}
