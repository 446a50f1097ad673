"""reproduce's exit status comes from the run's own tables: 0 clean, 3 a failed cell or a barring check, 4 nothing
measured; a condition of the host (drift) keeps 0."""

import pandas as pd
import pytest

from analysis.trust.kinds import FAIL, PASS, RUN, Check, Kind, Scope, frame
from ddbench import reproduce
from ddbench.core.results import TABLES, RunDir


def run_with(tmp_path, statuses, checks):
    run = RunDir.create("p", root=tmp_path)
    (run.path / TABLES).mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"status": statuses}).to_parquet(run.path / TABLES / "cells.parquet")
    frame([Check(k, s, status, "planted") for k, s, status in checks]).to_parquet(run.path / TABLES / "checks.parquet")
    return run


@pytest.mark.parametrize("statuses, checks, failed, code", [
    (["ok", "ok"], [(Kind.LOSSLESS, Scope("tree"), PASS), (Kind.DRIFT, RUN, FAIL)], 0, 0),
    (["ok", "failed"], [], 1, reproduce.EXIT_NOT_CLEAN),
    (["ok", "ok"], [(Kind.LOSSLESS, Scope("tree-b15-k8"), FAIL)], 0, reproduce.EXIT_NOT_CLEAN),
    (["ok", "ok"], [(Kind.SERVER_MATCHES, Scope("ar"), FAIL)], 0, reproduce.EXIT_NOT_CLEAN),
    (["failed", "failed"], [], 2, reproduce.EXIT_NOTHING),
])
def test_the_exit_status_follows_the_cells_and_the_barring_checks(tmp_path, statuses, checks, failed, code):
    got, why = reproduce.outcome(run_with(tmp_path, statuses, checks), failed)
    assert got == code
    assert (why is None) == (code == 0)
    if checks and code == reproduce.EXIT_NOT_CLEAN:
        assert checks[0][0].label in why and str(checks[0][1]) in why


def test_help_states_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        reproduce.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"{reproduce.EXIT_NOT_CLEAN} the report is written, but a cell failed" in out
    assert f"{reproduce.EXIT_NOTHING} the report is written and nothing was measured" in out
