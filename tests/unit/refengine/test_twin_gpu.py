"""A twin made on CUDA has the CPU build's bytes (the seeded values are integer hashes; the pair's part
is one IEEE multiply), so an 8B twin built on a GPU is the one a CPU would build. Skipped without a GPU."""

from __future__ import annotations

import json

import pytest
import torch

from refengine import twin
from refengine.config import DrafterConfig, TargetConfig

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not (twin.PAIR_TARGET / "config.json").is_file(), reason="no shipped pair")]


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_a_cuda_build_has_the_cpu_builds_bytes(tmp_path, dtype):
    runs = [twin.build("tiny-twin", tmp_path / dev, dtype=dtype, device=dev, shard_bytes=100_000_000)
            for dev in ("cuda", "cpu")]
    files = [json.loads((r / "twin.json").read_text())["files"] for r in runs]
    assert files[0] == files[1] and len(files[0]) >= 8


def test_the_8b_config_and_tensors_are_device_independent(tmp_path):
    lay = twin.layout("qwen3-8b")
    raw = [json.loads((d / "config.json").read_text()) for d in (twin.PAIR_TARGET, twin.PAIR_DRAFTER)]
    tcfg, dcfg = twin.configs(lay, *raw, "bf16")
    for role, cfg in (("target", tcfg), ("drafter", dcfg)):
        (tmp_path / role).mkdir()
        (tmp_path / role / "config.json").write_text(json.dumps(cfg))
    t, d = TargetConfig.load(tmp_path / "target"), DrafterConfig.load(tmp_path / "drafter")
    assert (t.hidden_size, t.num_hidden_layers, t.vocab_size, d.num_hidden_layers, d.target_layer_ids) == \
        (4096, 36, 151936, 5, [1, 9, 17, 25, 33])
    transformers = pytest.importorskip("transformers")
    assert transformers.AutoConfig.from_pretrained(tmp_path / "target").num_key_value_heads == 8
    pair = [twin.load_pair_state(d) for d in (twin.PAIR_TARGET, twin.PAIR_DRAFTER)]
    makers = [twin.Maker(lay, *pair, seed=0, dtype=torch.bfloat16, device=dev) for dev in ("cuda", "cpu")]
    names = dict(twin.tensor_shapes(TargetConfig.from_hf(tcfg), twin.Target))
    # a ballast layer's largest matrix, a mapped layer's (seeded heads + the pair's), and the padded head
    for name in ("model.layers.2.mlp.gate_proj.weight", "model.layers.9.self_attn.q_proj.weight",
                 "model.layers.9.self_attn.q_norm.weight", "lm_head.weight"):
        a, b = (m.target(name, names[name]) for m in makers)
        assert a.dtype == torch.bfloat16 and a.device.type == "cpu"
        assert torch.equal(a.view(torch.int16), b.view(torch.int16)), name
