"""The PDF of an SGLang-like synthetic run whose profile names a reference-engine-like run in
compare_with carries the cross-check section with its tables, reading and gap lines; a run
without compare_with has no such section."""

import re
import shutil
import subprocess

import pytest

from analysis.analyze import analyze
from analysis.synth import REFENGINE, Plan, write_run
from report.build import build, render

pytestmark = pytest.mark.skipif(not shutil.which("latexmk") or not shutil.which("pdftotext"),
                                reason="needs latexmk and poppler-utils (apt)")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("xcrep")
    # the reference side accepts fewer drafts: a τ gap well beyond 5% for every speculative arm
    ref = write_run(root, Plan(requests_per_user=20, repetitions=2, backend=dict(REFENGINE), profile_name="ref-tiny",
                               seed=1, acceptance_shift=-0.25))
    sgl = write_run(root, Plan(requests_per_user=20, repetitions=2, compare_with=str(ref), lossy_arm="linear-b16"))
    a = analyze(sgl, bootstrap=100)
    pdf, _ = build(a)
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return a, ref, re.sub(r"\s+", " ", text)


def test_section_and_sides(built):
    a, ref, flat = built
    assert "Cross-check: SGLang vs reference engine" in flat
    assert "A = SGLang 0.5.23, this run" in flat and "B = reference engine, compared with" in flat
    assert "Cross-check against reference engine" in flat      # the summary's bullet


def test_tables_carry_the_numbers(built):
    a, _, flat = built
    x = a.crosscheck
    for r in x.arms.to_dict("records"):
        assert f"{r['tau_this']:.2f} [{r['tau_this_lo']:.2f}" in flat
        assert f"{r['tau_gap_pct']:+.1f} [" in flat
        assert f"{r['pairs']} {r['identical']} {100 * r['agreement_rate']:.1f}" in flat
    for r in x.throughput.to_dict("records"):
        band = f" [{r['ratio_lo']:.3f}" if r["ratio_lo"] == r["ratio_lo"] else ""   # one repetition: no interval
        assert f"{r['throughput_this']:.1f} {r['throughput_other']:.1f} {r['ratio']:.3f}{band}" in flat


def test_reading_and_gap_lines(built):
    a, _, flat = built
    spec = a.crosscheck.arms[a.crosscheck.arms["kind"] != "ar"]
    assert not spec["tau_within_tolerance"].any()
    assert "At T=0 and C=1, 0 of 3 speculative arms judged on both sides agree in τ within 5%" in flat
    # a gap line splits τ by output agreement where a side's records allow it, else says it has no cause
    split = flat.count("the split of outputs")
    assert flat.count("This run measured the gap, not its cause.") + split == 3
    # split on both sides where both have per-request steps, else on the one side that has both halves
    both = spec[["tau_this_where_identical", "tau_other_where_identical"]].notna().all(axis=1)
    one = spec[["tau_other_where_identical", "tau_other_where_differing"]].notna().all(axis=1)
    assert split == int((both | one).sum()) and split >= 1
    tree = spec.set_index("arm").loc["tree-b15-k8"]
    assert f"τ of tree-b15-k8 differs by {tree['tau_gap_pct']:+.1f}%" in flat
    x = a.crosscheck.arms
    same, pairs = int(x["identical"].sum()), int(x["pairs"].sum())
    assert f"identical for {same} of {pairs} paired requests ({100 * same / pairs:.1f}%)" in flat


def test_no_section_without_compare_with(built, tmp_path):
    _, ref, _ = built
    tex = render(analyze(ref, bootstrap=20), tmp_path).read_text()
    assert "Cross-check" not in tex and "sec:crosscheck" not in tex
