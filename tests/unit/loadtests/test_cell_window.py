from ddbench.core.profile import Load
from ddbench.core.records import RequestRecord
from loadtests.cell import judge, window


def rec(user, warmup, send, end, status=200, error=None, intended=None):
    return RequestRecord(request_id=f"{user}-{send}", arm="ar", concurrency=2, repetition=1, warmup=warmup,
                         prompt_id="p", category="c", worker="w", user=user, max_tokens=8, temperature=0.0,
                         send_ns=send, send_unix_ns=0, end_ns=end, status=status, error=error,
                         intended_send_ns=intended)


RECORDS = [rec(0, True, 0, 100), rec(1, True, 0, 150), rec(0, False, 100, 220), rec(1, False, 150, 300),
           rec(0, False, 220, 290, status=500, error="HTTP 500: x")]


def test_closed_window_runs_from_the_last_warmup_end_to_the_last_measured_end():
    assert window(RECORDS, "closed") == (150, 300)


def test_without_warmup_the_window_starts_at_the_first_measured_send():
    assert window([r for r in RECORDS if not r.warmup], "closed") == (100, 300)


def test_open_window_starts_at_the_first_intended_send():
    rs = [rec(0, False, 105, 200, intended=90), rec(1, False, 130, 260, intended=120)]
    assert window(rs, "open") == (90, 260)


def test_judge_counts_measured_requests_and_errors(tmp_path):
    st = judge(RECORDS, Load(concurrency=[2], requests_per_user=1), 2, 0, False, 60, tmp_path)
    assert st.status == "failed" and "expected 2 x 1" in st.reason  # 3 measured records, not 2
    st = judge(RECORDS[:4], Load(concurrency=[2], requests_per_user=1), 2, 0, False, 60, tmp_path)
    assert (st.status, st.requests, st.errors, st.window_start_ns, st.window_end_ns) == ("ok", 2, 0, 150, 300)
    st = judge(RECORDS, Load(concurrency=[2], duration_s=5), 2, 0, False, 60, tmp_path)
    assert (st.status, st.requests, st.errors) == ("ok", 3, 1)


def test_judge_fails_a_crashed_or_empty_cell(tmp_path):
    assert "exited with code 3" in judge(RECORDS, Load(concurrency=[2], duration_s=5), 2, 3, False, 60, tmp_path).reason
    empty = judge([], Load(concurrency=[2], duration_s=5), 2, 0, False, 60, tmp_path)
    assert empty.reason == "no measured request completed"
    assert "60 s limit" in judge(RECORDS, Load(concurrency=[2], duration_s=5), 2, 0, True, 60, tmp_path).reason
