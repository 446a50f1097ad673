"""Sizing an SGLang server's --mem-fraction-static from its share of the whole GPU."""

from __future__ import annotations

import pytest

from containers import gpu_memory
from containers.gpu_memory import GpuMemoryError
from ddbench.core.profile import load_profile

GIB = 2 ** 30


def test_nvidia_smi_memory_lines_give_the_tightest_gpu_in_bytes():
    assert gpu_memory.parse_memory("143771, 143771\n") == (143771 * 2 ** 20, 143771 * 2 ** 20)
    assert gpu_memory.parse_memory("100000, 143771\n60000, 143771\n")[0] == 60000 * 2 ** 20
    with pytest.raises(GpuMemoryError, match="not understood"):
        gpu_memory.parse_memory("[N/A], 143771\n")
    with pytest.raises(GpuMemoryError, match="no GPU"):
        gpu_memory.parse_memory("")


def test_the_fraction_is_the_share_of_the_whole_gpu_over_what_is_free():
    assert gpu_memory.fraction(0.2, free=140 * GIB, total=140 * GIB) == 0.2
    assert gpu_memory.fraction(0.2, free=70 * GIB, total=140 * GIB) == 0.4
    with pytest.raises(GpuMemoryError, match="only 20.0 GiB are free"):
        gpu_memory.fraction(0.2, free=20 * GIB, total=140 * GIB)


def test_only_sglang_on_cuda_with_a_share_is_resized(monkeypatch, tmp_path):
    monkeypatch.setenv("DDBENCH_TWIN_DIR", str(tmp_path))
    twin = load_profile("h200-twin8b-sglang")
    mine, note = gpu_memory.fitted(twin, (70 * GIB, 140 * GIB))
    assert mine.runtime.mem_fraction_static == 0.31 and twin.runtime.mem_fraction_static == 0.155
    assert "--mem-fraction-static 0.31" in note
    assert gpu_memory.fitted(twin, None) == (twin, None)        # no nvidia-smi: nothing to share
    cpu = load_profile("cpu-tiny")
    assert not gpu_memory.shares_gpu(cpu) and gpu_memory.fitted(cpu, (1, 2)) == (cpu, None)


def test_a_placement_names_the_gpus_this_machine_lacks():
    assert gpu_memory.missing_gpus([0, 1], 2) is None
    assert "has 1 GPU(s) (ids 0-0); [1] do not exist" in gpu_memory.missing_gpus([0, 1], 1)
    assert "nvidia-smi not found" in gpu_memory.missing_gpus([0], None)


def test_reproduce_refuses_a_cuda_profile_on_a_machine_without_its_gpus(monkeypatch, tmp_path):
    from ddbench.preflight import problems

    monkeypatch.setenv("DDBENCH_TWIN_DIR", str(tmp_path))
    monkeypatch.setattr(gpu_memory, "count_gpus", lambda: 0)
    assert any(p.startswith("placement.gpus [0]: this machine has 0 GPU(s)")
               for p in problems(load_profile("h200-twin8b-sglang"), report=False))
    assert not any("placement" in p for p in problems(load_profile("cpu-tiny"), report=False))
