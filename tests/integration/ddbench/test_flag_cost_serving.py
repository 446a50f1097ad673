"""ddbench.flag_cost for real on the CPU: cpu-tiny's AR through the reference engine with ddbench's flags and
with the server's defaults, requests in turns."""

import json

from ddbench.flag_cost import run


def test_flags_against_defaults_on_cpu_tiny(tmp_path):
    got = run("cpu-tiny", "ar", [8, 4], 2, tmp_path)
    assert [(g["server"], g["max_tokens"], g["requests"]) for g in got] == [
        ("flags", 8, 2), ("defaults", 8, 2), ("flags", 4, 2), ("defaults", 4, 2)]
    assert all(g["tok_s"] > 0 and g["tpot_ms"] > 0 and g["ttft_ms"] > 0 for g in got)
    saved = json.loads((tmp_path / "flag_cost.json").read_text())
    assert "--enable-metrics" in saved["argv"]["flags"] and "--enable-metrics" not in saved["argv"]["defaults"]
    assert [r["tokens"] for r in saved["requests"]] == [8] * 4 + [4] * 4
    # each round sends one prompt to both servers, the order rotated
    assert [r["server"] for r in saved["requests"][:4]] == ["flags", "defaults", "defaults", "flags"]
    assert (tmp_path / "flags.log").is_file() and (tmp_path / "defaults.log").is_file()
