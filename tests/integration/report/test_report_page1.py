"""The report of a fixture run (analysis.synth) builds clean and its page 1 answers: what to deploy, by how much,
how sure. The build fails on any overfull box over 1 pt in the LaTeX log and on any figure with an empty panel;
page 1 carries the header, the deployment table, one recommendation per concurrency and the regression box, in
which a tree slower than its linear arm is named with its step cost."""

import re
import shutil
import subprocess

import pytest

from analysis.analyze import analyze
from analysis.synth import DEFAULT_ARMS, Plan, write_run
from report import figures
from report.build import build

pytestmark = pytest.mark.skipif(not shutil.which("latexmk") or not shutil.which("pdftotext"),
                                reason="needs latexmk and poppler-utils (apt)")

# a tree of 127 nodes verifies so many more tokens per step than it gains in acceptance that it is slower than
# the linear arm: the regression page 1 must show
SLOW_TREE = {"id": "tree-b127-k8", "kind": "tree", "block_size": 16, "budget": 127, "topk": 8}
# figures whose whole section is left out when they have nothing to show (that section's own note says why)
CONDITIONAL = {"budget_curve", "rates", "tau_temperature", "triage"}
OVERFULL = re.compile(r"Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\)")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    plan = Plan(arms=[dict(a) for a in DEFAULT_ARMS] + [dict(SLOW_TREE)], requests_per_user=20, repetitions=3,
                failed_cell=None)
    run = write_run(tmp_path_factory.mktemp("page1"), plan)
    a = analyze(run, bootstrap=100)
    keep = tmp_path_factory.mktemp("build")
    pdf, _ = build(a, keep=keep)
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    return a, pdf, keep, text


def _page(pdf, n: int) -> str:
    out = subprocess.run(["pdftotext", "-f", str(n), "-l", str(n), "-layout", str(pdf), "-"], capture_output=True,
                         text=True, check=True).stdout
    return re.sub(r"\s+", " ", out)


def test_no_overfull_box_over_one_point(built):
    _, _, keep, _ = built
    log = (keep / "report.log").read_text(errors="replace")
    over = [float(x) for x in OVERFULL.findall(log)]
    assert not [x for x in over if x > 1.0], f"overfull boxes (pt): {over}"


def test_no_figure_has_an_empty_panel_and_each_left_out_says_why(built):
    a, _, keep, _ = built
    tex = (keep / "report.tex").read_text()
    for name, builder in figures.ALL.items():
        try:
            fig = builder(a)
        except figures.NoData as e:
            if name not in CONDITIONAL:
                assert str(e) in tex.replace("\n", " ").replace("-{}", "-"), name
            continue
        assert not figures.empty(fig), f"{name} has a panel without data"
    for path in re.findall(r"\\includegraphics\[[^]]*\]\{([^}]+)\}", tex):
        assert (keep / path).is_file()


def test_figures_keep_their_fonts_at_8pt_and_fit_the_text(built):
    a = built[0]
    for name, builder in figures.ALL.items():
        try:
            fig = builder(a)
        except figures.NoData:
            continue
        assert fig.get_size_inches()[0] <= figures.MAX_WIDTH + 1e-6, name
        sizes = [t.get_fontsize() for t in fig.findobj(lambda o: hasattr(o, "get_fontsize") and
                                                        hasattr(o, "get_text") and o.get_text())]
        assert min(sizes) >= figures.MIN_FONT, (name, min(sizes))


def test_page_one_has_the_header(built):
    a, pdf, _, _ = built
    p1 = _page(pdf, 1)
    for field in ("model pair", "engine and build", "hardware", "run", "commit", "date"):
        assert field in p1
    assert a.run.profile.models.target in p1 and a.run.path.name in p1
    assert (a.run.manifest.git.sha or "")[:12] in p1
    assert f"engine and build {a.run.profile.backend.kind}" in p1


def test_page_one_has_the_deployment_table_and_a_recommendation_per_c(built):
    a, pdf, _, _ = built
    p1 = _page(pdf, 1)
    assert "Deployment table" in p1 and "× AR (95% CI)" in p1 and "× best linear (95% CI)" in p1
    for h in ("TPOT ms", "TTFT ms", "p50", "p99"):
        assert h in p1
    for arm in a.kinds:
        assert arm in p1
    for c in a.run.profile.load.concurrency:
        assert re.search(rf"C={c}: deploy \S+", p1), c
    # every ratio on page 1 carries the verdict its interval supports
    for r in a.speedups[a.speedups["baseline_kind"] == "ar"].itertuples():
        assert f"{r.speedup:.2f} ({r.speedup_lo:.2f}–{r.speedup_hi:.2f}) {r.verdict}" in p1


def test_page_one_names_the_slow_tree_as_a_regression_with_its_step_cost(built):
    a, pdf, _, _ = built
    p1 = _page(pdf, 1)
    box = p1[p1.index("Regressions"):p1.index("Failed checks")]
    slow = a.speedups[(a.speedups["arm"] == SLOW_TREE["id"]) & (a.speedups["baseline"] == "linear-b16")
                      & (a.speedups["verdict"] == "slower")]
    assert len(slow), "the fixture's slow tree is not slower: the test plan no longer plants a regression"
    for r in slow.itertuples():
        assert f"{SLOW_TREE['id']} / linear-b16 at C={r.concurrency} = {r.speedup:.2f}×" in box
    assert "its step costs" in box and "% more" in box


def test_page_one_has_the_failed_checks_box_and_correctness_line(built):
    a, pdf, _, _ = built
    p1 = _page(pdf, 1)
    bad = int((a.checks["status"] == "fail").sum())
    assert f"Failed checks: {bad} of {len(a.checks)}" in p1
    assert re.search(r"Correctness: (lossless|LOSSY): \d+ failures?", p1)


def test_questions_follow_on_page_two(built):
    _, pdf, _, _ = built
    assert "What the run answers" in _page(pdf, 2) and "What the run answers" not in _page(pdf, 1)


def test_the_checks_appendix_is_a_summary(built):
    a, _, _, text = built
    flat = re.sub(r"\s+", " ", text)
    assert "tables/checks.csv" in flat
    body = flat[flat.index("Checks Every check by kind"):]
    # one row per kind of check, not one per check and scope
    assert body.count("pass") < len(a.checks)


def test_the_body_before_the_appendices_is_at_most_eight_pages(built):
    _, pdf, _, _ = built
    first = next(n for n in range(1, 30) if re.search(r"\bA Per-cell tables\b", _page(pdf, n)))
    assert first - 1 <= 8, f"the appendices start on page {first}"
