"""Trust checks of docs/metrics.md: each yields pass, fail or n/a, with the evidence that decided it.

The original study's mistakes are the checklist: too few samples, errors, uncontrolled output
length, a saturated client, acceptance counters that disagree, commit length ≠ depth + 1, a
warm prefix cache carried across cells, a throttling GPU, a warmup too short to count; and
a ratio whose repetition pairs step or trend during the run (analysis.trust.stationarity).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.read.ingest import Run, dense
from analysis.triage import CHAIN, LOSSLESS
from analysis.trust import stability, stationarity
from analysis.trust.correctness import greedy_arms
from analysis.trust.kinds import (
    CLOCK_SPREAD,
    FAIL,
    LOG_ROUNDING,
    MAX_CLIENT_CPU,
    MAX_ERROR_RATE,
    MIN_REQUESTS,
    NA,
    OUTPUT_TOLERANCE,
    PASS,
    RUN,
    TAU_TOLERANCE,
    Check,
    Kind,
    Scope,
    frame,
)
from ddbench.core import prom
from ddbench.core.results import FLUSH, OVERLAY_CHECK, SERVER_INFO, cell_name

MAX_GPU_TEMP_C = 87.0
# a check that reads what ddbench only has for servers it starts (their log, their processes, a restart)
EXTERNAL = "external server: ddbench did not start it"
# clock-event reasons that do not slow a busy GPU (NVML names, as containers/telemetry.py writes them)
IDLE_REASONS = {"gpu_idle", "applications_clocks_setting", "display_clock_setting", "sync_boost"}


def run_checks(run: Run, req: pd.DataFrame, cells: pd.DataFrame, lossless: pd.DataFrame | None,
               min_requests: int = MIN_REQUESTS, speedups: pd.DataFrame | None = None, drift: dict | None = None,
               band: pd.DataFrame | None = None, triage=None, host: pd.DataFrame | None = None,
               stationary: pd.DataFrame | None = None, warmups: pd.DataFrame | None = None) -> pd.DataFrame:
    out: list[Check] = []
    kinds = {a.id: a.kind for a in run.profile.arms}
    out += _profile_digest(run)
    out += _overlay(run)
    out += _step_diagnostics(run)
    out += _min_requests(cells, min_requests)
    out.append(_drift(speedups, drift))
    out += _stationary(stationary)
    out += _gpu_band(band)
    out += _warmed_up(warmups)
    out += _host_quiet(host, run.profile.backend.runtime) if not _external(run) else \
        [Check(Kind.HOST_QUIET, RUN, NA, f"{EXTERNAL} (its processes cannot be told from other work on the host)")]
    tau_cols = req[["arm", "concurrency", "repetition", "ok", "completion_tokens", "spec_verify_ct"]]
    for cell in cells.to_dict("records"):
        scope = Scope(cell["arm"], int(cell["concurrency"]), int(cell["repetition"]))
        out.append(_finished(cell, scope))
        out.append(_errors(cell, scope))
        out.append(_client_cpu(cell, scope))
        out.append(_warmup(run, cell, scope))
        out.append(_tau_consistency(run, tau_cols, cell, scope, kinds))
        out.append(_clean_start(run, cells, cell, scope))
        out.append(_gpu_stable(run, cell, scope))
    out += _output_length(run, cells)
    out += _requested_lengths(req)
    for arm in run.profile.arms:
        out.append(_commit_requests(req, arm.id))
        out.append(_commit_log(run, arm.id))
        out.append(_histograms(req, arm.id))
    out += _lossless(run, lossless, triage)
    out += _server_matches(run, cells)
    out += _chain_equals_linear(run, triage)
    out += _chain_steps(run)
    df = frame(out)
    # failures first: a report must never bury them
    df["_order"] = df["status"].map({FAIL: 0, PASS: 1, NA: 2})
    return df.sort_values(["_order"], kind="stable").drop(columns="_order").reset_index(drop=True)


SPEC_TAU = 1.05   # a server whose own τ exceeds AR's by this factor drafts and verifies; at or below, it does not
# SGLang's server_info fields against an arm's shape
SHAPE_FIELDS = (("speculative_num_draft_tokens", "block_size"), ("speculative_ddtree_budget", "tree_budget"),
                ("speculative_ddtree_topk", "tree_topk"))


def shape_evidence(arm, req: pd.DataFrame) -> list[str]:
    """What an arm's own requests show its server cannot be with the declared block b (and budget B): a request
    committing more than b tokens a verify step on average (its prefill's token takes no step), a draft accepted
    at depth b or deeper (a block of b drafts b - 1), or trees of more drafted nodes than B (a chain or a linear
    arm: b - 1)."""
    if arm.kind == "ar" or arm.block_size is None or req is None or req.empty:
        return []
    r = req[(req["arm"] == arm.id) & req["ok"].astype(bool)]
    out = []
    if "spec_verify_ct" in r and "completion_tokens" in r:
        steps = r["spec_verify_ct"].astype(float)
        tau = ((r["completion_tokens"].astype(float) - 1) / steps.where(steps > 0)).max()
        if np.isfinite(tau) and tau > arm.block_size:
            out.append(f"a request committed {tau:.2f} tokens a verify step, which a block of {arm.block_size} cannot")
    if "spec_accepted_depth_histogram" in r and len(r):
        depth, has = dense(r["spec_accepted_depth_histogram"])
        seen = np.flatnonzero(depth[has].sum(axis=0))
        if len(seen) and seen[-1] >= arm.block_size:
            out.append(f"drafts accepted at depth {seen[-1]}, past a block of {arm.block_size}'s {arm.block_size - 1}")
    if "spec_avg_tree_nodes" in r and len(r):
        most = arm.tree_budget if arm.kind == "tree" and arm.tree_budget else arm.block_size - 1
        nodes = r["spec_avg_tree_nodes"].astype(float).max()
        if np.isfinite(nodes) and nodes > most + 1e-6:
            out.append(f"trees of {nodes:.2f} drafted nodes on average, more than the declared {most}")
    return out


def server_matches(arm, info: dict | None, taus: list[float], tokens: int | None = None,
                   evidence: list[str] = ()) -> Check:
    """An external arm's declared kind and shape against what its server says of itself (server_info.json's
    /get_server_info or /server_info) and its own τ over the arm's cells: an 'ar' arm whose server runs a
    speculative algorithm or commits more than AR's tokens a step, a speculative arm whose server reports none
    or whose τ stays at AR's, or a block, budget or top-k the server contradicts, fails (swapped URLs, say).
    AR's own counters read n / (n - 1) for n-token outputs (the prefill's token takes no decode step: 1.07 at
    16 tokens), so the line between the two is SPEC_TAU times that."""
    endpoints = (info or {}).get("endpoints") or {}
    raw = next((endpoints[p] for p in ("/get_server_info", "/server_info")
                if isinstance(endpoints.get(p), dict) and "error" not in endpoints[p]), None)
    spec = raw.get("speculative_algorithm") if raw else None
    tau = max((t for t in taus if np.isfinite(t)), default=float("nan"))
    line = SPEC_TAU * (tokens / (tokens - 1) if tokens and tokens > 1 else 1.0)
    said = [f"the server reports speculative_algorithm {spec!r}" if raw and "speculative_algorithm" in raw
            else "the server does not report its speculative algorithm",
            f"its own τ {tau:.2f}" if np.isfinite(tau) else "its τ is not reported"]
    wrong = []
    if arm.kind == "ar":
        if spec not in (None, "", "NONE"):
            wrong.append(f"an 'ar' arm's server runs {spec}")
        if np.isfinite(tau) and tau > line:
            wrong.append(f"an 'ar' arm's server commits {tau:.2f} tokens a step")
    else:
        if raw and "speculative_algorithm" in raw and spec in (None, "", "NONE"):
            wrong.append(f"a '{arm.kind}' arm's server runs no speculative algorithm")
        if np.isfinite(tau) and tau <= line:
            wrong.append(f"a '{arm.kind}' arm's server commits {tau:.2f} tokens a step")
        if raw:
            _shape_fields(arm, raw, wrong, said)
    wrong += list(evidence)   # the arm's own requests against its declared block
    if not raw and not np.isfinite(tau) and not wrong:
        return Check(Kind.SERVER_MATCHES, Scope(arm.id), NA, "; ".join(said))
    return Check(Kind.SERVER_MATCHES, Scope(arm.id), FAIL if wrong else PASS,
                 "; ".join(wrong + said) if wrong else "; ".join(said) + f": consistent with a '{arm.kind}' arm")


def _shape_fields(arm, raw: dict, wrong: list[str], said: list[str]) -> None:
    """The block, budget and top-k the server reports against the arm's: a contradiction goes to wrong, a value
    that is not a number (a redacted record, say) to said, and that shape goes unchecked."""
    for field, attr in SHAPE_FIELDS:
        value, want = raw.get(field), getattr(arm, attr)
        if value is None or want is None:
            continue
        try:
            if int(value) != want:
                wrong.append(f"{field} {value} against the arm's {attr} {want}")
        except (TypeError, ValueError):
            said.append(f"its {field} {value!r} is not a number, so the arm's {attr} is not checked")


def _server_matches(run: Run, cells: pd.DataFrame) -> list[Check]:
    """External arms only: ddbench started every other server with the arm's own flags."""
    if not _external(run):
        return []
    ok = cells[cells["status"] == "ok"]
    out = []
    for arm in run.profile.arms:
        mine = ok[ok["arm"] == arm.id]
        taus = [server_tau(run, arm.id, int(c), g["repetition"].astype(int).tolist())[0]
                for c, g in mine.groupby("concurrency")]
        try:
            info = json.loads((run.path / arm.server / SERVER_INFO).read_text())
        except (OSError, ValueError):
            info = None
        w = run.profile.workload
        out.append(server_matches(arm, info, taus, w.max_tokens if w.ignore_eos else None,
                                  shape_evidence(arm, run.requests)))
    return out


