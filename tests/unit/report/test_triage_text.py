"""The triage part of the Correctness section: counts, threshold, figure and failures, from a hand-made triage."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis import triage as tr
from report import figures
from report import triage as rt
from report.tex import environment


def hand_triage() -> tr.Triage:
    counts = pd.DataFrame([
        {"comparison": tr.LOSSLESS, "arm": "tree-b15-k8", "reference": "ar", "compared": 10, "identical": 7,
         "ties": 2, "failures": 1, "divergent_outputs": 2, "token_source": tr.RETOKENIZED, "largest_gap": 2.5,
         "largest_margin": 2.5, "largest_tie_margin": 0.02}], columns=tr.COUNT_COLUMNS)
    div = pd.DataFrame([
        {"comparison": tr.LOSSLESS, "arm": "tree-b15-k8", "reference": "ar", "prompt_id": "code_$1", "requests": 2,
         "token_source": tr.RETOKENIZED, "position": 7, "ref_len": 64, "arm_len": 64, "ref_token": 10,
         "arm_token": 11, "ref_text": "\n", "arm_text": " {x}", "top1": 10, "top2": 11, "top1_text": "\n",
         "top2_text": " {x}", "gap": 0.02, "margin": 0.02, "ref_rank": 1, "arm_rank": 2, "verdict": tr.TIE,
         "why": "margin 0.020 < 0.19"},
        {"comparison": tr.LOSSLESS, "arm": "tree-b15-k8", "reference": "ar", "prompt_id": "json-%", "requests": 1,
         "token_source": tr.RETOKENIZED, "position": 3, "ref_len": 64, "arm_len": 64, "ref_token": 4,
         "arm_token": 5, "ref_text": "a", "arm_text": "b", "top1": 4, "top2": 5, "top1_text": "a",
         "top2_text": "b", "gap": 2.5, "margin": 2.5, "ref_rank": 1, "arm_rank": 2, "verdict": tr.FAILURE,
         "why": "margin 2.500 >= 0.19"}], columns=tr.COLUMNS)
    return tr.Triage(counts, div, np.linspace(0.001, 10, 200))


def test_section_shows_counts_threshold_and_failures_escaped():
    a = SimpleNamespace(triage=hand_triage())
    ctx = rt.context(a)
    tex = environment().get_template("triage.tex.j2").render(triage=ctx, fig={"triage": "triage.pdf"})
    assert "\\textbf{0.19}" in tex and "derive-{}threshold" in tex and "5th percentile" in tex
    assert "json-{}\\%" in tex and "code\\_\\$1" not in tex      # the tie is counted, only the failure listed
    assert "\\textbf{1}" in tex and "triage.pdf" in tex and "re-{}tokenized" in tex
    assert "2 distinct divergent outputs in 3 requests" in tex


def test_not_triaged_says_why():
    a = SimpleNamespace(triage=tr.empty("the target x is not a local checkpoint"))
    tex = environment().get_template("triage.tex.j2").render(triage=rt.context(a), fig={})
    assert "Divergences not triaged: the target x is not a local checkpoint" in tex


def test_figure_draws_with_divergences_and_is_omitted_without():
    fig = figures.triage(SimpleNamespace(triage=hand_triage()))
    assert not figures.empty(fig)
    with pytest.raises(figures.NoData, match="nothing to triage"):
        figures.triage(SimpleNamespace(triage=tr.empty()))
