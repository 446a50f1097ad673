"""Budget curves from hand-made summary and ratio tables on a real measured profile: the families found (and not),
the fastest budget per C with the runner-up beaten, within noise, or not paired, and what the figure draws."""

from types import SimpleNamespace

import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from ddbench.profile import Profile, load_profile
from report import budgets, figures

SETTINGS = [{"temperature": 0}, {"temperature": 0.7, "top_p": 0.95}]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    figures.plt.close("all")


def _profile(sampling=SETTINGS, drop=(), concurrency=(1, 4)) -> Profile:
    """h200-tiny (linear, chain-b15, trees B = 15, 31, 63 with K = B, eager twins) under these sampling settings."""
    d = load_profile("h200-tiny").model_dump()
    d["arms"] = [x for x in d["arms"] if x["id"] not in drop]
    d["load"].update(concurrency=list(concurrency), requests_per_user=4)
    if sampling is not None:
        d["workload"]["sampling"] = sampling
    return Profile.model_validate(d).measured()


def _tau(arm: str) -> float:
    if arm.startswith("tree"):
        return {"15": 5.0, "31": 5.6, "63": 5.9}[arm.split("-")[1][1:]]
    return 4.5 if arm.startswith(("chain", "linear")) else 1.0


# throughput per base arm and C: at C=1 B=31 is fastest, the chain the runner-up; at C=4 the chain is fastest and
# B=15 the runner-up; the sampled setting is slower throughout
THROUGHPUT = {("chain-b15", 1): 118.0, ("tree-b15-k15", 1): 110.0, ("tree-b31-k31", 1): 120.0,
              ("tree-b63-k63", 1): 100.0, ("linear-b16", 1): 115.0,
              ("chain-b15", 4): 400.0, ("tree-b15-k15", 4): 380.0, ("tree-b31-k31", 4): 350.0,
              ("tree-b63-k63", 4): 300.0, ("linear-b16", 4): 395.0}


def _summary(p: Profile) -> pd.DataFrame:
    rows = []
    for x in p.arms:
        for c in p.load.concurrency:
            base = figures._base(x)
            thr = THROUGHPUT.get((base.removesuffix("-eager"), c), 90.0 * c) * (0.8 if "@t0.7" in x.id else 1.0)
            tau = _tau(base) * (0.8 if "@t0.7" in x.id and x.kind != "ar" else 1.0)
            rows.append({"arm": x.id, "kind": x.kind, "concurrency": c, "reps": 3, "tau": tau,
                         "tau_t_lo": tau - 0.1 if x.kind != "ar" else 1.0, "tau_t_hi": tau + 0.1 if x.kind != "ar"
                         else 1.0, "throughput": thr, "throughput_t_lo": 0.97 * thr, "throughput_t_hi": 1.03 * thr})
    return pd.DataFrame(rows)


def _ratio(arm, base, kind, c, r, lo, hi, pairs=3):
    verdict = "faster" if lo > 1 else "slower" if hi < 1 else "within noise"
    return {"arm": arm, "baseline": base, "baseline_kind": kind, "concurrency": c, "speedup": r, "speedup_lo": lo,
            "speedup_hi": hi, "verdict": verdict, "pairs": pairs, "mde": 0.04, "n_to_resolve": 12}


SPEEDUPS = [
    # C=1: B=31 over the chain, its runner-up: within noise
    _ratio("tree-b31-k31@t0", "chain-b15@t0", "chain", 1, 1.017, 0.99, 1.04),
    _ratio("tree-b31-k31@t0", "linear-b16@t0", "linear", 1, 1.043, 1.02, 1.07),
    # C=4: the chain is fastest; only B=15 over the chain was compared: 0.95 [0.93, 0.97], so the chain beats it
    _ratio("tree-b15-k15@t0", "chain-b15@t0", "chain", 4, 0.95, 0.93, 0.97),
    # a pair across settings that the analysis would have refused: never read
    _ratio("tree-b31-k31@t0.7-p0.95", "chain-b15@t0", "chain", 1, 9.99, 9.9, 10.1),
]


def _analysis(p: Profile | None = None, speedups=SPEEDUPS):
    p = p or _profile()
    return SimpleNamespace(run=SimpleNamespace(profile=p), summary=_summary(p),
                           speedups=pd.DataFrame(speedups))


def _plain(tex) -> str:
    return str(tex).replace("-{}", "-")


def test_a_family_per_setting_with_three_budgets_and_its_references():
    a = _analysis()
    fams = figures.budgets(a)
    assert [f.sampling.label for f in fams] == ["t0", "t0.7-p0.95"]
    for f, label in zip(fams, ("t0", "t0.7-p0.95"), strict=True):
        assert f.budgets == [15, 31, 63] and f.graphs and f.block_size == 16 and f.topk is None
        assert [t.id for t in f.trees] == [f"tree-b{b}-k{b}@{label}" for b in (15, 31, 63)]
        assert f.chain.id == f"chain-b15@{label}" and f.linear.id == f"linear-b16@{label}"
    assert fams[1].title == "T=0.7, top-p 0.95, block 16, K = B, CUDA graphs on"
    # the graphs-off trees are a family of one budget: found, but no curve
    off = [f for f in figures.families(a) if not f.graphs]
    assert [f.budgets for f in off] == [[15], [15]] and off[0].chain is None


def test_one_setting_keeps_the_arm_ids():
    a = _analysis(_profile(sampling=None), speedups=SPEEDUPS[:3])
    (fam,) = figures.budgets(a)
    assert [t.id for t in fam.trees] == ["tree-b15-k15", "tree-b31-k31", "tree-b63-k63"]
    assert fam.title.startswith("T=0 (greedy), block 16")