def _external(run: Run) -> bool:
    return run.profile.backend.kind == "external"


def _profile_digest(run: Run) -> list[Check]:
    m = run.manifest.digest_matches
    if m is None:
        return [Check(Kind.PROFILE_DIGEST, RUN, NA, "manifest has no profile_digest")]
    return [Check(Kind.PROFILE_DIGEST, RUN, PASS if m else FAIL,
                  "profile_digest is the hash of the profile in the manifest" if m else
                  f"profile_digest {run.manifest.profile_digest[:12]}… is not the hash of the profile it holds "
                  f"({run.profile.digest()[:12]}…): the manifest was edited")]




def _overlay(run: Run) -> list[Check]:
    """A run on the SGLang DDTree fork: its DFLASH must take stock SGLang's verify steps (the overlay check,
    a diagnostic beside the sweep), and the build that check ran must be the build that served the run."""
    name = Kind.OVERLAY
    if run.profile.backend.ddtree != "fork":
        return []
    path = run.path / OVERLAY_CHECK
    if not path.is_file():
        path = _same_build_check(run)
    if path is None:
        return [Check(name, RUN, FAIL, f"no {OVERLAY_CHECK}, here or in another run of this build: the build was "
                                         "not checked against stock SGLang "
                                         "(python -m ddbench.diagnostics overlay-check RUN_DIR)")]
    try:
        doc = json.loads(path.read_text())
        stock, fork = doc["sides"]["stock"], doc["sides"]["fork"]
    except (ValueError, KeyError, TypeError) as e:
        return [Check(name, RUN, FAIL, f"{path}: not an overlay-check record ({type(e).__name__}: {e})")]
    key = {"metrics": "verify_steps", "spec_verify_ct": "spec_verify_ct"}.get(doc.get("steps_from"), "verify_steps")
    facts = (f"{doc.get('arm')} on {len(doc.get('prompts', {}).get('ids', []))} prompts: stock "
             f"{stock.get(key)} verify steps ({stock.get('status')}), this build {fork.get(key)} "
             f"({fork.get('status')}); "
             f"outputs {'identical' if doc.get('same_outputs') else 'differ'}")
    served = run.manifest.sglang_build
    checked = doc.get("build") or {}
    if served.get("commit") and checked.get("commit") and served.get("head") != checked.get("head"):
        return [Check(name, RUN, FAIL, f"{facts}; but the check ran build {str(checked.get('head'))[:12]} and "
                                         f"the run was served by {str(served.get('head'))[:12]}")]
    if path != run.path / OVERLAY_CHECK:
        facts += f"; checked once for this build, in {path.parent.parent.relative_to(run.path.parent.parent)}"
    return [Check(name, RUN, PASS if doc.get("passed") else FAIL, facts)]


