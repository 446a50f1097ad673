"""The front door as a user meets it: real `python -m ddbench` and `just` processes, real exit codes."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ddbench import cli
from ddbench.core.profile import PROFILES_DIR, REPO_ROOT

JUST = shutil.which("just", path=str(Path(sys.executable).parent)) or shutil.which("just")


def ddbench(*args, cwd=REPO_ROOT):
    return subprocess.run([sys.executable, "-m", "ddbench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def write_bad(tmp_path, edit):
    data = yaml.safe_load((PROFILES_DIR / "cpu-tiny.yaml").read_text())
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("name", sorted(p.stem for p in PROFILES_DIR.glob("*.yaml")))
def test_check_passes_on_every_shipped_profile(name):
    out = ddbench("check", name, "--no-probe")   # external-example's servers run on the user's host
    assert out.returncode == 0, out.stderr
    assert f"profile {name}" in out.stdout and " cells; " in out.stdout
    started = out.stdout.count("-m sglang.launch_server") + out.stdout.count("-m refengine.serve")
    external = out.stdout.count("note: external server at http")
    assert (started >= 1) != (external >= 1)   # servers ddbench starts, or servers it only measures


def test_check_prints_the_plan():
    out = ddbench("check", "cpu-tiny")
    assert "4 arms x 2 concurrency x 10 repetitions = 80 cells" in out.stdout
    assert "schedule interleaved-fresh: set by the profile" in out.stdout and "40 server start(s)" in out.stdout
    assert "order ar:C1r1, linear-b16:C1r1" in out.stdout
    assert "SGLANG_DDTREE_MAX_TOPK=8" in out.stdout and "--speculative-ddtree-budget 15" in out.stdout


@pytest.mark.parametrize("edit,expected", [
    (lambda d: d["workload"].update(max_token=64), "workload.max_token: unknown key"),
    (lambda d: d["arms"][2].update(topk=4), "arms[2] (arm 'chain-b15')"),
    (lambda d: d["arms"][3].update(budget=0), "arms[3].budget"),
    (lambda d: d["models"].update(target="${DDBENCH_UNSET_MODEL_DIR}/t"), "${DDBENCH_UNSET_MODEL_DIR} is not set"),
    (lambda d: d["workload"].update(prompt_set="nope.jsonl"), "workload.prompt_set"),
])
def test_check_fails_on_a_malformed_profile(tmp_path, edit, expected):
    path = write_bad(tmp_path, edit)
    out = ddbench("check", str(path))
    assert out.returncode == cli.EXIT_ERROR
    assert str(path) in out.stderr and expected in out.stderr
    assert out.stdout == ""


def test_check_points_at_a_bad_prompt_line(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "category": "code", "messages": [{"role": "user", "content": "x"}]}\n{oops\n')
    out = ddbench("check", str(write_bad(tmp_path, lambda d: d["workload"].update(prompt_set=str(prompts)))))
    assert out.returncode == cli.EXIT_ERROR and f"{prompts}:2: not valid JSON" in out.stderr


def test_unknown_command_and_usage():
    out = ddbench("frobnicate")
    assert out.returncode == cli.EXIT_ERROR and "unknown command 'frobnicate'" in out.stderr
    assert ddbench().returncode == cli.EXIT_ERROR
    assert ddbench("--help").returncode == 0


def test_missing_stage_says_which(monkeypatch, capsys):
    monkeypatch.setitem(cli.STAGES, "analyze", ("ddbench_no_such_stage.sub", "Analysis and report"))
    assert cli.main(["analyze", "results/x"]) == cli.EXIT_MISSING_STAGE
    err = capsys.readouterr().err
    assert "'Analysis and report' stage is not built yet" in err and "nothing was run" in err


def test_stage_exit_code_passes_through(tmp_path, monkeypatch):
    mod = tmp_path / "ddbench_fake_stage.py"
    mod.write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(7)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.STAGES, "analyze", ("ddbench_fake_stage", "Analysis"))
    assert cli.main(["analyze", "run-dir"]) == 7


@pytest.mark.skipif(JUST is None, reason="just is not installed (./setup installs it)")
def test_just_check_exit_codes(tmp_path):
    ok = subprocess.run([JUST, "check", "cpu-tiny"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "profile cpu-tiny" in ok.stdout
    bad = write_bad(tmp_path, lambda d: d["arms"][3].update(budget=0))
    fail = subprocess.run([JUST, "check", str(bad)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert fail.returncode != 0 and "arms[3].budget" in fail.stderr


def test_check_rejects_a_flag_sglang_would_not_parse(tmp_path):
    data = yaml.safe_load((PROFILES_DIR / "qwen3-8b-1gpu.yaml").read_text())
    data["workload"]["prompt_set"] = str(REPO_ROOT / "loadtests/prompts/study5.jsonl")   # the profile's, as a path
    data["backend"]["version"] = "0.5.23"
    data["backend"].pop("ddtree")  # a stock release's flag table, not the pinned fork's
    data["runtime"]["extra_args"] = ["--cuda-graph-max-bs", "8"]  # an ambiguous prefix on 0.5.23
    path = tmp_path / "ambiguous.yaml"
    path.write_text(yaml.safe_dump(data))
    out = ddbench("check", str(path))
    assert out.returncode == cli.EXIT_ERROR
    assert "would reject its command line" in out.stderr and "--cuda-graph-max-bs" in out.stderr
