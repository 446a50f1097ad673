"""The twin decodes as the shipped pair does, through every consumer (fp32, CPU, the tiny-twin shape):

- every reference-engine arm (ar, linear b16, chain b15, tree b15 k8), at T=0 and with seeded sampling
  at T>0: the same tokens and the same verify steps on the twin as on the pair. At T>0 a draw
  (torch.multinomial) takes one random number per vocab entry, so a padded vocab shifts the random
  stream after the first draw: the padded twin draws over the real tokens after each draw is checked
  to give the padded ones exactly 0 mass; a twin of the pair's vocab runs the sampler untouched;
- transformers' Qwen3ForCausalLM greedy generate on the twin's files == on the pair's;
- z-lab's dflash_generate on the twin's files == on the pair's, acceptance lengths included.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
import torch

from refengine import twin
from refengine.engine import Engine
from refengine.pair import load_pair
from refengine.plan import Plan
from refengine.sampling import Sampling
from refengine.tokenizer import Tokenizer

transformers = pytest.importorskip("transformers")
dflash_model = pytest.importorskip("dflash.model", reason="pip install --no-deps dflash==0.1.0")

REPO = Path(__file__).resolve().parents[3]
ARMS = ["ar", "linear-b16", "chain-b15", "tree-b15-k8"]
SAMPLINGS = [Sampling(), Sampling(temperature=0.8, top_p=0.95, top_k=50, seed=7)]
MAX_TOKENS = 32

pytestmark = pytest.mark.skipif(not (twin.PAIR_TARGET / "config.json").is_file(), reason="no shipped pair")
torch.set_num_threads(1)  # 2 cores shared with other jobs: OpenMP spin-waits starve


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    out = twin.build("tiny-twin", tmp_path_factory.mktemp("twin") / "t", dtype="fp32", device="cpu",
                     shard_bytes=100_000_000)
    pair = tmp_path_factory.mktemp("pair")
    (pair / "target").symlink_to(twin.PAIR_TARGET)
    (pair / "drafter").symlink_to(twin.PAIR_DRAFTER)
    return pair, out


@pytest.fixture(scope="module")
def same_vocab(tmp_path_factory):
    """The tiny twin at the pair's vocab (no padded tokens): the engine's sampler draws the same stream."""
    shapes = dict(twin.SHAPES)
    twin.SHAPES["tiny-twin-v8192"] = dataclasses.replace(twin.SHAPES["tiny-twin"], vocab_size=8192)
    try:
        return twin.build("tiny-twin-v8192", tmp_path_factory.mktemp("twin") / "v", dtype="fp32", device="cpu")
    finally:
        twin.SHAPES.clear()
        twin.SHAPES.update(shapes)


@pytest.fixture(scope="module")
def prompts():
    tok = Tokenizer.from_pretrained(twin.PAIR_TARGET)
    rows = [json.loads(line) for line in (REPO / "loadtests/prompts/chat.jsonl").read_text().splitlines() if line]
    return [tok.chat_ids(r["messages"]) for r in rows[::20]], tok.eos_ids  # code, arithmetic, creative


def _steps(out):
    return [(s.committed, s.accepted, s.depth, s.nodes) for s in out.steps]


def _compare(pair, tw, ps, eos, samplings) -> int:
    accepted = 0
    for s in samplings:
        for p in ps:
            for arm in ARMS:
                want = pair.generate(p, Plan.parse(arm), s, max_tokens=MAX_TOKENS, stop_ids=eos)
                got = tw.generate(p, Plan.parse(arm), s, max_tokens=MAX_TOKENS, stop_ids=eos)
                assert got.tokens == want.tokens, (arm, s)
                assert got.finish_reason == want.finish_reason
                assert _steps(got) == _steps(want), (arm, s)
                accepted += sum(x.accepted for x in got.steps)
    return accepted


def test_every_arm_decodes_the_pairs_tokens_and_steps(dirs, prompts, monkeypatch):
    ps, eos = prompts
    pair, tw = (Engine(*load_pair(d), capacity=512) for d in dirs)
    v, draw, checked = pair.target.config.vocab_size, torch.multinomial, []

    def real_tokens_only(p, n, generator=None):
        assert (p[..., v:] == 0).all()   # no mass on a padded token, at every draw
        checked.append(p.shape[-1] > v)
        return draw(p[..., :v], n, generator=generator)

    monkeypatch.setattr(torch, "multinomial", real_tokens_only)
    accepted = _compare(pair, tw, ps, eos, SAMPLINGS)
    assert accepted > 0  # drafts were accepted: the comparison covered the accept path
    assert any(checked)


def test_seeded_sampling_is_untouched_at_the_pairs_vocab(dirs, same_vocab, prompts):
    ps, eos = prompts
    pair, tw = Engine(*load_pair(dirs[0]), capacity=512), Engine(*load_pair(same_vocab), capacity=512)
    assert _compare(pair, tw, ps[:2], eos, SAMPLINGS[1:]) > 0


@torch.inference_mode()
def test_transformers_greedy_generate_matches(dirs, prompts):
    ps, eos = prompts
    pair, tw = (transformers.Qwen3ForCausalLM.from_pretrained(d / "target", dtype=torch.float32).eval()
                for d in dirs)
    for p in ps:
        ids = torch.tensor([p])
        outs = [m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_TOKENS, do_sample=False,
                           eos_token_id=eos, pad_token_id=eos[0]) for m in (pair, tw)]
        assert outs[0].tolist() == outs[1].tolist()


def test_dflash_generate_matches(dirs, prompts, monkeypatch):
    # return_stats=True times with torch.cuda.synchronize(); on a CPU a plain clock gives the same stats
    monkeypatch.setattr(dflash_model, "_cuda_time", time.perf_counter)
    ps, eos = prompts
    runs = []
    for d in dirs:
        hf = transformers.Qwen3ForCausalLM.from_pretrained(d / "target", dtype=torch.float32).eval()
        zd = dflash_model.DFlashDraftModel.from_pretrained(d / "drafter", dtype=torch.float32).eval()
        runs.append([dflash_model.dflash_generate(zd, hf, torch.tensor([p]), MAX_TOKENS, eos, temperature=0.0,
                                                  return_stats=True) for p in ps])
    for want, got in zip(*runs, strict=True):
        assert got.output_ids.tolist() == want.output_ids.tolist()
        assert got.acceptance_lengths == want.acceptance_lengths
    assert any(x > 1 for r in runs[1] for x in r.acceptance_lengths)
