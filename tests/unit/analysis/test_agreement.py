"""analysis.agreement: two runs' ratios side by side, each interval against the other's point, and the
run A / run B ratio from the two runs' repetition pairs."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from analysis.agreement import across, agreement, between_runs, main, pair_ratios, siblings
from analysis.estimate import stats
from loadtests.plan import PROMPT_ORDER


def _run(root, name, tree_over_ar: list[float], verdict="faster"):
    t = root / name / "tables"
    t.mkdir(parents=True)
    reps = range(1, len(tree_over_ar) + 1)
    cells = [{"arm": "ar", "concurrency": 1, "repetition": r, "status": "ok", "throughput": 100.0} for r in reps]
    cells += [{"arm": "tree", "concurrency": 1, "repetition": r, "status": "ok", "throughput": 100.0 * x}
              for r, x in zip(reps, tree_over_ar, strict=True)]
    cells.append({"arm": "tree", "concurrency": 1, "repetition": 99, "status": "failed", "throughput": 1.0})
    pd.DataFrame(cells).to_csv(t / "cells.csv", index=False)
    p = stats.paired_log_ratio(np.array(tree_over_ar) * 100, np.full(len(tree_over_ar), 100.0))
    pd.DataFrame([{"arm": "tree", "baseline": "ar", "concurrency": 1, "speedup": p["ratio"],
                   "speedup_lo": p["ratio_lo"], "speedup_hi": p["ratio_hi"], "verdict": verdict}]).to_csv(
        t / "speedups.csv", index=False)
    return root / name


def test_pairs_are_the_repetitions_both_arms_finished():
    cells = pd.DataFrame({"arm": ["ar", "tree", "ar", "tree", "tree"], "concurrency": [1] * 5,
                          "repetition": [1, 1, 2, 3, 2], "status": ["ok", "ok", "ok", "ok", "failed"],
                          "throughput": [100, 150, 100, 170, 1]})
    assert pair_ratios(cells, "tree", "ar", 1).tolist() == [1.5]


def test_runs_within_each_others_noise_agree(tmp_path):
    a = _run(tmp_path, "a", [1.30, 1.34, 1.28, 1.36, 1.31, 1.33])
    b = _run(tmp_path, "b", [1.31, 1.35, 1.29, 1.33, 1.30, 1.36])
    [r] = agreement(a, b).itertuples()
    assert r.a_holds_b and r.b_holds_a and r.same_verdict and r.differ is False
    assert r.a_over_b == pytest.approx(np.exp(np.mean(np.log([1.30, 1.34, 1.28, 1.36, 1.31, 1.33]))
                                              - np.mean(np.log([1.31, 1.35, 1.29, 1.33, 1.30, 1.36]))))


def test_a_shifted_run_is_told_apart_and_printed(tmp_path, capsys):
    a = _run(tmp_path, "a", [1.30, 1.34, 1.28, 1.36, 1.31, 1.33])
    b = _run(tmp_path, "b", [1.20, 1.22, 1.19, 1.23, 1.21, 1.20], verdict="faster")
    [r] = agreement(a, b).itertuples()
    assert not r.a_holds_b and not r.b_holds_a and r.differ is True and r.a_over_b_lo > 1
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "an interval misses the other's point" in out
    assert ("1 ratios: both intervals hold the other run's point for 0 (0 with the repetitions' intervals alone); "
            "the same verdict for 1") in out


def test_a_run_without_tables_is_named(tmp_path, capsys):
    a = _run(tmp_path, "a", [1.3, 1.3])
    assert main([str(a), str(tmp_path / "nothing")]) == 2
    assert "nothing/tables: no speedups.csv, cells.csv" in capsys.readouterr().err


# ---- across runs: the run effect that no single run's repetitions can see ----------------------------

def _by_hand(samples):
    """Cochran's Q and the DerSimonian-Laird tau^2, written out for two or three runs."""
    m = [np.mean(np.log(s)) for s in samples]
    v = [np.var(np.log(s), ddof=1) / len(s) for s in samples]
    w = [1 / x for x in v]
    mw = sum(wi * mi for wi, mi in zip(w, m, strict=True)) / sum(w)
    q = sum(wi * (mi - mw) ** 2 for wi, mi in zip(w, m, strict=True))
    tau2 = max(0.0, (q - (len(m) - 1)) / (sum(w) - sum(wi ** 2 for wi in w) / sum(w)))
    return q, tau2


def test_runs_that_share_one_ratio_show_no_run_effect():
    a, b = [1.30, 1.34, 1.28, 1.36, 1.31, 1.33], [1.31, 1.35, 1.29, 1.33, 1.30, 1.36]
    r = stats.between_runs([a, b])
    q, tau2 = _by_hand([a, b])
    assert r["runs"] == 2 and r["q"] == pytest.approx(q) and tau2 == 0
    assert r["q_p"] > 0.5 and r["between_sd"] == 0 and r["i2"] == 0
    assert r["pooled_lo"] < r["pooled"] < r["pooled_hi"]
    assert r["pooled"] == pytest.approx(np.exp(np.mean(np.log(a + b))), rel=2e-3)