STEPS_DIAGNOSTICS = "diagnostics/steps*.json"   # ddbench/diagnostics/steps.py writes them


def _step_diagnostics(run: Run) -> list[Check]:
    """SGLang reports no per-step depth or commit in a measured cell (the statistics cost a sync a step), so
    a run on the DDTree fork checks commit = depth + 1 of its chain and tree arms in the steps diagnostic
    beside the sweep (SGLang's per-step log lines, --speculative-ddtree-step-stats), once per arm and label."""
    name = Kind.COMMIT_STEPS
    if run.profile.backend.ddtree != "fork":
        return []
    seen: dict[str, list[Check]] = {}
    for path in sorted(run.path.glob(STEPS_DIAGNOSTICS)):
        try:
            doc = json.loads(path.read_text())
            arms, prune, c = doc["arms"], bool(doc.get("prune")), doc.get("concurrency")
        except (ValueError, KeyError, TypeError) as e:
            seen.setdefault(path.name, []).append(
                Check(name, RUN, FAIL, f"{path.name}: not a steps record ({type(e).__name__}: {e})"))
            continue
        for arm, r in arms.items():
            where = f"{path.name}: {'pruned, ' if prune else ''}C={c}"
            if r.get("status") != "ok":
                ev = f"{where}: the arm did not serve ({r.get('reason') or r.get('status')})"
                seen.setdefault(arm, []).append(Check(name, Scope(arm), FAIL, ev))
                continue
            ev = (f"{where}: {r.get('violation_count')} of {r.get('steps')} steps break it "
                  f"({r.get('batched_steps')} batched, tree nodes {_span_of(r.get('widths') or [])}, "
                  f"{r.get('requests_ok')} requests)")
            seen.setdefault(arm, []).append(Check(name, Scope(arm), PASS if r.get("passed") else FAIL, ev))
    out = [c for checks in seen.values() for c in checks]
    for a in run.profile.arms:
        if a.kind in ("chain", "tree") and a.id not in seen:
            out.append(Check(name, Scope(a.id), NA, "no steps diagnostic for this arm "
                                             f"(python -m ddbench.diagnostics steps RUN_DIR --arm {a.id})"))
    return out


def _span_of(widths: list[int]) -> str:
    return "-" if not widths else (str(widths[0]) if len(widths) == 1 else f"{min(widths)}-{max(widths)}")


def _same_build_check(run: Run) -> Path | None:
    """The check is once per build: another run beside this one (results/<profile>/<run>) that ran it on the
    build that served this run, the newest first."""
    head = run.manifest.sglang_build.get("head")
    if not head:
        return None
    for path in sorted(run.path.parent.parent.glob(f"*/*/{OVERLAY_CHECK}"), reverse=True):
        try:
            if (json.loads(path.read_text()).get("build") or {}).get("head") == head:
                return path
        except ValueError:
            continue
    return None


def _warmed_up(warmups: pd.DataFrame | None) -> list[Check]:
    """Per arm and C warmed up until stable: whether each bring-up's warm-up held still before its cap."""
    out = []
    for (arm, c), g in (warmups.groupby(["arm", "concurrency"], sort=False) if warmups is not None
                        and len(warmups) else []):
        moving = g[~g["stable"].astype(bool)]
        facts = "; ".join(f"bring-up {r.bring_up}: {r.throughputs} tok/s" for r in g.itertuples())
        if len(moving):
            out.append(Check(Kind.WARMUP_STABLE, Scope(arm, int(c)), FAIL,
                             f"{len(moving)} of {len(g)} warm-up(s) ran out of their share of warmup_s before two "
                             f"windows agreed within {g['within_pct'].iloc[0]:g}% ({facts}): the first cells may "
                             "run on a server still speeding up"))
        else:
            out.append(Check(Kind.WARMUP_STABLE, Scope(arm, int(c)), PASS,
                             f"stable after {', '.join(f'{x:g} s' for x in g['stable_after_s'])} ({facts})"))
    return out


def _finished(cell, scope) -> Check:
    if cell["status"] == "ok":
        return Check(Kind.CELL_FINISHED, scope, PASS, "status.json: ok")
    return Check(Kind.CELL_FINISHED, scope, FAIL, f"status {cell['status']}: {cell.get('reason') or 'no reason given'}")


def _min_requests(cells: pd.DataFrame, minimum: int) -> list[Check]:
    """Per (arm, C), over its repetitions that finished ok: intervals come from the repetitions, so a
    cell may be short; what the arm's pooled percentiles (p50 needs 20) and request mix need is the total."""
    out = []
    ok = cells[cells["status"] == "ok"]
    for (arm, c), g in ok.groupby(["arm", "concurrency"], sort=False):
        n = int(g["n"].sum())
        out.append(Check(Kind.MIN_REQUESTS, Scope(arm, int(c)), PASS if n >= minimum else FAIL,
                         f"{n} measured requests completed over {len(g)} repetition(s) (minimum {minimum}; "
                         f"fewest in one cell {int(g['n'].min())})"))
    return out


