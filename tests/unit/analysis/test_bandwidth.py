import math

import pandas as pd

from analysis.diagnose.bandwidth import ar_bandwidth, weight_bytes
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
