"""Prefill's share at C=1: each ratio end to end beside decoding alone, and each side's share before its first
token; nothing without a C=1 TPOT ratio."""

from types import SimpleNamespace

import pandas as pd

from report import tables


def test_each_c1_ratio_sits_beside_its_decode_only_ratio_and_the_prefill_shares():
    speedups = pd.DataFrame([
        {"arm": "linear-b16", "baseline": "ar", "concurrency": 1, "speedup": 3.015, "speedup_lo": 2.9,
         "speedup_hi": 3.1, "tpot_ratio": 3.499, "tpot_ratio_lo": 3.289, "tpot_ratio_hi": 3.724},
        {"arm": "linear-b16", "baseline": "ar", "concurrency": 8, "speedup": 1.7, "speedup_lo": 1.6,
         "speedup_hi": 1.8, "tpot_ratio": float("nan"), "tpot_ratio_lo": float("nan"),
         "tpot_ratio_hi": float("nan")}])
    cells = pd.DataFrame([{"arm": "linear-b16", "concurrency": 1, "status": "ok", "ttft_mean": 0.017, "e2e_mean": 0.1},
                          {"arm": "ar", "concurrency": 1, "status": "ok", "ttft_mean": 0.009, "e2e_mean": 0.3}])
    text = str(tables.prefill(SimpleNamespace(speedups=speedups, cells=cells)))
    assert "3.015" in text and "3.499" in text and "17 / 3" in text
    assert "1.7" not in text.replace("17 / 3", "")          # C=8 has no decode-only ratio: not shown
    assert tables.prefill(SimpleNamespace(speedups=speedups[speedups["concurrency"] == 8], cells=cells)) is None
