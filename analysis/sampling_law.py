"""Lossless at T > 0, checked where it can be: on the reference engine, the law of the first k sampled tokens
of every speculative arm against the exact AR law, computed from the target.

Offline, fp32 on the CPU, for a run's (or a profile's) pair and prompt set, under each T > 0 sampling setting
of the profile (T = 0 is checked token for token elsewhere: analysis.trust.correctness, `just verify`).

  the exact law   p(t1) p(t2 | t1) ... p(tk | t1..tk-1), each factor the target's distribution after
                  temperature, top-k and top-p (refengine.sampling.probs, the engine's own rule), from one
                  batched forward per depth. Only prefixes of probability >= 5 / n are expanded (n = draws per
                  prompt): an outcome is never likelier than its prefix, so every outcome that gets a bin of
                  its own is found exactly, and the rest is one 'other' bin of probability 1 - their sum.
  the draws       n seeded Engine.generate(prompt, plan, sampling, max_tokens=k) per prompt and arm, one
                  request alone (C = 1); AR too, which checks the sampler and the law computation themselves.
  the prompts     P of the prompt set's (the first CANDIDATES, round-robin over categories), those whose binned
                  k-token law has the highest entropy at this setting, so that the test has bins to test;
                  a near-deterministic prompt puts every draw in one bin and tests nothing.
  the test        per prompt a G-test of the observed bin counts against n times the law (bins: every outcome of
                  expected count >= 5, the rest as 'other', merged into the least likely bin when its own expected
                  count is < 5), df = bins - 1; per row the G statistics of the P prompts summed (independent
                  draws with the prompt margins fixed by design: chi-square with the summed df under the null).
                  alpha per row = the family alpha / the number of checked rows (Bonferroni across arms and
                  settings). Independently of the p-value, one drawn outcome of law probability 0 (a token
                  outside the top-p / top-k support, an early stop without a stop token) fails the row; a row
                  whose draws all fall in one bin (df 0) tested nothing and says n/a.
  the power       detectable_w: the smallest Cohen's w (over the prompt x outcome table, prompts weighted
                  equally) that the test rejects with 80% power at this alpha, N and df (noncentral
                  chi-square, lambda = N w^2); detectable_shift says it in probability: the mass moved from
                  each prompt's most likely outcome to its second that has that w.
  accepted_share  the share of draws whose first step accepted a draft token: the draws that exercise the walk
                  past the root. A share near 0 means the test checked little more than the root's sample.
  planted         a control row per setting: one speculative arm (the tree, when there is one) with a planted bug,
                  a drafted child accepted whenever it is in the target's support instead of following the
                  target's sample (`planted`). It must fail: it shows what the test catches at this N.

Seeds: every draw of every row has a seed of its own (seed + (row * P + prompt) * n + draw), so that the rows are
independent samples and reproducible. (With shared seeds an arm repeats AR's tokens in most draws, 26 to 28 of 40
on the shipped pair at T=0.7, top-p 0.95, all of them on the toy echo pair: its row would largely re-test AR's sample.)

    python -m analysis.sampling_law RUN_DIR [--draws N] [--prompts P] [--k K] [--alpha A] [--jobs J]
    python -m analysis.sampling_law --profile PROFILE --out DIR [...]

writes RUN_DIR/tables/lossless_sampling.{csv,parquet} (or DIR/...).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import torch
from scipy import optimize, stats

from analysis.estimate.stats import POWER as MDE_POWER
from ddbench.core.results import SAMPLING_LAW_TABLE
from refengine.plan import Plan
from refengine.sampling import Sampling as RefSampling
from refengine.sampling import probs

NAME = SAMPLING_LAW_TABLE
DRAWS = 1200          # per row: AR, 3 speculative arms and the control took 3.4 minutes on 2 cores (335 CPU-s)
PROMPTS = 4
K = 3                 # the shipped pair's first token after the chat template is near-certain: k = 3 tests two
ALPHA = 0.05          # the family's, across every checked row
POWER = MDE_POWER   # the power a detectable bias is stated at, as every MDE of the report
MIN_EXPECTED = 5      # the usual rule for the chi-square approximation of G
CANDIDATES = 48       # prompts whose law is computed to choose from
CHUNK = 256           # sequences per target forward in the law
COLUMNS = ["arm", "kind", "sampling", "temperature", "top_p", "top_k", "planted", "prompts", "prompt_ids", "draws",
           "k", "bins", "df", "statistic", "p_value", "alpha", "detectable_w", "detectable_shift", "accepted_share",
           "impossible", "verdict", "seconds"]


# -- the exact law ------------------------------------------------------------------------------

def ref_sampling(s, seed: int | None = None) -> RefSampling:
    """The engine's Sampling for a profile's (top_k None = off)."""
    return RefSampling(s.temperature, s.top_p, s.top_k or 0, seed)


def next_probs(target, prompt: list[int], prefixes: Sequence[tuple], s: RefSampling) -> torch.Tensor:
    """The sampling distribution [len(prefixes), V] (float64) after prompt + each prefix (all one length)."""
    out = []
    for lo in range(0, len(prefixes), CHUNK):
        ids = torch.tensor([prompt + list(p) for p in prefixes[lo:lo + CHUNK]])
        pos = torch.arange(ids.shape[1])[None].expand(len(ids), -1)
        out.append(probs(target(ids, pos)[0][:, -1], s).double())
    return torch.cat(out)


@torch.inference_mode()
def law(target, prompt: list[int], s: RefSampling, k: int, floor: float = 0.0, stop_ids=()) -> dict[tuple, float]:
    """Exact probability of every outcome of probability >= floor (and > 0): the first k tokens, or fewer when
    one is a stop token (generation ends there). Outcomes below floor are left out (1 - the sum is their mass)."""
    done, live = {}, {(): 1.0}
    for _ in range(k):
        if not live:
            break
        keys = list(live)
        p = next_probs(target, prompt, keys, s) * torch.tensor([live[x] for x in keys], dtype=torch.float64)[:, None]
        keep = (p > 0) & (p >= floor)
        live = {}
        for row, tok in keep.nonzero().tolist():
            out = keys[row] + (tok,)
            (done if tok in stop_ids else live)[out] = float(p[row, tok])
    return {**done, **live}


@torch.inference_mode()
def outcome_probs(target, prompt: list[int], outcomes: Sequence[tuple], s: RefSampling) -> list[float]:
    """The law's probability of each outcome: one forward of prompt + outcome, the product of its factors."""
    out = {}
    for size in {len(o) for o in outcomes}:     # one batch per length
        same = [o for o in outcomes if len(o) == size]
        for lo in range(0, len(same), CHUNK):
            batch = torch.tensor(same[lo:lo + CHUNK])
            ids = torch.cat([torch.tensor([prompt]).expand(len(batch), -1), batch], 1)
            pos = torch.arange(ids.shape[1])[None].expand(len(batch), -1)
            logits = target(ids, pos)[0][:, len(prompt) - 1:-1]
            q = probs(logits, s).double().gather(-1, batch[..., None])[..., 0].prod(-1)
            out.update(zip(same[lo:lo + CHUNK], q.tolist(), strict=True))
    return [out[o] for o in outcomes]


