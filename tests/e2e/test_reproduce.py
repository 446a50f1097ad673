"""The whole study, miniature: reproduce -> cells -> analysis -> PDF; then Ctrl-C and --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from ddbench.core.results import RunDir

REPO = Path(__file__).resolve().parents[2]
# deterministic per cell at T = 0 in fp32, whatever the timing
STABLE = ["arm", "concurrency", "repetition", "status", "n", "errors", "tokens", "steps", "tau"]


@pytest.fixture
def mini(tmp_path, word_pair_dir):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "category": c, "messages": [
        {"role": "user", "content": f"w{i} w{i + 3} w{i * 7 % 200}"}]}) + "\n"
        for i, c in enumerate(["code", "code", "json", "creative"], start=1)))
    profile = {
        "name": "mini", "backend": {"kind": "refengine", "runtime": "local"},
        "models": {"target": str(word_pair_dir / "target"), "drafter": str(word_pair_dir / "drafter")},
        "placement": {"device": "cpu"}, "runtime": {"dtype": "float32"},
        "arms": [{"id": "ar", "kind": "ar"}, {"id": "linear-b8", "kind": "linear", "block_size": 8}],
        "workload": {"prompt_set": str(prompts), "max_tokens": 12, "temperature": 0},
        # 10 a repetition: 20 an arm, the minimum-requests check passes and a clean run exits 0
        "load": {"concurrency": [1], "warmup_requests": 1, "requests_per_user": 10, "repetitions": 2,
                 "warmup_s": 2},
    }
    path = tmp_path / "mini.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path, tmp_path / "results"


def reproduce(profile: Path, root: Path, *extra: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ddbench", "reproduce", str(profile), "--results-root",
                             str(root), *extra], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, **kw)


def only_run(root: Path) -> RunDir:
    runs = sorted((root / "mini").iterdir())
    assert len(runs) == 1
    return RunDir.open(runs[0])


def stable_cells(run: RunDir) -> pd.DataFrame:
    cells = pd.read_csv(run.tables / "cells.csv")[STABLE]
    return cells.sort_values(["arm", "concurrency", "repetition"]).reset_index(drop=True)


def test_dry_run_changes_nothing(mini):
    profile, root = mini
    out = subprocess.run([sys.executable, "-m", "ddbench", "reproduce", str(profile), "--dry-run",
                          "--results-root", str(root)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "2 arms x 1 concurrency x 2 repetitions = 4 cells" in out.stdout
    assert "time plan:\n  no earlier run of mini under" in out.stdout
    assert not root.exists()


def verify(run_dir: Path, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddbench", "verify", str(run_dir), "--results-root", str(root)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_reproduce_verify_then_interrupt_and_resume(mini, tmp_path):
    profile, root = mini
    whole = reproduce(profile, root)
    log, _ = whole.communicate(timeout=600)
    assert whole.returncode == 0, log
    run = only_run(root)
    assert run.report.is_file() and "report:" in log
    text = subprocess.run(["pdftotext", str(run.report), "-"], capture_output=True, text=True).stdout
    assert "linear-b8" in text and "ar" in text
    expected = stable_cells(run)
    assert (expected["status"] == "ok").all() and len(expected) == 4
    # the warm-up after the bring-up ran each arm through the real load generator, outside the cells
    for arm in ("ar", "linear-b8"):
        warm = run.path / arm / "warmup" / "c1.1"
        assert json.loads((warm / "status.json").read_text())["status"] == "ok"
        assert list(warm.glob("requests-*.jsonl*"))

    # verify: a deterministic re-run matches; a tampered record is named by arm and prompt
    same = verify(run.path, tmp_path / "verify")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "identical" in same.stdout and "throughput here / committed" in same.stdout
    records = next((run.path / "linear-b8" / "c1-r1").glob("requests-*.jsonl"))
    lines = records.read_text().splitlines()
    rec = next(json.loads(x) for x in lines if not json.loads(x)["warmup"])
    rec["chunks"][0]["text"] = "tampered"
    records.write_text("\n".join(json.dumps(rec) if json.loads(x)["request_id"] == rec["request_id"] else x
                                 for x in lines) + "\n")
    differ = verify(run.path, tmp_path / "verify2")
    assert differ.returncode == 3
    assert f"DIFFERENT  linear-b8 / {rec['prompt_id']}: output differs" in differ.stdout

    # the same study, stopped by Ctrl-C once its first cell is done, then resumed
    root2 = tmp_path / "results2"
    proc = reproduce(profile, root2)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if list(root2.glob("mini/*/ar/c1-r1/status.json")):
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    log2, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, log2
    assert "--resume" in log2
    assert not [p for p in psutil.process_iter(["cmdline"])
                if "refengine.serve" in " ".join(p.info["cmdline"] or [])
                and str(profile.parent) in " ".join(p.info["cmdline"] or [])], "a server outlived Ctrl-C"
    run2 = only_run(root2)
    assert run2.manifest()["interrupted"] is True
    resumed = reproduce(profile, root2, "--resume", str(run2.path))
    log3, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, log3
    pd.testing.assert_frame_equal(stable_cells(run2), expected)
    assert (run2.path / "ar" / "warmup" / "c1.2" / "status.json").is_file()   # the resume's own bring-up


def test_resume_refuses_another_profile(mini, tmp_path):
    profile, root = mini
    run = RunDir.create("mini", root=root)
    (run.path / "manifest.json").write_text(json.dumps({"profile_digest": "0" * 64}))
    out = subprocess.run([sys.executable, "-m", "ddbench", "reproduce", str(profile), "--resume", str(run.path),
                          "--results-root", str(root)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "different profile" in out.stderr


def test_sigterm_from_timeout_records_what_ran(mini):
    """A slice of device time cut by `timeout` (SIGTERM to the reproduce process alone): the servers go
    down and the manifest says interrupted, with the cells that ran in order."""
    profile, root = mini
    proc = reproduce(profile, root)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(root.glob("mini/*/ar/c1-r1/status.json")):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, log
    m = only_run(root).manifest()
    assert m["interrupted"] is True and m["slices"][0]["repetitions"] == "all"
    assert m["schedule"]["ran"][0]["arm"] == "ar" and m["schedule"]["ran"][0]["status"] == "ok"
    assert not [p for p in psutil.process_iter(["cmdline"])
                if "refengine.serve" in " ".join(p.info["cmdline"] or [])
                and str(profile.parent) in " ".join(p.info["cmdline"] or [])], "a server outlived SIGTERM"


def test_a_budget_stops_the_sweep_between_repetitions_and_the_report_says_so(mini):
    """load.budget_s far below a repetition: the first three run whole, the rest do not; the run still gets
    its report, which says what the budget left out, and the command says how to run the rest."""
    profile, root = mini
    proc = reproduce(profile, root, "--set", "load.repetitions=5", "--set", "load.budget_s=0.5")
    log, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, log
    said = " ".join(log.split())   # the console wraps lines
    assert "after 3 of 5 repetitions; repetition(s) 4-5 did not run" in said and "--resume" in said
    run = only_run(root)
    m = run.manifest()
    assert m["budget"]["ran"] == [1, 2, 3] and m["budget"]["not_run"] == [4, 5]
    assert m["cells"] == {"total": 10, "ok": 6, "not_ok": 0, "not_run": 4}
    assert sorted(pd.read_csv(run.tables / "cells.csv")["repetition"].unique()) == [1, 2, 3]
    text = subprocess.run(["pdftotext", str(run.report), "-"], capture_output=True, text=True).stdout
    assert "stopped the sweep after 3 of 5" in " ".join(text.split())
    # the command it printed runs the rest (the budget is no condition of the run: another one resumes it)
    resumed = reproduce(profile, root, "--no-report", "--set", "load.repetitions=5", "--set", "load.budget_s=3600",
                        "--resume", str(run.path))
    log, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, log
    m = run.manifest()
    assert m["budget"]["ran"] == [4, 5] and m["budget"]["not_run"] == []
    assert m["cells"] == {"total": 10, "ok": 10, "not_ok": 0, "not_run": 0}
    assert sorted(pd.read_csv(run.tables / "cells.csv")["repetition"].unique()) == [1, 2, 3, 4, 5]
