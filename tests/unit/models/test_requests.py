"""Chat-shaped training prompts: docstring requests, their rendering, and ragged greedy batches."""

import numpy as np
import torch

from refengine.train import greedy, requests
from refengine.train.drafter import pick_anchors

SOURCE = '''"""Tools for parsing things in a module."""
class A:
    """Base class for UDP tests."""
    def f(self):
        """Returns a synchronized shared object."""
    def g(self):
        """Create a new parser object.

        Details that are not part of the request."""
    async def h(self):
        """HTTP helper that does stuff here."""
    def short(self):
        """Too short."""
'''


def test_requests_from_docstrings():
    got = requests.docstring_requests([SOURCE, "def broken(:\n"])
    assert got == sorted(got) and len(got) == len(set(got))
    assert "Write a Python function that returns a synchronized shared object." in got
    assert "Write a Python function to create a new parser object." in got
    assert "Write a Python coroutine for: HTTP helper that does stuff here." in got
    assert "Write a Python class: Base class for UDP tests." in got
    assert "Create a new parser object." in got       # the first paragraph only, as written too
    assert not any("Details" in r or "Too short" in r for r in got)


class _Tok:
    """Stands in for a tokenizer: one id per character."""

    def encode_batch(self, texts, add_special_tokens=False):
        return [type("E", (), {"ids": [ord(c) % 997 for c in t]}) for t in texts]


def test_encode_renders_the_chat_template_and_drops_long_requests():
    stream, starts = requests.encode(_Tok(), ["ab", "x" * 100, "cde"], max_tokens=30)
    pieces = np.split(stream, starts[1:])
    assert len(pieces) == 2 and len(pieces[1]) == len(pieces[0]) + 1
    assert requests.encode(_Tok(), ["x" * 100], max_tokens=30)[0].size == 0


class _Counter(torch.nn.Module):
    """A 'model' whose greedy next token is the last token + 1: the continuation is checkable."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x, past_key_values=None, use_cache=True, **_):
        logits = torch.nn.functional.one_hot((x + 1) % 50, 50).float()
        return type("O", (), {"logits": logits, "past_key_values": None})


def test_generate_to_continues_prompts_of_any_length_to_one_length():
    prompts = [np.array([3, 4]), np.array([10]), np.array([7, 8, 9]), np.array([20, 21])]
    out = greedy.generate_to(_Counter(), prompts, length=6, batch=8, log=lambda *a, **k: None)
    assert out.shape == (4, 6)
    for p, row in zip(prompts, out, strict=True):
        assert row[: len(p)].tolist() == p.tolist()
        assert row[len(p):].tolist() == list(range(p[-1] + 1, p[-1] + 1 + 6 - len(p)))


def test_anchors_stay_in_each_rows_continuation():
    starts = torch.tensor([5, 20, 40])
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        a = pick_anchors(starts, 64, 8, gen)
        assert a.shape == (3, 8)
        assert (a >= starts[:, None]).all() and (a <= 62).all()
        assert (a.diff(1) > 0).all()  # distinct and sorted


def test_padded_batches_continue_like_prompts_alone():
    """Left-padded, masked batches of mixed lengths give each prompt the continuation it gets alone."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64)
    model = Qwen3ForCausalLM(cfg).eval()
    for p in model.parameters():  # sharper logits than the init's, so greedy ties do not decide the test
        p.data.mul_(8)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 64, n) for n in (3, 7, 5, 7, 1, 12)]
    got = greedy.generate_to(model, prompts, length=20, batch=4, log=lambda *a, **k: None)
    for p, row in zip(prompts, got, strict=True):
        alone = greedy.continue_greedy(model, torch.from_numpy(p[None].astype(np.int64)), 20 - len(p))[0]
        assert row.tolist() == alone.tolist()


def test_equal_starts_draw_the_anchors_the_shipped_drafter_was_trained_with():
    """Rows that all start at 64 draw exactly as the pre-ragged code did, so `just train-models`
    still rebuilds the shipped drafter's training batches."""
    got = pick_anchors(torch.full((16,), 64), 192, 32, torch.Generator().manual_seed(5))
    r = torch.rand(16, 127, generator=torch.Generator().manual_seed(5))
    assert torch.equal(got, r.argsort(1)[:, :32].sort(1).values + 64)