def _drift(speedups: pd.DataFrame | None, drift: dict | None) -> Check:
    """Fails when what the run's drift could add to some compared ratio reaches the smallest effect claimed."""
    name = Kind.DRIFT
    if drift is None or not np.isfinite(drift.get("slope_lo", np.nan)):
        return Check(name, RUN, NA, "drift not estimable: no (arm, C) has two repetitions that finished ok")
    if not stability.estimable(drift):
        return Check(name, RUN, NA, f"the repeated cells span {drift['span_s']:.0f} s: too short to estimate a "
                                      f"drift (minimum {stability.DRIFT_MIN_SPAN_S} s)")
    rate, lo, hi = (stability.over_run(drift, k) for k in ("slope", "slope_lo", "slope_hi"))
    facts = (f"drift {rate:+.2f}% over the run's {drift['span_s'] / 60:.1f} min (95% CI {lo:+.2f} to {hi:+.2f}) "
             f"from {drift['cells']} cells")
    if speedups is None or speedups.empty or "drift_bias" not in speedups:
        return Check(name, RUN, NA, facts + "; no ratio compared")
    bias = speedups["drift_bias"].astype(float)
    worst = speedups.loc[bias.idxmax()] if bias.notna().any() else None
    claimed = speedups[speedups["verdict"].isin(["faster", "slower"])]
    if worst is None:
        return Check(name, RUN, NA, facts + "; no ratio has paired cells with times")
    # cells that ran far apart (arm by arm) turn even a poorly known drift rate into a huge bound
    bound = f"{100 * worst['drift_bias']:.2f}%" if worst["drift_bias"] < 1 else "more than 100%"
    where = (f"up to {bound} on {worst['arm']}/{worst['baseline']} at C={worst['concurrency']}, whose paired cells "
             f"ran {abs(worst['dt_mean_s']):.0f} s apart on average")
    if claimed.empty:
        return Check(name, RUN, PASS, f"{facts}; it could move a ratio {where}; no ratio claims an effect")
    effect = np.abs(np.log(claimed["speedup"].astype(float)))
    small = claimed.loc[effect.idxmin()]
    smallest = 100 * (np.exp(effect.min()) - 1)
    ok = np.log1p(worst["drift_bias"]) < effect.min()
    return Check(name, RUN, PASS if ok else FAIL,
                 f"{facts}; it could move a ratio {where}; the smallest effect claimed is {smallest:.2f}% "
                 f"({small['arm']}/{small['baseline']} at C={small['concurrency']})")


def _stationary(table: pd.DataFrame | None) -> list[Check]:
    """Per ratio compared within the run: its repetition pairs neither step nor trend by more than its MDE
    (analysis.trust.stationarity), naming the arm whose own throughput moved."""
    if table is None or table.empty:
        return []
    out = []
    for r in table.to_dict("records"):
        scope = Scope(r["arm"], int(r["concurrency"]), baseline=r["baseline"])
        if r["note"] or not np.isfinite(r["shift"]):
            out.append(Check(Kind.STATIONARY, scope, NA, r["note"] or "no shift estimable"))
            continue
        moved, still = (r["arm"], r["baseline"]) if r["moved"] == r["arm"] else (r["baseline"], r["arm"])
        own = {r["arm"]: r["arm_shift"], r["baseline"]: r["baseline_shift"]}
        shift = (f"{100 * r['shift']:+.1f}% from the first half of {r['pairs']} pairs to the second "
                 f"(run order by {r['order']})")
        beyond = abs(np.log1p(r["shift"])) > np.log1p(r["mde"])
        tests = (f"p {r['p_holm']:.3g}, Holm over {r['ratios']} ratios; step p {r['step_p']:.3g}, "
                 f"Spearman rho {r['rho']:+.2f} with order, p {r['rho_p']:.3g}")
        common = r.get("common_shift")
        arms = (f"own throughput, second half against first: {moved} {100 * own[moved]:+.1f}%, "
                f"{still} {100 * own[still]:+.1f}%"
                + (f" (every arm's median {100 * common:+.1f}%)" if common is not None and np.isfinite(common)
                   else ""))
        if stationarity.shifted(r):
            out.append(Check(Kind.STATIONARY, scope, FAIL, f"{moved} moved: the ratio shifted {shift}, beyond its MDE "
                                                      f"{100 * r['mde']:.1f}% and beyond noise ({tests}); {arms}"))
        else:
            size = "larger than" if beyond else "within"
            why = " but within noise" if beyond else ""
            out.append(Check(Kind.STATIONARY, scope, PASS, f"shift {shift}, {size} its MDE {100 * r['mde']:.1f}%{why} "
                                                      f"({tests}); {arms}"))
    return out


def _gpu_band(band: pd.DataFrame | None) -> list[Check]:
    name = Kind.GPU_BAND
    if band is None or band.empty:
        return [Check(name, RUN, NA, "no GPU samples")]
    out = []
    for r in band.itertuples():
        scope = Scope(r.arm, int(r.concurrency), int(r.repetition))
        ev = (f"median SM clock {r.sm_clock_mhz:.0f} MHz (band {r.clock_band_lo:.0f}-{r.clock_band_hi:.0f}), "
              f"mean power {r.power_w:.0f} W (band {r.power_band_lo:.0f}-{r.power_band_hi:.0f})")
        if r.outside:
            out.append(Check(name, scope, FAIL, f"{r.outside} outside the band: {ev}; touches "
                                                f"{r.comparisons or 'no comparison'}"))
        else:
            out.append(Check(name, scope, PASS, ev))
    return out


def _host_quiet(host: pd.DataFrame | None, runtime: str = "local") -> list[Check]:
    """One line for the run: the cells during which other work took CPU on the host, with what they touch."""
    name = Kind.HOST_QUIET
    why = stability.host_unmeasured(runtime, host)
    if why:
        return [Check(name, RUN, NA, f"no foreign-CPU figures: {why}")]
    busy = host[host["busy"].astype(bool)]
    worst = host.loc[host["foreign_cores"].idxmax()]
    facts = (f"{len(busy)} of {len(host)} cells had more than {host['limit'].max():g} core(s) of other work; "
             f"median over cells {host['foreign_cores'].median():.2f}, most {worst['foreign_cores']:.2f} "
             f"({worst['arm']} C={worst['concurrency']} rep {worst['repetition']})")
    if busy.empty:
        return [Check(name, RUN, PASS, facts)]
    cells = "; ".join(f"{r.arm} C={r.concurrency} rep {r.repetition} ({r.foreign_cores:.2f})"
                      for r in busy.head(6).itertuples())
    return [Check(name, RUN, FAIL, f"{facts}: {cells}{' ...' if len(busy) > 6 else ''}")]


