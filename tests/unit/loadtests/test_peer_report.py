"""The peer comparison's two sides read alike: guidellm's report and our achieved rate."""

import pytest

from loadtests.peer import achieved_rate, parse_report


def test_achieved_rate_counts_only_requests_ending_inside_the_window():
    s = 1_000_000_000
    # a 2-second window; one request ended before it opened, one after it closed
    assert achieved_rate([s // 2, s + 1, 2 * s, 3 * s, 3 * s + 1], s, 3 * s) == pytest.approx(1.5)


def test_guidellm_report_gives_medians_and_its_request_rate():
    def dist(median, mean=None):
        return {"successful": {"median": median, "mean": mean if mean is not None else median}}

    report = {"benchmarks": [{"metrics": {
        "request_totals": {"successful": 40},
        "time_to_first_token_ms": dist(21.0), "inter_token_latency_ms": dist(4.5),
        "time_per_output_token_ms": dist(4.8), "requests_per_second": dist(3.9, mean=3.8)}}]}
    assert parse_report(report) == {"n": 40, "ttft_ms": 21.0, "tpot_ms": 4.5, "guidellm_tpot_ms": 4.8,
                                    "achieved_rate": 3.8}
