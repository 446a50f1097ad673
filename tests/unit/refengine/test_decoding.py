"""Decoding invariants (fp32, CPU): lossless at T=0, chain == linear, commit = depth + 1,
KV compaction == fresh prefill, seeded repeatability, and T>0 distributions == AR's."""

from __future__ import annotations

import pytest
import torch
from engine_prompts import prompts
from scipy.stats import chisquare

from refengine.plan import Plan
from refengine.sampling import Sampling, probs

ARMS = ["linear-b16", "linear-b4", "chain-b15", "chain-b3", "tree-b15-k8", "tree-b31-k4", "tree-b12-k3-d0.3"]


def _cases(engine, n=6, max_tokens=40):
    """Prompts with their AR output; every other one gets a stop token taken from AR's own output."""
    out = []
    for i, p in enumerate(prompts(n)):
        free = engine.generate(p, Plan("ar"), max_tokens=max_tokens)
        stop = {free.tokens[len(free.tokens) // 2]} if i % 2 else set()
        ar = engine.generate(p, Plan("ar"), max_tokens=max_tokens, stop_ids=stop)
        out.append((p, stop, ar))
    return out


@pytest.fixture(scope="module", params=["rand_engine", "echo_engine"])
def engine_cases(request):
    engine = request.getfixturevalue(request.param)
    return engine, _cases(engine)


@pytest.mark.parametrize("arm", ARMS)
def test_every_arm_equals_ar_at_temperature_zero(engine_cases, arm):
    engine, cases = engine_cases
    for prompt, stop, ar in cases:
        out = engine.generate(prompt, Plan.parse(arm), max_tokens=40, stop_ids=stop)
        assert out.tokens == ar.tokens, (arm, prompt)
        assert out.finish_reason == ar.finish_reason
        assert sum(s.committed for s in out.steps) == len(out.tokens) - 1  # the first token is prefill's
    reasons = {ar.finish_reason for _, _, ar in cases}
    assert reasons == {"stop", "length"}  # both endings were exercised


def test_echo_pair_really_accepts_drafts(echo_engine):
    """Guards the tests above from passing vacuously: the echo pair accepts whole blocks, and
    its trees accept part-way (its linear drafts are all-or-nothing; the trained pair, when
    present, covers partial linear accepts)."""
    commits = {"linear-b16": [], "tree-b15-k8": []}
    for arm, got in commits.items():
        for p in prompts(5):
            got += [s.committed for s in echo_engine.generate(p, Plan.parse(arm), max_tokens=48).steps[:-1]]
    assert max(commits["linear-b16"]) == 16
    assert any(2 <= c < 16 for c in commits["tree-b15-k8"])


@pytest.mark.parametrize("b", [16, 4])
def test_chain_equals_linear_step_by_step(echo_engine, rand_engine, b):
    for engine in (echo_engine, rand_engine):
        for p in prompts(5, seed=1):
            lin = engine.generate(p, Plan.parse(f"linear-b{b}"), max_tokens=50)
            chain = engine.generate(p, Plan.parse(f"chain-b{b - 1}"), max_tokens=50)
            assert chain.tokens == lin.tokens
            assert [s.committed for s in chain.steps] == [s.committed for s in lin.steps]
            assert [s.accepted for s in chain.steps] == [s.accepted for s in lin.steps]


def test_tree_with_topk_one_is_the_chain(echo_engine):
    for p in prompts(5, seed=2):
        chain = echo_engine.generate(p, Plan.parse("chain-b15"), max_tokens=50)
        tree = echo_engine.generate(p, Plan("tree", budget=15, topk=1), max_tokens=50)
        assert tree.tokens == chain.tokens
        assert [(s.committed, s.depth, s.nodes) for s in tree.steps] == \
               [(s.committed, s.depth, s.nodes) for s in chain.steps]


@pytest.mark.parametrize("arm", ["linear-b16", "chain-b15", "tree-b15-k8", "tree-b31-k4"])
def test_commit_length_is_depth_plus_one(echo_engine, arm):
    depths = []
    for p in prompts(5, seed=3):
        out = echo_engine.generate(p, Plan.parse(arm), max_tokens=50)
        for i, s in enumerate(out.steps):
            assert s.accepted == s.depth
            last = i == len(out.steps) - 1
            assert s.committed == s.depth + 1 or (last and s.committed < s.depth + 1)
            assert s.nodes <= Plan.parse(arm).budget if arm.startswith(("chain", "tree")) else s.nodes == 15
            depths.append(s.depth)
    assert max(depths) >= 5


@pytest.mark.parametrize("arm", ["tree-b15-k8", "tree-b31-k4", "linear-b16"])
def test_compacted_cache_equals_a_fresh_prefill(echo, echo_engine, arm):
    target, _ = echo
    accepted = 0
    for p in prompts(5, seed=4):
        out = echo_engine.generate(p, Plan.parse(arm), max_tokens=60)
        accepted += sum(s.accepted for s in out.steps)
        seq = p + out.tokens[:-1]  # the last token's entry is written by the next step
        fresh = target.new_cache(1, 512)
        target(torch.tensor([seq]), torch.arange(len(seq))[None], cache=fresh)
        n = len(seq)
        assert echo_engine.tcache.length() >= n
        torch.testing.assert_close(echo_engine.tcache.k[:, :, :, :n], fresh.k[:, :, :, :n], atol=1e-5, rtol=0)
        torch.testing.assert_close(echo_engine.tcache.v[:, :, :, :n], fresh.v[:, :, :, :n], atol=1e-5, rtol=0)
    assert accepted > 0


def test_compaction_of_a_forced_deep_side_branch(rand_pair):
    """Walk a path that is not the first child at each depth and check the next logits."""
    from tree_helpers import build_from_logprobs

    from refengine.engine import Engine
    from refengine.request import Request

    target, drafter = rand_pair
    engine = Engine(target, drafter, capacity=128)
    prompt = prompts(1, seed=5)[0] + [1, 2, 3]
    req = Request(prompt, Sampling(), 50, frozenset())
    engine.prefill(req, True, row=0)
    tree = build_from_logprobs(req.root, torch.randn(5, 256).log_softmax(-1), 40, 4)
    node = max(n for n in range(len(tree.tokens)) if tree.depths[n] >= 2)  # the last popped deep node
    path = []
    while node >= 0:
        path.insert(0, node)
        node = tree.parents[node]
    assert path != list(range(len(path)))  # a side branch, so compaction really moves entries
    ids = torch.tensor([tree.tokens])
    engine.verify(ids, req.start + torch.tensor([tree.depths]), torch.from_numpy(tree.visible())[None])
    engine.tcache.compact([path])
    seq = prompt + [tree.tokens[n] for n in path]
    nxt = engine.decode(torch.tensor([7]), torch.tensor([len(seq)]))[0]
    want = target(torch.tensor([seq + [7]]), torch.arange(len(seq) + 1)[None])[0][0, -1]
    torch.testing.assert_close(nxt, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arm", ["ar", "linear-b16", "tree-b15-k8"])
def test_seeded_sampling_repeats(rand_engine, arm):
    s = Sampling(temperature=1.0, top_p=0.95, top_k=50, seed=123)
    p = prompts(1, seed=6)[0]
    a = rand_engine.generate(p, Plan.parse(arm), s, max_tokens=40)
    b = rand_engine.generate(p, Plan.parse(arm), s, max_tokens=40)
    c = rand_engine.generate(p, Plan.parse(arm), Sampling(temperature=1.0, top_p=0.95, top_k=50, seed=124),
                             max_tokens=40)
    assert a.tokens == b.tokens
    assert [x.committed for x in a.steps] == [x.committed for x in b.steps]
    assert a.tokens != c.tokens


@pytest.fixture(scope="module")
def soft_echo():
    """Echo pair with flatter logits: T=1 sampling spreads over several tokens, drafts still often accepted."""
    from refengine.engine import Engine
    from refengine.pair import echo_pair

    target, drafter = echo_pair(seed=0, mix=0.5, noise=2.0, sharpness=0.12)
    return target, Engine(target, drafter, capacity=64)


def _second_token_law(target, prompt, s: Sampling) -> torch.Tensor:
    """Exact AR law of the second output token: sum over t1 of p(t1) p(t2 | t1)."""
    n = len(prompt)
    first = probs(target(torch.tensor([prompt]), torch.arange(n)[None])[0][0, -1], s)
    v = first.shape[0]
    seqs = torch.cat([torch.tensor([prompt]).expand(v, n), torch.arange(v)[:, None]], 1)
    second = probs(target(seqs, torch.arange(n + 1)[None].expand(v, -1))[0][:, -1], s)
    return first @ second


@pytest.mark.parametrize("arm,s", [("tree-b15-k8", Sampling(temperature=1.0)),
                                   ("linear-b16", Sampling(temperature=1.0)),
                                   ("tree-b15-k8", Sampling(temperature=1.0, top_k=20, top_p=0.95))])
def test_sampled_tokens_follow_the_ar_law(soft_echo, arm, s):
    target, engine = soft_echo
    prompt = [5, 9, 14, 20]
    with torch.inference_mode():
        law = _second_token_law(target, prompt, s)
    runs, counts, accepted = 1000, torch.zeros_like(law), 0
    for seed in range(runs):
        out = engine.generate(prompt, Plan.parse(arm), Sampling(s.temperature, s.top_p, s.top_k, seed), max_tokens=2)
        counts[out.tokens[1]] += 1
        accepted += out.steps[0].accepted > 0
    assert accepted > runs * 0.1, "drafts are rarely accepted: the test would not exercise the walk"
    expected = law * runs
    big = expected >= 5
    obs = torch.cat([counts[big], counts[~big].sum()[None]])
    exp = torch.cat([expected[big], expected[~big].sum()[None]])
    keep = exp > 0
    assert big.sum() >= 5, "the law is too peaked for a meaningful test"
    assert counts[law == 0].sum() == 0  # top-k / top-p never emits an excluded token
    assert chisquare(obs[keep].numpy(), exp[keep].numpy()).pvalue > 1e-3