def binning(p: dict[tuple, float], n: int) -> tuple[dict[tuple, int], int, np.ndarray]:
    """Bins for n draws: (outcome -> bin, the bin of every other outcome, bin probabilities). An outcome of
    expected count >= MIN_EXPECTED has its own bin (most likely first); the rest share 'other', which joins the
    least likely bin when it is too small for one of its own."""
    own = sorted((o for o, q in p.items() if n * q >= MIN_EXPECTED), key=lambda o: -p[o])
    q = [p[o] for o in own]
    other = max(0.0, 1.0 - sum(q))
    if own and n * other < MIN_EXPECTED:
        rest = len(own) - 1
        q[rest] += other
    else:
        rest = len(own)
        q.append(other)
    q = np.array(q)
    return {o: i for i, o in enumerate(own)}, rest, q / q.sum()


def entropy(q: np.ndarray) -> float:
    q = q[q > 0]
    return float(-(q * np.log(q)).sum())


# -- the statistics -----------------------------------------------------------------------------

def g_test(observed, expected_p) -> tuple[float, int]:
    """G = 2 sum O ln(O / E) with E = N * expected_p; df = bins - 1 (the law is given, nothing is fitted).
    An observed count in a bin of probability 0 makes G infinite."""
    o = np.asarray(observed, dtype=float)
    e = np.asarray(expected_p, dtype=float) * o.sum()
    hit = o > 0
    with np.errstate(divide="ignore"):
        g = 2 * float((o[hit] * np.log(o[hit] / e[hit])).sum())
    return g, len(o) - 1


