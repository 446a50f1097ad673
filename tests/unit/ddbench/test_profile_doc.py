"""docs/profile.md is generated from the profile schema, and kept current."""

from ddbench.core import profile as P
from ddbench.profile_doc import COMMAND, DOC_PATH, SECTIONS, main, render


def test_docs_profile_md_is_current():
    assert DOC_PATH.is_file(), f"{DOC_PATH} is missing; run: {COMMAND}"
    assert DOC_PATH.read_text(encoding="utf-8") == render(), \
        f"docs/profile.md is not current with ddbench/core/profile.py; run: {COMMAND}"


def test_every_field_of_every_model_is_documented():
    text = render()
    reached = {P.Profile}
    for model, _ in SECTIONS:   # every model a profile reaches has a section
        for f in model.model_fields.values():
            reached |= {m for m in (P.Backend, P.Models, P.Placement, P.Runtime, P.Arm, P.Workload, P.Sampling,
                                    P.Load) if m.__name__ in str(f.annotation)}
    assert reached <= {m for m, _ in SECTIONS}
    for model, _ in SECTIONS:
        assert f"## {model.__name__}\n" in text
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name} has no description"
            assert f"| `{name}` |" in text


def test_check_flag_says_how_to_fix(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "profile.md"
    stale.write_text("old\n")
    monkeypatch.setattr("ddbench.profile_doc.DOC_PATH", stale)
    monkeypatch.setattr("ddbench.profile_doc.P.REPO_ROOT", tmp_path)
    assert main(["--check"]) == 1
    assert COMMAND in capsys.readouterr().err
    assert main(["--write"]) == 0 and main(["--check"]) == 0