def _errors(cell, scope) -> Check:
    rate = cell["error_rate"]
    if pd.isna(rate):
        return Check(Kind.ERRORS, scope, FAIL, "no measured request was sent")
    return Check(Kind.ERRORS, scope, PASS if rate <= MAX_ERROR_RATE else FAIL,
                 f"{cell['errors']} errors of {cell['n'] + cell['errors']} measured requests ({100 * rate:.1f}%)")


def _client_cpu(cell, scope) -> Check:
    cpu = cell.get("client_cpu_max")
    if cpu is None or pd.isna(cpu):
        return Check(Kind.CLIENT_CPU, scope, NA, "status.json has no client_cpu_max")
    return Check(Kind.CLIENT_CPU, scope, PASS if cpu < MAX_CLIENT_CPU else FAIL,
                 f"peak load-generator CPU {cpu:.0f}%")


def _warmup(run: Run, cell, scope) -> Check:
    want = run.profile.load.warmup_requests * int(cell["concurrency"])
    have = int(cell["warmup_n"])
    if want == 0:
        return Check(Kind.WARMUP_EXCLUDED, scope, NA, "the profile asks for no warmup")
    return Check(Kind.WARMUP_EXCLUDED, scope, PASS if have >= want else FAIL,
                 f"{have} warmup requests excluded from statistics (profile: {want})")


def _tau_consistency(run: Run, req: pd.DataFrame, cell, scope, kinds) -> Check:
    name = Kind.TAU
    if kinds.get(cell["arm"]) == "ar":
        return Check(name, scope, NA, "ar: tau = 1 by definition")
    key = (cell["arm"], cell["concurrency"], cell["repetition"])
    r = req[(req["arm"] == key[0]) & (req["concurrency"] == key[1]) & (req["repetition"] == key[2]) & req["ok"]]
    steps = r["spec_verify_ct"].sum()
    if not steps > 0:
        return Check(name, scope, NA, "requests carry no spec_verify_ct (spec details not returned)")
    # the /metrics scrape brackets the whole cell, warmup included: so does the client side here
    client = r["completion_tokens"].sum() / steps
    server, source = server_tau(run, key[0], key[1], [key[2]], measured_only=False)
    if np.isnan(server):
        return Check(name, scope, NA, f"client tau {client:.3f}; no server-side counter or log line to compare")
    rel = abs(server - client) / client
    return Check(name, scope, PASS if rel <= TAU_TOLERANCE else FAIL,
                 f"server {server:.3f} ({source}) vs client {client:.3f} (sum completion_tokens / sum "
                 f"spec_verify_ct): {100 * rel:.1f}% apart (limit {100 * TAU_TOLERANCE:.0f}%)")


def server_tau(run: Run, arm: str, c: int, reps: list[int], measured_only: bool = True) -> tuple[float, str]:
    """τ as the server itself reports it over the given cells of one arm: its /metrics counters
    differenced over each cell (SGLang's: Σ generated tokens / Σ verify calls; vLLM's: 1 + Σ accepted
    tokens / Σ drafts), else the mean 'accept len' of its Decode batch log lines. (nan, 'not reported: ...')
    when it reports none of them. The counters include the warm-up
    requests; where the stream's chunks are provably the verify steps, τ is the measured requests' alone
    (_measured_tau), unless measured_only is False (a check that compares the counters themselves)."""
    s = run.server
    s = s[(s["arm"] == arm) & (s["concurrency"] == c) & s["repetition"].isin(reps)]
    gen = s.loc[s["metric"] == prom.GENERATED, "delta"]
    ver = s.loc[s["metric"] == prom.VERIFY_CALLS, ["repetition", "delta"]]
    # every cell must have both counters: a sum over some cells only would mix windows
    if len(gen) == len(ver) == len(reps) and gen.notna().all() and ver["delta"].notna().all() \
            and ver["delta"].sum() > 0:
        where = "the cell" if len(reps) == 1 else f"each of {len(reps)} cells"
        measured = _measured_tau(run, arm, c, dict(zip(ver["repetition"].astype(int), ver["delta"], strict=True))) \
            if measured_only else None
        if measured is not None:
            return measured, (f"the measured requests' stream chunks, each a verify step (their count over "
                              f"{where} equals the /metrics verify calls, warm-up included)")
        return float(gen.sum() / ver["delta"].sum()), f"/metrics counters differenced over {where}, warm-up included"
    vllm = _vllm_tau(s, reps)
    if vllm is not None:
        return vllm
    log = run.log
    lines = log[(log["arm"] == arm) & (log["concurrency"] == c) & log["repetition"].isin(reps)
                & (log["kind"] == "decode")]["accept_len"].dropna()
    if lines.empty:
        return float("nan"), prom.TAU_NOT_REPORTED
    return float(lines.mean()), f"mean 'accept len' of {len(lines)} Decode batch lines"


def _vllm_tau(s: pd.DataFrame, reps: list[int]) -> tuple[float, str] | None:
    """vLLM's spec_decode counters over the cells: each draft is one verify step of one request, committing
    its accepted tokens and one more (the bonus), so τ = 1 + Σ accepted / Σ drafts."""
    drafts = s.loc[s["metric"] == prom.VLLM_DRAFTS, "delta"]
    accepted = s.loc[s["metric"] == prom.VLLM_ACCEPTED, "delta"]
    # every cell must have both counters, as for SGLang's: a sum over some cells only would mix windows
    if not (len(drafts) == len(accepted) == len(reps) and drafts.notna().all() and accepted.notna().all()
            and drafts.sum() > 0):
        return None
    where = "the cell" if len(reps) == 1 else f"each of {len(reps)} cells"
    return (1 + float(accepted.sum() / drafts.sum()),
            f"vLLM /metrics spec_decode counters differenced over {where}, warm-up included: 1 + accepted / drafts")


