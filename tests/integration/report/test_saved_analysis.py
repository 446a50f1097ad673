"""The report renders the analysis as saved: the same .tex as from the analysis in memory, with the run's record
files gone, and a clear refusal where no analysis was saved."""

import json
import re

import pytest

from analysis import saved
from analysis.analyze import analyze
from analysis.synth import REFENGINE, Plan, write_run
from ddbench.core.results import ANALYSIS_RECORD
from report.__main__ import main as report_main
from report.build import render


def _tex(a, build_dir):
    # the build time, as TeX writes it ("2026-{}12-{}07 17:33 UTC"), may pass a minute between two renders
    return re.sub(r"report built .*? UTC", "report built DATE", render(a, build_dir).read_text())


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    ref = write_run(root, Plan(requests_per_user=12, backend=dict(REFENGINE), profile_name="ref-tiny", seed=1))
    sgl = write_run(root, Plan(requests_per_user=12, lossy_arm="linear-b16", compare_with=str(ref.parent)))
    return sgl, analyze(sgl, bootstrap=50)


def test_the_saved_analysis_renders_the_same_report_without_the_records(pair, tmp_path):
    run, a = pair
    assert a.crosscheck is not None and len(a.checks) and (a.cells["status"] != "ok").any()
    before = _tex(a, tmp_path / "memory")
    saved.write(a)
    for f in run.glob("*/c*-r*/requests-*.jsonl*"):   # nothing is recomputed: the records are not needed
        f.unlink()
    back = saved.read(run)
    assert back.bootstrap == 50 and back.crosscheck.twin == a.crosscheck.twin
    assert back.lossless_note == a.lossless_note and back.refusals == a.refusals
    assert _tex(back, tmp_path / "saved") == before


def test_a_run_without_a_saved_analysis_is_refused_by_name(tmp_path, capsys):
    run = write_run(tmp_path, Plan(requests_per_user=4, repetitions=1, failed_cell=None))
    assert report_main([str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{run / ANALYSIS_RECORD}: no saved analysis" in err and f"python -m analysis {run}" in err
    assert not (run / "report.pdf").exists()


def test_an_analysis_saved_by_another_version_is_refused(tmp_path, capsys):
    run = write_run(tmp_path, Plan(requests_per_user=4, repetitions=1, failed_cell=None))
    saved.write(analyze(run, bootstrap=10))
    record = run / ANALYSIS_RECORD
    record.write_text(json.dumps({**json.loads(record.read_text()), "schema": saved.SCHEMA + 1}))
    assert report_main([str(run)]) == 2
    assert "saved by another version of ddbench" in capsys.readouterr().err
