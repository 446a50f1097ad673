import json

import pytest

from containers.telemetry import Telemetry, open_source, parse_smi, reason_names

# two GPUs as `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` prints them; the second is
# power-capped and reports no power reading
SMI = """0, 1980, 2619, 41, 312.47, 97, 58, 0x0000000000000000, 80123
1, 1410, 2619, 67, [N/A], 100, 61, 0x0000000000000004, 80011
"""


def test_nvidia_smi_rows_become_samples_shaped_like_nvml():
    a, b = parse_smi(SMI)
    assert a == {"index": 0, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "temperature_c": 41, "power_w": 312.47,
                 "utilization_gpu_pct": 97, "utilization_mem_pct": 58, "memory_used_bytes": 80123 * 2**20,
                 "throttle_mask": 0, "throttle": []}
    assert b["power_w"] is None and b["throttle"] == ["sw_power_cap"] and b["temperature_c"] == 67


def test_a_short_smi_row_is_an_error_naming_the_line():
    with pytest.raises(ValueError, match="expected 9"):
        parse_smi("0, 1980, 2619\n")


def test_throttle_bits_are_named():
    assert reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert reason_names(None) == []


def test_samples_go_to_telemetry_jsonl_and_a_missing_gpu_is_recorded_not_raised(tmp_path):
    path = tmp_path / "cell" / "telemetry.jsonl"
    source, reason = open_source(None)
    with Telemetry(path, interval_s=0.05) as t:
        import time

        time.sleep(0.3)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    head, samples = rows[0], rows[1:]
    assert head["kind"] == "source"
    if source is None:  # this machine: no GPU, said so with the reasons
        assert head["gpu"] == "absent" and "nvml" in head["reason"] and "nvidia-smi" in head["reason"]
        assert all("gpus" not in s for s in samples)
    else:
        source.close()
        assert head["gpu"] in ("nvml", "nvidia-smi")
        assert all(s["gpus"] for s in samples)
    assert len(samples) == t.samples >= 3
    assert all(s["kind"] == "sample" and 0 <= s["host"]["cpu_pct"] <= 100 * 512 for s in samples)
    assert [s["t_ns"] for s in samples] == sorted(s["t_ns"] for s in samples)


@pytest.mark.gpu
def test_nvml_reports_clocks_temperature_power_and_throttling(tmp_path):
    path = tmp_path / "telemetry.jsonl"
    with Telemetry(path, gpus=[0], interval_s=0.1):
        import time

        time.sleep(0.5)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[0]["gpu"] == "nvml"
    gpu = rows[-1]["gpus"][0]
    assert gpu["index"] == 0 and gpu["sm_clock_mhz"] > 0 and gpu["mem_clock_mhz"] > 0
    assert 0 < gpu["temperature_c"] < 120 and gpu["power_w"] > 0
    assert isinstance(gpu["throttle_mask"], int) and gpu["memory_used_bytes"] > 0


def _spin(seconds: float) -> None:
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_foreign_cpu_counts_work_outside_this_process_tree_not_inside():
    import subprocess
    import sys
    import time

    from containers.telemetry import ForeignCpu

    f = ForeignCpu()
    assert f.read() is None                     # the first reading only primes it
    _spin(0.8)                                  # our own work: not foreign
    assert f.read() < 0.3
    # a busy loop orphaned by its shell (reparented away from this tree): another tenant's work
    loop = "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass"
    subprocess.run(["sh", "-c", f"'{sys.executable}' -c '{loop}' >/dev/null 2>&1 &"], check=True)
    f.read()
    time.sleep(1.0)
    assert f.read() > 0.5