def _measured_tau(run: Run, arm: str, c: int, verify_calls: dict[int, float]) -> float | None:
    """τ of the measured requests alone (Σ completion tokens / Σ verify steps), where each cell's streamed
    chunks are its verify steps: a request's first chunk is its prefill's token and each later one a step's
    commit, so over a cell Σ (chunks - 1) over all its requests must equal the server's verify calls. The
    counters count the warm-up requests too, and a fixed prompt order makes those the same prompts every
    time. None where any cell's chunks do not add up (a batched count, a step with no text, a failed stream)."""
    rq = run.requests
    rq = rq[(rq["arm"] == arm) & (rq["concurrency"] == c) & rq["repetition"].isin(list(verify_calls))]
    if rq.empty or "content_chunks" not in rq or not rq["ok"].all():
        return None
    steps = (rq["content_chunks"] - 1).clip(lower=0)
    per_cell = steps.groupby(rq["repetition"].astype(int)).sum()
    if any(per_cell.get(r, -1) != v for r, v in verify_calls.items()):
        return None
    measured = ~rq["warmup"].astype(bool)
    n = steps[measured].sum()
    return float(rq.loc[measured, "completion_tokens"].sum() / n) if n > 0 else None


def _clean_start(run: Run, cells: pd.DataFrame, cell, scope) -> Check:
    name = Kind.CLEAN_START
    if _external(run):   # no server log of ours: what the server answered when asked to flush
        return _flush_answer(run, cell, scope, name)
    # the server's own lines (a flush or a start lies between cells, so it keeps the server's arm id), and the
    # previous cell it served, of any sampling setting
    server = {a.id: a.server for a in run.profile.arms}
    base = server.get(cell["arm"], cell["arm"])
    log = run.log[(run.log["arm"] == base) & run.log["kind"].isin(["flush", "ready"])]
    if pd.isna(cell.get("started_unix")):
        return Check(name, scope, NA, "status.json has no start time")
    same = cells["arm"].map(lambda a: server.get(a, a)) == base
    mine = cells[same & (cells["started_unix"] < cell["started_unix"])]
    since = mine["ended_unix"].max() if len(mine) else -np.inf
    since = np.floor(since) if np.isfinite(since) else since
    seen = log[(log["t_unix"] >= since) & (log["t_unix"] <= np.ceil(cell["started_unix"]))]
    if seen.empty:
        return Check(name, scope, FAIL, "no 'Cache flushed successfully' or server start in server.log "
                                        "between the previous cell and this one: the prefix cache may be warm")
    ev = seen.iloc[-1]
    what = "cache flushed" if ev["kind"] == "flush" else "server started"
    return Check(name, scope, PASS, f"{what} (server.log line {int(ev['line'])})")


def _flush_answer(run: Run, cell, scope, name: str) -> Check:
    path = run.path / str(cell["arm"]) / cell_name(int(cell["concurrency"]), int(cell["repetition"])) / FLUSH
    if not path.is_file():
        return Check(name, scope, NA, f"{EXTERNAL}, and the cell recorded no {FLUSH}")
    rec = json.loads(path.read_text())
    if rec.get("flushed"):
        return Check(name, scope, PASS, f"POST {rec.get('path')} answered 200 before the cell ({FLUSH})")
    tried = ", ".join(f"{t['path']} HTTP {t['status']}" for t in rec.get("tried") or [])
    return Check(name, scope, FAIL, f"not flushed: {rec.get('why', 'no reason recorded')}"
                 + (f" ({tried})" if tried else "") + ": the prefix cache may be warm from the cell before")


def _gpu_stable(run: Run, cell, scope) -> Check:
    name = Kind.GPU_STABLE
    t = run.telemetry
    if t.empty or "source" not in t:
        return Check(name, scope, NA, "no telemetry.jsonl")
    mine = t[(t["arm"] == cell["arm"]) & (t["concurrency"] == cell["concurrency"])
             & (t["repetition"] == cell["repetition"])]
    g = mine[mine["source"] == "gpu"]
    if g.empty:
        why = mine.loc[mine["source"] == "source", "detail"] if "detail" in mine else pd.Series(dtype=str)
        return Check(name, scope, NA, "no GPU samples" + (f" (telemetry source {why.iloc[0]})" if len(why) else ""))
    problems, facts = [], [f"{len(g)} samples"]
    if "sm_clock_mhz" in g and g["sm_clock_mhz"].notna().any():
        clk = g["sm_clock_mhz"].astype(float)
        spread = (clk.max() - clk.min()) / clk.median()
        facts.append(f"SM clock {clk.min():.0f}-{clk.max():.0f} MHz")
        if spread > CLOCK_SPREAD:
            problems.append(f"SM clock varies {100 * spread:.0f}% (limit {100 * CLOCK_SPREAD:.0f}%)")
    if "temperature_c" in g and g["temperature_c"].notna().any():
        temp = g["temperature_c"].astype(float)
        facts.append(f"{temp.min():.0f}-{temp.max():.0f} C")
        if temp.max() >= MAX_GPU_TEMP_C:
            problems.append(f"GPU reached {temp.max():.0f} C")
    if "throttle" in g:
        reasons = sorted({x for v in g["throttle"].dropna() for x in str(v).split(",")
                          if x and x not in IDLE_REASONS})
        if reasons:
            problems.append("throttled: " + ", ".join(reasons))
    errors = mine[mine["source"] == "gpu_error"]
    if len(errors):
        problems.append(f"{len(errors)} samples lost: {errors['detail'].iloc[0]}")
    return Check(name, scope, FAIL if problems else PASS, "; ".join(problems + facts))


