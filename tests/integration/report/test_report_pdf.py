"""The PDF builds with latexmk from a synthetic run that has a failed cell, hostile prompt ids and an
arm name with TeX ligatures; its text carries the arms and the numbers the tables hold."""

import re
import shutil
import subprocess

import pytest

from analysis.analyze import analyze
from analysis.synth import DEFAULT_ARMS, Plan, write_run
from report.build import build

pytestmark = pytest.mark.skipif(not shutil.which("latexmk") or not shutil.which("pdftotext"),
                                reason="needs latexmk and poppler-utils (apt)")

HOSTILE = ["a_b%c&d#e$f", "{brace}\\back~^", "caf\u00e9-\u4e2d-\U0001F600", "--`'\"<>|", "\\end{document}",
           "ctl\x07bell"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    arms = [dict(a) for a in DEFAULT_ARMS]
    arms[3]["id"] = "tree--b15.k8"
    plan = Plan(arms=arms, requests_per_user=20, repetitions=2, prompt_ids=HOSTILE + [f"p{i}" for i in range(6)],
                failed_cell=("tree--b15.k8", 4, 2), lossy_arm="linear-b16")
    run = write_run(tmp_path_factory.mktemp("rep"), plan)
    (run / "notes.md").write_text("Arm tree-b31 was not run: 100% of_it\nmissing.\n\n  Second {note} here.\n")
    a = analyze(run, bootstrap=200)
    pdf, seconds = build(a)
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return a, pdf, text


def test_pdf_is_written(built):
    a, pdf, _ = built
    assert pdf == a.run.path / "report.pdf"
    assert pdf.read_bytes()[:5] == b"%PDF-"


def test_text_has_sections_arms_and_failure(built):
    a, _, text = built
    for section in ("Summary", "Setup", "Methodology", "Results per concurrency", "Acceptance", "Correctness",
                    "Trust checks", "The full profile"):
        assert section in text
    for arm in ("ar", "linear-b16", "chain-b16", "tree--b15.k8"):
        assert arm in text
    assert "server exited with code -9 (out of memory)" in text
    assert "1 of 16 cells failed" in text


def test_the_runs_notes_are_printed(built):
    flat = re.sub(r"\s+", " ", built[2])
    assert "Notes on this run" in flat
    assert "Arm tree-b31 was not run: 100% of_it missing. Second {note} here." in flat


def test_text_has_the_table_numbers(built):
    a, _, text = built
    flat = re.sub(r"\s+", " ", text)
    for r in a.cells.to_dict("records"):
        assert f"{r['throughput']:.1f} [{r['throughput_lo']:.1f}" in flat
    for r in a.speedups.to_dict("records"):
        band = f" [{r['speedup_lo']:.3f}" if r["speedup_lo"] == r["speedup_lo"] else ""  # one pair: no interval
        assert f"{r['speedup']:.3f}{band}" in flat
    for r in a.decomposition.to_dict("records"):
        assert f"{r['product']:.3f}" in flat


def test_page_one_row_carries_number_interval_and_verdict(built):
    a, pdf, _ = built
    page = subprocess.run(["pdftotext", "-f", "1", "-l", "1", "-layout", str(pdf), "-"], capture_output=True,
                          text=True, check=True).stdout
    flat = re.sub(r"\s+", " ", page)
    r = a.speedups[(a.speedups["arm"] == "tree--b15.k8") & (a.speedups["baseline_kind"] == "ar")
                   & (a.speedups["concurrency"] == 1)].iloc[0]
    assert f"{r['speedup']:.2f} ({r['speedup_lo']:.2f}–{r['speedup_hi']:.2f}) {r['verdict']}" in flat


def test_every_failure_is_listed_once_in_the_checks_appendix(built):
    a, _, text = built
    appendix = text[text.index("Every check by kind"):]
    failed = int((a.checks["status"] == "fail").sum())
    assert failed and appendix.count("FAIL") == failed
    assert "tables/checks.csv" in re.sub(r"\s+", " ", appendix)


def test_hostile_prompt_ids_survive(built):
    # the lossy arm's differing prompts are named in the correctness table
    _, _, text = built
    flat = re.sub(r"\s+", "", text)
    for pid in ("a_b%c&d#e$f", "\\end{document}", "café-<U+4E2D>-<U+1F600>", "ctl<U+0007>bell"):
        assert pid in flat


def test_pages_render_to_png(built, tmp_path):
    _, pdf, _ = built
    pages = int(re.search(r"Pages:\s+(\d+)", subprocess.run(["pdfinfo", str(pdf)], capture_output=True,
                                                               text=True, check=True).stdout).group(1))
    subprocess.run(["pdftoppm", "-r", "30", "-png", str(pdf), str(tmp_path / "page")], check=True)
    pngs = sorted(tmp_path.glob("page-*.png"))
    assert pages >= 8 and len(pngs) == pages
    assert all(p.stat().st_size > 1000 for p in pngs)
