"""Reading a results directory: bad input is named by file, line and field; a damaged record file fails its own
cell, with that line as the reason, and the rest of the run is read."""

import pytest
from handrun import write_hand_run

from analysis.read import ingest, serverlog
from ddbench.core import prom

LOG = """[2026-11-29 08:10:00] Decode batch, #running-req: 8, #token: 9120, token usage: 0.04, accept len: 4.12, \
accept rate: 0.21, cuda graph: True, gen throughput (token/s): 1523.40, #queue-req: 0
[2026-11-29 08:10:01 TP0] DDTree window, steps: 40, avg tree nodes: 15.00, avg accepted depth: 3.10, \
avg commit length: 4.10
[2026-11-29 08:10:01 TP1] DDTree window, steps: 40, avg tree nodes: 15.00, avg accepted depth: 3.10, \
avg commit length: 4.10
[2026-11-29 08:10:02] Cache flushed successfully!
some other line
"""


def test_server_log_lines():
    df = serverlog.parse(LOG)
    assert list(df["kind"]) == ["decode", "ddtree", "flush"]       # TP1 repeats TP0's window: dropped
    assert list(df["line"]) == [1, 2, 4]
    d = df.iloc[0]
    assert (d["running_req"], d["tokens"], d["accept_len"], d["accept_rate"], d["gen_throughput"],
            d["queue_req"]) == (8, 9120, 4.12, 0.21, 1523.40, 0)
    assert d["cuda_graph"] is True
    assert d["t_unix"] == 1795939800.0                            # 2026-11-29 08:10:00 UTC


def test_server_log_ranks():
    df = serverlog.parse("\n".join(LOG.splitlines()[1:3]))
    assert len(df) == 1 and df.iloc[0]["rank"] == "TP0"
    t = df.iloc[0]
    assert (t["steps"], t["avg_nodes"], t["avg_depth"], t["avg_commit"]) == (40, 15.0, 3.1, 4.1)


def test_prometheus_sums_label_sets_and_skips_buckets():
    text = """# HELP x
sglang:generation_tokens_total{model_name="a",tp_rank="0"} 10
sglang:generation_tokens_total{model_name="a",tp_rank="1"} 5.5
sglang:time_to_first_token_seconds_bucket{le="0.1"} 3
sglang:time_to_first_token_seconds_sum 1.5
"""
    assert prom.parse(text) == {"sglang:generation_tokens_total": 15.5, "sglang:time_to_first_token_seconds_sum": 1.5}
    with pytest.raises(prom.PromError, match=r"m.prom:2: not a Prometheus sample line"):
        prom.parse("ok 1\n{broken\n", "m.prom")


def damaged(run, reason: str) -> None:
    """The cell of the damaged file failed, naming it; every other cell was read as it was."""
    import re

    cells = ingest.load(run).cells.set_index(["arm", "concurrency", "repetition"])
    bad = cells.loc[("ar", 1, 1)]
    assert bad["status"] == "failed" and re.search(reason, bad["reason"]), bad["reason"]
    assert bad["reason"].startswith("damaged record file: ")
    assert (cells.drop(("ar", 1, 1))["status"] == "ok").all()


def test_bad_record_names_file_line_and_field(hand_run):
    f = hand_run / "ar" / "c1-r1" / "requests-h-1.jsonl"
    lines = f.read_text().splitlines()
    lines[2] = lines[2].replace('"send_ns":', '"send_nanos":')
    f.write_text("\n".join(lines) + "\n")
    damaged(hand_run, r"requests-h-1.jsonl:3: send_ns: Field required")


def test_string_where_a_number_belongs(hand_run):
    # Arrow reads the file happily (a string column); the schema check sends it through pydantic
    f = hand_run / "ar" / "c1-r1" / "requests-h-1.jsonl"
    f.write_text(f.read_text().replace('"max_tokens":8', '"max_tokens":"eight"'))
    damaged(hand_run, r"requests-h-1.jsonl:1: max_tokens: Input should be a valid integer")


def test_record_in_the_wrong_cell_is_refused(hand_run):
    f = hand_run / "ar" / "c1-r1" / "requests-h-1.jsonl"
    f.write_text(f.read_text().replace('"concurrency":1', '"concurrency":4', 1))
    damaged(hand_run, r"requests-h-1.jsonl:1: concurrency is 4 but the file lies in")