def _output_length(run: Run, cells: pd.DataFrame) -> list[Check]:
    out = []
    p = run.profile
    ok = cells[cells["status"] == "ok"]
    for arm in p.arms:
        if arm.kind == "ar":
            continue
        # ar under the same sampling: output length is a property of the setting too, when EOS is honoured
        ar = [a.id for a in p.arms if a.kind == "ar" and p.sampling_for(a.id) == p.sampling_for(arm.id)]
        for c in run.profile.load.concurrency:
            scope = Scope(arm.id, int(c))
            mine = ok[(ok["arm"] == arm.id) & (ok["concurrency"] == c)]
            base = ok[(ok["arm"].isin(ar)) & (ok["concurrency"] == c)]
            if mine.empty or base.empty:
                out.append(Check(Kind.OUTPUT_LENGTH, scope, NA, "no finished cell to compare"))
                continue
            x = np.average(mine["output_tokens_mean"], weights=mine["n"])
            y = np.average(base["output_tokens_mean"], weights=base["n"])
            rel = (x - y) / y
            out.append(Check(Kind.OUTPUT_LENGTH, scope, PASS if abs(rel) <= OUTPUT_TOLERANCE else FAIL,
                             f"mean {x:.1f} tokens vs ar {y:.1f} ({100 * rel:+.1f}%)"))
    return out


def _requested_lengths(req: pd.DataFrame) -> list[Check]:
    """Where the workload drew each request's lengths (workload.input / output), the server's usage must
    report them exactly: a miss means the distribution in the report is not what was measured."""
    name, out = Kind.REQUESTED_LENGTHS, []
    ok = req[req["ok"].astype(bool)] if "ok" in req else req
    for target, got, what in (("target_output_tokens", "completion_tokens", "output"),
                              ("target_input_tokens", "prompt_tokens", "input")):
        if target not in ok or ok[target].isna().all():
            continue
        for arm, g in ok[ok[target].notna()].groupby("arm", sort=False):
            miss = g[g[got] != g[target]]
            facts = (f"{what}: {len(g) - len(miss)} of {len(g)} requests got their drawn length "
                     f"({int(g[target].min())}-{int(g[target].max())} tokens)")
            if not miss.empty:
                r = miss.iloc[0]
                facts += f"; e.g. request {r['request_id']}: {r[got]} for {int(r[target])}"
            out.append(Check(name, Scope(arm, part=what), PASS if miss.empty else FAIL, facts))
    return out


def commit_violations(req: pd.DataFrame, arm: str) -> tuple[int, int, list[str], str]:
    """Requests whose commit-length histogram is not the accepted-depth histogram shifted by one.

    Commit lengths come from spec_commit_length_histogram when the server sends it, else from
    SGLang's spec_correct_drafts_histogram (commit length = 1 + accepted drafts).
    Returns (requests checked, violations, their ids, the source of commit lengths)."""
    cols = ["request_id", "spec_accepted_depth_histogram", "spec_commit_length_histogram",
            "spec_correct_drafts_histogram"]
    r = req[cols][(req["arm"] == arm) & req["ok"]]
    depth, has_d = dense(r["spec_accepted_depth_histogram"])
    commit, has_c = dense(r["spec_commit_length_histogram"])
    source = "spec_commit_length_histogram"
    if not (has_d & has_c).any():
        drafts, has_c = dense(r["spec_correct_drafts_histogram"])
        commit = np.hstack([np.zeros((len(r), 1)), drafts])
        source = "spec_correct_drafts_histogram + 1"
    both = has_d & has_c
    width = max(depth.shape[1] + 1, commit.shape[1])
    shifted = np.zeros((len(r), width))
    shifted[:, 1:depth.shape[1] + 1] = depth
    padded = np.zeros((len(r), width))
    padded[:, :commit.shape[1]] = commit
    bad = both & (shifted != padded).any(axis=1)
    return int(both.sum()), int(bad.sum()), [str(x) for x in r["request_id"][bad]], source


def _commit_requests(req: pd.DataFrame, arm: str) -> Check:
    name, scope = Kind.COMMIT_REQUESTS, Scope(arm)
    n, nbad, bad, source = commit_violations(req, arm)
    if n == 0:
        return Check(name, scope, NA, "requests carry no spec_accepted_depth_histogram beside a commit-length "
                                      "or accepted-drafts histogram")
    if nbad:
        return Check(name, scope, FAIL, f"{nbad} of {n} requests break it ({source} vs "
                                        f"spec_accepted_depth_histogram), e.g. {', '.join(bad[:3])}")
    return Check(name, scope, PASS, f"all {n} requests: commit lengths ({source}) = accepted depth + 1")


def _commit_log(run: Run, arm: str) -> Check:
    name, scope = Kind.COMMIT_LOG, Scope(arm)
    if _external(run):
        return Check(name, scope, NA, f"{EXTERNAL}: its log is not in the run")
    d = run.log[(run.log["arm"] == arm) & (run.log["kind"] == "ddtree")]
    d = d.dropna(subset=["avg_depth", "avg_commit"])
    if d.empty:
        return Check(name, scope, NA, "no DDTree window lines in server.log")
    err = (d["avg_commit"] - d["avg_depth"] - 1).abs()
    bad = d[err > LOG_ROUNDING]
    if len(bad):
        first = bad.iloc[0]
        return Check(name, scope, FAIL, f"{len(bad)} of {len(d)} DDTree lines break it, first at server.log line "
                                        f"{int(first['line'])}: depth {first['avg_depth']:.2f}, commit "
                                        f"{first['avg_commit']:.2f}")
    return Check(name, scope, PASS, f"all {len(d)} DDTree lines agree (largest gap {err.max():.3f})")


