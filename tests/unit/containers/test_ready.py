import pytest

from containers.ready import TAIL_LINES, BringUpError, last_traceback, tail, wait_ready

LOG = """starting
Traceback (most recent call last):
  File "a.py", line 1, in <module>
    first()
ValueError: an earlier failure
loading model
Traceback (most recent call last):
  File "serve.py", line 9, in <module>
    load()
  File "serve.py", line 5, in load
    raise FileNotFoundError("models/x/config.json")
FileNotFoundError: models/x/config.json
shutting down
"""


def test_the_last_traceback_is_found_through_its_exception_line():
    tb = last_traceback(LOG)
    assert tb.splitlines()[0] == "Traceback (most recent call last):"
    assert tb.splitlines()[-1] == "FileNotFoundError: models/x/config.json"
    assert "earlier failure" not in tb
    assert last_traceback("no trouble here\n") is None


def test_chained_tracebacks_are_kept_whole():
    log = ("Traceback (most recent call last):\n  File \"x\", line 1\nKeyError: 'a'\n\n"
           "During handling of the above exception, another exception occurred:\n\n"
           "Traceback (most recent call last):\n  File \"y\", line 2\nRuntimeError: b\n")
    assert last_traceback(log).splitlines()[-1] == "RuntimeError: b"


def test_tail_keeps_the_last_lines():
    text = "\n".join(f"line {i}" for i in range(200)) + "\n"
    assert tail(text).splitlines() == [f"line {i}" for i in range(200 - TAIL_LINES, 200)]


def test_the_error_says_what_happened_first_then_traceback_then_log_tail():
    e = BringUpError("arm 'ar' exited with code 1 before it was ready", LOG)
    lines = str(e).splitlines()
    assert lines[0] == "arm 'ar' exited with code 1 before it was ready"
    assert "Python traceback:" in lines and f"last {TAIL_LINES} log lines:" in lines
    assert lines[-1] == "shutting down"
    assert e.summary == lines[0]


def test_a_server_that_exits_fails_at_once_with_its_log():
    with pytest.raises(BringUpError) as info:
        wait_ready("http://127.0.0.1:9", exited=lambda: "exited with code 3", logs=lambda: LOG, timeout_s=60,
                   what="arm 'x'")
    assert str(info.value).startswith("arm 'x' exited with code 3 before it was ready (waiting for /v1/models")
    assert info.value.traceback.endswith("FileNotFoundError: models/x/config.json")


def test_a_cells_reason_carries_the_cause_and_where_the_log_is():
    e = BringUpError("arm 'ar' exited with code 1 before it was ready", LOG).naming("/r/ar/server.log")
    assert e.summary == ("arm 'ar' exited with code 1 before it was ready; it said: FileNotFoundError: "
                         "models/x/config.json; its log: /r/ar/server.log")
    quiet = BringUpError("arm 'ar' exited with code 1 before it was ready", "").naming("/r/ar/server.log")
    assert quiet.summary.endswith("before it was ready; its log: /r/ar/server.log")
