"""Speed: the PDF build (figures, template, latexmk) of a synthetic run, reported by pytest-benchmark."""

import shutil

import pytest

from analysis.analyze import analyze
from analysis.synth import Plan, write_run
from report.build import build

pytestmark = pytest.mark.skipif(not shutil.which("latexmk"), reason="needs latexmk (apt)")


def test_pdf_build_time(benchmark, tmp_path):
    a = analyze(write_run(tmp_path, Plan(requests_per_user=20, repetitions=2)), bootstrap=200)
    pdf, _ = benchmark.pedantic(lambda: build(a), rounds=2, iterations=1)
    assert pdf.stat().st_size > 10_000
