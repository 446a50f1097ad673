import json
import os
from pathlib import Path

import pytest

from ddbench.core.manifest import finish_run, start_run
from ddbench.core.profile import load_profile
from ddbench.core.results import RunDir, parse_cell_name, redact, write_json_atomic, write_text_atomic


def test_atomic_write_keeps_old_content_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "status.json"
    write_json_atomic(target, {"status": "ok"})

    def disk_full(fd):  # fails after the new bytes were written to the temp file
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_json_atomic(target, {"status": "failed", "reason": "x" * 10000})
    assert json.loads(target.read_text()) == {"status": "ok"}
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temp file left behind


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "a" / "log.txt"
    write_text_atomic(target, "x" * 1000)
    write_text_atomic(target, "short")
    assert target.read_text() == "short"


def test_run_dirs_are_never_overwritten(tmp_path):
    run = RunDir.create("cpu-tiny", root=tmp_path, run_id="20260101T000000Z-abcdef")
    (run.path / "keep").write_text("data")
    with pytest.raises(FileExistsError, match="never overwritten"):
        RunDir.create("cpu-tiny", root=tmp_path, run_id="20260101T000000Z-abcdef")
    assert (run.path / "keep").read_text() == "data"


def test_run_ids_are_unique_and_sortable(tmp_path):
    ids = {RunDir.create("p", root=tmp_path).path.name for _ in range(20)}
    assert len(ids) == 20
    assert all(i[8] == "T" and i.endswith(i[-6:]) and len(i) == 23 for i in ids)


def test_cell_layout(tmp_path):
    run = RunDir.create("p", root=tmp_path)
    d = run.cell_dir("tree-b15-k8", 8, 2)
    d.mkdir(parents=True)
    assert d.name == "c8-r2" and parse_cell_name(d.name) == (8, 2)
    assert [(a, c, r) for a, c, r, _ in run.cells()] == [("tree-b15-k8", 8, 2)]
    with pytest.raises(ValueError, match="not a cell directory"):
        parse_cell_name("c8")


def test_secrets_never_reach_results(tmp_path, monkeypatch, write_profile):
    fake = "hf_FAKEtoken1234567890"
    monkeypatch.setenv("HF_TOKEN", fake)
    monkeypatch.setenv("MY_API_KEY", "sk-also-secret-999")
    monkeypatch.setenv("SGLANG_DDTREE_DEPTH_BONUS", "0.2")
    assert redact(f"token={fake}") == "token=<redacted>"
    profile = load_profile(write_profile(lambda d: d["runtime"].update(env={"HF_TOKEN": fake})))
    run = RunDir.create(profile.name, root=tmp_path)
    start_run(profile, "test", run)
    write_text_atomic(run.arm_dir("ar") / "server.log", f"loading with token {fake}\n")
    finish_run(run, note=f"key sk-also-secret-999 {fake}")
    for path in Path(run.path).rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert fake not in text and "sk-also-secret-999" not in text, path
    manifest = run.manifest()
    assert manifest["environment"]["HF_TOKEN"] == "<redacted>"
    assert manifest["environment"]["SGLANG_DDTREE_DEPTH_BONUS"] == "0.2"


def test_manifest_contents(tmp_path, write_profile):
    profile = load_profile(write_profile())
    run = RunDir.create(profile.name, root=tmp_path)
    start_run(profile, "src.yaml", run)
    m = finish_run(run)
    assert m["profile"]["name"] == "t" and m["profile_digest"] == profile.digest()
    assert len(m["prompt_set_digest"]) == 64
    assert set(m["git"]) == {"sha", "dirty"}
    host = m["host"]
    assert host["cores"] == os.cpu_count() and host["memory_bytes"] > 0 and host["cpu"]
    assert host["gpus"] == [] or host["gpu_source"] in ("nvml", "nvidia-smi")
    assert m["packages"]["torch"] and m["packages"]["pydantic"]
    assert m["seeds"] == {"load": 0} and m["started"] <= m["ended"]


def test_manifest_records_the_checkpoints_contents(tmp_path, write_profile):
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"weights v1")
    (target / "README.md").write_text("card")
    profile = load_profile(write_profile(lambda d: d["models"].update(target=str(target), drafter="org/hub-id")))

    def digest():
        run = RunDir.create(profile.name, root=tmp_path / "runs")
        return start_run(profile, "src.yaml", run)["models"]

    first = digest()
    assert set(first) == {"target"}  # a hub id is not hashed here
    assert sorted(first["target"]["files"]) == ["config.json", "model.safetensors"]
    (target / "README.md").write_text("card, edited")
    assert digest() == first  # the card is not the model
    (target / "model.safetensors").write_bytes(b"weights v2")
    second = digest()
    assert second["target"]["sha256"] != first["target"]["sha256"]
    assert second["target"]["files"]["config.json"] == first["target"]["files"]["config.json"]


def test_a_run_packed_then_resumed_keeps_both_slices_of_its_server_log(tmp_path):
    from ddbench.core.results import RunDir, pack, read_run_text

    run = RunDir.create("p", root=tmp_path)
    log = run.path / "ar" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_text("slice 1: fired up\nCache flushed successfully!\n")
    pack(run)
    assert not log.exists() and read_run_text(log) == "slice 1: fired up\nCache flushed successfully!\n"
    log.write_text("slice 2: fired up\n")       # --resume appends a new plain log beside the packed one
    assert read_run_text(log) == "slice 1: fired up\nCache flushed successfully!\nslice 2: fired up\n"
    pack(run)
    assert not log.exists()
    assert read_run_text(log) == "slice 1: fired up\nCache flushed successfully!\nslice 2: fired up\n"


def test_pack_gzips_locusts_html_view_and_keeps_its_bytes(tmp_path):
    import gzip

    from ddbench.core.results import RunDir, pack

    run = RunDir.create("p", root=tmp_path)
    html = run.path / "ar" / "warmup" / "c1.1" / "locust.html"
    html.parent.mkdir(parents=True)
    page = "<html>" + "<script>var x = 1;</script>" * 4000 + "</html>"
    html.write_text(page)
    before, after = pack(run)
    assert not html.exists() and gzip.decompress(html.with_name("locust.html.gz").read_bytes()).decode() == page
    assert after < before / 10


def test_git_state_names_the_sent_commit_when_the_copy_says_so(monkeypatch):
    from ddbench.core.manifest import git_state
    monkeypatch.delenv("DDBENCH_GIT_SHA", raising=False)
    assert "from" not in git_state()
    monkeypatch.setenv("DDBENCH_GIT_SHA", "a" * 40)
    monkeypatch.setenv("DDBENCH_GIT_DIRTY", "1")
    assert git_state() == {"sha": "a" * 40, "dirty": True, "from": "DDBENCH_GIT_SHA"}


def test_a_packed_record_file_cut_short_is_an_error_naming_the_file(tmp_path):
    import gzip

    from ddbench.core.results import read_records

    cell = tmp_path / "ar" / "c1-r1"
    cell.mkdir(parents=True)
    whole = gzip.compress(b'{"id": "x"}\n' * 200, mtime=0)
    (cell / "requests-vm-1.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"requests-vm-1\.jsonl\.gz: not a whole gzip file \(truncated or corrupt\)"):
        read_records(cell)
