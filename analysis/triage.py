"""Triage of T=0 divergences: a numerical near-tie, or a bug?

In bf16 a speculative arm may legitimately pick a different greedy token than AR where the
target's two best logits are nearly equal: verify batches tokens differently, and rounding
decides the tie. Anywhere else a different token is a bug. For every request whose T=0 output
differs from its reference's output for the same prompt (reference: the ar arm's most frequent
output, for every arm; and for a chain arm also the linear arm of its block size, "chain equals
linear"), this module

  1. finds the first differing output token: the records' output_token_ids where the server
     returned them, else both texts re-tokenized with the pair's tokenizer, each token the best-ranked
     one that spells the text on where the encoding is not the target's argmax (retokenize: generated
     splits the tokenizer would not choose); the table says which. Text fixes characters, not tokens:
     where the re-tokenized difference is a failure, the near-tied split of the same characters up to
     LOOKBACK positions before it, if any, is the divergence (earlier_split);
  2. re-scores the prompt (rendered by the reference engine's chat template code, as its server
     renders it) + the shared prefix with the target in fp32 on the CPU (the reference engine's
     own model code: it serves SGLang runs of our pair too), one forward per distinct reference
     output (causal: its logits at position p are the prefix's), cached;
  3. takes the target's top-1/top-2 logit gap there, the tokens each side chose, their ranks, and
     the margin: the top-1 logit minus the lower of the two chosen tokens' logits, i.e. how far
     rounding had to move a logit for the two sides to choose as they did. It is the gap when
     the two sides chose the target's top two tokens (all but one of the 61 divergences of the
     committed h200-tiny run). A twin run (refengine/twin.py) is re-scored with the pair it was
     built from, whose fp32 logits the twin's equal.

Verdicts (per distinct divergent output; counts weight them by requests):
  numerical tie  margin < THRESHOLD. A side's token outside the target's top two is a tie only
                 so: then the top three or more lie within THRESHOLD of each other (in h200-tiny,
                 ar's bf16 greedy pick was the fp32 #3, 0.055 below the #1), and rounding of that
                 size reorders any of them. The row shows the ranks.
  failure        margin >= THRESHOLD (a token the target does not nearly prefer); or the outputs
                 agree token for token and differ only in length (ignore_eos fixes the length:
                 not a numerical effect).

THRESHOLD is fixed here, never tuned per run: the 5th percentile of the fp32 top-1/top-2 gap
over every position of the shipped target's greedy continuations of the shipped chat prompts
(derive_threshold; `python -m analysis.triage derive-threshold`). A target other than the shipped
one is judged by the same constant; the report says where it comes from.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.read.manifest import twin
from analysis.trust.correctness import T_ONLY, greedy_arms

# 5th percentile of the fp32 top-1/top-2 logit gap over all 46 x 128 = 5,888 positions of the shipped
# target's (models/qwen3-stdlib-13m) greedy continuations of loadtests/prompts/chat.jsonl, 128 tokens
# each, CPU: `python -m analysis.triage derive-threshold` printed 0.1897 (logits); rounded to 2 decimals.
THRESHOLD = 0.19
THRESHOLD_QUANTILE = 0.05
THRESHOLD_MODEL = "models/qwen3-stdlib-13m"
THRESHOLD_PROMPTS = "loadtests/prompts/chat.jsonl"
THRESHOLD_TOKENS = 128
THRESHOLD_COMMAND = "python -m analysis.triage derive-threshold"
THRESHOLD_SOURCE = (f"{100 * THRESHOLD_QUANTILE:.0f}th percentile of the fp32 top-1/top-2 logit gap over every "
                    f"position of the greedy continuations of {THRESHOLD_PROMPTS} by {THRESHOLD_MODEL} "
                    f"({THRESHOLD_TOKENS} tokens each, CPU)")
# re-tokenized text: how many positions before its first difference a near-tied split of the same characters
# is looked for (earlier_split)
LOOKBACK = 4
# a target larger than this is not re-scored on a CPU in fp32 (n/a, with the reason)
MAX_TARGET_BYTES = 4 * 2**30

LOSSLESS, CHAIN = "lossless", "chain equals linear"
TIE, FAILURE = "numerical tie", "failure"
SERVER, RETOKENIZED = "server ids", "re-tokenized"
COUNT_COLUMNS = ["comparison", "arm", "reference", "compared", "identical", "ties", "failures", "divergent_outputs",
                 "token_source", "largest_gap", "largest_margin", "largest_tie_margin"]
COLUMNS = ["comparison", "arm", "reference", "prompt_id", "requests", "token_source", "position", "ref_len",
           "arm_len", "ref_token", "arm_token", "ref_text", "arm_text", "top1", "top2", "top1_text", "top2_text",
           "gap", "margin", "ref_rank", "arm_rank", "verdict", "why"]


@dataclass
class Triage:
    counts: pd.DataFrame                    # per (comparison, arm)
    divergences: pd.DataFrame               # one row per distinct divergent output
    position_gaps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # every position of the ar references
    note: str | None = None                 # why nothing was triaged (None: it was, or nothing diverged)
    threshold: float = THRESHOLD
    source: str = THRESHOLD_SOURCE

    def row(self, comparison: str, arm: str) -> dict | None:
        c = self.counts
        m = c[(c["comparison"] == comparison) & (c["arm"] == arm)] if len(c) else c
        return m.iloc[0].to_dict() if len(m) else None

    def failures(self, comparison: str | None = None, arm: str | None = None) -> pd.DataFrame:
        d = self.divergences
        if d.empty:
            return d
        keep = d["verdict"] == FAILURE
        if comparison is not None:
            keep &= d["comparison"] == comparison
        if arm is not None:
            keep &= d["arm"] == arm
        return d[keep]

    def verdict(self, comparison: str, arm: str) -> tuple[bool, str] | None:
        """(every divergence a numerical tie, evidence) for a trust check; None when not triaged."""
        r = self.row(comparison, arm)
        if r is None or self.note is not None:
            return None
        bad = self.failures(comparison, arm)
        ties = int(r["ties"])
        ev = (f"{r['identical']} of {r['compared']} outputs equal {r['reference']}'s; {ties} differ at a numerical tie "
              f"(fp32 logit margin < {self.threshold:g}")
        ev += f", largest {r['largest_tie_margin']:.3f})" if ties else ")"
        if bad.empty:
            return True, ev
        listed = "; ".join(f"{d.prompt_id} token {d.position} gap {d.gap:.3f}: {d.why} ({d.requests} req.)"
                           for d in bad.sort_values("margin", ascending=False).head(5).itertuples())
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        return False, ev + f"; {int(r['failures'])} fail: {listed}{more}"


def empty(note: str | None = None) -> Triage:
    return Triage(pd.DataFrame(columns=COUNT_COLUMNS), pd.DataFrame(columns=COLUMNS), note=note)


def pairs(profile) -> list[tuple[str, str, str]]:
    """(comparison, arm, reference arm): every arm against the first ar arm; every chain arm also against
    the linear arm of its block size (the one with the same CUDA-graph setting when there are several)."""
    arms = greedy_arms(profile)     # at T>0 outputs differ by design
    ar = [a for a in arms if a.kind == "ar"]
    out = [(LOSSLESS, a.id, ar[0].id) for a in arms] if ar else []
    for c in (a for a in arms if a.kind == "chain"):
        lin = [a for a in arms if a.kind == "linear" and a.block_size == c.block_size]
        same = [a for a in lin if profile.cuda_graphs(a) == profile.cuda_graphs(c)]
        if lin:
            out.append((CHAIN, c.id, (same or lin)[0].id))
    return out


def first_difference(ref: list[int], arm: list[int]) -> int | None:
    """Index of the first differing token; len of the shorter when one is a prefix of the other; None if equal."""
    n = min(len(ref), len(arm))
    for i in range(n):
        if ref[i] != arm[i]:
            return i
    return None if len(ref) == len(arm) else n


def triage(run, req: pd.DataFrame, scorer=None) -> Triage:
    """The analysis stage's entry: every divergence of the run's T=0 outputs, triaged.

    scorer (tests) stands in for the target: an object with .tokenizer and .score(prompt_ids, output_ids)
    (see Scorer); by default the run's target is loaded when the first divergence needs it."""
    todo = pairs(run.profile)
    ok, why = _greedy_outputs(run.profile, req, todo)
    if ok is None:
        return empty(why)
    state = _State(run, scorer)
    counts, found = [], []
    for comparison, arm, ref_arm in todo:
        mine = ok[ok["arm"] == arm]
        refs = _references(ok[ok["arm"] == ref_arm])
        mine = mine[mine["prompt_id"].isin(list(refs))]
        if mine.empty:
            continue
        rows, sources = _diverged(state, mine, refs, comparison, arm, ref_arm)
        if state.note:
            return empty(state.note)
        found += [d for _, _, d in rows if d is not None]
        counts.append(_count(comparison, arm, ref_arm, rows, sources))
    if found:
        state.ensure_positions(ok, [r for c, _, r in todo if c == LOSSLESS][:1])
    div = pd.DataFrame(found, columns=COLUMNS)
    return Triage(pd.DataFrame(counts, columns=COUNT_COLUMNS), div, state.positions(), state.note)


