"""The profile `ddbench init` writes for the shipped pair runs: one cell of its tree arm, on the CPU, through
the reproduce sweep's own path (--set overrides keep it short; `ddbench load` narrows a profile the same way)."""

import pytest

from containers import local_runtime
from ddbench import cli
from ddbench.core.profile import load_profile
from ddbench.onecell import narrow
from ddbench.sweep import run_sweep
from loadtests.cell import run_cell
from loadtests.recorder import read_records

ARM, MAX_TOKENS, PER_USER = "tree-b15-k8", 8, 2


@pytest.fixture(autouse=True)
def local_state(tmp_path, monkeypatch):
    """This test's servers are recorded in its own state directory; none may outlive it."""
    monkeypatch.setenv("DDBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(local_runtime, "STATE_DIR", tmp_path / "state" / "local")
    yield
    left = local_runtime.recorded()
    for s in left:
        s.stop()
    assert not left, f"the test left local servers running: {[s.ident for s in left]}"


def test_init_profile_runs_one_cell_on_the_cpu(tmp_path, capsys):
    path = tmp_path / "init.yaml"
    rc = cli.main(["init", "--target", "models/qwen3-stdlib-13m", "--drafter", "models/qwen3-stdlib-13m-dflash-b16",
                   "--engine", "refengine", "-o", str(path)])
    assert rc == 0, capsys.readouterr().err
    profile = narrow(load_profile(path, [f"workload.max_tokens={MAX_TOKENS}", f"load.requests_per_user={PER_USER}",
                                         "load.warmup_requests=0"]), ARM, 1)
    run = tmp_path / "run"
    out = run_sweep(profile, run, run_cell)
    (status,) = out[ARM]
    assert status.status == "ok", status.reason
    records = [r for r in read_records(run / ARM / "c1-r1") if not r.warmup]
    assert len(records) == PER_USER
    assert all(r.ok and r.usage.completion_tokens == MAX_TOKENS for r in records)