def test_no_family_of_three_budgets_says_the_run_cannot_answer():
    a = _analysis(_profile(drop=("tree-b31-k31",)), speedups=[])
    assert figures.budgets(a) == []
    ctx = budgets.context(a)
    assert ctx["families"] == []
    note = _plain(ctx["note"])
    assert "15, 63 (T=0 (greedy), block 16, K = B, CUDA graphs on)" in note
    assert "cannot say which budget is fastest" in note
    fig = figures.budget_curve(a)
    assert not any(isinstance(c, ErrorbarContainer) for ax in fig.axes for c in ax.containers)
    assert "no budget family" in fig.axes[0].texts[0].get_text()


def test_no_tree_arm_no_section():
    p = _profile(drop=("tree-b15-k15", "tree-b15-k15-eager", "tree-b31-k31", "tree-b63-k63"))
    assert budgets.context(_analysis(p, speedups=[])) is None


def test_the_fastest_budget_and_a_runner_up_within_noise():
    a = _analysis()
    fam = figures.budgets(a)[0]
    text = _plain(budgets.sentence(a, fam, 1))
    assert text.startswith("C=1: the fastest budget by geometric mean is B=31 (tree-b31-k31@t0) at 120.0 tok/s "
                           "(t 95\\% 116.4--123.6)")
    assert ("1.043$\\times$ (95\\% CI 1.020--1.070, 3 pairs) the throughput of the linear arm linear-b16@t0 "
            "(faster)") in text
    assert "the chain (B=15, chain-b15@t0) at 118.0 tok/s" in text
    assert "1.017$\\times$ (95\\% CI 0.990--1.040, 3 pairs)" in text
    assert "within noise" in text and "it does not beat the runner-up beyond noise" in text
    assert "9.99" not in text


def test_the_chain_beats_a_tree_from_the_inverted_pair():
    a = _analysis()
    text = _plain(budgets.sentence(a, figures.budgets(a)[0], 4))
    assert "the fastest budget by geometric mean is the chain (B=15, chain-b15@t0) at 400.0 tok/s" in text
    # only tree-b15 over the chain was compared, 0.95 [0.93, 0.97]: the chain over it is 1/0.95 [1/0.97, 1/0.93]
    assert "1.053$\\times$ (95\\% CI 1.031--1.075, 3 pairs)" in text
    assert "faster at 95\\% confidence" in text and "it beats the runner-up beyond noise" in text


def test_two_trees_are_never_said_to_differ_beyond_noise():
    a = _analysis()
    # under the sampled setting no ratio of that setting was given: the runner-up is not a paired comparison
    fam = figures.budgets(a)[1]
    text = _plain(budgets.sentence(a, fam, 1))
    assert "the fastest budget by geometric mean is B=31 (tree-b31-k31@t0.7-p0.95) at 96.0 tok/s" in text
    assert "the ratio of these two was not measured paired" in text
    assert "does not say whether B=31 beats it beyond noise" in text
    assert "9.99" not in text and "confidence" not in text


def test_table_stars_the_fastest_and_gives_the_paired_ratio_over_linear():
    a = _analysis()
    tex = _plain(budgets.table(a, figures.budgets(a)[0]))
    assert "tree-b31-k31@t0$^\\star$" in tex and "chain-b15@t0$^\\star$" in tex
    assert tex.count("$^\\star$") == 2                       # one per C
    assert "1.043 [1.020--1.070], 3" in tex
    assert "15 (chain)" in tex


def _errorbars(ax) -> dict[str, ErrorbarContainer]:
    return {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}


def test_the_figure_draws_each_budget_the_chain_and_the_linear_line_per_panel():
    a = _analysis()
    fig = figures.budget_curve(a)
    assert len(fig.subfigs) == 2 and len(fig.axes) == 2 * 2 * 2   # families x (tau, throughput) x C
    assert [s._suptitle.get_text() for s in fig.subfigs] == [f.title for f in figures.budgets(a)]
    for ax in fig.axes:
        bars = _errorbars(ax)
        assert sorted(bars) == ["chain-b15 (chain, B = L-1)", "tree-b15-k15", "tree-b31-k31", "tree-b63-k63"]
        x = {k: v.lines[0].get_xdata()[0] for k, v in bars.items()}
        assert x["tree-b31-k31"] == 31 and x["chain-b15 (chain, B = L-1)"] < 15    # moved off the B=15 tree
        dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert [ln.get_label() for ln in dashed] == ["linear-b16 (linear)"]
        assert ax.get_xscale() == "log" and ax.get_legend() is None
    # the first family's throughput panel at C=4 draws the table's numbers
    thr = _errorbars(fig.subfigs[0].axes[3])
    assert thr["chain-b15 (chain, B = L-1)"].lines[0].get_ydata()[0] == pytest.approx(400.0)
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == 5    # one entry per arm, below the axes


def test_an_arm_keeps_its_colour_across_settings_and_figures():
    a = _analysis()
    fig = figures.budget_curve(a)
    t0, t7 = (_errorbars(s.axes[0])["tree-b31-k31"].lines[0].get_color() for s in fig.subfigs)
    assert t0 == t7 == figures.colour(a, "tree-b31-k31@t0") == figures.colour(a, "tree-b31-k31")
    assert figures.colour(a, "tree-b63-k63") != t0


def test_draw_writes_the_pdf(tmp_path):
    path = figures.draw("budget_curve", _analysis(), tmp_path)
    assert path.read_bytes().startswith(b"%PDF")