def _greedy_outputs(p, req: pd.DataFrame, todo: list) -> tuple[pd.DataFrame | None, str]:
    """The finished requests of the greedy arms, with their text and ids as tuples; or None and why not."""
    if not greedy_arms(p):
        return None, T_ONLY
    if not todo:
        return None, "the profile has no ar arm to compare against"
    ok = req[req["ok"].to_numpy(dtype=bool)]
    ok = ok[ok["arm"].isin([a.id for a in greedy_arms(p)])]
    if ok.empty:
        return None, "no request finished"
    if (ok["temperature"] != 0).any():
        return None, "sampling at temperature > 0: outputs may differ by design"
    cols = ["arm", "prompt_id", "text", "output_token_ids", "completion_tokens"]
    ok = ok[[c for c in cols if c in ok]].copy()
    if "output_token_ids" not in ok:
        ok["output_token_ids"] = None
    ok["arm"], ok["prompt_id"] = ok["arm"].astype(str), ok["prompt_id"].astype(str)
    ok["text"] = ok["text"].astype(str)
    ok["ids"] = [_ids(v) for v in ok["output_token_ids"].tolist()]
    return ok, ""


def _diverged(state, mine: pd.DataFrame, refs: dict, comparison: str, arm: str, ref_arm: str):
    """Each distinct output of one arm against its reference: (verdict, requests, divergence or None) rows and
    where each output's tokens came from; stops at the first note of the state (the target cannot score)."""
    groups: dict[tuple, int] = {}
    for key in zip(mine["prompt_id"], mine["text"], mine["ids"], strict=True):
        groups[key] = groups.get(key, 0) + 1
    rows, sources = [], []
    for (prompt, text, ids), n in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        ref_text, ref_ids = refs[prompt]
        server = ids is not None and ref_ids is not None
        sources.append((SERVER if server else RETOKENIZED, n))
        if (ids == ref_ids) if server else (text == ref_text):
            rows.append(("identical", n, None))
            continue
        d = state.divergence(prompt, ref_text, ref_ids, text, ids, server)
        if state.note:
            break
        if d is None:       # the texts differ, their re-tokenizations do not (cannot happen; be safe)
            rows.append(("identical", n, None))
            continue
        d.update(comparison=comparison, arm=arm, reference=ref_arm, prompt_id=prompt, requests=n)
        rows.append((d["verdict"], n, d))
    return rows, sources


