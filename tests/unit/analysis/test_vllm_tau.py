"""τ of an external server from its own /metrics: vLLM's spec_decode counters (1 + accepted / drafts), read
from two realistic scrapes a cell apart; a server with no verify-step counter gets 'not reported', never a τ."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis.read import ingest
from analysis.trust.checks import server_tau
from ddbench.core import prom

FIXTURES = Path(__file__).with_name("fixtures")


def _run(tmp_path: Path, keep=lambda line: True) -> SimpleNamespace:
    """One cell (linear, C=1, rep 1) whose directory holds the two scrapes, read as ingest reads a run."""
    cell = tmp_path / "linear" / "c1-r1"
    cell.mkdir(parents=True)
    for side in ("before", "after"):
        text = (FIXTURES / f"vllm-metrics-{side}.prom").read_text()
        (cell / f"metrics-{side}.prom").write_text("".join(x for x in text.splitlines(True) if keep(x)))
    server = pd.DataFrame(ingest._server_metrics(cell, "linear", 1, 1),
                          columns=ingest.CELL + ["metric", "before", "after", "delta"])
    log = pd.DataFrame(columns=["arm", "concurrency", "repetition", "kind", "accept_len"])
    return SimpleNamespace(server=server, log=log, requests=pd.DataFrame())


def test_the_fixture_parses_to_vllm_counters():
    after = prom.parse((FIXTURES / "vllm-metrics-after.prom").read_text())
    assert after[prom.VLLM_DRAFTS] == 5400 and after[prom.VLLM_ACCEPTED] == 12200
    assert after[prom.VLLM_DRAFT_TOKENS] == 37800
    assert prom.GENERATED not in after and prom.VERIFY_CALLS not in after   # no SGLang counter to fall back on


def test_vllm_tau_is_one_plus_accepted_per_draft_over_the_cell(tmp_path):
    tau, source = server_tau(_run(tmp_path), "linear", 1, [1])
    # the cell: 5400 - 5000 = 400 drafts (verify steps), 12200 - 11000 = 1200 accepted drafted tokens
    assert tau == pytest.approx(1 + 1200 / 400)
    assert "vLLM" in source and "1 + accepted / drafts" in source


def test_a_server_without_spec_counters_reports_no_tau(tmp_path):
    run = _run(tmp_path, keep=lambda line: "spec_decode" not in line)   # the same vLLM server, no speculation
    tau, source = server_tau(run, "linear", 1, [1])
    assert np.isnan(tau) and source == prom.TAU_NOT_REPORTED and source.startswith("not reported")


def test_a_counter_missing_from_one_cell_gives_no_tau(tmp_path):
    run = _run(tmp_path)
    two = pd.concat([run.server, run.server[run.server["metric"] != prom.VLLM_DRAFTS].assign(repetition=2)])
    tau, _ = server_tau(SimpleNamespace(server=two, log=run.log, requests=run.requests), "linear", 1, [1, 2])
    assert np.isnan(tau)   # a sum over some cells only would mix windows
