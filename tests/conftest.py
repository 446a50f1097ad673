"""Markers come from the directory a test lives in; GPU tests skip, visibly, without CUDA; and a test session
that leaves a file in the checkout (git status changed) fails, naming it: tests write under tmp paths only."""

import json
import subprocess
from pathlib import Path

import pytest

_TIERS = ("unit", "integration", "e2e")
_REPO = Path(__file__).resolve().parents[1]


def _checkout() -> set[str] | None:
    """git status's lines, ignored files aside (caches); None outside a git checkout."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=_REPO,
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(out.stdout.splitlines()) if out.returncode == 0 else None


def pytest_sessionstart(session):
    session.config._checkout_before = _checkout()


def pytest_sessionfinish(session, exitstatus):
    before, after = session.config._checkout_before, _checkout()
    if before is None or after is None or after == before:
        return
    changed = sorted(after ^ before)
    session.config.get_terminal_writer().line(
        "the tests changed the checkout (a test must write under its tmp_path):\n  " + "\n  ".join(changed[:20]),
        red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(config, items):
    have_cuda = _cuda_available()
    for item in items:
        parts = Path(str(item.fspath)).parts
        for tier in _TIERS:
            if tier in parts:
                item.add_marker(getattr(pytest.mark, tier))
        if "gpu" in item.keywords and not have_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; none on this machine"))


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


WORD_VOCAB = 256


def write_word_tokenizer(directory: Path, vocab: int = WORD_VOCAB) -> None:
    """A word-level tokenizer whose every token decodes to a whole ASCII word ("w17"), so no text
    is held back for an incomplete UTF-8 character and each verify step is exactly one chunk."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<eos>", "<bos>"] + [f"w{i}" for i in range(vocab - 3)] + ["<mask>"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(directory / "tokenizer.json"))
    config = {"bos_token": "<bos>", "eos_token": "<eos>", "model_max_length": 512,
              "chat_template": "{{ bos_token }}{% for m in messages %} {{ m['content'] }}{% endfor %}"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))


@pytest.fixture(scope="session")
def word_pair_dir(tmp_path_factory) -> Path:
    """A small random target + drafter (HF layout) with the word tokenizer: pair/target, pair/drafter."""
    from refengine.pair import random_pair, save_pair

    d = tmp_path_factory.mktemp("pair")
    # an EOS id the random target picks sometimes, so some outputs end by EOS
    target, drafter = random_pair(seed=1, vocab_size=WORD_VOCAB, eos_token_id=0, std=0.3)
    save_pair(target, drafter, d)
    for sub in ("target", "drafter"):
        write_word_tokenizer(d / sub)
    return d


REPO = Path(__file__).resolve().parents[1]
SHIPPED_TARGET, SHIPPED_DRAFTER = "models/qwen3-stdlib-13m", "models/qwen3-stdlib-13m-dflash-b16"
DFLASH = ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", SHIPPED_DRAFTER,
          "--speculative-dflash-block-size", "16")


class RefengineServers:
    """Reference-engine servers of the shipped pair on the CPU (`start(log, *flags)`), or any server's argv
    (`launch`), each started, waited for and stopped by the fixture that made this; both return the
    server's base URL once /health answers."""

    def __init__(self):
        self.procs = []

    @staticmethod
    def free_port() -> int:
        # the sweep's range: SGLang refuses a port whose gRPC port (port + 10000) passes 65535
        from containers.bringup import free_port

        return free_port()

    def start(self, log: Path, *flags: str) -> str:
        import os
        import sys

        port = self.free_port()
        argv = [sys.executable, "-m", "refengine.serve", "--model-path", SHIPPED_TARGET, "--port", str(port),
                "--device", "cpu", "--dtype", "float32", "--enable-metrics", *flags]
        return self.launch(argv, port, log, env={**os.environ, "OMP_NUM_THREADS": "1"})

    def launch(self, argv: list[str], port: int, log: Path, env: dict[str, str] | None = None,
               timeout: float = 180) -> str:
        """Any server's argv (SGLang's too), run from the repository root: its base URL once /health answers."""
        import subprocess

        proc = subprocess.Popen(argv, cwd=REPO, stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        self.procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        self._wait(proc, url, log, timeout)
        return url

    @staticmethod
    def _wait(proc, url: str, log: Path, timeout: float) -> None:
        import time
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"server not ready in {timeout:.0f} s:\n{log.read_text()[-3000:]}")

    def pair(self, folder: Path) -> list[str]:
        """An AR server and a DFlash (linear, block 16) one: their URLs."""
        return [self.start(folder / "ar.log", "--max-running-requests", "2"),
                self.start(folder / "linear.log", "--max-running-requests", "2", *DFLASH)]

    def stop(self) -> None:
        import os
        import signal
        import subprocess

        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def refengine_servers():
    servers = RefengineServers()
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture(scope="module")
def module_refengine_servers():
    servers = RefengineServers()
    try:
        yield servers
    finally:
        servers.stop()