def _ids(v) -> tuple[int, ...] | None:
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return None
    return tuple(int(i) for i in v)


def _references(rows: pd.DataFrame) -> dict[str, tuple[str, tuple[int, ...] | None]]:
    """prompt -> (the most frequent text, its ids when every request with that text carries the same ids)."""
    out = {}
    for prompt, g in rows.groupby("prompt_id", sort=True):
        text = g["text"].value_counts().index[0]
        ids = g.loc[g["text"] == text, "ids"].tolist()
        out[prompt] = (text, ids[0] if ids and all(i is not None and i == ids[0] for i in ids) else None)
    return out


def _count(comparison, arm, ref_arm, rows, sources) -> dict:
    n = sum(k for _, k, _ in rows)
    ties = [d for v, _, d in rows if v == TIE]
    divs = [d for _, _, d in rows if d is not None]
    by = pd.DataFrame(sources, columns=["s", "n"]).groupby("s")["n"].sum()
    source = by.index[0] if len(by) == 1 else ", ".join(f"{k}: {v}" for k, v in by.items())
    return {"comparison": comparison, "arm": arm, "reference": ref_arm, "compared": n,
            "identical": sum(k for v, k, _ in rows if v == "identical"),
            "ties": sum(k for v, k, _ in rows if v == TIE), "failures": sum(k for v, k, _ in rows if v == FAILURE),
            "divergent_outputs": len(divs), "token_source": source,
            "largest_gap": _max(d["gap"] for d in divs), "largest_margin": _max(d["margin"] for d in divs),
            "largest_tie_margin": _max(d["margin"] for d in ties)}


