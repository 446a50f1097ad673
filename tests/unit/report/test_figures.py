"""The acceptance-across-concurrency figure and the arm colours, from summary tables written by hand: what the
figure draws is read off its axes before it is saved."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from ddbench.core.profile import Arm, Sampling
from report import figures
from report.summary import tau_across_concurrency


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    figures.plt.close("all")   # builders hand their figures back open; tests read and drop them

ARMS = [Arm(id="ar", kind="ar"), Arm(id="linear-b16", kind="linear", block_size=16),
        Arm(id="tree-b15-k8", kind="tree", block_size=16, budget=15, topk=8)]
EAGER = [*ARMS, Arm(id="tree-b15-k8-eager", kind="tree", block_size=16, budget=15, topk=8, cuda_graphs=False)]
# (arm, kind, C, tau, lo, hi): lo/hi asymmetric, as a log-scale interval is
ROWS = [("ar", "ar", 1, 1.0, 1.0, 1.0), ("ar", "ar", 4, 1.0, 1.0, 1.0),
        ("linear-b16", "linear", 1, 5.56, 5.40, 5.70), ("linear-b16", "linear", 4, 5.39, 5.30, 5.50),
        ("tree-b15-k8", "tree", 1, 6.27, 6.00, 6.60), ("tree-b15-k8", "tree", 4, 6.14, 6.10, 6.20)]
EAGER_ROWS = [*ROWS, ("tree-b15-k8-eager", "tree", 1, 6.27, 6.00, 6.60), ("tree-b15-k8-eager", "tree", 4, 6.14,
                                                                          6.10, 6.20)]


def _profile(arms, backend="refengine", cpu=False):
    def cuda_graphs(arm):   # as ddbench.core.profile.Profile.cuda_graphs: never on a CPU, else the arm's or True
        return False if cpu else arm.cuda_graphs is not False
    return SimpleNamespace(arms=arms, cuda_graphs=cuda_graphs, backend=SimpleNamespace(kind=backend),
                           sampling_for=lambda _: Sampling(), arm=lambda i: next(x for x in arms if x.id == i))


def _analysis(arms=ARMS, rows=ROWS, **kw):
    s = pd.DataFrame(rows, columns=["arm", "kind", "concurrency", "tau", "tau_t_lo", "tau_t_hi"])
    s["throughput"] = 100.0 * s["tau"]      # what the throughput figure reads, for the colour test
    s["throughput_t_lo"], s["throughput_t_hi"] = 0.9 * s["throughput"], 1.1 * s["throughput"]
    return SimpleNamespace(run=SimpleNamespace(profile=_profile(arms, **kw)), summary=s)


def _series(ax) -> dict[str, ErrorbarContainer]:
    return {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}


def _points(c: ErrorbarContainer):
    line, _, (bars, *_) = c.lines
    ends = np.array([[seg[0][1], seg[1][1]] for seg in bars.get_segments()])
    return list(line.get_xdata()), list(line.get_ydata()), ends


def test_one_panel_one_series_per_speculative_arm_with_its_points_and_intervals():
    fig = figures.tau_concurrency(_analysis())
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    series = _series(ax)
    assert sorted(series) == ["linear-b16", "tree-b15-k8"]       # ar has τ=1 by definition: not drawn
    x, y, ends = _points(series["tree-b15-k8"])
    assert y == pytest.approx([6.27, 6.14])
    # x at C, nudged apart per arm (the same factor at every C) so that arms of equal τ stay visible
    lx, _, _ = _points(series["linear-b16"])
    assert x == pytest.approx([1 * x[0], 4 * x[0]]) and lx == pytest.approx([1 * lx[0], 4 * lx[0]])
    assert lx[0] < 1 < x[0] < 1.1
    assert ends == pytest.approx(np.array([[6.00, 6.60], [6.10, 6.20]]))
    assert ax.get_xscale() == "log"
    assert list(ax.get_xticks()) == [1, 4] and [t.get_text() for t in ax.get_xticklabels()] == ["1", "4"]
    assert ax.get_legend() is None and len(fig.legends) == 1     # the legend sits outside the axes


def test_eager_twins_get_their_own_panel():
    a = _analysis(EAGER, EAGER_ROWS)
    assert figures.eager_twins(a)
    fig = figures.tau_concurrency(a)
    on, off = fig.axes
    assert (on.get_title(), off.get_title()) == ("CUDA graphs on", "CUDA graphs off")
    assert sorted(_series(on)) == ["linear-b16", "tree-b15-k8"] and sorted(_series(off)) == ["tree-b15-k8-eager"]
    assert on.get_ylim() == off.get_ylim()                       # one τ scale for both


def test_no_twins_without_a_graphs_off_arm_of_the_same_shape():
    other = Arm(id="tree-b31-k8-eager", kind="tree", block_size=16, budget=31, topk=8, cuda_graphs=False)
    assert not figures.eager_twins(_analysis([*ARMS, other]))
    # on a CPU every arm runs without graphs, whatever its id: nothing to split
    assert not figures.eager_twins(_analysis(EAGER, EAGER_ROWS, cpu=True))
    assert len(figures.tau_concurrency(_analysis(EAGER, EAGER_ROWS, cpu=True)).axes) == 1


def test_draw_writes_the_pdf(tmp_path):
    path = figures.draw("tau_concurrency", _analysis(EAGER, EAGER_ROWS), tmp_path)
    assert path == tmp_path / "tau_concurrency.pdf" and path.read_bytes().startswith(b"%PDF")


def test_an_arm_has_one_colour_in_every_figure():
    a = _analysis()
    tau = _series(figures.tau_concurrency(a).axes[0])
    thr = _series(figures.throughput(a).axes[0])
    for arm in ("linear-b16", "tree-b15-k8"):
        assert tau[arm].lines[0].get_color() == thr[arm].lines[0].get_color() == figures.colour(a, arm)
    # by place in the profile: ar keeps the first colour though the τ figure leaves it out
    assert thr["ar"].lines[0].get_color() == figures.colour(a, "ar") != figures.colour(a, "linear-b16")


def test_sentence_says_tau_across_c_is_not_matched_and_states_the_table_numbers():
    text = str(tau_across_concurrency(_analysis())).replace("-{}", "-")
    assert text.startswith("$\\tau$ at different $C$ is not a matched comparison")
    assert "the reference engine's scheduler and the engine change what runs per step" in text
    # linear-b16 moves 5.56/5.39-1 = 3.2%, more than tree-b15-k8's 6.27/6.14-1 = 2.1%
    assert "(widest here: linear-b16, 5.56 at C=1 and 5.39 at C=4, 3.2\\% apart)" in text
    assert "ratios between arms at the same $C$" in text and "matched comparison." in text
    sglang = str(tau_across_concurrency(_analysis(backend="sglang")))
    assert "SGLang's scheduler and the engine change what runs per step" in sglang


def test_sentence_with_one_concurrency_and_without_speculative_arms():
    one = _analysis(rows=[r for r in ROWS if r[2] == 1])
    assert str(tau_across_concurrency(one)).startswith("This run has one concurrency (C=1)")
    assert tau_across_concurrency(_analysis(rows=ROWS[:2])) is None


def test_the_category_figure_names_the_ratio_it_draws():
    a = _analysis()
    a.categories = pd.DataFrame([{"arm": "tree-b15-k8", "baseline": "ar", "baseline_kind": "ar", "concurrency": 1,
                                  "category": cat, "speedup": 1.2, "speedup_lo": 1.1, "speedup_hi": 1.3}
                                 for cat in ("chat", "code")])
    ax = figures.categories(a).axes[0]
    # compare.per_category: the category's throughput (rate × occupancy), not its request output rate
    assert ax.get_ylabel() == "speedup over ar (category throughput)"
    assert ax.get_title() == "Speedup per category at C=1 (paired by repetition, 95% CI)"
