"""Sampling is a condition: a synthetic run of every arm under T=0 and T=0.7 pairs arms only within a
setting, checks losslessness only where it is defined (T=0), and refuses a cross-setting comparison."""

from __future__ import annotations

import pytest

from analysis.analyze import analyze
from analysis.estimate import compare
from analysis.synth import Plan, write_run

SETTINGS = [{"temperature": 0}, {"temperature": 0.7, "top_p": 0.95}]


@pytest.fixture(scope="module")
def hot(tmp_path_factory):
    run = write_run(tmp_path_factory.mktemp("sampling"),
                    Plan(requests_per_user=12, repetitions=3, sampling=SETTINGS, failed_cell=None))
    return analyze(run, bootstrap=200)


def _label(arm: str) -> str:
    return arm.split("@")[1]


def test_cells_are_keyed_by_measured_arm(hot):
    arms = set(hot.cells["arm"].astype(str))
    assert arms == {f"{a}@{s}" for a in ("ar", "linear-b16", "chain-b16", "tree-b15-k8")
                    for s in ("t0", "t0.7-p0.95")}
    assert len(hot.cells) == 8 * 2 * 3 and (hot.cells["status"] == "ok").all()


def test_every_ratio_pairs_one_setting(hot):
    for table in (hot.speedups, hot.decomposition):
        other = "baseline" if "baseline" in table else "reference"
        assert len(table) and (table["arm"].map(_label) == table[other].map(_label)).all()
    # both settings are compared: each spec arm over ar, tree over linear and chain, chain over linear
    assert len(hot.speedups) == 2 * 2 * (3 + 2 + 1)
    hot_tau = hot.summary.set_index(["arm", "concurrency"])["tau"]
    assert hot_tau[("tree-b15-k8@t0.7-p0.95", 1)] < hot_tau[("tree-b15-k8@t0", 1)]   # synth: hotter accepts less


def test_a_cross_setting_comparison_is_refused(hot):
    side = lambda arm: compare.Side(hot.run, hot.cells, hot.boots, arm)  # noqa: E731
    with pytest.raises(compare.MismatchError, match="temperature differs"):
        compare.speedup(side("tree-b15-k8@t0.7-p0.95"), side("linear-b16@t0"), 1)


def test_losslessness_is_checked_at_t0_only(hot):
    assert set(hot.lossless["arm"]) == {"ar@t0", "linear-b16@t0", "chain-b16@t0", "tree-b15-k8@t0"}
    assert (hot.lossless["match_rate"] == 1).all()
    chain = hot.checks[hot.checks["check"] == "chain equals linear at T=0"]
    assert list(chain["scope"]) == ["chain-b16@t0"]
    length = hot.checks[hot.checks["check"] == "output length within 10% of ar"]
    assert len(length) == 6 * 2 and (length["status"] == "pass").all()


def test_figures_draw_a_panel_per_setting_with_one_legend_below(hot):
    from report import figures

    fig = figures.throughput(hot)
    assert [ax.get_title() for ax in fig.axes] == ["T=0 (greedy)", "T=0.7, top-p 0.95"]
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["ar", "linear-b16", "chain-b16", "tree-b15-k8"]
    # a base arm keeps its colour in both settings' panels
    assert figures.colour(hot, "tree-b15-k8@t0") == figures.colour(hot, "tree-b15-k8@t0.7-p0.95")
    tau = figures.tau_concurrency(hot)
    assert len(tau.axes) == 2 and len(tau.axes[0].containers) == 3      # ar has no τ to draw
