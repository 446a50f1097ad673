"""A rate sweep read across its rates: saturation where an arm serves under 95% of the offered rate, and the
highest rate at which a speculative arm's TPOT beats AR's, resolved and unsaturated; the report says both."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis.estimate import rates

SERVERS = {f"{b}@q{q}": b for b in ("ar", "tree-b15-k8") for q in (2, 4, 8)}


def summary() -> pd.DataFrame:
    rows = []
    for arm, base in SERVERS.items():
        q = float(arm.split("@q")[1])
        served = {"ar": {2: 1.0, 4: 0.99, 8: 0.7}, "tree-b15-k8": {2: 1.0, 4: 0.98, 8: 0.9}}[base][q]
        # the arrivals ran 15% under the nominal rate, as a short Poisson cell can: served is of what arrived
        rows.append({"arm": arm, "kind": "ar" if base == "ar" else "tree", "concurrency": 64, "offered_rate": q,
                     "arrival_rate": 0.85 * q, "achieved_rate": 0.85 * q * served, "throughput": 100 * q * served,
                     "ttft_mean": 0.02,
                     "ttft_mean_t_lo": 0.01, "ttft_mean_t_hi": 0.03, "tpot_mean": 0.004 * q,
                     "tpot_mean_t_lo": 0.003 * q, "tpot_mean_t_hi": 0.005 * q})
    return pd.DataFrame(rows)


def speedups() -> pd.DataFrame:
    ratio = {2: (1.9, 1.7, 2.1), 4: (1.4, 1.1, 1.7), 8: (1.5, 1.2, 1.9)}   # at 8 the tree saturates
    return pd.DataFrame([{"arm": f"tree-b15-k8@q{q}", "baseline": f"ar@q{q}", "baseline_kind": "ar",
                          "concurrency": 64, "tpot_ratio": r, "tpot_ratio_lo": lo, "tpot_ratio_hi": hi}
                         for q, (r, lo, hi) in ratio.items()])


def test_rates_span_first_to_last_event_free_of_the_cells_edges():
    from ddbench.core.formulas import span_rate

    s = 1_000_000_000
    assert span_rate(pd.Series([0, s, 2 * s, 4 * s])) == pytest.approx(0.75)    # 3 intervals in 4 s
    assert np.isnan(span_rate(pd.Series([s, np.nan])))                          # one event: no rate


def test_saturation_is_under_95_percent_of_arrivals_served():
    t = rates.table(summary(), SERVERS).set_index("arm")
    assert t.loc["ar@q8", "saturated"] and not t.loc["ar@q4", "saturated"] and t.loc["tree-b15-k8@q8", "saturated"]
    assert t.loc["ar@q8", "served"] == pytest.approx(0.7) and t.loc["ar@q2", "base"] == "ar"
    closed = summary().assign(offered_rate=np.nan)
    assert rates.table(closed, SERVERS).empty


def test_the_highest_rate_won_is_resolved_and_unsaturated():
    w = rates.wins(rates.table(summary(), SERVERS), speedups())
    row = w.iloc[0]
    assert (row["arm"], row["baseline"], row["highest_rate"], row["tpot_ratio"]) == ("tree-b15-k8", "ar", 4, 1.4)
    assert (row["saturates_at"], row["baseline_saturates_at"], row["rates"]) == (8, 8, 3)
    unresolved = speedups().assign(tpot_ratio_lo=0.9)
    assert np.isnan(rates.wins(rates.table(summary(), SERVERS), unresolved).iloc[0]["highest_rate"])


def test_the_report_says_it_and_draws_it(tmp_path):
    from report import figures, tables

    t = rates.table(summary(), SERVERS)
    profile = SimpleNamespace(arms=[SimpleNamespace(id=a, server=b) for a, b in SERVERS.items()])
    a = SimpleNamespace(rates=t, rate_wins=rates.wins(t, speedups()), run=SimpleNamespace(profile=profile))
    [line] = tables.rate_wins(a)
    assert "k8 beat ar up to 4 req/s offered (TPOT 1.40x [1.10, 1.70])" in line
    assert "saturates from 8 req/s" in line
    fig = figures.rates(a)
    assert len(fig.axes) == 3
    figures.plt.close(fig)
    with pytest.raises(figures.NoData, match="closed loop"):
        figures.rates(SimpleNamespace(rates=pd.DataFrame()))


def test_page_one_names_saturation_and_the_rule_bars_the_saturated_arm():
    from analysis import recommend
    from report import front

    t = rates.table(summary(), SERVERS)
    a = SimpleNamespace(rates=t)
    assert recommend.saturated(a, "ar@q8") == pytest.approx(0.7) and recommend.saturated(a, "ar@q4") is None
    assert recommend.saturated(SimpleNamespace(rates=pd.DataFrame()), "ar") is None   # closed loop
    ar, tree = front.saturation_lines(a)
    assert "ar} \\textbf{saturated from 8 req/s} (served 70\\% at 8): not recommended there" in ar
    assert "tree-{}b15-{}k8} \\textbf{saturated from 8 req/s} (served 90\\% at 8)" in tree
    assert front.saturation_lines(SimpleNamespace(rates=pd.DataFrame())) == []


def test_a_rate_sweeps_groups_are_named_by_the_rate_offered():
    from analysis.estimate import standings
    from ddbench.core.profile import load_profile

    p = load_profile("cpu-tiny-rates").measured()
    run = SimpleNamespace(profile=p)
    a = SimpleNamespace(run=run)
    assert standings.group_title(a, "ar@q4", 64) == "4 req/s offered"
    closed = SimpleNamespace(run=SimpleNamespace(profile=load_profile("cpu-tiny").measured()))
    assert standings.group_title(closed, "ar", 4) == "C=4"
