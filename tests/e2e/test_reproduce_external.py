"""backend 'external', whole: two reference-engine servers this test starts itself (the shipped pair, CPU; one
AR, one DFlash linear), measured by `reproduce` as servers it did not start: the report says so and shows what
each server reported, τ comes from the servers' own /metrics, the checks that need ddbench's own server are
n/a with the reason, and the API key's value is nowhere in the results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ddbench import reproduce
from ddbench.core.results import RunDir

REPO = Path(__file__).resolve().parents[2]
TARGET, DRAFTER = "models/qwen3-stdlib-13m", "models/qwen3-stdlib-13m-dflash-b16"

KEY = "e2e-key-5d1c8b2a90"    # under a variable whose name does not look secret: only the declaration hides it
NOT_STARTED = "external server: ddbench did not start it"


def test_reproduce_measures_servers_it_did_not_start(servers, tmp_path):
    ar_url, linear_url = servers
    profile = {
        "name": "ext", "backend": {"kind": "external"},
        "models": {"target": TARGET, "drafter": DRAFTER},
        "arms": [{"id": "ar", "kind": "ar", "url": ar_url},
                 {"id": "linear-b16", "kind": "linear", "block_size": 16, "url": linear_url,
                  "api_key_env": "DDBENCH_E2E_AUTH"}],
        "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 16, "temperature": 0},
        # 10 a repetition: the minimum-requests check (20 an arm and C) passes, so a healthy run exits 0
        "load": {"concurrency": [1], "warmup_requests": 1, "requests_per_user": 10, "repetitions": 2},
    }
    path, root = tmp_path / "ext.yaml", tmp_path / "results"
    path.write_text(yaml.safe_dump(profile))
    out = subprocess.run([sys.executable, "-m", "ddbench", "reproduce", str(path), "--results-root", str(root)],
                         cwd=REPO, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "DDBENCH_E2E_AUTH": KEY, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    run = RunDir.open(next((root / "ext").iterdir()))

    # every cell ran against the servers, and nothing was started: no server.log, a status saying 'external'
    cells = pd.read_csv(run.tables / "cells.csv")
    assert len(cells) == 4 and (cells["status"] == "ok").all()
    for arm, url in (("ar", ar_url), ("linear-b16", linear_url)):
        assert not (run.path / arm / "server.log").exists()
        status = json.loads((run.path / arm / "status.json").read_text())
        assert status["backend"] == "external" and status["url"] == url and status["status"] == "up"
        info = json.loads((run.path / arm / "server_info.json").read_text())
        assert info["url"] == url and info["summary"]["models"] == [TARGET]
        assert "sglang:spec_verify_calls_total" in info["endpoints"]["/metrics"]["families"]
    linear_info = json.loads((run.path / "linear-b16" / "server_info.json").read_text())
    assert linear_info["summary"]["speculative_algorithm"] == "DFLASH"

    # τ of the linear arm from its server's own counters, which moved over its cells
    summary = pd.read_csv(run.tables / "summary.csv")
    row = summary[summary["arm"] == "linear-b16"].iloc[0]
    assert np.isfinite(row["server_tau"]) and row["server_tau"] >= 1 and "/metrics" in row["server_tau_source"]
    metrics = pd.read_csv(run.tables / "server_metrics.csv")
    verify = metrics[(metrics["arm"] == "linear-b16") & (metrics["metric"] == "sglang:spec_verify_calls_total")]
    assert len(verify) == 2 and (verify["delta"] > 0).all()

    # the checks that need ddbench's own server are n/a, with the reason
    checks = pd.read_csv(run.tables / "checks.csv", keep_default_na=False)   # "n/a" is a status, not NaN
    na = checks[checks["evidence"].astype(str).str.contains(NOT_STARTED, regex=False)]
    assert (na["status"] == "n/a").all()
    assert "commit = depth + 1 (server log)" in set(na["check"])
    # the prefix cache: what each server answered when asked to drop it, cell by cell
    cache = checks[checks["check"] == "cache flushed or server restarted"]
    assert len(cache) == 4 and (cache["status"] == "pass").all()
    assert cache["evidence"].str.contains("POST /flush_cache answered 200").all()

    # the report says plainly that ddbench did not start them, and shows what they reported
    assert run.report.is_file()
    text = subprocess.run(["pdftotext", str(run.report), "-"], capture_output=True, text=True).stdout
    flat = " ".join(text.split())
    assert "External servers." in flat and "ddbench did not start these servers" in flat
    assert "DFLASH" in flat and "linear-b16" in flat

    # the key went to the server by its variable's name; its value is in no file of the run
    leaked = [str(f) for f in root.rglob("*") if f.is_file() and KEY.encode() in f.read_bytes()]
    assert leaked == []
    assert json.loads(run.manifest_path.read_text())["profile"]["arms"][1]["api_key_env"] == "DDBENCH_E2E_AUTH"
    # each server is what its arm says it is
    matches = checks[checks["check"] == "server matches its arm"].set_index("scope")
    assert (matches["status"] == "pass").all(), matches.to_dict()

    # the same servers with their URLs swapped: each arm's check fails, and page 1 recommends neither
    swapped = {**profile, "arms": [{"id": "ar", "kind": "ar", "url": linear_url, "api_key_env": "DDBENCH_E2E_AUTH"},
                                   {"id": "linear-b16", "kind": "linear", "block_size": 16, "url": ar_url}]}
    path2, root2 = tmp_path / "swapped.yaml", tmp_path / "results-swapped"
    path2.write_text(yaml.safe_dump({**swapped, "name": "swapped"}))
    out = subprocess.run([sys.executable, "-m", "ddbench", "reproduce", str(path2), "--results-root", str(root2)],
                         cwd=REPO, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "DDBENCH_E2E_AUTH": KEY, "OMP_NUM_THREADS": "1"})
    assert out.returncode == reproduce.EXIT_NOT_CLEAN, out.stdout + out.stderr
    assert "server matches its arm" in " ".join(out.stderr.split())
    run2 = RunDir.open(next((root2 / "swapped").iterdir()))
    checks2 = pd.read_csv(run2.tables / "checks.csv", keep_default_na=False)
    bad = checks2[checks2["check"] == "server matches its arm"].set_index("scope")
    assert (bad["status"] == "fail").all() and "an 'ar' arm's server runs DFLASH" in bad.loc["ar", "evidence"]
    rec = pd.read_csv(run2.tables / "recommendation.csv", keep_default_na=False)
    assert not rec["pick"].astype(bool).any() and rec["why_not"].str.contains("server matches its arm").all()
    flat2 = " ".join(subprocess.run(["pdftotext", "-l", "1", str(run2.report), "-"], capture_output=True,
                                    text=True).stdout.split())
    assert "C=1: no recommendation" in flat2

    # one server gone: the other arm is measured, and the exit status says cells failed
    dead = {**profile, "name": "dead", "arms": [profile["arms"][0], {**profile["arms"][1], "url": DEAD[0]}]}
    out, run3 = reproduce_profile(dead, tmp_path, {"DDBENCH_E2E_AUTH": KEY})
    assert out.returncode == reproduce.EXIT_NOT_CLEAN, out.stdout + out.stderr
    cells3 = pd.read_csv(run3.tables / "cells.csv").set_index("arm")["status"]
    assert (cells3.loc["ar"] == "ok").all() and (cells3.loc["linear-b16"] == "failed").all()


DEAD = ("http://127.0.0.1:9", "http://127.0.0.1:10")   # ports nothing listens on


def reproduce_profile(profile: dict, tmp_path: Path, env: dict | None = None):
    path, root = tmp_path / f"{profile['name']}.yaml", tmp_path / f"results-{profile['name']}"
    path.write_text(yaml.safe_dump(profile))
    out = subprocess.run([sys.executable, "-m", "ddbench", "reproduce", str(path), "--results-root", str(root)],
                         cwd=REPO, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    return out, RunDir.open(next((root / profile["name"]).iterdir()))


def test_a_run_that_measured_nothing_writes_a_pdf_that_says_so(tmp_path):
    # no server answers, and the profile names no model (optional for external servers)
    profile = {"name": "nothing", "backend": {"kind": "external"},
               "arms": [{"id": "ar", "kind": "ar", "url": DEAD[0]},
                        {"id": "linear-b16", "kind": "linear", "block_size": 16, "url": DEAD[1]}],
               "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 16, "temperature": 0},
               "load": {"concurrency": [1, 4], "requests_per_user": 2, "repetitions": 2}}
    out, run = reproduce_profile(profile, tmp_path)
    assert out.returncode == reproduce.EXIT_NOTHING, out.stdout + out.stderr
    assert "nothing was measured" in " ".join(out.stderr.split())
    flat = " ".join(subprocess.run(["pdftotext", str(run.report), "-"], capture_output=True, text=True).stdout.split())
    assert "Nothing was measured" in flat
    for arm, url in zip(("ar", "linear-b16"), DEAD, strict=True):
        assert f"{arm}, 4 cell(s): external arm '{arm}': no server answers at {url}" in flat
    assert "load generator's host" in flat.replace("’", "'")



def test_bench_in_one_line_writes_the_profile_and_runs_it(servers, tmp_path):
    ar_url, linear_url = servers
    out = tmp_path / "mine.yaml"
    run = subprocess.run([sys.executable, "-m", "ddbench", "bench", "--arm", f"ar={ar_url}",
                          "--arm", f"linear-b16={linear_url}", "--concurrency", "1", "--requests", "10",
                          "--repetitions", "2", "--max-tokens", "16", "--slo", "ttft_ms=1000", "-o", str(out),
                          "--results-root", str(tmp_path / "results")],
                         cwd=REPO, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert yaml.safe_load(out.read_text())["slo"] == {"ttft_ms": 1000.0}
    done = RunDir.open(next((tmp_path / "results" / "mine").iterdir()))
    assert done.report.is_file()
    good = pd.read_csv(done.tables / "goodput.csv")
    assert len(good) == 4 and (good["slo_share"] > 0).all()


def test_sglang_shaped_dflash_and_ddtree_servers_are_measured_to_a_report(refengine_servers, tmp_path):
    """Reference-engine AR, DFLASH and DDTREE servers behind fronts that describe themselves as the pinned SGLang
    does (every ServerArgs field, sizes named *_tokens, the --api-key echoed): every field but the key survives,
    each server matches its arm's shape, and the run ends 0 with a report."""
    from sglang_front import server_info

    from containers.launch import refengine_command, sglang_command
    from ddbench.core.profile import load_profile

    shipped = load_profile("gpu-sglang-checks")
    arms = [a for a in shipped.arms if a.id in ("ar", "linear-b16", "tree-b15-k8")]
    urls = {}
    for arm in arms:
        ref = refengine_command(load_profile("cpu-tiny"), arm, port=refengine_servers.free_port())
        argv = [sys.executable if a == "python3" else a for a in ref.argv] + ["--dtype", "float32"]
        upstream = refengine_servers.launch(argv, int(argv[argv.index("--port") + 1]), tmp_path / f"{arm.id}.log",
                                            env={**os.environ, **ref.env, "OMP_NUM_THREADS": "1"})
        info = server_info(sglang_command(shipped, arm).argv + ["--api-key", KEY], "ddtree-fork-433c58ed")
        (tmp_path / f"{arm.id}.json").write_text(json.dumps(info))
        port = refengine_servers.free_port()
        urls[arm.id] = refengine_servers.launch(
            [sys.executable, "tests/e2e/sglang_front.py", "--upstream", upstream, "--port", str(port),
             "--info", str(tmp_path / f"{arm.id}.json")], port, tmp_path / f"{arm.id}-front.log",
            env={**os.environ, "PYTHONPATH": str(REPO)})
    shapes = {"ar": {}, "linear-b16": {"block_size": 16}, "tree-b15-k8": {"block_size": 16, "budget": 15, "topk": 8}}
    profile = {"name": "sglang-shaped", "backend": {"kind": "external"},
               "models": {"target": TARGET, "drafter": DRAFTER},
               "arms": [{"id": a.id, "kind": a.kind, **shapes[a.id], "url": urls[a.id],
                         "api_key_env": "DDBENCH_E2E_AUTH"} for a in arms],
               "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 16, "temperature": 0},
               "load": {"concurrency": [1], "warmup_requests": 1, "requests_per_user": 10, "repetitions": 2}}
    out, run = reproduce_profile(profile, tmp_path, {"DDBENCH_E2E_AUTH": KEY})
    assert out.returncode == 0, out.stdout + out.stderr
    assert run.report.is_file()

    # the sizes whose names hold "token" are kept, the key is not, and its value is in no file of the run
    tree = json.loads((run.path / "tree-b15-k8" / "server_info.json").read_text())["endpoints"]["/get_server_info"]
    assert tree["speculative_algorithm"] == "DDTREE" and tree["speculative_num_draft_tokens"] == 16
    assert (tree["speculative_ddtree_budget"], tree["speculative_ddtree_topk"]) == (15, 8)
    assert tree["max_total_num_tokens"] > 0 and tree["internal_states"][0]["memory_usage"]["token_capacity"] > 0
    assert tree["api_key"] == "<redacted>" and tree["internal_states"][0]["api_key"] == "<redacted>"
    assert [str(f) for f in run.path.rglob("*") if f.is_file() and KEY.encode() in f.read_bytes()] == []

    checks = pd.read_csv(run.tables / "checks.csv", keep_default_na=False)
    matches = checks[checks["check"] == "server matches its arm"].set_index("scope")
    assert (matches["status"] == "pass").all(), matches.to_dict()
    assert "speculative_algorithm 'DDTREE'" in matches.loc["tree-b15-k8", "evidence"]
    flat = " ".join(subprocess.run(["pdftotext", str(run.report), "-"], capture_output=True, text=True).stdout.split())
    assert "DDTREE" in flat and "tree-b15-k8" in flat
