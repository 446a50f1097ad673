"""A run's notes.md: paragraphs split on blank lines, lines joined; no file, no notes."""

from report.build import notes


def test_paragraphs_and_absence(tmp_path):
    assert notes(tmp_path) == []
    (tmp_path / "notes.md").write_text("One\nparagraph.\n\n\n  Two  \n\n")
    assert notes(tmp_path) == ["One paragraph.", "Two"]