def test_a_run_effect_is_found_and_sized_as_dersimonian_laird_does():
    runs = [[1.30, 1.34, 1.28, 1.36, 1.31, 1.33], [1.20, 1.22, 1.19, 1.23, 1.21, 1.20],
            [1.25, 1.27, 1.24, 1.28, 1.26, 1.25]]
    r = stats.between_runs(runs)
    q, tau2 = _by_hand(runs)
    assert r["q"] == pytest.approx(q) and r["q_p"] < 1e-6 and r["i2"] > 0.9
    assert r["between_sd"] == pytest.approx(np.exp(np.sqrt(tau2)) - 1)
    assert 0.03 < r["between_sd"] < 0.05  # the three run means sit 1.32, 1.21, 1.26
    # the pooled interval spans the runs' spread, not the repetitions' alone
    assert r["pooled_lo"] < 1.22 and r["pooled_hi"] > 1.31


def test_the_pooled_interval_is_never_narrower_than_the_runs_own_noise():
    """Two runs closer together than their noise implies (Hartung-Knapp's scale < 1) keep the fixed-effect width."""
    a, b = [1.30, 1.34, 1.28, 1.36], [1.30, 1.345, 1.28, 1.355]
    r = stats.between_runs([a, b])
    w = [1 / (np.var(np.log(x), ddof=1) / len(x)) for x in (a, b)]
    half = np.log(r["pooled_hi"] / r["pooled"])
    assert half == pytest.approx(sps.t.ppf(0.975, 1) * np.sqrt(1 / sum(w)))
    assert np.log(r["pooled"] / r["pooled_lo"]) == pytest.approx(half)


def test_too_few_runs_or_repetitions_give_no_test():
    assert np.isnan(stats.between_runs([[1.3, 1.4, 1.2]])["q_p"])
    r = stats.between_runs([[1.3, 1.4, 1.2], [1.3]])  # a run of one repetition has no noise to weigh it by
    assert r["runs"] == 1 and np.isnan(r["between_sd"])


def test_across_runs_flags_the_shifted_run_and_prints_no_pairwise_table_for_three(tmp_path, capsys):
    a = _run(tmp_path, "a", [1.30, 1.34, 1.28, 1.36, 1.31, 1.33])
    b = _run(tmp_path, "b", [1.31, 1.35, 1.29, 1.33, 1.30, 1.36])
    c = _run(tmp_path, "c", [1.20, 1.22, 1.19, 1.23, 1.21, 1.20])
    [r] = across([a, b]).itertuples()
    assert not r.run_effect and r.runs == 2 and r.ratios == "1.320 1.323"
    [r] = across([a, b, c]).itertuples()
    assert r.run_effect and r.runs == 3 and r.between_sd > 0.02
    assert main([str(a), str(b), str(c)]) == 0
    out = capsys.readouterr().out
    assert "<- run effect" in out and "both intervals hold" not in out
    assert "1 ratios over 3 runs: a run effect beyond the repetitions' noise (Q's p < 0.05/1) for 1: tree / ar at C=1" \
        in out


def test_one_run_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([str(_run(tmp_path, "a", [1.3, 1.3]))])
    assert "give two runs or more" in capsys.readouterr().err


def _manifest(run, digest="d1", cpu="Xeon", cores=2, cpu_id=None, prompt_order=PROMPT_ORDER):
    host = {"cpu": cpu, "cores": cores, "gpus": [], **({"cpu_id": cpu_id} if cpu_id else {})}
    schedule = {"prompt_order": prompt_order} if prompt_order else {}
    (run / "manifest.json").write_text(json.dumps({"profile_digest": digest, "host": host, "schedule": schedule}))
    return run


def test_siblings_are_analysed_runs_of_the_same_plan_on_the_same_kind_of_host(tmp_path):
    me = _manifest(_run(tmp_path, "r1", [1.3, 1.32]))
    same = _manifest(_run(tmp_path, "r2", [1.3, 1.31]))
    _manifest(_run(tmp_path, "r3", [1.3, 1.31]), digest="d2")           # another plan
    _manifest(_run(tmp_path, "r4", [1.3, 1.31]), cores=16)              # another host
    _manifest(_run(tmp_path, "r6", [1.3, 1.31]), cpu_id="AuthenticAMD 26/2/1")  # one model name, another chip
    _manifest(_run(tmp_path, "r7", [1.3, 1.31]), prompt_order=None)     # sent a new subset each repetition
    (tmp_path / "r5").mkdir()
    _manifest(tmp_path / "r5")                                          # not analysed
    assert siblings(me) == [same]
    assert siblings(tmp_path / "nothing") == []


def test_between_runs_is_empty_alone_and_names_the_runs_it_used(tmp_path):
    a = _manifest(_run(tmp_path, "a", [1.30, 1.34, 1.28, 1.36, 1.31, 1.33]))
    speedups, cells = pd.read_csv(a / "tables" / "speedups.csv"), pd.read_csv(a / "tables" / "cells.csv")
    assert between_runs(a, speedups, cells).empty
    _manifest(_run(tmp_path, "b", [1.20, 1.22, 1.19, 1.23, 1.21, 1.20]))
    _manifest(_run(tmp_path, "c", [1.25, 1.27, 1.24, 1.28, 1.26, 1.25]))
    [r] = between_runs(a, speedups, cells).itertuples()
    assert r.with_runs == "b c" and r.runs == 3 and r.run_effect and r.ratios.startswith("1.320 ")
