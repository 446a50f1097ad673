"""The temperature section from hand-made summary and ratio tables on a real measured profile: nothing with one
setting, τ and throughput per setting, ratios that never pair across settings, the external figure labelled as
such, and a τ-against-T figure with one line per base arm in its colour."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from ddbench.core.profile import Profile, load_profile
from report import figures, temperature

SETTINGS = [{"temperature": 0}, {"temperature": 0.7, "top_p": 0.95}]
ONE_GRAPHS_SWITCH = ("ar-eager", "linear-b16-eager", "tree-b15-k15-eager")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    figures.plt.close("all")


def _profile(sampling=SETTINGS, drop=ONE_GRAPHS_SWITCH) -> Profile:
    """h200-tiny (ar, linear-b16, chain-b15, trees B = 15, 31, 63) at C = 1 and 4 under these sampling settings."""
    d = load_profile("h200-tiny").model_dump()
    d["arms"] = [x for x in d["arms"] if x["id"] not in drop]
    d["load"].update(concurrency=[1, 4], requests_per_user=4)
    if sampling is not None:
        d["workload"]["sampling"] = sampling
    return Profile.model_validate(d).measured()


# τ per base arm at T=0; the sampled setting accepts 20% less, throughput follows τ
TAU = {"ar": 1.0, "ar-eager": 1.0, "linear-b16": 4.5, "linear-b16-eager": 4.5, "chain-b15": 4.5,
       "tree-b15-k15": 5.0, "tree-b15-k15-eager": 5.0, "tree-b31-k31": 5.6, "tree-b63-k63": 5.9}


def _summary(p: Profile) -> pd.DataFrame:
    rows = []
    for x in p.arms:
        sampled = not p.sampling_for(x.id).greedy
        for c in p.load.concurrency:
            tau = TAU[figures._base(x)] * (0.8 if sampled and x.kind != "ar" else 1.0)
            thr = 20.0 * c * tau
            rows.append({"arm": x.id, "kind": x.kind, "concurrency": c, "reps": 3, "tau": tau,
                         "tau_t_lo": tau - 0.1 * (x.kind != "ar"), "tau_t_hi": tau + 0.1 * (x.kind != "ar"),
                         "throughput": thr, "throughput_t_lo": 0.97 * thr, "throughput_t_hi": 1.03 * thr})
    return pd.DataFrame(rows)


def _ratio(arm, base, kind, c, r, lo, hi, pairs=3):
    verdict = "faster" if lo > 1 else "slower" if hi < 1 else "within noise"
    return {"arm": arm, "baseline": base, "baseline_kind": kind, "concurrency": c, "speedup": r, "speedup_lo": lo,
            "speedup_hi": hi, "verdict": verdict, "pairs": pairs, "mde": 0.04, "n_to_resolve": 12}


SPEEDUPS = [
    _ratio("tree-b15-k15@t0", "chain-b15@t0", "chain", 1, 1.031, 1.01, 1.05),
    _ratio("tree-b15-k15@t0.7-p0.95", "chain-b15@t0.7-p0.95", "chain", 1, 0.962, 0.93, 0.99),
    _ratio("tree-b15-k15@t0", "linear-b16@t0", "linear", 1, 1.021, 0.99, 1.05),
    _ratio("tree-b15-k15@t0.7-p0.95", "linear-b16@t0.7-p0.95", "linear", 1, 0.981, 0.95, 1.01),
    _ratio("tree-b15-k15@t0", "ar@t0", "ar", 1, 2.5, 2.4, 2.6),
    # pairs across settings (a T=0.7 cell over a T=0 cell), as a careless ingest might leave them: never read
    _ratio("tree-b15-k15@t0.7-p0.95", "chain-b15@t0", "chain", 1, 9.99, 9.9, 10.1),
    _ratio("tree-b15-k15@t0", "linear-b16@t0.7-p0.95", "linear", 1, 8.88, 8.8, 8.9),
]


def _analysis(p: Profile | None = None, speedups=SPEEDUPS):
    p = p or _profile()
    return SimpleNamespace(run=SimpleNamespace(profile=p), summary=_summary(p), speedups=pd.DataFrame(speedups))


def _plain(tex) -> str:
    return str(tex).replace("-{}", "-")


def test_one_setting_has_no_temperature_section():
    a = _analysis(_profile(sampling=None), speedups=[r for r in SPEEDUPS if "@t0.7" not in r["arm"]])
    assert temperature.context(a) is None and temperature.table(a) is None and temperature.ratios(a) is None
    assert temperature.sentences(a) == []
    with pytest.raises(figures.NoData, match="one sampling setting"):   # omitted with its reason, never drawn empty
        figures.tau_temperature(a)


def test_ratios_never_pair_across_settings():
    a = _analysis()
    d = temperature.pairs(a)
    assert len(d) == 4 and set(d["baseline_kind"]) == {"chain", "linear"}        # ar is not a tree/chain/linear ratio
    assert (d["arm"].str.split("@").str[1] == d["baseline"].str.split("@").str[1]).all()
    assert sorted(zip(d["base"], d["base_over"], d["label"], strict=True)) == [
        ("tree-b15-k15", "chain-b15", "t0"), ("tree-b15-k15", "chain-b15", "t0.7-p0.95"),
        ("tree-b15-k15", "linear-b16", "t0"), ("tree-b15-k15", "linear-b16", "t0.7-p0.95")]
    tex = _plain(temperature.ratios(a))
    assert "9.99" not in tex and "8.88" not in tex
    # one row per (arm, over, C), a column pair per setting
    assert "1.031 [1.010--1.050], 3&faster&0.962 [0.930--0.990], 3&slower" in tex
    assert "1.021 [0.990--1.050], 3&within noise&0.981 [0.950--1.010], 3&within noise" in tex
    assert "T=0.7, top-p 0.95: ratio" in tex


def test_table_gives_tau_and_throughput_per_setting():
    tex = _plain(temperature.table(_analysis()))
    # tree-b15 at C=1: τ 5.00 at T=0 and 4.00 at T=0.7; throughput 20 · τ
    assert "tree-b15-k15&1&5.00 [4.90--5.10]&4.00 [3.90--4.10]&100.0 [97.0--103.0]&80.0 [77.6--82.4]" in tex
    assert "ar&1&1 (def.)&1 (def.)" in tex
    assert "@t0" not in tex                                                       # base arms, one row each


def test_sentences_state_the_caveat_the_numbers_and_the_external_figure_as_external():
    text = [_plain(x) for x in temperature.sentences(_analysis())]
    assert text[0].startswith("$\\tau$ at different temperatures is not a matched comparison")
    assert "acceptance changes with T by design" in text[0] and "never pairs" in text[0]
    assert "tree-b15-k15 5.00 / 4.00" in text[1] and "linear-b16 4.50 / 3.60" in text[1]
    # the tree over its chain, the chain's own top-k-1 reference, per setting
    (tree,) = [x for x in text if x.startswith("tree-b15-k15 over")]
    assert tree.startswith("tree-b15-k15 over chain-b15 at C=1")
    assert "1.031$\\times$ (95\\% CI 1.010--1.050, 3 pairs, faster) under T=0 (greedy)" in tree
    assert "0.962$\\times$ (95\\% CI 0.930--0.990, 3 pairs, slower) under T=0.7, top-p 0.95" in tree
    assert "not itself tested" in tree and "9.99" not in tree
    assert text[-1].startswith("External reference, not measured in this run")
    assert "0.69$\\times$ at T=1" in text[-1] and "rmagur1203/vllm-ddtree" in text[-1]


def _series(ax) -> dict[str, ErrorbarContainer]:
    return {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}


def test_the_figure_draws_one_line_per_base_arm_per_concurrency():
    a = _analysis()
    fig = figures.tau_temperature(a)
    assert [ax.get_title() for ax in fig.axes] == ["C=1", "C=4"]
    for ax in fig.axes:
        series = _series(ax)
        assert sorted(series) == ["chain-b15", "linear-b16", "tree-b15-k15", "tree-b31-k31", "tree-b63-k63"]
        for base, c in series.items():
            x, y = c.lines[0].get_xdata(), c.lines[0].get_ydata()
            assert np.asarray(x) == pytest.approx([0.0, 0.7], abs=0.05)        # nudged apart, at T
            assert y == pytest.approx([TAU[base], 0.8 * TAU[base]])
            assert c.lines[0].get_color() == figures.colour(a, base) == figures.colour(a, f"{base}@t0.7-p0.95")
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "0.7\ntop-p 0.95"]
        assert ax.get_legend() is None
    assert len(fig.legends) == 1
    assert "Not a matched comparison of arm with arm" in fig._suptitle.get_text()


def test_eager_twins_get_their_own_row():
    a = _analysis(_profile(drop=()))
    fig = figures.tau_temperature(a)
    assert [ax.get_title() for ax in fig.axes] == ["CUDA graphs on, C=1", "CUDA graphs on, C=4",
                                                   "CUDA graphs off, C=1", "CUDA graphs off, C=4"]
    assert sorted(_series(fig.axes[2])) == ["linear-b16-eager", "tree-b15-k15-eager"]
    assert len(_series(fig.axes[0])) == 5


def test_draw_writes_the_pdf(tmp_path):
    assert figures.draw("tau_temperature", _analysis(), tmp_path).read_bytes().startswith(b"%PDF")