def p_value(g: float, df: int) -> float:
    return float(stats.chi2.sf(g, df)) if df > 0 else 1.0


def verdict(p: float, alpha: float, df: int, impossible: int) -> str:
    """fail: an impossible draw, or p < alpha; n/a: every draw fell in one bin, so nothing was tested."""
    if impossible:
        return "fail"
    if df < 1:
        return "n/a"
    return "fail" if p < alpha else "pass"


def power(w: float, n: int, df: int, alpha: float) -> float:
    """Probability that the chi-square-type test of df at alpha rejects, N draws, true effect Cohen's w."""
    return float(stats.ncx2.sf(stats.chi2.isf(alpha, df), df, n * w * w))


def detectable_w(n: int, df: int, alpha: float, target: float = POWER) -> float:
    """The smallest Cohen's w detected with probability `target` (inf when nothing can be: df 0 or no draws)."""
    if df < 1 or n < 1:
        return math.inf
    return float(optimize.brentq(lambda w: power(w, n, df, alpha) - target, 1e-9, 100.0))


def shift(w: float, laws: Sequence[np.ndarray]) -> float:
    """The probability d moved from each prompt's most likely bin to its second (probabilities a, b) whose Cohen's
    w is w, prompts weighted equally: w^2 = mean over prompts of d^2 (1/a + 1/b)."""
    two = [np.sort(q)[::-1][:2] for q in laws if len(q) >= 2]
    if not two or not math.isfinite(w):
        return math.inf
    return w / math.sqrt(np.mean([1 / a + 1 / b for a, b in two]))


# -- the arms -----------------------------------------------------------------------------------

def plan(arm, env: dict[str, str] | None = None) -> Plan:
    """The plan the reference server runs for a profile's arm (refengine.serve.make_plan's rule: a chain or tree
    drafts the drafter's block, the depth bonus comes from SGLANG_DDTREE_DEPTH_BONUS)."""
    env = {**(env or {}), **arm.env}
    if arm.kind == "ar":
        return Plan("ar")
    if arm.kind == "linear":
        return Plan("linear", block_size=arm.block_size)
    bonus = float(env.get("SGLANG_DDTREE_DEPTH_BONUS", "0"))
    return Plan(arm.kind, budget=arm.tree_budget, topk=arm.tree_topk, depth_bonus=bonus)


@dataclass(frozen=True)
class Row:
    arm: str
    kind: str
    plan: Plan
    sampling: object        # ddbench.core.profile.Sampling
    planted: bool = False


