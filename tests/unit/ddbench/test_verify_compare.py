"""verify's comparison: tokens and tau of the prompts both runs measured; a prompt only one
run reached (duration-bound cells) is not a difference, a run that shares none is."""

import json

from ddbench.core.records import Chunk, RequestRecord, Usage
from ddbench.core.results import RunDir
from ddbench.verify import compare
from loadtests.recorder import RecordFile


def _run(root, name, outputs: dict[str, tuple[str, int]]):
    run = RunDir.create("v", root=root / name)
    cell = run.cell_dir("ar", 1, 1)
    cell.mkdir(parents=True)
    f = RecordFile(cell, "w:1")
    for i, (pid, (text, steps)) in enumerate(outputs.items()):
        f.write(RequestRecord(request_id=f"r{i}", arm="ar", concurrency=1, repetition=1, warmup=False,
                              prompt_id=pid, category="c", worker="w:1", user=0, max_tokens=8, temperature=0.0,
                              send_ns=10 + i, send_unix_ns=20, chunks=[Chunk(t_ns=11 + i, text=text)],
                              end_ns=12 + i, status=200, usage=Usage(prompt_tokens=3, completion_tokens=8),
                              spec={"spec_verify_ct": steps}))
    f.close()
    (cell / "status.json").write_text(json.dumps({"window_start_ns": 1, "window_end_ns": 10**9}))
    return run


def test_only_shared_prompts_are_compared(tmp_path):
    old = _run(tmp_path, "a", {"p1": ("hello", 4), "p2": ("world", 4)})
    same = _run(tmp_path, "b", {"p1": ("hello", 4), "p3": ("extra", 2)})
    assert compare(old, same, ["ar"]) == []
    other = _run(tmp_path, "c", {"p1": ("help!", 2)})
    diffs = compare(old, other, ["ar"])
    assert any("ar / p1: output differs from character 3" in d for d in diffs)
    assert any("ar / p1: tau 2.0 vs 4.0" in d for d in diffs)
    disjoint = _run(tmp_path, "d", {"p9": ("x", 1)})
    assert compare(old, disjoint, ["ar"]) == ["ar: no prompt was measured in both runs"]
