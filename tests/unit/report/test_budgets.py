"""Budget curves from hand-made summary, ratio and cell tables on a real measured profile: the families found (and
not), the fastest budget per C with the runner-up beaten, within noise, paired from the cells where the speedups table
lacks the pair, or refused; the verdict's (c) quoting the same ratio; and what the figure draws."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from analysis.estimate import metrics, standings, stats
from ddbench.core.profile import Profile, load_profile
from report import budgets, figures, verdict

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


def _cells(summary: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Three ok cells per (arm, C), 0.5% of seeded noise about the summary's throughput (so that a pair's interval
    has a width), with the bootstraps compare.speedup reads."""
    rng = np.random.default_rng(0)
    rows, boots = [], {}
    for r in summary.itertuples():
        for rep in (1, 2, 3):
            thr = r.throughput * (1 + 0.005 * rng.standard_normal())
            rows.append({"arm": r.arm, "concurrency": r.concurrency, "repetition": rep, "status": "ok",
                         "tokens": 10 * thr, "window_s": 10.0, "throughput": thr, "tpot_mean": 1 / thr})
            boots[(r.arm, r.concurrency, rep)] = metrics.Boot(["tokens", "busy_s"], np.array([[10 * thr, 10.0]]), 10,
                                                              rng)
    return pd.DataFrame(rows), boots


def _ratio(arm, base, kind, c, r, lo, hi, pairs=3):
    verdict = "faster" if lo > 1 else "slower" if hi < 1 else "within noise"
    return {"arm": arm, "baseline": base, "baseline_kind": kind, "concurrency": c, "speedup": r, "speedup_lo": lo,
            "speedup_hi": hi, "verdict": verdict, "pairs": pairs, "sign_p": 0.25, "mde": 0.04, "n_to_resolve": 12}


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
    s = _summary(p)
    cells, boots = _cells(s)
    # what compare.conditions reads of a run: every arm here sends what its profile says
    run = SimpleNamespace(profile=p, manifest=SimpleNamespace(weights=lambda role: None, prompt_set_digest="d"),
                          requests=pd.DataFrame(columns=["arm", "concurrency", "warmup", "max_tokens", "temperature"]),
                          cache={})
    return SimpleNamespace(run=run, summary=s, speedups=pd.DataFrame(speedups), cells=cells, boots=boots,
                           by_position=pd.DataFrame())


def _plain(tex) -> str:
    return " ".join(str(tex).replace("-{}", "-").split())


def _paired(a, x: str, y: str, c: int) -> dict:
    """x over y at C straight from the cells, as the analysis pairs them."""
    def side(arm):
        d = a.cells[(a.cells["arm"] == arm) & (a.cells["concurrency"] == c)]
        return d.sort_values("repetition")["throughput"].to_numpy()
    return stats.paired_log_ratio(side(x), side(y))


def test_a_family_per_setting_with_three_budgets_and_its_references():
    a = _analysis()
    fams = standings.budget_families(a)
    assert [f.sampling.label for f in fams] == ["t0", "t0.7-p0.95"]
    for f, label in zip(fams, ("t0", "t0.7-p0.95"), strict=True):
        assert f.budgets == [15, 31, 63] and f.graphs and f.block_size == 16 and f.topk is None
        assert [t.id for t in f.trees] == [f"tree-b{b}-k{b}@{label}" for b in (15, 31, 63)]
        assert f.chain.id == f"chain-b15@{label}" and f.linear.id == f"linear-b16@{label}"
    assert fams[1].title == "T=0.7, top-p 0.95, block 16, K = B, CUDA graphs on"
    # the graphs-off trees are a family of one budget: found, but no curve
    off = [f for f in standings.families(a) if not f.graphs]
    assert [f.budgets for f in off] == [[15], [15]] and off[0].chain is None


def test_one_setting_keeps_the_arm_ids():
    a = _analysis(_profile(sampling=None), speedups=SPEEDUPS[:3])
    (fam,) = standings.budget_families(a)
    assert [t.id for t in fam.trees] == ["tree-b15-k15", "tree-b31-k31", "tree-b63-k63"]
    assert fam.title.startswith("T=0 (greedy), block 16")


def test_no_family_of_three_budgets_says_the_run_cannot_answer():
    a = _analysis(_profile(drop=("tree-b31-k31",)), speedups=[])
    assert standings.budget_families(a) == [] and standings.budgets(a).empty
    ctx = budgets.context(a)
    assert ctx["families"] == []
    note = _plain(ctx["note"])
    assert "15, 63 (T=0 (greedy), block 16, K = B, CUDA graphs on)" in note
    assert "cannot say which budget is fastest" in note
    assert _plain(verdict.which_budget(a)).startswith("The run cannot answer: choosing a budget needs at least 3")
    with pytest.raises(figures.NoData, match="no budget family"):   # omitted, with the reason, not drawn empty
        figures.budget_curve(a)


def test_no_tree_arm_no_section():
    p = _profile(drop=("tree-b15-k15", "tree-b15-k15-eager", "tree-b31-k31", "tree-b63-k63"))
    assert budgets.context(_analysis(p, speedups=[])) is None