def test_not_json_is_named(hand_run):
    f = hand_run / "ar" / "c1-r1" / "requests-h-1.jsonl"
    f.write_text(f.read_text() + "{not json\n")
    damaged(hand_run, r"requests-h-1.jsonl:5: ")


def test_bad_status_and_missing_manifest(tmp_path, hand_run):
    (hand_run / "ar" / "c1-r1" / "status.json").write_text('{"arm": "ar", "concurrency": 1, "repetition": 1, '
                                                           '"status": "maybe"}')
    with pytest.raises(ingest.IngestError, match=r"status.json: status: Input should be 'ok' or 'failed'"):
        ingest.load(hand_run)
    with pytest.raises(ingest.IngestError, match="not a run directory"):
        ingest.load(tmp_path / "nowhere")


def test_unknown_arm_in_records(tmp_path):
    from analysis.analyze import analyze
    run = write_hand_run(tmp_path)
    (run / "ar").rename(run / "ghost")
    for f in (run / "ghost").rglob("*.json*"):
        f.write_text(f.read_text().replace('"arm":"ar"', '"arm":"ghost"').replace('"arm": "ar"', '"arm": "ghost"'))
    with pytest.raises(ingest.IngestError, match=r"arms \['ghost'\] that the manifest's profile does not define"):
        analyze(run, bootstrap=20)


def test_missing_status_is_a_missing_cell(hand_run):
    (hand_run / "ar" / "c1-r1" / "status.json").unlink()
    run = ingest.load(hand_run)
    row = run.cells.set_index("arm").loc["ar"]
    assert row["status"] == "missing" and "did not finish" in row["reason"]


def test_packed_runs_read_the_same(tmp_path):
    """`ddbench pack` gzips records, /metrics scrapes, server logs and telemetry in place (twice
    gives the same bytes); ingest reads every table of them unchanged."""
    from analysis.synth import Plan, write_run
    from ddbench.core.results import PACKED, RunDir, pack

    run = write_run(tmp_path, Plan(concurrency=[1], repetitions=1, requests_per_user=5, prompts=4,
                                   failed_cell=None))
    plain = ingest.load(run)
    assert not plain.server.empty and not plain.log.empty
    before, after = pack(RunDir.open(run))
    assert 0 < after < before
    for pattern in PACKED:
        assert not list(run.rglob(pattern)), pattern
    assert list(run.rglob("metrics-before.prom.gz")) and list(run.rglob("server.log.gz"))
    packed = ingest.load(run)
    for table in ("requests", "server", "log", "telemetry"):
        assert getattr(packed, table).equals(getattr(plain, table)), table
    assert pack(RunDir.open(run)) == (0, 0)  # nothing left to pack


def test_a_packed_record_file_cut_short_fails_its_cell(hand_run):
    import gzip

    f = hand_run / "ar" / "c1-r1" / "requests-h-1.jsonl"
    packed = gzip.compress(f.read_bytes())
    f.unlink()
    f.with_name(f.name + ".gz").write_bytes(packed[: len(packed) // 2])
    damaged(hand_run, r"requests-h-1\.jsonl\.gz: not a whole gzip file \(truncated or corrupt\)")


def test_a_run_that_cannot_be_read_sets_its_old_tables_and_report_aside(hand_run, capsys):
    from analysis.__main__ import main
    from ddbench.core.results import RunDir

    run = RunDir.open(hand_run)
    assert main([str(hand_run), "--bootstrap", "20"]) == 0 and run.tables.is_dir()
    run.report.write_bytes(b"%PDF of the data as it was")
    (hand_run / "ar" / "c1-r1" / "status.json").write_text("{broken")
    assert main([str(hand_run), "--bootstrap", "20"]) == 2
    err = capsys.readouterr().err
    assert "status.json" in err and "tables, report.pdf no longer match the run's data: moved to" in err
    assert not run.tables.exists() and not run.report.exists()
    assert (hand_run / "stale" / "tables" / "cells.csv").is_file()
    assert (hand_run / "stale" / "report.pdf").read_bytes() == b"%PDF of the data as it was"
