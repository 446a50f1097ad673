import math

import pandas as pd

from analysis.diagnose.bandwidth import ar_bandwidth, step_by_context, weight_bytes
from analysis.read import serverlog
from refengine.twin import SHAPES

QWEN3_8B = {k: v for k, v in vars(SHAPES["qwen3-8b"]).items()}


def cells(steps, kind="ar", c=1, status="ok"):
    return pd.DataFrame({"kind": kind, "concurrency": c, "status": status, "step_time_s": steps})


def test_qwen3_8b_weights_without_the_embedding_table():
    # Qwen3-8B has 8.19e9 parameters; less its 151936 x 4096 embedding table it reads 7.57e9 a step
    n = weight_bytes(QWEN3_8B) / 2
    assert abs(n + 151936 * 4096 - 8.19e9) / 8.19e9 < 0.01
    assert weight_bytes(QWEN3_8B, bytes_per_param=1) * 2 == weight_bytes(QWEN3_8B)


def test_share_of_the_h200_peak():
    b = ar_bandwidth(cells([0.006, 0.0062]), QWEN3_8B, "NVIDIA H200", "bfloat16")
    assert math.isclose(b["step_s"], 0.0061)
    assert math.isclose(b["achieved_tb_s"], weight_bytes(QWEN3_8B) / 0.0061 / 1e12)
    assert math.isclose(b["share"], b["achieved_tb_s"] / 4.8)
    assert b["floor_s"] < b["step_s"]


def test_only_ok_ar_cells_at_c1_count():
    mixed = pd.concat([cells([0.006]), cells([0.05], kind="linear"), cells([0.009], c=8),
                       cells([0.5], status="failed")])
    assert math.isclose(ar_bandwidth(mixed, QWEN3_8B, "NVIDIA H200", "bfloat16")["step_s"], 0.006)


def test_no_figure_without_a_shape_an_ar_cell_or_a_16_bit_dtype():
    assert ar_bandwidth(cells([0.006]), None, "NVIDIA H200", "bfloat16") is None
    assert ar_bandwidth(cells([0.006], kind="linear"), QWEN3_8B, "NVIDIA H200", "bfloat16") is None
    assert ar_bandwidth(cells([0.006]), QWEN3_8B, "NVIDIA H200", "float32") is None


def test_unknown_gpu_gets_the_rate_but_no_share():
    b = ar_bandwidth(cells([0.006]), QWEN3_8B, "Some GPU", "bfloat16")
    assert b["peak_tb_s"] is None and math.isnan(b["share"]) and b["achieved_tb_s"] > 0


def decode_log(firsts, tps, arm="ar", c=1, n=14, idle_tps=2.0):
    """SGLang's decode lines every 40 steps for requests served one after another, starting at each of firsts
    tokens, at tps(tokens) tokens/s; the first line of each request covers the idle time before it."""
    lines, t = [], 0
    for first in firsts:
        for i in range(n):
            t += 1
            tok = first + 40 * i
            lines.append(f"[2026-12-06 22:17:{t % 60:02d}] Decode batch, #running-req: 1, #token: {tok}, "
                         f"token usage: 0.00, cuda graph: True, gen throughput (token/s): "
                         f"{idle_tps if i == 0 else tps(tok)}, #queue-req: 0")
    df = serverlog.parse("\n".join(lines))
    df.insert(0, "arm", arm)
    return df.assign(concurrency=c)


def slowing(tokens):
    return 200.0 if tokens < 160 else 195.0 if tokens < 320 else 192.0 if tokens < 480 else 190.0


def test_ar_step_by_context_leaves_out_each_requests_first_line():
    # two requests in turn: their first lines would read 2 tok/s (500 ms a step) and must not count
    steps = step_by_context(decode_log([40, 60], slowing), ["ar"])
    assert list(steps["lo"]) == [0, 160, 320, 480]
    assert [round(1e3 / x, 6) for x in steps["step_ms"]] == [200.0, 195.0, 192.0, 190.0]
    assert steps["lines"].sum() == 2 * 13


def test_ar_step_by_context_reads_only_the_arms_asked_at_c1():
    log = pd.concat([decode_log([40], slowing, arm="ar-no-overlap"), decode_log([40], slowing, c=8)])
    assert step_by_context(log, ["ar"]).empty
    assert step_by_context(serverlog.parse(""), ["ar"]).empty