def _max(values) -> float:
    return max((v for v in values if v == v), default=np.nan)


class _State:
    """The scorer (loaded at the first divergence), prompts, and the re-score cache."""

    def __init__(self, run, scorer):
        self.run, self.scorer, self.note = run, scorer, None
        self.prompts: dict[str, list[int]] | None = None
        self.cache: dict[tuple, dict] = {}      # (prompt ids, output ids) -> scores
        self.aligned: dict[tuple, list[int]] = {}   # (prompt, text) -> its re-tokenization
        self.scored_refs: dict[tuple, np.ndarray] = {}

    def _ready(self) -> bool:
        if self.note:
            return False
        if self.scorer is None:
            try:
                self.scorer = Scorer.for_run(self.run)
            except TriageUnavailable as e:
                self.note = str(e)
                return False
        if self.prompts is None:
            try:
                self.prompts = prompt_ids(self.run, self.scorer.tokenizer)
            except TriageUnavailable as e:
                self.note = str(e)
                return False
        return True

    def tokens(self, prompt: str, text: str, ids) -> list[int]:
        if ids is not None:
            return list(ids)
        if (prompt, text) not in self.aligned:
            self.aligned[(prompt, text)] = retokenize(text, self.prompts[prompt], self.scorer, self.score_ids)
        return self.aligned[(prompt, text)]

    def score_ids(self, prompt_ids: list[int], out: list[int]) -> dict:
        key = (tuple(prompt_ids), tuple(out))
        if key not in self.cache:
            self.cache[key] = self.scorer.score(list(prompt_ids), list(out))
        return self.cache[key]

    def score(self, prompt: str, out: list[int]) -> dict:
        return self.score_ids(self.prompts[prompt], out)

    def divergence(self, prompt, ref_text, ref_ids, text, ids, server) -> dict | None:
        if not self._ready():
            return {}
        if prompt not in self.prompts:
            self.note = f"prompt '{prompt}' of the records is not in the run's prompt set"
            return {}
        ref = self.tokens(prompt, ref_text, ref_ids if server else None)
        arm = self.tokens(prompt, text, ids if server else None)
        pos = first_difference(ref, arm)
        if pos is None:
            return None
        rows = self.score(prompt, ref)["rows"]
        d = judge(self.scorer.tokenizer, rows, ref, arm, pos, server)
        if not server and d["verdict"] == FAILURE:
            d = earlier_split(self.scorer.tokenizer, rows, ref, text, pos, len(arm)) or d
        return d

    def ensure_positions(self, ok: pd.DataFrame, ref_arms: list[str]) -> None:
        """Gaps at every position of the ar references (one forward each, cached): the run's own
        gap distribution, which the divergences' gaps are read against."""
        if not ref_arms or not self._ready():
            return
        for prompt, (text, ids) in _references(ok[ok["arm"] == ref_arms[0]]).items():
            if prompt in self.prompts:
                out = self.tokens(prompt, text, ids)
                self.scored_refs[(prompt, tuple(out))] = self.score(prompt, out)["gaps"]

    def positions(self) -> np.ndarray:
        return np.concatenate(list(self.scored_refs.values())) if self.scored_refs else np.zeros(0)


def margin(at: np.ndarray, a: int, b: int) -> float:
    """How far the lower of two chosen tokens lies below the target's top-1 logit (at: its logits there)."""
    return float(at.max() - min(at[a], at[b]))


