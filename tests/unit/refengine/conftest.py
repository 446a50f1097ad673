"""Small pairs shared by the engine's unit tests (fp32, CPU, built in code)."""

from __future__ import annotations

import pytest
import torch

from refengine.engine import Engine
from refengine.pair import echo_pair, random_pair

torch.set_num_threads(1)  # 2 cores shared with other jobs: OpenMP spin-waits starve


@pytest.fixture(autouse=True)
def seeded():
    """Inputs drawn with torch's global generator repeat from run to run."""
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def rand_pair():
    """Random weights, std large enough that logits are not flat: diverse outputs, few accepts."""
    return random_pair(seed=0, vocab_size=256, std=0.2)


@pytest.fixture(scope="session")
def echo():
    """Hand-built to accept drafts (see refengine.pair.echo_pair): partial and long accepts."""
    return echo_pair(seed=0, mix=0.5, noise=2.0)


@pytest.fixture(scope="session")
def rand_engine(rand_pair):
    return Engine(*rand_pair, capacity=512)


@pytest.fixture(scope="session")
def echo_engine(echo):
    return Engine(*echo, capacity=512)

