"""Other work on the host during a cell (telemetry's foreign_cores) flags the cell and fails one run check."""

import pandas as pd

from analysis.trust import checks, stability

CELLS = pd.DataFrame({"arm": ["ar", "tree", "ar", "tree"], "concurrency": [1, 1, 1, 1], "repetition": [1, 1, 2, 2],
                      "status": ["ok"] * 4})
SPEEDUPS = pd.DataFrame({"arm": ["tree"], "baseline": ["ar"], "concurrency": [1]})


def _telemetry(loads: dict) -> pd.DataFrame:
    rows = []
    for (arm, rep), values in loads.items():
        rows += [{"source": "host", "arm": arm, "concurrency": 1, "repetition": rep, "foreign_cores": v}
                 for v in values]
    rows.append({"source": "gpu", "arm": "ar", "concurrency": 1, "repetition": 1})
    return pd.DataFrame(rows)


def test_a_busy_cell_is_flagged_with_the_comparisons_it_touches():
    t = _telemetry({("ar", 1): [None, 0.01, 0.02], ("tree", 1): [0.0, 0.03], ("ar", 2): [0.9, 1.1, 0.8],
                    ("tree", 2): [0.02, 0.6, 0.01]})
    h = stability.host_quiet(t, CELLS, SPEEDUPS)
    assert h["foreign_cores"].round(3).tolist() == [0.015, 0.015, 0.9, 0.02]
    assert h["busy"].tolist() == [False, False, True, False]
    assert h.loc[2, "comparisons"] == "tree/ar" and h.loc[3, "comparisons"] == ""
    [c] = checks._host_quiet(h)
    assert c.status == "fail" and "1 of 4 cells" in c.evidence and "ar C=1 rep 2 (0.90)" in c.evidence


def test_a_quiet_run_passes_and_an_old_run_says_not_recorded():
    h = stability.host_quiet(_telemetry({("ar", 1): [0.01], ("tree", 1): [0.02]}), CELLS, SPEEDUPS)
    assert checks._host_quiet(h)[0].status == "pass"
    old = pd.DataFrame([{"source": "host", "arm": "ar", "concurrency": 1, "repetition": 1, "cpu_pct": 50.0}])
    assert stability.host_quiet(old, CELLS, SPEEDUPS).empty
    assert checks._host_quiet(stability.host_quiet(old, CELLS, SPEEDUPS))[0].status == checks.NA


def test_containerized_servers_leave_the_check_not_applicable():
    h = stability.host_quiet(_telemetry({("ar", 1): [0.9]}), CELLS, SPEEDUPS)
    [c] = checks._host_quiet(h, "docker")
    assert c.status == checks.NA and "containers" in c.evidence


def test_the_limit_is_a_share_of_the_host():
    """0.5 core of other work is a quarter of a 2-core machine and 3% of a 16-core one."""
    t = _telemetry({("ar", 1): [0.5], ("tree", 1): [0.02]})
    small, big, unknown = (stability.host_quiet(t, CELLS, SPEEDUPS, cores=n) for n in (2, 16, None))
    assert small["busy"].tolist() == [True, False] and small["limit"].tolist() == [0.2, 0.2]
    assert big["busy"].tolist() == [False, False] and big["limit"].tolist() == [1.6, 1.6]
    assert unknown["limit"].tolist() == [0.2, 0.2]
    [c] = checks._host_quiet(big)
    assert c.status == "pass" and "more than 1.6 core(s)" in c.evidence