def judge(tok, rows: np.ndarray, ref: list[int], arm: list[int], pos: int, server: bool,
          arm_len: int | None = None) -> dict:
    """The divergence at output position pos (rows: the target's logits on the reference, row p predicting
    output token p; pos == len(ref): the one after it), with its verdict."""
    at = rows[pos]
    top1, top2 = (int(i) for i in np.argsort(-at, kind="stable")[:2])
    rank = lambda t: int((at > at[t]).sum()) + 1  # noqa: E731
    r_tok = ref[pos] if pos < len(ref) else None
    a_tok = arm[pos] if pos < len(arm) else None
    chosen = [t for t in (r_tok, a_tok) if t is not None]
    d = {"token_source": SERVER if server else RETOKENIZED, "position": pos, "ref_len": len(ref),
         "arm_len": len(arm) if arm_len is None else arm_len, "ref_token": r_tok, "arm_token": a_tok,
         "ref_text": tok.decode([r_tok]) if r_tok is not None else "", "arm_text":
         tok.decode([a_tok]) if a_tok is not None else "", "top1": top1, "top2": top2,
         "top1_text": tok.decode([top1]), "top2_text": tok.decode([top2]), "gap": float(at[top1] - at[top2]),
         "margin": margin(at, *chosen) if len(chosen) == 2 else np.nan,
         "ref_rank": rank(r_tok) if r_tok is not None else None,
         "arm_rank": rank(a_tok) if a_tok is not None else None}
    d["verdict"], d["why"] = classify(d, server)
    return d


def earlier_split(tok, rows: np.ndarray, ref: list[int], text: str, pos: int, arm_len: int,
                  lookback: int = LOOKBACK, limit: int = 64) -> dict | None:
    """Re-tokenized text fixes the characters, not the tokens: a server that took a near-tied token a few
    positions before the re-tokenized difference writes the same text (ar's '\\n' then 'from' against an arm's
    '\\n\\n' then '\\n' then 'class', 0.007 apart, re-tokenizes as '\\n' then '\\n' against 'from', 1.7
    apart). The most favourable reading that the arm's text allows: at each of the `lookback` positions up to
    pos, each of the target's `limit` best tokens other than the reference's that spells the arm's text on;
    the divergence with the smallest margin, where it is a tie (None where none is)."""
    best = None   # (margin, position, token)
    for p in range(max(0, pos - lookback), min(pos, len(ref) - 1) + 1):
        at = rows[p]
        for t in np.argsort(-at, kind="stable")[:limit]:
            t = int(t)
            if t == ref[p] or spells(tok, ref, p, text, t) is None:
                continue
            m = margin(at, ref[p], t)   # judge's, without its decoding
            if m < THRESHOLD and (best is None or m < best[0]):
                best = (m, p, t)
    if best is None:
        return None
    _, p, t = best
    d = judge(tok, rows, ref, ref[:p] + [t], p, False, arm_len)
    d["why"] += f"; split as the arm's text allows, {pos - p} token(s) before the encoding's"
    return d


def classify(d: dict, server: bool) -> tuple[str, str]:
    """The verdict on one divergence, and why (see the module's docstring)."""
    if d["ref_token"] is None or d["arm_token"] is None:
        longer = "the arm's" if d["arm_token"] is not None else "the reference's"
        return FAILURE, (f"the outputs agree on {d['position']} tokens and differ only in length "
                         f"({d['ref_len']} vs {d['arm_len']}; {longer} is longer)")
    notes = [f"the {side}'s token is the target's #{r}" for side, r in
             (("reference", d["ref_rank"]), ("arm", d["arm_rank"])) if r > 2]
    if not server:   # a verdict on ids the server did not return says so, wherever it is read
        notes.append("ids re-tokenized from text")
    where = f" ({'; '.join(notes)})" if notes else ""
    if d["margin"] >= THRESHOLD:
        return FAILURE, f"margin {d['margin']:.3f} >= {THRESHOLD:g}{where}"
    return TIE, f"margin {d['margin']:.3f} < {THRESHOLD:g}{where}"


def spelled(tok, ids: list[int], pos: int, text: str, row: np.ndarray, limit: int = 64) -> int | None:
    """Of the target's `limit` best-ranked tokens at output position pos (row: its logits there), the first
    that spells `text` on from ids[:pos]; None if none does."""
    return next((int(t) for t in np.argsort(-row, kind="stable")[:limit] if spells(tok, ids, pos, text, int(t))),
                None)


def spells(tok, ids: list[int], pos: int, text: str, t: int) -> str | None:
    """ids[:pos] + [t] decoded, where it is a longer prefix of `text` than ids[:pos] alone; else None."""
    head = tok.decode(ids[:pos] + [t])
    return head if len(head) > len(tok.decode(ids[:pos])) and text.startswith(head) else None


