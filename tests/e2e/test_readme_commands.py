"""The README's "On your GPU" commands, as a user types them, up to where a GPU is needed: `just init` for a
hub pair writes a profile that `just check` passes (no network), and the three commands of "Your server"
(`just bench` last) produce a profile and a report against two servers the test started itself (the README's
HOST:PORT replaced by theirs)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd

from ddbench.core.profile import load_profile
from ddbench.core.results import RunDir

REPO = Path(__file__).resolve().parents[2]


def block(heading: str) -> list[str]:
    """The command lines of the first ```sh block under a README heading (comments and blanks dropped)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(f"\n### {heading}\n"):]
    body = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in body.splitlines() if line.strip()]


def ddbench(words: list[str], cwd: Path, caller: Path | None = None, **kw) -> subprocess.CompletedProcess:
    """`just VERB ...` or `.venv/bin/just VERB ...` as the justfile runs it: python -m ddbench VERB ..., with the
    directory the user typed it in (caller, else cwd) as just exports it. Always set: under `just test`, the
    test process inherits just's own (the repository root), and a file the command writes would land there."""
    assert words[0] in ("just", ".venv/bin/just"), words
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "DDBENCH_CALLER_DIR": str(caller or cwd)}
    return subprocess.run([sys.executable, "-m", "ddbench", *words[1:]], cwd=cwd, capture_output=True, text=True,
                          env=env, **kw)


def test_your_model_init_then_check_without_network(tmp_path):
    lines = block("Your model")
    assert [shlex.split(x)[1] for x in lines] == ["init", "check", "reproduce"]
    for line in lines[:2]:   # reproduce needs the GPU
        out = ddbench(shlex.split(line), tmp_path, timeout=300)
        assert out.returncode == 0, line + "\n" + out.stdout + out.stderr
    assert "chain-b15" in out.stdout and "tree-b15-k8" in out.stdout and "concurrency [1, 8, 32]" in out.stdout
    assert (tmp_path / "mine.yaml").is_file()


def test_your_server_three_commands_to_a_report(servers, tmp_path):
    clone, setup, run = block("Your server")
    assert clone.startswith("git clone") and setup == "./setup"   # the test runs from this clone, set up
    urls = iter(servers)
    words = [re.sub(r"http://HOST:\d+", lambda _: next(urls), w) for w in shlex.split(run)]
    assert words[1] == "bench"
    root = tmp_path / "results"
    out = ddbench(words + ["--results-root", str(root)], REPO, caller=tmp_path, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    # the profile it ran, where the user typed the command, for `just reproduce bench.yaml` to repeat
    written = load_profile(str(tmp_path / "bench.yaml"))
    assert written.backend.kind == "external" and [a.url for a in written.arms] == servers
    run_dir = RunDir.open(next((root / "bench").iterdir()))
    assert (run_dir.path / "report.pdf").stat().st_size > 0
    cells = pd.read_csv(run_dir.tables / "cells.csv")
    assert (cells["status"] == "ok").all() and set(cells["arm"]) == {"ar", "linear-b16"}