def rows(profile, settings=None, planted: bool = True) -> list[Row]:
    """Per T > 0 setting: AR (the profile's ar arm, or a plain one: it checks the sampler), each speculative arm,
    and the planted control on the tree arm (else the last speculative one)."""
    settings = [s for s in (settings or profile.workload.settings()) if not s.greedy]
    arms = list(profile.arms)
    ar = next((a.id for a in arms if a.kind == "ar"), "ar")
    spec = [(a.id, a.kind, plan(a, profile.runtime.env)) for a in arms if a.kind != "ar"]
    out = []
    for s in settings:
        out.append(Row(ar, "ar", Plan("ar"), s))
        out += [Row(i, kind, p, s) for i, kind, p in spec]
        if planted and spec:
            i, kind, p = next((x for x in spec if x[1] == "tree"), spec[-1])
            out.append(Row(i, kind, p, s, planted=True))
    return out


# -- the draws ----------------------------------------------------------------------------------

@contextmanager
def planted(engine):
    """The bug the check must catch: at every verified node whose drafted child is in the target's support, accept
    that child (the first such, best first) instead of sampling the target there and following its sample. Both
    speculative steps (linear, DDTree) are patched; the root's and every node's sample is biased towards the draft.

    The parent of node m is its latest ancestor in the verify mask (a tree is verified parent-first; linear is
    causal, its parent is m - 1)."""
    from refengine import ddtree, linear
    from refengine.sampling import pick_rows
    seen = {}
    verify = engine.verify

    def spy(ids, positions, visible):
        seen["ids"], seen["visible"] = ids.cpu(), None if visible is None else visible.cpu()
        return verify(ids, positions, visible)

    def biased(logits, reqs, lengths=None):
        choice = pick_rows(logits, reqs, lengths)
        ids, width = seen["ids"], seen["ids"].shape[1]
        visible = seen["visible"]
        if visible is None:
            visible = torch.ones(width, width, dtype=torch.bool).tril().expand(len(reqs), -1, -1)
        for i, r in enumerate(reqs):
            size = width if lengths is None else lengths[i]
            support = probs(logits[i, :size], r.sampling) > 0
            taken = set()
            for m in range(1, size):
                ancestors = visible[i, m, :m].nonzero()
                if not len(ancestors):
                    continue
                parent = int(ancestors.max())
                if parent not in taken and support[parent, ids[i, m]]:
                    choice[i, parent] = ids[i, m]
                    taken.add(parent)
        return choice

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(engine, "verify", spy))
        for module in (ddtree, linear):
            stack.enter_context(mock.patch.object(module, "pick_rows", biased))
        yield


def sample(engine, prompt: list[int], p: Plan, s, seeds: Sequence[int], k: int, stop_ids=(),
           bug: bool = False) -> tuple[Counter, int]:
    """Outcome counts of seeded generations of k tokens, and how many had a first step that accepted a draft."""
    counts, accepted = Counter(), 0
    with planted(engine) if bug else nullcontext():
        for seed in seeds:
            out = engine.generate(prompt, p, ref_sampling(s, seed), max_tokens=k, stop_ids=stop_ids)
            counts[tuple(out.tokens)] += 1
            accepted += bool(out.steps) and out.steps[0].accepted > 0
    return counts, accepted


_WORKER: dict = {}


def _start(target_dir: str, drafter_dir: str, capacity: int) -> None:
    """A worker process: its own pair and engine, one torch thread (the other cores are the other workers')."""
    from refengine.drafter import Drafter
    from refengine.engine import Engine
    from refengine.model import Target
    torch.set_num_threads(1)
    target = Target.from_pretrained(target_dir, torch.float32, "cpu").eval()
    drafter = Drafter.from_pretrained(drafter_dir, torch.float32, "cpu").eval()
    _WORKER["engine"] = Engine(target, drafter, capacity=capacity)


def timed(engine, args) -> tuple[Counter, int, float]:
    t0 = time.perf_counter()
    counts, accepted = sample(engine, *args)
    return counts, accepted, time.perf_counter() - t0


def _task(args) -> tuple[Counter, int, float]:
    return timed(_WORKER["engine"], args)


# -- the check ----------------------------------------------------------------------------------