def retokenize(text: str, prompt: list[int], scorer, score=None, limit: int = 64) -> list[int]:
    """The ids of a generated text whose ids were not recorded, split as a greedy server would have: the
    tokenizer's encoding, then, wherever the target's fp32 argmax differs from the encoded token, the
    best-ranked token that spells the text on from there (`spelled`; the model generated another split of the
    same characters: ')' then '(' re-tokenizes as ')(', a token the target ranks far down), the rest encoded
    again; until every token is the best-ranked one that spells its text. One forward per change (score: a
    caching stand-in for scorer.score)."""
    tok, score = scorer.tokenizer, score or scorer.score
    ids = tok.encode(text)
    for _ in range(limit):
        rows = score(prompt, ids)["rows"][: len(ids)]
        best = rows.argmax(axis=1) if len(ids) else np.zeros(0, dtype=int)
        for i in np.nonzero(best != np.asarray(ids, dtype=int))[0]:
            a = spelled(tok, ids, int(i), text, rows[i])
            if a is not None and a != ids[i]:
                head = spells(tok, ids, int(i), text, a)
                ids = ids[:i] + [a] + tok.encode(text[len(head):])
                break
        else:
            return ids
    return ids


class TriageUnavailable(RuntimeError):
    """The target cannot be re-scored here; the message says why."""


def prompt_ids(run, tokenizer) -> dict[str, list[int]]:
    """Every prompt of the run's prompt set as the server's token ids (refengine's chat template code)."""
    from ddbench.core.prompts import PromptSetError, load_prompt_set, prompt_set_digest, prompt_set_label
    prompt_set = run.profile.workload.prompt_set
    try:
        prompts = load_prompt_set(prompt_set)
    except PromptSetError as e:
        raise TriageUnavailable(f"cannot read the prompt set: {e}") from None
    want = run.manifest.prompt_set_digest
    if want and prompt_set_digest(prompt_set) != want:
        raise TriageUnavailable(f"{prompt_set_label(prompt_set)} is not the prompt set the run used "
                                f"(sha256 {want[:12]}... in the manifest)")
    return {p.id: tokenizer.chat_ids([m.model_dump() for m in p.messages]) for p in prompts}


def twin_source(run) -> Path | None:
    """The target a twin run is re-scored with: the pair the twin was built from. A twin's fp32 logits over
    the pair's vocabulary are the pair's (refengine/twin.py; its padded tokens never win), so the 13M target
    stands in for the 8B-shaped one, checked file by file against the digests the twin recorded of it.
    None for a run that served no twin."""
    rec = twin(run.manifest)
    if rec is None:
        return None
    from refengine.twin import PAIR_TARGET, dir_digests
    want = (rec.get("pair") or {}).get("target") or {}
    have = dir_digests(PAIR_TARGET) if PAIR_TARGET.is_dir() else {}
    changed = sorted(f for f, sha in want.items() if have.get(f) != sha)
    if not want or changed:
        raise TriageUnavailable(f"the twin's source target {PAIR_TARGET} here is not the one it was built from "
                                f"({', '.join(changed) or 'no digests recorded'})")
    return PAIR_TARGET


class Scorer:
    """The target in fp32 on the CPU (the reference engine's Target) and the pair's tokenizer."""

    def __init__(self, target, tokenizer):
        self.target, self.tokenizer = target, tokenizer

    @classmethod
    def load(cls, model: str | Path, tokenizer: str | Path | None = None) -> Scorer:
        import torch

        from refengine.model import Target
        from refengine.tokenizer import Tokenizer
        return cls(Target.from_pretrained(model, dtype=torch.float32, device="cpu"),
                   Tokenizer.from_pretrained(tokenizer or model))

    @classmethod
    def for_run(cls, run) -> Scorer:
        from ddbench.core.manifest import checkpoint_digest
        from ddbench.core.profile import repo_path
        twin = twin_source(run)
        if twin is not None:
            return cls.load(twin)
        m = run.profile.models
        if not m.target:
            raise TriageUnavailable("the profile names no target (backend 'external'): nothing to re-score with")
        path = repo_path(m.target)
        if not path.is_dir():
            raise TriageUnavailable(f"the target {m.target} is not a local checkpoint: nothing to re-score with")
        size = sum(f.stat().st_size for f in path.glob("*.safetensors"))
        if size > MAX_TARGET_BYTES:
            raise TriageUnavailable(f"the target {m.target} ({size / 2**30:.1f} GiB) is too large to re-score "
                                    f"in fp32 on a CPU (limit {MAX_TARGET_BYTES / 2**30:.0f} GiB)")
        want = run.manifest.weights("target")
        if want and checkpoint_digest(path)["sha256"] != want:
            raise TriageUnavailable(f"{m.target} here is not the target the run used (contents sha256 "
                                    f"{want[:12]}... in the manifest)")
        try:
            return cls.load(path, repo_path(m.tokenizer) if m.tokenizer else None)
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            raise TriageUnavailable(f"cannot load {m.target} with the reference engine: {e}") from None

    def score(self, prompt: list[int], out: list[int]) -> dict:
        """One fp32 forward over prompt + out: 'rows' [len(out) + 1, V] are the logits predicting output
        tokens 0..len(out) (numpy), 'gaps' the top-1/top-2 gap at each output position."""
        import torch
        ids = list(prompt) + list(out)
        with torch.inference_mode():
            logits, _ = self.target(torch.tensor([ids]), torch.arange(len(ids))[None])
        rows = logits[0, len(prompt) - 1:].float().numpy()
        top = np.sort(rows[: len(out)], axis=1)[:, -2:] if out else np.zeros((0, 2))
        return {"rows": rows, "gaps": top[:, 1] - top[:, 0]}


