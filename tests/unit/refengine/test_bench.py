"""`python -m refengine.bench` (`just bench-engine`) on the random pair: its JSON, and --profile's
split of the tree arms' bookkeeping."""

import json

from refengine.bench import PARTS, main


def test_bench_json_and_bookkeeping_parts(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["--arms", "ar,linear-b8,tree-b7-k2", "--n-prompts", "2", "--max-tokens", "12",
                 "--profile", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    arms = {a["arm"]: a for a in doc["arms"]}
    assert set(arms) == {"ar", "linear-b8", "tree-b7-k2"}
    assert arms["ar"]["tau"] == 1.0
    for a in ("linear-b8", "tree-b7-k2"):
        assert arms[a]["tau"] >= 1.0 and arms[a]["steps"] > 0
    # only tree/chain arms are split, and each labelled part of their step was seen
    assert set(doc["bookkeeping_us"]) == {"tree-b7-k2"}
    assert all(doc["bookkeeping_us"]["tree-b7-k2"][p] > 0 for p in PARTS)
    printed = capsys.readouterr().out
    assert "bookkeeping parts" in printed and "2/2" in printed  # every arm's tokens equal ar's


def test_kernels_say_what_each_bare_forward_spends_its_time_in(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["--arms", "ar", "--n-prompts", "1", "--max-tokens", "4", "--kernels", "--json", str(out)]) == 0
    kernels = json.loads(out.read_text())["kernels"]
    assert {"target 1-token forward", "drafter 16-token block"} <= set(kernels)
    for k in kernels.values():
        us = [r["us"] for r in k["top"]]
        assert us == sorted(us, reverse=True) and 0 < sum(us) <= k["total_us"] + 1e-6 and k["kernels"] >= len(us)
    # on the CPU the forward's ops: a matrix multiply is among them, and on top of the target's
    assert any("mm" in r["kernel"] for r in kernels["target 1-token forward"]["top"][:3])
    assert "us of ops in" in capsys.readouterr().out