def choose(target, prompts: Sequence[list[int]], s, k: int, n: int, count: int, stop_ids=()) -> list[int]:
    """Indices of the `count` prompts whose binned k-token law at n draws has the highest entropy (ties: order)."""
    rs = ref_sampling(s)
    h = [entropy(binning(law(target, p, rs, k, MIN_EXPECTED / n, stop_ids), n)[2]) for p in prompts]
    return sorted(sorted(range(len(prompts)), key=lambda i: -h[i])[:count])


def check(target, drafter, prompts: Sequence[list[int]], plan_rows: Sequence[Row], draws: int = DRAWS,
          n_prompts: int = PROMPTS, k: int = K, alpha: float = ALPHA, seed: int = 0, stop_ids=(),
          names: Sequence[str] | None = None, jobs: int = 1, dirs: tuple | None = None) -> pd.DataFrame:
    """One table row per Row (see the module docstring). prompts: token ids; names: their ids for the table.
    jobs > 1 draws in that many processes, which load the pair from dirs = (target_dir, drafter_dir)."""
    from refengine.engine import Engine, verify_width
    if not plan_rows:
        return pd.DataFrame(columns=COLUMNS)
    names = list(names or [str(i) for i in range(len(prompts))])
    n = max(1, draws // n_prompts)
    stop_ids = tuple(stop_ids)
    checked = sum(not r.planted for r in plan_rows)
    row_alpha = alpha / max(checked, 1)
    chosen, laws = {}, {}
    for r in plan_rows:       # the prompts and their laws, once per setting
        if r.sampling.label not in chosen:
            idx = choose(target, prompts, r.sampling, k, n, n_prompts, stop_ids)
            rs = ref_sampling(r.sampling)
            chosen[r.sampling.label] = idx
            laws[r.sampling.label] = [law(target, list(prompts[i]), rs, k, MIN_EXPECTED / n, stop_ids) for i in idx]
    capacity = max(map(len, prompts)) + k + max(verify_width(r.plan) for r in plan_rows) + 1
    # row j's draws at its prompt number u have seeds from seed + (j * n_prompts + u) * n: no two draws share one
    tasks = [(j, i, (list(prompts[i]), r.plan, r.sampling, range(seed + (j * n_prompts + u) * n,
                                                                  seed + (j * n_prompts + u + 1) * n),
                     k, stop_ids, r.planted))
             for j, r in enumerate(plan_rows) for u, i in enumerate(chosen[r.sampling.label])]
    if jobs > 1:
        if dirs is None:
            raise ValueError("jobs > 1 needs the pair's checkpoint directories (dirs)")
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_start,
                                 initargs=(*map(str, dirs), capacity)) as pool:
            results = list(pool.map(_task, [t for _, _, t in tasks]))
    else:
        engine = Engine(target, drafter, capacity=capacity)
        results = [timed(engine, t) for _, _, t in tasks]
    out = []
    for j, r in enumerate(plan_rows):
        mine = [(i, res) for (jj, i, _), res in zip(tasks, results, strict=True) if jj == j]
        out.append(judge(target, prompts, r, mine, laws[r.sampling.label], n, k, row_alpha, stop_ids, names))
    return pd.DataFrame(out, columns=COLUMNS)


