"""A real null server process on a free port (tests/integration/conftest.py), and small profiles written to disk."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from loadtests import nullserver


@dataclass
class NullServer:
    url: str
    log: Path


@pytest.fixture
def null_server(tmp_path):
    with ExitStack() as stack:
        def start(**flags) -> NullServer:
            log = tmp_path / f"null-{nullserver.free_port()}.jsonl"
            return NullServer(stack.enter_context(nullserver.running(log=log, **flags)), log)

        yield start


@pytest.fixture
def write_profile(tmp_path):
    def write(load: dict, workload: dict | None = None, name: str = "nulltest") -> Path:
        data = {"name": name, "backend": {"kind": "refengine"}, "models": {"target": "none"},
                "arms": [{"id": "ar", "kind": "ar"}],
                "workload": {"prompt_set": "loadtests/prompts/study5.jsonl", "max_tokens": 32, **(workload or {})},
                "load": load}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return write