def test_the_fastest_budget_and_a_runner_up_within_noise():
    a = _analysis()
    fam = standings.budget_families(a)[0]
    text = _plain(budgets.sentence(a, fam, 1))
    assert text.startswith("C=1: the fastest budget by geometric mean is B=31 (tree-b31-k31@t0) at 120.0 tok/s "
                           "(t 95\\% 116.4--123.6)")
    assert ("1.043$\\times$ (95\\% CI 1.020--1.070, 3 pairs) the throughput of the linear arm linear-b16@t0 "
            "(faster)") in text
    assert "the chain (B=15, chain-b15@t0) at 118.0 tok/s" in text
    assert "1.017$\\times$ (95\\% CI 0.990--1.040, 3 pairs) paired by repetition" in text
    assert "within noise" in text and "it does not beat the runner-up beyond noise" in text
    assert "9.99" not in text


def test_the_chain_beats_a_tree_from_the_inverted_pair_and_the_verdict_says_the_same():
    a = _analysis()
    text = _plain(budgets.sentence(a, standings.budget_families(a)[0], 4))
    assert "the fastest budget by geometric mean is the chain (B=15, chain-b15@t0) at 400.0 tok/s" in text
    # only tree-b15 over the chain was compared, 0.95 [0.93, 0.97]: the chain over it is 1/0.95 [1/0.97, 1/0.93]
    assert "1.053$\\times$ (95\\% CI 1.031--1.075, 3 pairs)" in text
    assert "faster at 95\\% confidence" in text and "it beats the runner-up beyond noise" in text
    # the verdict's (c) reads the same families and ratios: at C=4 it names the chain, with the same interval
    c = _plain(verdict.which_budget(a))
    assert "At C=4, sampling t0, block 16, budgets 15 (the chain, 400.0 tok/s" in c
    assert "the chain (B=15) has the highest throughput, 1.053$\\times$ budget 15 (95\\% CI 1.031--1.075 over 3 " \
           "pairs), faster at 95\\% confidence" in c


def test_two_budgets_are_paired_from_the_cells_where_the_speedups_table_lacks_the_pair():
    # without the chain, B=15 is the runner-up at C=1: the speedups table never pairs two trees
    a = _analysis(_profile(drop=("chain-b15",)))
    want = _paired(a, "tree-b31-k31@t0", "tree-b15-k15@t0", 1)
    assert want["ratio_lo"] > 1                                          # the hand-made cells resolve it
    got = standings.pair_ratio(a, "tree-b31-k31@t0", "tree-b15-k15@t0", 1)
    assert got["source"] == "computed" and got["verdict"] == "faster"
    assert (got["speedup"], got["speedup_lo"], got["speedup_hi"]) == pytest.approx(
        (want["ratio"], want["ratio_lo"], want["ratio_hi"]))
    ratio = f"{want['ratio']:.3f}$\\times$"
    band = f"{want['ratio_lo']:.3f}--{want['ratio_hi']:.3f}"
    text = _plain(budgets.sentence(a, standings.budget_families(a)[0], 1))
    assert "Over the runner-up, B=15 (tree-b15-k15@t0) at 110.0 tok/s" in text
    assert f"it delivers {ratio} (95\\% CI {band}, 3 pairs) paired by repetition: faster at 95\\% confidence; " \
           f"it beats the runner-up beyond noise." in text
    assert "not measured paired" not in text and "not compared" not in text
    # and the verdict's (c) quotes the very same ratio
    assert f"{ratio} budget 15 (95\\% CI {band} over 3 pairs), faster at 95\\% confidence" in _plain(
        verdict.which_budget(a))


def test_the_sampled_setting_pairs_within_its_setting_only():
    a = _analysis()
    fam = standings.budget_families(a)[1]
    text = _plain(budgets.sentence(a, fam, 1))
    assert "the fastest budget by geometric mean is B=31 (tree-b31-k31@t0.7-p0.95) at 96.0 tok/s" in text
    # no ratio of this setting is in the table: the runner-up's comes from the cells of the same setting
    want = _paired(a, "tree-b31-k31@t0.7-p0.95", "chain-b15@t0.7-p0.95", 1)
    assert f"{want['ratio']:.3f}$\\times$ (95\\% CI {want['ratio_lo']:.3f}--{want['ratio_hi']:.3f}, 3 pairs)" in text
    assert "9.99" not in text


def test_a_refused_pair_is_named_not_read_off_two_intervals():
    a = _analysis()
    a.cells = a.cells[a.cells["arm"] != "chain-b15@t0.7-p0.95"]      # the runner-up has no cell that finished ok
    text = _plain(budgets.sentence(a, standings.budget_families(a)[1], 1))
    assert ("The runner-up is the chain (B=15, chain-b15@t0.7-p0.95) at 94.4 tok/s (t 95\\% 91.6--97.2); the two "
            "were not compared") in text
    assert "has no cell that finished ok" in text
    assert "does not say whether B=31 beats it beyond noise" in text
    assert "beats the runner-up" not in text and "confidence" not in text


def test_table_stars_the_fastest_and_gives_the_paired_ratio_over_linear():
    a = _analysis()
    tex = _plain(budgets.table(a, standings.budget_families(a)[0]))
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
    assert [s._suptitle.get_text() for s in fig.subfigs] == [f.title for f in standings.budget_families(a)]
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