def _histograms(req: pd.DataFrame, arm: str) -> Check:
    name, scope = Kind.HISTOGRAMS, Scope(arm)
    cols = ["request_id", "spec_verify_ct", "spec_num_correct_drafts", "spec_correct_drafts_histogram"]
    r = req[cols][(req["arm"] == arm) & req["ok"]]
    hist, present = dense(r["spec_correct_drafts_histogram"])
    if not present.any():
        return Check(name, scope, NA, "requests carry no spec_correct_drafts_histogram")
    steps, correct = r["spec_verify_ct"].to_numpy(dtype=float), r["spec_num_correct_drafts"].to_numpy(dtype=float)
    bad = present & ((hist.sum(axis=1) != steps) | (hist @ np.arange(hist.shape[1]) != correct))
    if bad.any():
        ids = [str(x) for x in r["request_id"][bad][:3]]
        return Check(name, scope, FAIL, f"{bad.sum()} of {present.sum()} requests: histogram does not sum to "
                                        f"spec_verify_ct or to spec_num_correct_drafts, e.g. {', '.join(ids)}")
    return Check(name, scope, PASS, f"all {present.sum()} requests consistent")


def _lossless(run: Run, table: pd.DataFrame | None, triage=None) -> list[Check]:
    """fp32 must match ar exactly; other dtypes pass when every divergence is a numerical tie
    (analysis.triage), and are n/a when the triage could not run."""
    if table is None or table.empty:
        return [Check(Kind.LOSSLESS, RUN, NA, "not applicable (see Correctness)")]
    exact_required = run.profile.runtime.dtype == "float32"
    out = []
    for row in table.itertuples():
        ev = f"{row.exact} of {row.compared} outputs equal ar's ({100 * row.match_rate:.1f}%)"
        if row.match_rate == 1:
            out.append(Check(Kind.LOSSLESS, Scope(row.arm), PASS, ev))
        elif exact_required:
            out.append(Check(Kind.LOSSLESS, Scope(row.arm), FAIL, ev + "; float32 must match exactly"))
        elif (judged := triage.verdict(LOSSLESS, row.arm) if triage is not None else None) is not None:
            out.append(Check(Kind.LOSSLESS, Scope(row.arm), PASS if judged[0] else FAIL,
                             f"{judged[1]}; {run.profile.runtime.dtype}: numerical ties allowed"))
        else:
            why = f"; not triaged: {triage.note}" if triage is not None and triage.note else ""
            out.append(Check(Kind.LOSSLESS, Scope(row.arm), NA,
                             ev + f"; {run.profile.runtime.dtype} numerics: rate reported, exact match not required"
                             + why))
    return out


def _chain_equals_linear(run: Run, triage) -> list[Check]:
    """A chain arm's T=0 outputs against the linear arm of its block size (analysis.triage pairs them),
    whichever engine served: fp32 exactly, other dtypes up to numerical ties."""
    name, chains = Kind.CHAIN_EQUALS_LINEAR, [a.id for a in greedy_arms(run.profile) if a.kind == "chain"]
    out = []
    for arm in chains:
        r = triage.row(CHAIN, arm) if triage is not None and triage.note is None else None
        if r is None:
            why = triage.note if triage is not None and triage.note else "no linear arm of its block size, or no output"
            out.append(Check(name, Scope(arm), NA, why))
        elif r["identical"] == r["compared"]:
            out.append(Check(name, Scope(arm), PASS, f"all {r['compared']} outputs equal {r['reference']}'s"))
        elif run.profile.runtime.dtype == "float32":
            out.append(Check(name, Scope(arm), FAIL, f"{r['compared'] - r['identical']} of {r['compared']} outputs "
                                                     f"differ from {r['reference']}'s; float32 must match exactly"))
        else:
            ok, ev = triage.verdict(CHAIN, arm)
            out.append(Check(name, Scope(arm), PASS if ok else FAIL,
                             f"{ev}; {run.profile.runtime.dtype}: numerical ties allowed"))
    return out


def _chain_steps(run: Run) -> list[Check]:
    """The single-chain test: at T=0 and C=1, a chain arm must take its linear arm's verify steps on every
    request whose output is the same. A server streams one chunk per verify step, so the steps are the
    sequence of content chunks; a divergent output is left to 'chain equals linear at T=0' (its triage)."""
    from analysis.triage import pairs

    name, out = Kind.CHAIN_STEPS, []
    req, chunks = run.requests, run.chunks
    for comparison, arm, ref in pairs(run.profile):
        if comparison != CHAIN:
            continue
        rows = req[req["arm"].isin([arm, ref]) & (req["concurrency"] == 1) & ~req["warmup"].astype(bool)
                   & req["ok"]]
        steps = chunks[chunks["req"].isin(rows.index)].groupby("req")["chars"].apply(tuple)
        sides = {a: {(r.repetition, r.prompt_id): (r.text, steps.get(i, ())) for i, r in g.iterrows()}
                 for a, g in rows.groupby("arm", observed=True)}
        both = sorted(set(sides.get(arm, {})) & set(sides.get(ref, {})))
        if not both:
            out.append(Check(name, Scope(arm), NA, f"no C=1 request of both {arm} and {ref}"))
            continue
        same_text = [k for k in both if sides[arm][k][0] == sides[ref][k][0]]
        differ = [k for k in same_text if sides[arm][k][1] != sides[ref][k][1]]
        diverged = len(both) - len(same_text)
        tail = f"; {diverged} outputs diverged (left to 'chain equals linear at T=0')" if diverged else ""
        if differ:
            rep_, prompt = differ[0]
            a, b = sides[arm][differ[0]][1], sides[ref][differ[0]][1]
            step = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            out.append(Check(name, Scope(arm), FAIL, f"{len(differ)} of {len(same_text)} requests with {ref}'s output "
                                                     f"take other steps; first: prompt {prompt} rep {rep_}, step "
                                                     f"{step} ({len(a)} chunks against {len(b)}){tail}"))
        elif not same_text:
            out.append(Check(name, Scope(arm), NA, f"every one of {len(both)} outputs diverged from {ref}'s{tail}"))
        else:
            out.append(Check(name, Scope(arm), PASS, f"all {len(same_text)} C=1 requests with {ref}'s output take its "
                                              f"verify steps (chunk by chunk){tail}"))
    return out