def greedy(target, prompts: list[list[int]], tokens: int) -> list[list[int]]:
    """The target's greedy continuations (no stop token), all prompts in one batch through the
    reference engine's AR step."""
    from refengine import ar
    from refengine.engine import Engine
    from refengine.plan import Plan
    from refengine.request import Request
    from refengine.sampling import Sampling
    engine = Engine(target, None, capacity=max(map(len, prompts)) + tokens + 1, batch=len(prompts))
    reqs = [Request(list(p), Sampling(), tokens, frozenset()) for p in prompts]
    for row, r in enumerate(reqs):
        engine.prefill(r, False, row=row)
    engine.use_rows(len(reqs))
    plan = Plan("ar")
    while not all(r.done for r in reqs):
        ar.step(engine, reqs, plan)
    return [r.tokens for r in reqs]


def continuations(scorer: Scorer, prompts: str | Path = THRESHOLD_PROMPTS,
                  tokens: int = THRESHOLD_TOKENS) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt ids, greedy continuation ids) of every prompt of a prompt set, fp32 on the CPU."""
    import torch

    from ddbench.core.profile import repo_path
    from ddbench.core.prompts import load_prompts
    ids = [scorer.tokenizer.chat_ids([m.model_dump() for m in p.messages])
           for p in load_prompts(repo_path(str(prompts)))]
    with torch.inference_mode():
        return ids, greedy(scorer.target, ids, tokens)


def derive_threshold(model: str | Path = THRESHOLD_MODEL, prompts: str | Path = THRESHOLD_PROMPTS,
                     tokens: int = THRESHOLD_TOKENS, quantile: float = THRESHOLD_QUANTILE,
                     scorer: Scorer | None = None, continued=None) -> tuple[float, np.ndarray]:
    """(the quantile, every gap): fp32 top-1/top-2 gaps at every position of the target's greedy
    continuations of the prompt set (continued: continuations() already made), each re-scored in one
    forward as a divergence is."""
    from ddbench.core.profile import repo_path
    scorer = scorer or Scorer.load(repo_path(str(model)))
    ids, outs = continued or continuations(scorer, prompts, tokens)
    gaps = np.concatenate([scorer.score(p, o)["gaps"] for p, o in zip(ids, outs, strict=True)])
    return float(np.quantile(gaps, quantile)), gaps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.triage", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("derive-threshold", help="recompute THRESHOLD from its definition")
    d.add_argument("--model", default=THRESHOLD_MODEL)
    d.add_argument("--prompts", default=THRESHOLD_PROMPTS)
    d.add_argument("--tokens", type=int, default=THRESHOLD_TOKENS)
    d.add_argument("--quantile", type=float, default=THRESHOLD_QUANTILE)
    a = ap.parse_args(argv)
    value, gaps = derive_threshold(a.model, a.prompts, a.tokens, a.quantile)
    qs = np.quantile(gaps, [0.01, 0.05, 0.25, 0.5])
    print(f"{len(gaps)} positions; gap quantiles 1% {qs[0]:.4f}, 5% {qs[1]:.4f}, 25% {qs[2]:.4f}, 50% {qs[3]:.4f}")
    print(f"{100 * a.quantile:g}th percentile: {value:.4f} (THRESHOLD in analysis/triage.py: {THRESHOLD:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
