import json

import pytest

from containers.launch import sglang_command
from containers.sglang_flags import (
    DDTREE_OVERLAY,
    FLAGS_DIR,
    FlagError,
    check_profile,
    extract,
    load_table,
    server_argv,
    validate,
)
from ddbench.core.profile import PROFILES_DIR, Profile, load_profile

LAUNCH = ["python3", "-m", "sglang.launch_server"]
SGLANG_PROFILES = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml")
                         if load_profile(p.stem).backend.kind == "sglang")


def profile(version="0.5.15", extra=(), arms=None) -> Profile:
    return Profile.model_validate({
        "name": "t", "backend": {"kind": "sglang", "runtime": "local", "version": version},
        "models": {"target": "/m/t", "drafter": "/m/d"}, "placement": {"device": "cuda", "gpus": [0]},
        "runtime": {"attention_backend": "triton", "overlap_scheduler": False, "extra_args": list(extra)},
        "arms": arms or [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16},
                         {"id": "tree-b63-k8", "kind": "tree", "block_size": 16, "budget": 63, "topk": 8}],
        "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 8},
        "load": {"concurrency": [1, 64], "requests_per_user": 1}})


@pytest.mark.parametrize("name", SGLANG_PROFILES)
def test_every_shipped_sglang_arm_parses(name):
    assert SGLANG_PROFILES, "no shipped SGLang profile found"
    assert check_profile(load_profile(name)) == []


def test_the_tables_come_from_the_pinned_sources():
    base = json.loads((FLAGS_DIR / "sglang-0.5.15.json").read_text())
    assert base["source"]["package"] == "sglang==0.5.15" and len(base["source"]["sha256"]) == 64
    assert "DFLASH" in base["speculative_algorithms"] and "DDTREE" not in base["speculative_algorithms"]
    overlay = load_table(DDTREE_OVERLAY)
    assert "DDTREE" in overlay["speculative_algorithms"]
    assert overlay["source"]["overlay"]["commit"] == "93e9850e430035f8a363fd881a6a0c5436b95108"


def test_an_unknown_flag_fails_and_names_itself():
    with pytest.raises(FlagError, match="--no-such-flag"):
        validate(LAUNCH + ["--model-path", "m", "--no-such-flag", "1"], load_table("sglang-0.5.15"))


def test_an_ambiguous_prefix_fails_on_0_5_23_but_is_an_alias_on_0_5_15():
    argv = LAUNCH + ["--model-path", "m", "--cuda-graph-max-bs", "8"]
    validate(argv, load_table("sglang-0.5.15"))
    with pytest.raises(FlagError, match="ambiguous option: --cuda-graph-max-bs could match"):
        validate(argv, load_table("sglang-0.5.23"))


def test_values_are_checked_against_choices_and_types():
    table = load_table("sglang-0.5.15")
    with pytest.raises(FlagError, match="invalid choice: 'flash'"):
        validate(LAUNCH + ["--model-path", "m", "--attention-backend", "flash"], table)
    with pytest.raises(FlagError, match="invalid int value: 'many'"):
        validate(LAUNCH + ["--model-path", "m", "--max-running-requests", "many"], table)
    with pytest.raises(FlagError, match="required: --model-path"):
        validate(LAUNCH + ["--tp-size", "2"], table)


def test_ddtree_is_known_only_with_the_pr():
    argv = LAUNCH + ["--model-path", "m", "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "15"]
    with pytest.raises(FlagError, match="--speculative-ddtree-budget"):
        validate(argv, load_table("sglang-0.5.15"))
    validate(argv, load_table(DDTREE_OVERLAY))
    validate(argv, load_table("ddtree-fork-ad7ab160"))
    with pytest.raises(FlagError, match="not a registered algorithm"):
        validate(LAUNCH + ["--model-path", "m", "--speculative-algorithm", "DDTREEE"], load_table(DDTREE_OVERLAY))


def test_a_bad_profile_fails_per_arm_naming_the_arm_and_the_flag():
    problems = check_profile(profile(version="0.5.23", extra=["--cuda-graph-max-bs", "8"],
                                     arms=[{"id": "ar", "kind": "ar"}]))
    assert len(problems) == 1 and problems[0].startswith("arm 'ar': SGLang (sglang-0.5.23) would reject")
    assert "--cuda-graph-max-bs" in problems[0]
    assert check_profile(profile()) == []


def test_ddtree_arms_are_checked_against_the_pr_and_others_against_the_release():
    p = profile()
    for arm in p.arms:
        argv = sglang_command(p, arm).argv
        assert server_argv(argv)[0] == "--model-path"
    assert check_profile(p) == []


def test_the_extractor_reads_both_flag_styles():
    src = '''
CHOICES = ["a", "b"]
@dataclasses.dataclass
class ServerArgs:
    model_path: A[str, Arg(help="m", aliases=["--model"])]
    tp_size: A[int, Arg(help="t", aliases=["--tp"])] = 1
    flag: A[bool, "f"] = False
    mode: A[Literal["x", "y"], "m"] = "x"
    kind: A[Optional[str], Arg(help="k", choices=CHOICES)] = None
    many: A[Optional[List[str]], "l"] = None
    hidden: A[bool, Arg(no_cli=True)] = False
    plain: int = 3

    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--old-switch", action=Gone, help="deprecated")
        parser.add_argument("--old-value", type=int, action=Moved, dest="tp_size")
'''
    actions = '''
class Gone(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kw):
        super().__init__(option_strings, dest, nargs=nargs, **kw)
class Moved(argparse.Action):
    pass
'''
    table = extract(src, actions, "class SpeculativeAlgorithm(Enum):\n    DFLASH = auto()\n    NONE = auto()\n")
    by_name = {f["names"][0]: f for f in table["flags"]}
    assert set(by_name) == {"--model-path", "--tp-size", "--flag", "--mode", "--kind", "--many", "--old-switch",
                            "--old-value"}
    assert by_name["--model-path"]["required"] and by_name["--model-path"]["names"] == ["--model-path", "--model"]
    assert by_name["--tp-size"]["type"] == "int"
    assert by_name["--flag"]["nargs"] == 0 and by_name["--old-switch"]["nargs"] == 0
    assert by_name["--old-value"]["nargs"] == 1
    assert by_name["--mode"]["choices"] == ["x", "y"] and by_name["--kind"]["choices"] == ["a", "b"]
    assert by_name["--many"]["nargs"] == "+"
    assert table["speculative_algorithms"] == ["DFLASH"]
    validate(LAUNCH + ["--model", "m", "--tp", "2", "--flag", "--many", "a", "b", "--old-switch"], table)
