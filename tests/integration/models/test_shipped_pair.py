"""The shipped pair (models/): loads offline through transformers, dflash and our engine; decodes
losslessly; and its tau on held-out prompts stays above a floor, so a broken checkpoint fails here.

Held-out prompts are token ids cut from held-out standard-library files (heldout_prompts.json).
The floors sit well under the measured values (model cards) yet far above a broken drafter's ~1.
"""

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from refengine.train import drafter as drafter_io  # noqa: E402
from refengine.train import greedy, tau, tokenizer  # noqa: E402
from refengine.train.draft_model import build_target_layer_ids  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
TARGET = REPO / "models" / "qwen3-stdlib-13m"
DRAFTER = REPO / "models" / "qwen3-stdlib-13m-dflash-b16"
PROMPTS = json.loads((Path(__file__).parent / "heldout_prompts.json").read_text())["prompts"]
NEW = 64
LINEAR_FLOOR = 2.5
TREE_FLOOR = 3.0

torch.set_num_threads(2)


@pytest.fixture(scope="module")
def target():
    return AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def runs(target):
    """Per prompt: the target's greedy sequence and our drafter's marginals along it."""
    model = drafter_io.load(DRAFTER)
    out = []
    for p in PROMPTS[:4]:
        seq = greedy.continue_greedy(target, torch.tensor([p["ids"]]), NEW)
        ids, lp = tau.marginals(model, target, seq, len(p["ids"]))
        out.append({"seq": seq[0].numpy(), "start": len(p["ids"]), "ids": ids[0], "lp": lp[0]})
    return out


def simulated(run, budget, topk):
    return tau.walk(run["seq"], run["start"], NEW, run["ids"], run["lp"], budget, topk)


def test_size_dtype_and_layout():
    total = sum(f.stat().st_size for d in (TARGET, DRAFTER) for f in d.iterdir())
    assert total <= 40e6, f"models weigh {total / 1e6:.1f} MB, over the 40 MB budget"
    for d in (TARGET, DRAFTER):
        for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md"):
            assert (d / name).is_file(), f"{d / name} missing"
    t = json.loads((TARGET / "config.json").read_text())
    c = json.loads((DRAFTER / "config.json").read_text())
    assert t["architectures"] == ["Qwen3ForCausalLM"] and t["torch_dtype"] == "bfloat16"
    assert c["architectures"] == ["DFlashDraftModel"] and c["block_size"] == 16
    assert c["num_target_layers"] == t["num_hidden_layers"]
    from dflash.model import build_target_layer_ids as zlab_rule
    layers = (t["num_hidden_layers"], c["num_hidden_layers"])
    assert c["dflash_config"]["target_layer_ids"] == build_target_layer_ids(*layers) == zlab_rule(*layers)
    tok = tokenizer.load(TARGET)
    assert c["dflash_config"]["mask_token_id"] == tok.token_to_id(tokenizer.MASK)


def test_autotokenizer_offline_with_chat_template():
    for d in (TARGET, DRAFTER):
        tok = AutoTokenizer.from_pretrained(d)
        assert tok.eos_token == tokenizer.EOS and tok.bos_token == tokenizer.BOS
        assert tok.mask_token == tokenizer.MASK
        msgs = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": 'Write a function that says """hi"""'}]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        assert text == tokenizer.render_chat(msgs)
        assert text.startswith('<|bos|>"""Be brief.\n"""\n\n"""Write a function that says \'\'\'hi\'\'\'\n"""\n\n')
        ids = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1


def test_target_loads_and_continues_held_out_code(target):
    assert sum(p.numel() for p in target.parameters()) == 12_588_672
    seq = greedy.continue_greedy(target, torch.tensor([PROMPTS[1]["ids"]]), 32)[0].tolist()
    text = AutoTokenizer.from_pretrained(TARGET).decode(seq[len(PROMPTS[1]["ids"]):])
    compile(PROMPTS[1]["text"].removeprefix("<|bos|>") + "\n", "<prompt>", "exec")  # the prompt is Python
    assert any(w in text for w in ("import", "def ", "class ", "self", "=")), text


def test_tau_floor_on_held_out_prompts(runs):
    lin = [c for r in runs for c in simulated(r, 15, 1)]
    tree = [c for r in runs for c in simulated(r, 15, 8)]
    lin_tau, tree_tau = sum(lin) / len(lin), sum(tree) / len(tree)
    assert lin_tau >= LINEAR_FLOOR, f"linear-b16 tau {lin_tau:.2f} under the floor {LINEAR_FLOOR}"
    assert tree_tau >= TREE_FLOOR, f"tree-b15-k8 tau {tree_tau:.2f} under the floor {TREE_FLOOR}"
    assert tree_tau > lin_tau


def test_dflash_oracle_decodes_losslessly_with_the_simulated_acceptance(target, runs, monkeypatch):
    import dflash.model as zlab
    # return_stats times with torch.cuda.synchronize; on a CPU a plain clock does the same job
    monkeypatch.setattr(zlab, "_cuda_time", time.perf_counter)
    drafter = zlab.DFlashDraftModel.from_pretrained(DRAFTER, dtype=torch.float32).eval()
    assert drafter.block_size == 16 and drafter.mask_token_id == 4
    got = want = 0.0
    for r in runs:
        prompt = torch.from_numpy(r["seq"][: r["start"]].astype(np.int64))[None]
        out = zlab.dflash_generate(drafter, target, prompt, NEW, None, temperature=0.0, return_stats=True)
        assert out.output_ids[0].tolist() == r["seq"].tolist(), "DFlash decoding differs from the target's greedy"
        assert sum(out.acceptance_lengths) == NEW - 1
        sim = simulated(r, 15, 1)
        got += (NEW - 1) / len(out.acceptance_lengths)
        want += (NEW - 1) / len(sim)
    # The same drafter run two ways (z-lab's cached single blocks, our masked all-anchors forward):
    # fp32 both, so only near-ties of the drafter's argmax may move a step.
    assert got == pytest.approx(want, rel=0.1), f"dflash tau {got / len(runs):.2f}, simulated {want / len(runs):.2f}"


def test_reference_engine_loads_and_matches(runs):
    engine_mod = pytest.importorskip("refengine.engine")
    from refengine.drafter import Drafter
    from refengine.model import Target
    from refengine.plan import Plan
    eng = engine_mod.Engine(Target.from_pretrained(TARGET, torch.float32, "cpu"),
                            Drafter.from_pretrained(DRAFTER, torch.float32, "cpu"))
    for plan, budget, topk in (("linear-b16", 15, 1), ("tree-b15-k8", 15, 8)):
        got = want = 0
        for r in runs:
            prompt = r["seq"][: r["start"]].tolist()
            out = eng.generate(prompt, Plan.parse(plan), max_tokens=NEW)
            assert out.tokens[-NEW:] == r["seq"][r["start"]:].tolist(), f"{plan}: not the target's greedy output"
            got += sum(s.committed for s in out.steps) / len(out.steps)
            sim = simulated(r, budget, topk)
            want += sum(sim) / len(sim)
        n = len(runs)
        assert got == pytest.approx(want, rel=0.1), f"{plan}: engine tau {got / n:.2f}, simulated {want / n:.2f}"
