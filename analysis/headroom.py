"""Drafter diagnosis: how much headroom a DDTree tree has over the chain, from the drafter's own marginals.

Offline, fp32 on the CPU, for a run's own prompts and pair. The target continues each prompt greedily
(T=0); at every `stride`-th position t of that continuation the drafter drafts one block from the true
context (the target's features of every token before the root, the root c[t], then MASKs: exactly the
input Engine.draft gives it after a prefill or verify that committed up to c[t]), and its depth-d
distribution q_d (d = 1..L, L = block_size - 1) is read against the target's token c[t + d]:

  ranks           (a) the rank of the target's token among the drafter's candidates, per depth and
                  pooled (depth 0), bucketed 1, 2, 3-4, 5-8, >8 (shares of the roots)
  first_mismatch  (b) at the first depth where the target's token is not the drafter's rank 1, how often
                  it is a rank 2..K sibling (a tree of top-k K would hold it there), per K
  after_sibling   (c) after the target's token is a sibling at depth d, how often the drafter's rank 1 at
                  d + 1 is the target's token, against the same rate after a rank-1 match (the spine)
  headroom        (d) expected acceptance under the drafter's marginals, chain (L rank-1 nodes) against the
                  best B-node tree of top-k K (refengine.tree.build), and what each accepts in fact
                  along the target's path

Biases to keep in mind when reading these (counterfactuals from one trace are biased):
- The marginals are block-level: q_{d+1} is conditioned on the block's context and the root, never on
  the token drafted at depth d. A tree hangs the same q_{d+1} under every depth-d sibling, so a sibling
  that the target takes is followed by a distribution that was fitted to the drafter's own rank-1 path.
  (c) measures what that costs; (d)'s "expected" columns assume it costs nothing (independence across
  depths, DDTree's objective), and its "accepted" columns show what the target actually does.
- Roots here are every stride-th position, not the positions a run's steps start at (a step starts
  right after the previous one stopped, i.e. where drafting was hard), so these are per-position rates,
  not tokens per step; "accepted" + 1 is a position's commit length, whose mean need not equal a run's tau.
- The greedy continuation is generated max_tokens + L tokens long, so that every root a run could
  step from (t < max_tokens) has all L targets; a stop token (ignore_eos off) ends it early, and then
  roots end L tokens before it.

    python -m analysis.headroom RUN_DIR [--prompts N] [--stride S] [--budgets 15,31,63] [--topk K]

writes RUN_DIR/tables/headroom_{ranks,first_mismatch,after_sibling,trees,setup}.csv.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ddbench.core.results import HEADROOM_FILES
from refengine.tree import Tree, build, walk

# (lowest rank, highest rank, column): the buckets of (a)
BUCKETS = ((1, 1, "rank_1"), (2, 2, "rank_2"), (3, 4, "rank_3_4"), (5, 8, "rank_5_8"), (9, math.inf, "rank_gt_8"))
SHARES = [name for _, _, name in BUCKETS]
DEFAULT_TREES = ((15, 8), (31, 8), (63, 8))   # when a profile has no tree arm and none are asked for
FILES = HEADROOM_FILES
DRAFT_CHUNK = 64   # roots per drafter forward: bounds the [roots, context, features] expansion


# -- (a)-(d) on arrays ------------------------------------------------------------------------

def ranks(logprobs, targets) -> np.ndarray:
    """1-based rank of each target token in its row's distribution (logprobs [..., L, V], targets [..., L]):
    1 + the number of tokens the drafter scores strictly higher (a tie counts in the target's favour)."""
    lp = torch.as_tensor(logprobs)
    t = torch.as_tensor(np.asarray(targets), dtype=torch.long)
    at = lp.gather(-1, t[..., None])
    return ((lp > at).sum(-1) + 1).numpy()


def shares(r: np.ndarray) -> dict[str, float]:
    """Share of the ranks r (any shape) in each bucket; NaN for none."""
    r = np.asarray(r).ravel()
    return {name: float(((r >= lo) & (r <= hi)).mean()) if r.size else math.nan for lo, hi, name in BUCKETS}


def rank_shares(r: np.ndarray) -> pd.DataFrame:
    """(a) Per depth d = 1..L and pooled over depths (depth 0): roots and the share in each rank bucket.
    r: [N, L] ranks, one row per root."""
    r = np.asarray(r).reshape(-1, np.shape(r)[-1])
    rows = [{"depth": d + 1, "roots": len(r), **shares(r[:, d])} for d in range(r.shape[1])]
    rows.insert(0, {"depth": 0, "roots": len(r), **shares(r)})
    return pd.DataFrame(rows, columns=["depth", "roots", *SHARES])


def first_mismatch(r: np.ndarray, topk: int) -> dict:
    """(b) Over the roots whose chain breaks within L (some depth's target is not the drafter's rank 1): at
    the first such depth, the share where the target's token is a rank 2..topk sibling, the mean depth of
    that mismatch, and the rank buckets there. r: [N, L] ranks."""
    r = np.asarray(r)
    miss = r != 1
    broke = miss.any(1)
    depth = miss.argmax(1)[broke]              # 0-based first mismatch of each broken chain
    at = r[broke, depth]
    sibling = int(((at >= 2) & (at <= topk)).sum())
    n = int(broke.sum())
    return {"topk": topk, "roots": len(r), "whole_chain": len(r) - n, "mismatches": n, "sibling": sibling,
            "sibling_share": sibling / n if n else math.nan,
            "mean_depth": float(depth.mean() + 1) if n else math.nan, **shares(at)}


def after_sibling(r: np.ndarray, topk: int) -> pd.DataFrame:
    """(c) After the target's token is a rank 2..topk sibling at depth d, how often the drafter's rank 1 at
    d + 1 is the target's token (sibling_rate), against the same rate after a rank-1 match at d
    (spine_rate); per depth d = 1..L-1 and pooled (depth 0).

    prefix 'spine': only roots whose depths 1..d-1 all matched at rank 1, i.e. the walk reached depth d
    on the spine, so the sibling is the first branch off it and both rates share the prefix; 'any': every
    root, whatever came before d.

    The drafter's depth-(d+1) distribution is conditioned on the block's context and root, not on the
    sibling: the drafter never saw the sibling it is asked to continue. A low sibling_rate against
    spine_rate is that conditioning showing, and it is why counterfactuals from one trace ("a tree would
    have gone on from the sibling") are biased: the marginals promise spine-like continuation after a
    sibling, and the target does not deliver it.
    """
    r = np.asarray(r)
    n, depth = r.shape
    rows = []
    for prefix in ("spine", "any"):
        total = np.zeros(4, dtype=np.int64)
        per = []
        for j in range(depth - 1):                 # j: 0-based depth d - 1
            on = (r[:, :j] == 1).all(1) if prefix == "spine" else np.ones(n, dtype=bool)
            sib = on & (r[:, j] >= 2) & (r[:, j] <= topk)
            spine = on & (r[:, j] == 1)
            nxt = r[:, j + 1] == 1
            counts = np.array([sib.sum(), (sib & nxt).sum(), spine.sum(), (spine & nxt).sum()])
            total += counts
            per.append((j + 1, counts))
        for d, c in [(0, total), *per]:
            rows.append({"topk": topk, "prefix": prefix, "depth": d, "sibling_n": int(c[0]),
                         "sibling_next": int(c[1]), "sibling_rate": c[1] / c[0] if c[0] else math.nan,
                         "spine_n": int(c[2]), "spine_next": int(c[3]),
                         "spine_rate": c[3] / c[2] if c[2] else math.nan})
    return pd.DataFrame(rows)


def grow(values, ids, budget: int, topk: int) -> Tree:
    """The best `budget`-node tree of top-k `topk` from per-depth top-k log-probs (values, ids: [L, >=topk],
    each row sorted best first, as torch.topk gives): refengine.tree.build, the tree the engine verifies."""
    v, i = np.asarray(values, dtype=np.float64)[:, :topk], np.asarray(ids)[:, :topk]
    return build(-1, v.tolist(), i.tolist(), budget)   # the root's token plays no part in the tree's value


def expected(tree: Tree, values, ids) -> float:
    """E[accepted] of a tree under independent per-depth marginals: the sum over its nodes of the product
    of q_depth(token) along the node's path from the root (DDTree's objective)."""
    logq = [dict(zip(row_i, row_v, strict=True)) for row_v, row_i in
            zip(np.asarray(values, dtype=np.float64).tolist(), np.asarray(ids).tolist(), strict=True)]
    score = [0.0] * len(tree.tokens)
    total = 0.0
    for node in range(1, len(tree.tokens)):    # pop order: a parent precedes its children
        score[node] = score[tree.parents[node]] + logq[tree.depths[node] - 1][tree.tokens[node]]
        total += math.exp(score[node])
    return total


def accepted(tree: Tree, targets) -> int:
    """Nodes the target accepts: the walk that follows its tokens (targets [L], depth d's at d - 1)."""
    targets = [int(t) for t in targets]
    choice = [targets[d] if d < len(targets) else -1 for d in tree.depths]
    return len(walk(tree, choice)) - 1


def expected_acceptance(values, ids, budget: int, topk: int) -> float:
    """E[accepted] of the best budget-node, top-k tree (see grow, expected)."""
    return expected(grow(values, ids, budget, topk), values, ids)


def chain_expected(values) -> float:
    """E[accepted] of the chain: the L rank-1 nodes, sum over d of prod_{j<=d} q_j(rank 1)."""
    return float(np.exp(np.cumsum(np.asarray(values, dtype=np.float64)[:, 0])).sum())


def chain_accepted(r) -> int:
    """What the chain accepts: the leading run of rank-1 matches (r: one root's ranks [L])."""
    r = np.asarray(r)
    miss = np.nonzero(r != 1)[0]
    return int(miss[0]) if miss.size else len(r)


def headroom(chain_e, chain_a, tree_e: dict, tree_a: dict) -> pd.DataFrame:
    """(d) Per (budget, topk): the means over roots of the chain's and the tree's expected acceptance, the
    mean per-root ratio tree / chain (the headroom DDTree's objective promises) and the ratio of the means,
    and the same for what each accepts along the target's path. chain_*: [N]; tree_*: {(B, K): [N]}."""
    ce, ca = np.asarray(chain_e, dtype=float), np.asarray(chain_a, dtype=float)
    rows = []
    for (b, k), te in tree_e.items():
        te, ta = np.asarray(te, dtype=float), np.asarray(tree_a[(b, k)], dtype=float)
        n = len(te)
        rows.append({"budget": b, "topk": k, "roots": n,
                     "chain_expected": ce.mean() if n else math.nan, "tree_expected": te.mean() if n else math.nan,
                     "ratio_mean": (te / ce).mean() if n else math.nan,
                     "ratio_of_means": te.mean() / ce.mean() if n else math.nan,
                     "chain_accepted": ca.mean() if n else math.nan, "tree_accepted": ta.mean() if n else math.nan,
                     "accepted_ratio": ta.mean() / ca.mean() if n and ca.mean() else math.nan})
    return pd.DataFrame(rows, columns=["budget", "topk", "roots", "chain_expected", "tree_expected", "ratio_mean",
                                       "ratio_of_means", "chain_accepted", "tree_accepted", "accepted_ratio"])


# -- the models --------------------------------------------------------------------------------

def continue_greedy(target, prompts: Sequence[list[int]], tokens: Sequence[int], stop_ids=()) -> list[list[int]]:
    """The target's T=0 continuation of each prompt, through the reference engine's AR arm."""
    from refengine.engine import Engine
    from refengine.plan import Plan
    engine = Engine(target, None, capacity=max(len(p) + n for p, n in zip(prompts, tokens, strict=True)) + 1)
    return [engine.generate(p, Plan("ar"), max_tokens=n, stop_ids=stop_ids).tokens
            for p, n in zip(prompts, tokens, strict=True)]


def draft_blocks(target, drafter, seq: list[int], roots: Sequence[int], depth: int | None = None) -> torch.Tensor:
    """Drafter log-probs [len(roots), depth, V] of the block rooted at each position p of seq: context = the
    target's features of seq[:p], block = [seq[p], MASK...] at positions p.., output d predicts p + d.

    Engine.draft sees the same context through its KV cache; here one causal target forward gives every
    prefix's features, and a batch of roots shares one drafter forward, each row masked to its own prefix.
    """
    depth = depth or drafter.block_size - 1
    block = drafter.block_size
    with torch.inference_mode():
        ids = torch.tensor([seq])
        _, feats = target(ids, torch.arange(len(seq))[None], layers=drafter.target_layer_ids)
        out = []
        for lo in range(0, len(roots), DRAFT_CHUNK):
            p = torch.tensor(list(roots[lo:lo + DRAFT_CHUNK]))
            n, ctx = len(p), int(p.max())
            tokens = torch.full((n, block), drafter.mask_token_id)
            tokens[:, 0] = ids[0, p]
            positions = torch.cat([torch.arange(ctx).expand(n, ctx), p[:, None] + torch.arange(block)], 1)
            seen = torch.cat([torch.arange(ctx)[None] < p[:, None], torch.ones(n, block, dtype=torch.bool)], 1)
            hidden = drafter(drafter.embed(target, tokens), positions, feats[:, :ctx].expand(n, -1, -1),
                             visible=seen[:, None].expand(-1, block, -1))
            out.append(drafter.logits(target, hidden[:, 1:1 + depth]).float().log_softmax(-1))
    return torch.cat(out) if out else torch.zeros(0, depth, target.config.vocab_size)


@torch.inference_mode()
def measure(target, drafter, prompts: Sequence[tuple[list[int], int]], trees: Sequence[tuple[int, int]],
            stride: int = 1, stop_ids=()) -> dict[str, pd.DataFrame]:
    """(a)-(d) over every stride-th root of each prompt's greedy continuation.

    prompts: (prompt ids, max_tokens) each; trees: (budget, topk) pairs."""
    if stride < 1:
        raise ValueError(f"stride = {stride} must be >= 1")
    depth = drafter.block_size - 1
    trees = list(dict.fromkeys((int(b), min(int(k), target.config.vocab_size)) for b, k in trees))
    kmax = max([k for _, k in trees], default=1)
    conts = continue_greedy(target, [p for p, _ in prompts], [n + depth for _, n in prompts], stop_ids)
    all_ranks, chain_e, chain_a = [], [], []
    tree_e = {t: [] for t in trees}
    tree_a = {t: [] for t in trees}
    for (prompt, n), cont in zip(prompts, conts, strict=True):
        seq = list(prompt) + list(cont)
        # root c[t] at position len(prompt) + t; its L targets c[t+1..t+L] must exist
        roots = [len(prompt) + t for t in range(0, min(n, len(cont) - depth), stride)]
        if not roots:
            continue
        lp = draft_blocks(target, drafter, seq, roots, depth)
        targets = np.array([seq[p + 1:p + 1 + depth] for p in roots])
        r = ranks(lp, targets)
        values, ids = (x.numpy() for x in lp.topk(kmax, dim=-1))
        for i in range(len(roots)):
            chain_e.append(chain_expected(values[i]))
            chain_a.append(chain_accepted(r[i]))
            for b, k in trees:
                tree = grow(values[i], ids[i], b, k)
                tree_e[(b, k)].append(expected(tree, values[i], ids[i]))
                tree_a[(b, k)].append(accepted(tree, targets[i]))
        all_ranks.append(r)
    r = np.concatenate(all_ranks) if all_ranks else np.zeros((0, depth), dtype=np.int64)
    ks = sorted({k for _, k in trees})
    return {"ranks": rank_shares(r),
            "first_mismatch": pd.DataFrame([first_mismatch(r, k) for k in ks]),
            "after_sibling": pd.concat([after_sibling(r, k) for k in ks], ignore_index=True) if ks
            else pd.DataFrame(),
            "headroom": headroom(chain_e, chain_a, tree_e, tree_a),
            "setup": pd.DataFrame([{"prompts": len(prompts), "roots": len(r), "stride": stride, "depth": depth,
                                    "max_tokens": max([n for _, n in prompts], default=0)}])}


def diagnose(target_dir, drafter_dir, prompts, max_tokens: int, budgets: Sequence[int],
             topk: int | Sequence[int] = 8, stride: int = 1, tokenizer_dir=None,
             ignore_eos: bool = True) -> dict[str, pd.DataFrame]:
    """(a)-(d) for a pair's checkpoints and a prompt set's prompts (ddbench.core.prompts.Prompt, or dicts of that
    shape), rendered with the pair's chat template as the reference server renders them (Tokenizer.chat_ids).

    topk: one K for every budget, or one per budget. A prompt's own max_tokens overrides max_tokens."""
    from ddbench.core.prompts import Prompt
    from refengine.drafter import Drafter
    from refengine.model import Target
    from refengine.tokenizer import Tokenizer
    ks = [topk] * len(budgets) if isinstance(topk, int) else list(topk)
    if len(ks) != len(budgets):
        raise ValueError(f"{len(ks)} top-k values for {len(budgets)} budgets: give one, or one per budget")
    tok = Tokenizer.from_pretrained(tokenizer_dir or target_dir)
    target = Target.from_pretrained(target_dir, torch.float32, "cpu").eval()
    drafter = Drafter.from_pretrained(drafter_dir, torch.float32, "cpu").eval()
    prompts = [Prompt.model_validate(p) if isinstance(p, dict) else p for p in prompts]
    ids = [(tok.chat_ids([m.model_dump() for m in p.messages]), p.max_tokens or max_tokens) for p in prompts]
    stop = () if ignore_eos else tuple(tok.eos_ids)
    return measure(target, drafter, ids, list(zip(budgets, ks, strict=True)), stride, stop)


# -- the CLI -----------------------------------------------------------------------------------

def spread(prompts: list, n: int | None) -> list:
    """n prompts taken round-robin over the categories (in file order), so a few still cover every kind."""
    if n is None or n >= len(prompts):
        return list(prompts)
    by: dict[str, list] = {}
    for p in prompts:
        by.setdefault(p.category, []).append(p)
    order = []
    for i in range(max(map(len, by.values()))):
        order += [g[i] for g in by.values() if i < len(g)]
    picked = set(map(id, order[:n]))
    return [p for p in prompts if id(p) in picked]


def run_trees(profile, budgets: list[int] | None, topk: int | None) -> list[tuple[int, int]]:
    """(budget, topk) pairs: those asked for, else the profile's tree arms', else DEFAULT_TREES."""
    arms = [(a.tree_budget, a.tree_topk) for a in profile.arms if a.kind == "tree"] or list(DEFAULT_TREES)
    k = topk or arms[0][1]
    if budgets:
        return [(b, k) for b in budgets]
    return list(dict.fromkeys((b, topk or kk) for b, kk in arms))


def run_prompts(manifest, n: int | None) -> list:
    """The run's prompts, checked against the manifest's digest of the prompt set."""
    from ddbench.core.prompts import load_prompt_set, prompt_set_digest, prompt_set_label
    w = manifest.profile.workload
    if manifest.prompt_set_digest and prompt_set_digest(w.prompt_set) != manifest.prompt_set_digest:
        raise ValueError(f"{prompt_set_label(w.prompt_set)} is not the prompt set the run used "
                         f"(sha256 {manifest.prompt_set_digest[:12]}... in the manifest)")
    return spread(load_prompt_set(w.prompt_set, w.categories or None), n)


def checkpoint(manifest, role: str) -> Path:
    """A local checkpoint of the run's pair, refused when its contents are not the ones the run recorded."""
    from ddbench.core.manifest import checkpoint_digest
    from ddbench.core.profile import repo_path
    name = getattr(manifest.profile.models, role)
    path = repo_path(name) if name else None
    if path is None or not path.is_dir():
        raise ValueError(f"the {role} {name} is not a local checkpoint")
    want = manifest.weights(role)
    if want and checkpoint_digest(path)["sha256"] != want:
        raise ValueError(f"{name} here is not the {role} the run used (sha256 {want[:12]}... in the manifest)")
    return path


def write(tables: dict[str, pd.DataFrame], tables_dir: Path) -> list[Path]:
    from ddbench.core.results import write_text_atomic
    out = []
    for key, df in tables.items():
        path = Path(tables_dir) / FILES[key]
        write_text_atomic(path, df.to_csv(index=False))
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.headroom", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--prompts", type=int, help="only N prompts, round-robin over categories (default: all)")
    ap.add_argument("--stride", type=int, default=1, help="every S-th position is a root (default %(default)s)")
    ap.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")],
                    help="tree budgets, comma-separated (default: the profile's tree arms')")
    ap.add_argument("--topk", type=int, help="tree top-k (default: the profile's tree arms')")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s)")
    a = ap.parse_args(argv)
    from analysis.read.manifest import ManifestError, load_manifest
    from ddbench.core.profile import repo_path
    from ddbench.core.results import RunDir
    torch.set_num_threads(a.threads)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        rd = RunDir.open(a.run_dir)
        m = load_manifest(rd.manifest_path)
        prompts = run_prompts(m, a.prompts)
        trees = run_trees(m.profile, a.budgets, a.topk)
        models = m.profile.models
        tables = diagnose(checkpoint(m, "target"), checkpoint(m, "drafter"), prompts, m.profile.workload.max_tokens,
                          [b for b, _ in trees], [k for _, k in trees], a.stride,
                          repo_path(models.tokenizer) if models.tokenizer else None, m.profile.workload.ignore_eos)
    except (FileNotFoundError, ValueError, ManifestError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    tables["setup"] = tables["setup"].assign(cpu_s=round(cpu, 2), wall_s=round(wall, 2), threads=a.threads)
    for path in write(tables, rd.tables):
        print(path)
    s = tables["setup"].iloc[0]
    print(f"{int(s.prompts)} prompts, {int(s.roots)} roots (stride {int(s.stride)}), depth {int(s.depth)}: "
          f"CPU {cpu:.1f} s, wall {wall:.1f} s, {a.threads} thread(s)")
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
        for key in ("ranks", "first_mismatch", "headroom"):
            print(f"\n{key}\n{tables[key].to_string(index=False)}")
        sib = tables["after_sibling"]
        print(f"\nafter_sibling (pooled)\n{sib[sib.depth == 0].to_string(index=False)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
