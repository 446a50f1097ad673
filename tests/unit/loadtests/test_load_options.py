import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

from ddbench.core.profile import Load, Workload
from loadtests.options import OPTIONS, OptionError, add_options, cell_argv, settings


def parse(argv):
    p = argparse.ArgumentParser()
    add_options(p)
    return p.parse_args(argv)


def test_cell_argv_round_trips_a_profile_cell(tmp_path):
    wl = Workload(prompt_set="loadtests/prompts/chat.jsonl", categories=["code", "json"], max_tokens=64,
                  temperature=0.5, top_p=0.9, top_k=20, ignore_eos=False)
    ld = Load(concurrency=[8], warmup_requests=3, requests_per_user=7, seed=11)
    s = settings(parse(cell_argv(wl, ld, arm="tree-b15-k8", concurrency=8, repetition=2,
                                 records_dir=tmp_path, model="m")))
    assert [Path(p).name for p in s.prompt_set] == ["chat.jsonl"] and Path(s.prompt_set[0]).is_file()
    assert (s.categories, s.max_tokens, s.temperature, s.top_p, s.top_k, s.ignore_eos) == (
        ["code", "json"], 64, 0.5, 0.9, 20, False)
    assert (s.warmup, s.per_user, s.duration_s, s.seed) == (3, 7, None, 11)
    assert (s.arm, s.concurrency, s.repetition, s.records_dir, s.model, s.mode) == (
        "tree-b15-k8", 8, 2, tmp_path, "m", "closed")


def test_open_loop_duration_cell():
    ld = Load(mode="open", rate=12.5, arrival="constant", concurrency=[4], duration_s=30)
    s = settings(parse(cell_argv(Workload(prompt_set="x.jsonl", max_tokens=8), ld, arm="ar", concurrency=4,
                                 repetition=1, records_dir="/tmp", model="m")))
    assert (s.mode, s.rate, s.arrival, s.duration_s, s.per_user) == ("open", 12.5, "constant", 30.0, None)


def test_web_ui_strings_are_converted():
    # the web UI hands every custom value back as a string
    raw = {name.replace("-", "_"): str(default) for name, default, _ in OPTIONS}
    raw.update(max_tokens="256", temperature="0.7", ignore_eos="False", warmup_requests="2")
    s = settings(SimpleNamespace(**raw))
    assert (s.max_tokens, s.temperature, s.ignore_eos, s.warmup) == (256, 0.7, False, 2)


@pytest.mark.parametrize("field,value,match", [
    ("max_tokens", "many", "--max-tokens"),
    ("max_tokens", "0", "--max-tokens"),
    ("ignore_eos", "maybe", "--ignore-eos"),
    ("mode", "sideways", "--mode"),
    ("top_p", "0", "--top-p"),
])
def test_bad_values_name_the_option(field, value, match):
    raw = {name.replace("-", "_"): str(default) for name, default, _ in OPTIONS}
    raw[field] = value
    with pytest.raises(OptionError, match=match):
        settings(SimpleNamespace(**raw))


def test_open_mode_needs_a_rate():
    with pytest.raises(OptionError, match="--rate"):
        settings(parse(["--mode", "open"]))


def test_the_web_ui_form_shows_no_field_that_files_the_records():
    import json
    import subprocess
    import sys

    from loadtests.options import INTERNAL

    # Locust's own parser, in a process of its own: importing locust monkey-patches the interpreter with gevent
    code = ("import json; from locust.argument_parser import get_empty_argument_parser as g; "
            "from loadtests.options import add_options; p = g(); add_options(p); "
            "a = p.parse_args(['--arm', 'linear-b16', '--records-dir', '/tmp/x']); "
            "print(json.dumps([sorted(p.args_included_in_web_ui), a.arm]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    shown, arm = json.loads(out.stdout.strip().splitlines()[-1])
    assert not {n.replace("-", "_") for n in INTERNAL} & set(shown)
    assert {"prompt_set", "max_tokens", "temperature", "mode", "rate"} <= set(shown)
    assert arm == "linear-b16"   # still options, set by the session's command line
