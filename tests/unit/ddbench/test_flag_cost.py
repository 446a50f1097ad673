import pytest

from ddbench.flag_cost import defaults_argv, run, summary


def test_the_defaults_server_keeps_only_what_the_build_needs():
    argv = ["py", "-m", "sglang.launch_server", "--model-path", "/t", "--host", "127.0.0.1", "--port", "9",
            "--enable-metrics", "--decode-log-interval", "40", "--attention-backend", "triton",
            "--mem-fraction-static", "0.16", "--sleep-on-idle", "--cuda-graph-bs", "1", "2", "4",
            "--sampling-backend", "pytorch"]
    assert defaults_argv(argv) == ["py", "-m", "sglang.launch_server", "--model-path", "/t", "--host", "127.0.0.1",
                                   "--port", "9", "--attention-backend", "triton", "--mem-fraction-static", "0.16",
                                   "--sampling-backend", "pytorch"]


def test_summary_per_server_and_length_in_order_of_first_appearance():
    rows = [{"server": s, "max_tokens": n, "tok_s": v, "tpot_ms": 1e3 / v, "ttft_ms": t}
            for s, n, v, t in (("flags", 512, 100.0, 20.0), ("defaults", 512, 110.0, 22.0),
                               ("flags", 512, 102.0, 30.0), ("flags", 128, 90.0, 10.0))]
    got = summary(rows)
    assert [(g["server"], g["max_tokens"], g["requests"]) for g in got] == [
        ("flags", 512, 2), ("defaults", 512, 1), ("flags", 128, 1)]
    assert got[0]["tok_s"] == 101.0 and got[0]["ttft_ms"] == 25.0


def test_a_speculative_arm_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="arm linear-b16 is linear"):
        run("cpu-tiny", "linear-b16", [8], 1, tmp_path)
