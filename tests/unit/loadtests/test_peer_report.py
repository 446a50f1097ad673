"""The peer comparison reads guidellm's report as analysis reads a cell: medians, and the rates requests were
sent and completed at."""

from loadtests.peer import parse_report


def test_guidellm_report_gives_medians_and_its_request_rate():
    def dist(median, mean=None):
        return {"successful": {"median": median, "mean": mean if mean is not None else median}}

    report = {"benchmarks": [{"duration": 10.0, "metrics": {
        "request_totals": {"successful": 40, "total": 42},
        "time_to_first_token_ms": dist(21.0), "inter_token_latency_ms": dist(4.5),
        "time_per_output_token_ms": dist(4.8), "requests_per_second": dist(3.9, mean=3.8)}}]}
    assert parse_report(report) == {"n": 40, "ttft_ms": 21.0, "tpot_ms": 4.5, "guidellm_tpot_ms": 4.8,
                                    "arrival_rate": 4.2, "achieved_rate": 3.8}