def judge(target, prompts, r: Row, results, laws, n: int, k: int, alpha: float, stop_ids, names) -> dict:
    """One row's statistics from its (prompt index, (counts, accepted, seconds)) per prompt."""
    rs = ref_sampling(r.sampling)
    g, df, bins, impossible, accepted, seconds, binned = 0.0, 0, 0, 0, 0, 0.0, []
    for (i, (counts, acc, sec)), p in zip(results, laws, strict=True):
        index, rest, q = binning(p, n)
        obs = np.zeros(len(q))
        for o, c in counts.items():
            obs[index.get(o, rest)] += c
        gi, dfi = g_test(obs, q)
        g, df, bins, binned = g + gi, df + dfi, bins + len(q), binned + [q]
        impossible += sum(counts[o] for o in unlikely(target, prompts[i], counts, p, rs, k, stop_ids))
        accepted, seconds = accepted + acc, seconds + sec
    s, total = r.sampling, n * len(results)
    pv = p_value(g, df)
    w = detectable_w(total, df, alpha)
    return {"arm": r.arm, "kind": r.kind, "sampling": s.label, "temperature": s.temperature, "top_p": s.top_p,
            "top_k": s.top_k, "planted": r.planted, "prompts": len(results),
            "prompt_ids": " ".join(names[i] for i, _ in results), "draws": total, "k": k, "bins": bins, "df": df,
            "statistic": g, "p_value": pv, "alpha": alpha, "detectable_w": w, "detectable_shift": shift(w, binned),
            "accepted_share": math.nan if r.kind == "ar" else accepted / total, "impossible": impossible,
            "verdict": verdict(pv, alpha, df, impossible), "seconds": round(seconds, 2)}


def unlikely(target, prompt, counts: Counter, p: dict, rs: RefSampling, k: int, stop_ids) -> list[tuple]:
    """The drawn outcomes of law probability 0: shorter than k without ending in a stop token, a stop token before
    the end, or a token outside the support (only outcomes below the law's floor need a forward to tell)."""
    bad, rest = [], []
    for o in counts:
        if o in p:
            continue
        early = len(o) < k and (not o or o[-1] not in stop_ids)
        if early or any(t in stop_ids for t in o[:-1]):
            bad.append(o)
        else:
            rest.append(o)
    return bad + [o for o, q in zip(rest, outcome_probs(target, list(prompt), rest, rs), strict=True) if q == 0]


# -- a run, a profile ---------------------------------------------------------------------------

def load(target_dir, drafter_dir, tokenizer_dir=None):
    from refengine.drafter import Drafter
    from refengine.model import Target
    from refengine.tokenizer import Tokenizer
    return (Target.from_pretrained(target_dir, torch.float32, "cpu").eval(),
            Drafter.from_pretrained(drafter_dir, torch.float32, "cpu").eval(),
            Tokenizer.from_pretrained(tokenizer_dir or target_dir))


def check_prompts(profile, target_dir, drafter_dir, prompts, settings=None, planted_row: bool = True,
                  jobs: int = 1, **kw) -> pd.DataFrame:
    """The check for a profile's arms and settings (settings: the profile's when None) on its pair and a list of
    prompts (ddbench.core.prompts.Prompt), rendered with the pair's chat template as the reference server does."""
    from analysis.headroom import spread
    from ddbench.core.profile import repo_path
    tok_dir = repo_path(profile.models.tokenizer) if profile.models.tokenizer else None
    target, drafter, tok = load(target_dir, drafter_dir, tok_dir)
    prompts = spread(list(prompts), CANDIDATES)
    ids = [tok.chat_ids([m.model_dump() for m in p.messages]) for p in prompts]
    stop = () if profile.workload.ignore_eos else tuple(tok.eos_ids)
    return check(target, drafter, ids, rows(profile, settings, planted_row), stop_ids=stop,
                 names=[p.id for p in prompts], jobs=jobs, dirs=(target_dir, drafter_dir), **kw)


def check_profile(profile, settings=None, **kw) -> pd.DataFrame:
    """The check for a profile with no run: its local pair and its prompt set."""
    from ddbench.core.profile import repo_path
    from ddbench.core.prompts import load_prompt_set
    dirs = [repo_path(getattr(profile.models, role)) for role in ("target", "drafter")]
    for d in dirs:
        if not d.is_dir():
            raise ValueError(f"{d} is not a local checkpoint")
    w = profile.workload
    return check_prompts(profile, *dirs, load_prompt_set(w.prompt_set, w.categories or None), settings, **kw)


