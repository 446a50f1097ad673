"""A run on the SGLang DDTree fork is trusted only when the overlay check passed on the build that served it."""

import json

import pytest

from analysis.analyze import analyze
from analysis.synth import SGLANG, Plan, write_run

NAME = "DDTree build's DFLASH = stock DFLASH (overlay check)"
BUILD = {"repo": "https://github.com/Rancy-Wang/sglang", "commit": "3" * 40, "head": "f" * 40}


@pytest.fixture
def fork_run(tmp_path):
    plan = Plan(arms=[{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16}],
                concurrency=[1], repetitions=2, requests_per_user=4, failed_cell=None,
                backend={**SGLANG, "ddtree": "fork"})
    run = write_run(tmp_path, plan)
    m = json.loads((run / "manifest.json").read_text())
    m["sglang_source"] = {"site": "/tmp/site-sglang-ddtree", "layer": "sglang-ddtree", "source": BUILD}
    (run / "manifest.json").write_text(json.dumps(m))
    return run


def _write(run, stock_steps, fork_steps, build=BUILD):
    doc = {"diagnostic": "overlay-check", "schema": 1, "arm": "linear-b16", "steps_from": "metrics",
           "prompts": {"ids": ["a", "b", "c"]}, "build": build, "same_outputs": True,
           "passed": stock_steps == fork_steps,
           "sides": {"stock": {"status": "ok", "verify_steps": stock_steps},
                     "fork": {"status": "ok", "verify_steps": fork_steps}}}
    (run / "diagnostics").mkdir(exist_ok=True)
    (run / "diagnostics" / "overlay-check.json").write_text(json.dumps(doc))


def _check(run):
    c = analyze(run, bootstrap=20).checks
    row = c[c["check"] == NAME]
    assert len(row) == 1
    return row.iloc[0]


def test_no_overlay_check_fails(fork_run):
    r = _check(fork_run)
    assert r["status"] == "fail" and "overlay-check" in r["evidence"]


def test_equal_steps_pass_and_unequal_fail(fork_run):
    _write(fork_run, 55, 55)
    assert _check(fork_run)["status"] == "pass"
    _write(fork_run, 55, 167)          # the trial without the rope fix: acceptance collapses
    r = _check(fork_run)
    assert r["status"] == "fail" and "167" in r["evidence"]


def test_a_check_of_another_build_does_not_count(fork_run):
    _write(fork_run, 55, 55, build={**BUILD, "head": "e" * 40})
    r = _check(fork_run)
    assert r["status"] == "fail" and "served by" in r["evidence"]


def test_a_stock_run_has_no_overlay_check(tmp_path):
    run = write_run(tmp_path, Plan(concurrency=[1], repetitions=2, requests_per_user=4, failed_cell=None))
    c = analyze(run, bootstrap=20).checks
    assert (c["check"] == NAME).sum() == 0


def test_the_check_of_this_build_in_another_run_counts_once_per_build(fork_run):
    other = fork_run.parent.parent / "another-profile" / "20260101T000000Z-aaaaaa"
    other.mkdir(parents=True)
    _write(other, 95, 95, build={**BUILD, "head": "e" * 40})     # another build: does not count
    assert _check(fork_run)["status"] == "fail"
    _write(other, 95, 95)                                        # this build, checked in the other run
    r = _check(fork_run)
    assert r["status"] == "pass" and "checked once for this build, in another-profile/" in r["evidence"]
    _write(other, 95, 170)
    assert _check(fork_run)["status"] == "fail"
