"""Speed: analysis of 100k synthetic request records (target: under 30 s on the 2-core dev machine).

Run with: .venv/bin/pytest tests/integration/analysis/test_bench_analysis.py --benchmark-only
The time is reported by pytest-benchmark, not asserted: timing asserts are flaky on shared machines."""

import pytest

from analysis import saved
from analysis.analyze import analyze
from analysis.synth import Plan, write_run

# 4 arms × users summed over C ∈ {1, 2, 4, 8, 16} = 124 users; 807 measured + 2 warmup each ≈ 100k records
PLAN = Plan(concurrency=[1, 2, 4, 8, 16], repetitions=1, requests_per_user=807, failed_cell=None, prompts=60)


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("big"), PLAN)


def test_analysis_of_100k_records(benchmark, big_run):
    result = benchmark.pedantic(lambda: saved.write(analyze(big_run)) and None, rounds=1, iterations=1)
    assert result is None
    a = analyze(big_run, bootstrap=10)
    assert len(a.requests) >= 100_000
    benchmark.extra_info["records"] = len(a.requests)