def check_run(manifest, settings=None, **kw) -> pd.DataFrame:
    """The check for a run: its profile, and the pair and prompt set it recorded (refused when they differ)."""
    from analysis.headroom import checkpoint, run_prompts
    return check_prompts(manifest.profile, checkpoint(manifest, "target"), checkpoint(manifest, "drafter"),
                         run_prompts(manifest, None), settings, **kw)


def write(df: pd.DataFrame, tables_dir: Path) -> list[Path]:
    from ddbench.core.results import write_bytes_atomic
    base = Path(tables_dir) / NAME
    write_bytes_atomic(base.with_suffix(".parquet"), df.to_parquet(index=False))
    write_bytes_atomic(base.with_suffix(".csv"), df.to_csv(index=False).encode())
    return [base.with_suffix(".csv"), base.with_suffix(".parquet")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.sampling_law", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?", help="a run directory (its manifest's profile, pair and prompts)")
    ap.add_argument("--profile", help="a profile instead of a run (its local pair and prompt set); needs --out")
    ap.add_argument("--out", help="tables directory (default RUN_DIR/tables)")
    ap.add_argument("--draws", type=int, default=DRAWS, help="draws per row, over the prompts (default %(default)s)")
    ap.add_argument("--prompts", type=int, default=PROMPTS, help="prompts per setting (default %(default)s)")
    ap.add_argument("--k", type=int, default=K, help="tokens whose joint law is tested (default %(default)s)")
    ap.add_argument("--alpha", type=float, default=ALPHA, help="family alpha, split over rows (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="drawing processes, a thread each (default %(default)s)")
    ap.add_argument("--no-planted", action="store_true", help="leave out the planted-bug control rows")
    ap.add_argument("--temperature", type=float, help="check this setting instead of the profile's T > 0 ones")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--top-k", type=int)
    a = ap.parse_args(argv)
    if (a.run_dir is None) == (a.profile is None):
        ap.error("give a RUN_DIR or --profile, not both")
    if a.profile and not a.out:
        ap.error("--profile needs --out")
    from analysis.read.manifest import ManifestError, load_manifest
    from ddbench.core.profile import ProfileError, Sampling, load_profile
    from ddbench.core.results import RunDir
    torch.set_num_threads(1)
    settings = None if a.temperature is None else [Sampling(temperature=a.temperature, top_p=a.top_p, top_k=a.top_k)]
    kw = dict(draws=a.draws, n_prompts=a.prompts, k=a.k, alpha=a.alpha, seed=a.seed, jobs=a.jobs,
              planted_row=not a.no_planted)
    t0 = time.perf_counter()
    try:
        if a.profile:
            profile = load_profile(a.profile)
            out = Path(a.out)
            df = check_profile(profile, settings, **kw)
        else:
            rd = RunDir.open(a.run_dir)
            m = load_manifest(rd.manifest_path)
            profile, out = m.profile, Path(a.out) if a.out else rd.tables
            df = check_run(m, settings, **kw)
    except (FileNotFoundError, ValueError, ManifestError, ProfileError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - t0
    for path in write(df, out):
        print(path)
    if df.empty:
        print(f"profile '{profile.name}' has no T > 0 setting: nothing to check (give --temperature to check one)")
        return 0
    with pd.option_context("display.width", 220, "display.max_columns", 30, "display.precision", 3):
        print(df.drop(columns=["prompt_ids", "temperature", "top_p", "top_k"]).to_string(index=False))
    print(f"wall {wall:.1f} s, {a.jobs} process(es); prompts: {', '.join(dict.fromkeys(df['prompt_ids']))}")
    for r in df[(df["kind"] != "ar") & (df["accepted_share"] < 0.1)].itertuples():
        print(f"note: {r.arm} at {r.sampling}: {r.accepted_share:.0%} of first steps accepted a draft, so its row "
              "tests little beyond the root's sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
