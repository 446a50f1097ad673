import pytest

from ddbench.core.records import Chunk, RequestRecord
from loadtests.recorder import RecordFile, read_records, record_path


def record(i, text="hello"):
    return RequestRecord(request_id=f"r{i}", arm="ar", concurrency=1, repetition=1, warmup=False,
                         prompt_id="p", category="code", worker="h:1", user=0, max_tokens=8, temperature=0.0,
                         send_ns=10, send_unix_ns=20, chunks=[Chunk(t_ns=11, text=text)], end_ns=12, status=200)


def test_each_record_is_on_disk_as_soon_as_it_is_written(tmp_path):
    f = RecordFile(tmp_path, "host:123")
    f.write(record(1))
    # flushed per record: another reader sees it before the file is closed
    assert [r.request_id for r in read_records(tmp_path)] == ["r1"]
    f.write(record(2))
    assert [r.request_id for r in read_records(tmp_path)] == ["r1", "r2"]
    f.close()
    assert f.path == record_path(tmp_path, "host:123") and f.path.name == "requests-host-123.jsonl"


def test_secrets_from_the_environment_are_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue")
    f = RecordFile(tmp_path, "w")
    f.write(record(1, text="leak hf_supersecretvalue here"))
    f.close()
    text = f.path.read_text()
    assert "hf_supersecretvalue" not in text and "<redacted>" in text


def test_a_malformed_record_line_is_named(tmp_path):
    f = RecordFile(tmp_path, "w")
    f.write(record(1))
    f.write('{"v": 1, "request_id": "broken"}')
    f.close()
    with pytest.raises(ValueError, match=r"requests-w\.jsonl:2: not a request record"):
        read_records(tmp_path)


def test_packed_records_are_read(tmp_path):
    from ddbench.core.results import RunDir, pack

    run = RunDir.create("p", root=tmp_path)
    cell = run.cell_dir("ar", 1, 1)
    cell.mkdir(parents=True)
    f = RecordFile(cell, "w:1")
    f.write(record(1))
    f.close()
    before = [r.request_id for r in read_records(cell)]
    pack(run)
    assert list(cell.glob("*.jsonl.gz")) and before == [r.request_id for r in read_records(cell)] == ["r1"]
