"""Divergence triage (analysis.triage) on planted divergences, against the shipped target in fp32 on the CPU."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis import triage as tr
from analysis.read import ingest
from analysis.trust import checks
from ddbench.core.profile import REPO_ROOT, Profile
from ddbench.core.records import RequestRecord

TARGET = REPO_ROOT / tr.THRESHOLD_MODEL
pytestmark = pytest.mark.skipif(not (TARGET / "model.safetensors").is_file(), reason="the shipped target is absent")
TOKENS = 64


def profile(dtype="bfloat16", arms=None, device="cuda") -> Profile:
    arms = arms or [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16},
                    {"id": "chain-b15", "kind": "chain", "block_size": 16},
                    {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8}]
    return Profile.model_validate({
        "name": "t", "backend": {"kind": "refengine"}, "models": {"target": tr.THRESHOLD_MODEL, "drafter": "d"},
        "placement": {"device": device, "gpus": [0]} if device == "cuda" else {"device": "cpu"},
        "runtime": {"dtype": dtype}, "arms": arms,
        "workload": {"prompt_set": tr.THRESHOLD_PROMPTS, "max_tokens": TOKENS},
        "load": {"concurrency": [1], "requests_per_user": 1}})


def fake_run(prof: Profile):
    return SimpleNamespace(profile=prof, manifest=SimpleNamespace(prompt_set_digest=None, weights=lambda role: None))


@pytest.fixture(scope="module")
def scorer():
    return tr.Scorer.load(TARGET)


@pytest.fixture(scope="module")
def planted(scorer):
    """A prompt, the target's greedy continuation, its fp32 scores, and a near-tie and a clear position."""
    prompts = tr.prompt_ids(fake_run(profile()), scorer.tokenizer)
    for pid in ("code-quicksort", *sorted(prompts)):
        out = tr.greedy(scorer.target, [prompts[pid]], TOKENS)[0]
        s = scorer.score(prompts[pid], out)
        gaps = s["gaps"]
        ties = [i for i in np.argsort(gaps) if gaps[i] < tr.THRESHOLD / 2 and i > 4]
        clear = [i for i in range(5, TOKENS - 5) if gaps[i] > 10 * tr.THRESHOLD]
        if ties and clear:
            return SimpleNamespace(prompt=pid, out=out, rows=s["rows"], gaps=gaps, tie=int(ties[0]),
                                   clear=int(clear[0]))
    pytest.skip("no prompt with both a near-tie and a clear position")


def second(rows, i) -> int:
    return int(np.argsort(-rows[i], kind="stable")[1])


def rank(rows, i, k) -> int:
    return int(np.argsort(-rows[i], kind="stable")[k - 1])


def requests(rows: list[tuple[str, list[int]]], prompt: str, tok, ids: bool = True) -> pd.DataFrame:
    return pd.DataFrame({"arm": [a for a, _ in rows], "prompt_id": prompt, "ok": True, "temperature": 0.0,
                         "text": [tok.decode(o) for _, o in rows], "completion_tokens": [len(o) for _, o in rows],
                         "output_token_ids": [list(o) if ids else None for _, o in rows]})


def by_arm(t: tr.Triage, comparison=tr.LOSSLESS) -> dict:
    d = t.divergences
    return {r.arm: r for r in d[d["comparison"] == comparison].itertuples()}


def test_planted_divergences_are_found_where_planted_and_judged_by_the_gap(planted, scorer):
    p, out, rows = planted, planted.out, planted.rows
    tie = out[:p.tie] + [second(rows, p.tie)] + out[p.tie + 1:]        # the runner-up at a near-tie
    bug = out[:p.clear] + [second(rows, p.clear)] + out[p.clear + 1:]  # the runner-up far behind the top
    far = out[:p.clear] + [rank(rows, p.clear, 5)] + out[p.clear + 1:]   # the #5 token
    short = out[:-3]
    req = requests([("ar", out), ("ar", out), ("ar", out), ("linear-b16", tie), ("linear-b16", out),
                    ("chain-b15", tie), ("tree-b15-k8", bug), ("tree-b15-k8", far), ("tree-b15-k8", short)],
                   p.prompt, scorer.tokenizer)
    t = tr.triage(fake_run(profile()), req, scorer=scorer)
    assert t.note is None
    d = t.divergences.set_index(["comparison", "arm", "position"])
    lin = d.loc[(tr.LOSSLESS, "linear-b16", p.tie)]
    assert lin["verdict"] == tr.TIE and lin["token_source"] == tr.SERVER
    assert lin["gap"] == pytest.approx(p.gaps[p.tie], abs=1e-4) and lin["margin"] == pytest.approx(lin["gap"])
    assert (lin["ref_token"], lin["arm_token"], lin["ref_rank"], lin["arm_rank"]) == (out[p.tie], tie[p.tie], 1, 2)
    tree = t.divergences[t.divergences["arm"] == "tree-b15-k8"].sort_values("arm_len")
    assert list(tree["verdict"]) == [tr.FAILURE] * 3
    assert list(tree["position"]) == [len(out) - 3, p.clear, p.clear]
    assert "only in length" in tree.iloc[0]["why"]
    big = tree[tree["arm_rank"] == 2].iloc[0]
    assert big["gap"] == pytest.approx(p.gaps[p.clear], abs=1e-4) and big["gap"] >= tr.THRESHOLD
    assert tree[tree["arm_rank"] == 5].iloc[0]["margin"] > big["margin"]
    c = t.counts.set_index(["comparison", "arm"])
    assert c.loc[(tr.LOSSLESS, "linear-b16"), ["compared", "identical", "ties", "failures"]].tolist() == [2, 1, 1, 0]
    assert c.loc[(tr.LOSSLESS, "tree-b15-k8"), ["compared", "identical", "ties", "failures"]].tolist() == [3, 0, 0, 3]
    # chain equals linear: the chain's output is linear's most frequent one (a tie with out: 1 each, the first)
    assert c.loc[(tr.LOSSLESS, "chain-b15"), "ties"] == 1
    # the run's own gap distribution: every position of ar's output
    assert len(t.position_gaps) == len(out)
    ok, ev = t.verdict(tr.LOSSLESS, "tree-b15-k8")
    assert not ok and f"{p.prompt} token {p.clear}" in ev
    assert t.verdict(tr.LOSSLESS, "linear-b16")[0]


def test_chain_is_paired_with_the_linear_arm_of_its_block_and_graph_setting(planted, scorer):
    arms = [{"id": "ar", "kind": "ar"}, {"id": "linear-b8", "kind": "linear", "block_size": 8},
            {"id": "linear-b16", "kind": "linear", "block_size": 16},
            {"id": "linear-b16-eager", "kind": "linear", "block_size": 16, "cuda_graphs": False},
            {"id": "chain-b15", "kind": "chain", "block_size": 16},
            {"id": "chain-b15-eager", "kind": "chain", "block_size": 16, "cuda_graphs": False},
            {"id": "chain-b31", "kind": "chain", "block_size": 32}]
    prof = profile(arms=arms)
    assert [x for x in tr.pairs(prof) if x[0] == tr.CHAIN] == [
        (tr.CHAIN, "chain-b15", "linear-b16"), (tr.CHAIN, "chain-b15-eager", "linear-b16-eager")]
    p, out, rows = planted, planted.out, planted.rows
    tie = out[:p.tie] + [second(rows, p.tie)] + out[p.tie + 1:]
    # linear-b16 and its chain both take the runner-up: lossless ties, chain equals linear exactly;
    # the eager chain keeps ar's output: it differs from its linear arm at the tie
    req = requests([("ar", out), ("linear-b16", tie), ("chain-b15", tie), ("linear-b16-eager", tie),
                    ("chain-b15-eager", out)], p.prompt, scorer.tokenizer)
    t = tr.triage(fake_run(prof), req, scorer=scorer)
    c = t.counts.set_index(["comparison", "arm"])
    assert c.loc[(tr.CHAIN, "chain-b15"), ["reference", "compared", "identical"]].tolist() == ["linear-b16", 1, 1]
    assert c.loc[(tr.CHAIN, "chain-b15-eager"), ["reference", "ties", "failures"]].tolist() == [
        "linear-b16-eager", 1, 0]
    d = by_arm(t, tr.CHAIN)["chain-b15-eager"]
    assert (d.position, d.ref_token, d.arm_token) == (p.tie, tie[p.tie], out[p.tie])
    # the checks: bf16 passes on ties; fp32 must match exactly
    for dtype, status in (("bfloat16", checks.PASS), ("float32", checks.FAIL)):
        run = SimpleNamespace(profile=profile(dtype, arms))
        got = {str(c.scope): c.status for c in checks._chain_equals_linear(run, t)}
        assert got == {"chain-b15": checks.PASS, "chain-b15-eager": status, "chain-b31": checks.NA}


def test_records_without_ids_are_retokenized_and_say_so(planted, scorer):
    p, out, rows = planted, planted.out, planted.rows
    tie = out[:p.tie] + [second(rows, p.tie)] + out[p.tie + 1:]
    with_ids = tr.triage(fake_run(profile()), requests([("ar", out), ("linear-b16", tie)], p.prompt,
                                                       scorer.tokenizer), scorer=scorer)
    text = tr.triage(fake_run(profile()), requests([("ar", out), ("linear-b16", tie)], p.prompt, scorer.tokenizer,
                                                   ids=False), scorer=scorer)
    # one side without ids: both sides are compared as re-tokenized text
    mixed = requests([("ar", out), ("linear-b16", tie)], p.prompt, scorer.tokenizer)
    mixed.loc[1, "output_token_ids"] = None
    mixed = tr.triage(fake_run(profile()), mixed, scorer=scorer)
    a, b, m = (by_arm(x)["linear-b16"] for x in (with_ids, text, mixed))
    assert (a.token_source, b.token_source, m.token_source) == (tr.SERVER, tr.RETOKENIZED, tr.RETOKENIZED)
    assert text.counts.set_index("arm").loc["linear-b16", "token_source"] == tr.RETOKENIZED
    # the greedy ids survive decode + re-tokenization here, so the finding is the same
    if scorer.tokenizer.encode(scorer.tokenizer.decode(tie)) == tie:
        assert (b.position, b.verdict) == (a.position, a.verdict) and b.gap == pytest.approx(a.gap)


def test_retokenize_keeps_the_targets_argmax_where_it_spells_the_text(planted, scorer):
    prompt = tr.prompt_ids(fake_run(profile()), scorer.tokenizer)[planted.prompt]
    text = scorer.tokenizer.decode(planted.out)
    got = tr.retokenize(text, prompt, scorer)
    assert scorer.tokenizer.decode(got) == text
    rows = scorer.score(prompt, got)["rows"][: len(got)]
    assert (rows.argmax(axis=1) == np.asarray(got)).all()   # the greedy continuation, as generated


def test_not_applicable_without_a_loadable_target():
    prof = profile()
    prof = prof.model_copy(update={"models": prof.models.model_copy(update={"target": "no/such-model"})})
    req = pd.DataFrame({"arm": ["ar", "linear-b16"], "prompt_id": "code-quicksort", "ok": True, "temperature": 0.0,
                        "text": ["a b", "a c"], "completion_tokens": [2, 2], "output_token_ids": [None, None]})
    t = tr.triage(fake_run(prof), req)
    assert t.counts.empty and "not a local checkpoint" in t.note
    table = pd.DataFrame([{"arm": "linear-b16", "compared": 1, "exact": 0, "match_rate": 0.0}])
    got = checks._lossless(SimpleNamespace(profile=prof), table, t)
    assert [(c.status, "not triaged" in c.evidence) for c in got] == [(checks.NA, True)]
    # identical outputs need no target at all
    same = req.assign(text="a b")
    assert tr.triage(fake_run(prof), same).note is None


def test_lossless_check_passes_on_ties_and_lists_failures(planted, scorer):
    p, out, rows = planted, planted.out, planted.rows
    tie = out[:p.tie] + [second(rows, p.tie)] + out[p.tie + 1:]
    bug = out[:p.clear] + [second(rows, p.clear)] + out[p.clear + 1:]
    req = requests([("ar", out), ("linear-b16", tie), ("tree-b15-k8", bug)], p.prompt, scorer.tokenizer)
    t = tr.triage(fake_run(profile()), req, scorer=scorer)
    table = pd.DataFrame([{"arm": "linear-b16", "compared": 1, "exact": 0, "match_rate": 0.0},
                          {"arm": "tree-b15-k8", "compared": 1, "exact": 0, "match_rate": 0.0}])
    bf16 = {str(c.scope): c for c in checks._lossless(SimpleNamespace(profile=profile("bfloat16")), table, t)}
    assert bf16["linear-b16"].status == checks.PASS and "numerical tie" in bf16["linear-b16"].evidence
    assert bf16["tree-b15-k8"].status == checks.FAIL
    assert f"{p.prompt} token {p.clear} gap" in bf16["tree-b15-k8"].evidence
    fp32 = {str(c.scope): c.status for c in checks._lossless(SimpleNamespace(profile=profile("float32")), table, t)}
    assert fp32 == {"linear-b16": checks.FAIL, "tree-b15-k8": checks.FAIL}


def test_records_carry_output_token_ids_and_old_records_still_load(tmp_path):
    base = dict(arm="ar", concurrency=1, repetition=1, warmup=False, prompt_id="p", category="c", worker="h:1",
                user=0, max_tokens=4, temperature=0.0, send_ns=1, send_unix_ns=1, end_ns=9, status=200,
                chunks=[{"t_ns": 5, "text": "ab"}], usage={"prompt_tokens": 1, "completion_tokens": 2})
    new = RequestRecord(request_id="n", output_token_ids=[7, 8], **base).model_dump_json()
    old = json.dumps({k: v for k, v in json.loads(RequestRecord(request_id="o", **base).model_dump_json()).items()
                      if k != "output_token_ids"})
    mixed, legacy = tmp_path / "mixed.jsonl", tmp_path / "legacy.jsonl"
    mixed.write_text(new + "\n" + old + "\n")
    legacy.write_text(old + "\n")
    req, _ = ingest._flatten([ingest._read_requests(mixed, "ar", 1, 1)])
    got = req["output_token_ids"].tolist()
    assert list(got[0]) == [7, 8] and pd.isna(got[1])
    assert [tr._ids(v) for v in got] == [(7, 8), None]
    req, _ = ingest._flatten([ingest._read_requests(legacy, "ar", 1, 1)])
    assert [tr._ids(v) for v in req["output_token_ids"].tolist()] == [None]


@pytest.mark.slow
def test_threshold_is_the_5th_percentile_of_the_fp32_gaps(scorer):
    # the derivation in full (CPU, fp32, 46 prompts x 128 tokens: about 10 s): the constant matches it
    ids, outs = tr.continuations(scorer)
    value, gaps = tr.derive_threshold(scorer=scorer, continued=(ids, outs))
    assert len(gaps) == 46 * tr.THRESHOLD_TOKENS
    assert value == pytest.approx(tr.THRESHOLD, abs=0.005)
    # the text fallback on the same continuations: plain encoding loses some generated splits,
    # re-tokenization against the target gets every one back
    tok = scorer.tokenizer
    texts = [tok.decode(o) for o in outs]
    assert sum(tok.encode(t) != o for t, o in zip(texts, outs, strict=True)) >= 1
    assert all(tr.retokenize(t, p, scorer) == o for t, p, o in zip(texts, ids, outs, strict=True))


def test_a_twin_run_is_re_scored_with_the_pair_it_was_built_from(planted, scorer):
    """The twin's own 8B-shaped target is neither here nor small; its source pair is, checked by digest."""
    from refengine.twin import PAIR_TARGET, dir_digests
    p, out, rows = planted, planted.out, planted.rows
    tie = out[:p.tie] + [second(rows, p.tie)] + out[p.tie + 1:]
    prof = profile()
    prof = prof.model_copy(update={"models": prof.models.model_copy(update={"target": ".twins/qwen3-8b-s0/target"})})

    def run(pair_files):
        twin = {"shape": "qwen3-8b", "pair": {"target": pair_files, "drafter": {}}}
        return SimpleNamespace(profile=prof, manifest=SimpleNamespace(prompt_set_digest=None, weights=lambda r: None,
                                                                      models={"twin": twin}))
    req = requests([("ar", out), ("linear-b16", tie)], p.prompt, scorer.tokenizer)
    t = tr.triage(run(dir_digests(PAIR_TARGET)), req)
    assert t.note is None and by_arm(t)["linear-b16"].verdict == tr.TIE
    assert by_arm(t)["linear-b16"].position == p.tie
    other = {**dir_digests(PAIR_TARGET), "model.safetensors": "0" * 64}
    t = tr.triage(run(other), req)
    assert t.counts.empty and "not the one it was built from (model.safetensors)" in t.note


class SplitTokenizer:
    """Longest-match over a few pieces, so ')' then '(' re-tokenizes as the one token ')('."""

    pieces = ["a", ")", "(", ")(", ')"']

    def encode(self, text: str) -> list[int]:
        out = []
        while text:
            i = max((i for i, p in enumerate(self.pieces) if text.startswith(p)), key=lambda i: len(self.pieces[i]))
            out.append(i)
            text = text[len(self.pieces[i]):]
        return out

    def decode(self, ids) -> str:
        return "".join(self.pieces[i] for i in ids)

    def chat_ids(self, messages) -> list[int]:
        return [0]


class SplitScorer:
    """At output position 1 the target prefers ')"' over ')' by 0.05 and ranks ')(' far down; 'a' elsewhere."""

    tokenizer = SplitTokenizer()

    def score(self, prompt, out) -> dict:
        rows = np.zeros((len(out) + 1, len(SplitTokenizer.pieces)))
        rows[:, 0] = 10.0
        rows[1] = [0.0, 9.95, 1.0, 3.0, 10.0]
        return {"rows": rows, "gaps": np.full(len(out), 5.0)}


def test_text_only_records_are_split_as_a_greedy_server_would_have(planted):
    # ar wrote 'a)"a'; the arm took the near-tied ')' and then '(': its text 'a)(a' re-tokenizes as ')(',
    # the target's #3, 7 logits down. Split as the target ranks it, the arm's token is ')', a numerical tie
    req = requests([("ar", [0, 4, 0]), ("linear-b16", [0, 1, 2, 0])], planted.prompt, SplitTokenizer(), ids=False)
    d = by_arm(tr.triage(fake_run(profile()), req, scorer=SplitScorer()))["linear-b16"]
    assert (d.position, d.token_source, d.ref_text, d.arm_text, d.arm_rank) == (1, tr.RETOKENIZED, ')"', ")", 2)
    assert d.verdict == tr.TIE and d.margin == pytest.approx(0.05)
    # with the server's ids the records say what was generated, and nothing is re-split
    req = requests([("ar", [0, 4, 0]), ("linear-b16", [0, 3, 0])], planted.prompt, SplitTokenizer())
    d = by_arm(tr.triage(fake_run(profile()), req, scorer=SplitScorer()))["linear-b16"]
    assert (d.arm_text, d.verdict) == (")(", tr.FAILURE) and "re-tokenized" not in d.why


class LoopTokenizer(SplitTokenizer):
    pieces = ["a", ")", "(", ")(", ')"', "))", '"']


class LoopScorer:
    """At output position 1 the target's #1 is '))', which spells neither text, and ')' its near-tied #2; at
    position 2 '"' leads '(' by 0.1. The encodings ')"' and ')(' rank far down."""

    tokenizer = LoopTokenizer()

    def score(self, prompt, out) -> dict:
        rows = np.zeros((len(out) + 1, len(LoopTokenizer.pieces)))
        rows[:, 0] = 10.0
        rows[1] = [0.0, 9.95, 1.0, 3.0, 2.0, 10.0, 0.0]
        rows[2] = [0.0, 0.0, 9.9, 0.0, 0.0, 0.0, 10.0]
        return {"rows": rows, "gaps": np.full(len(out), 5.0)}


def test_both_sides_are_resplit_where_their_best_spelling_agrees(planted):
    # 'a)"a' and 'a)(a' encode as ')"' and ')(' (the target's #4 and #3); a greedy server took ')' on both, the
    # best-ranked token that spells each text on, so they diverge one token later, at a near-tie
    req = requests([("ar", [0, 4, 0]), ("linear-b16", [0, 3, 0])], planted.prompt, LoopTokenizer(), ids=False)
    d = by_arm(tr.triage(fake_run(profile()), req, scorer=LoopScorer()))["linear-b16"]
    assert (d.position, d.ref_text, d.arm_text, d.ref_rank, d.arm_rank) == (2, '"', "(", 1, 2)
    assert d.verdict == tr.TIE and d.margin == pytest.approx(0.1) and "ids re-tokenized from text" in d.why
    assert tr.retokenize('a)"a', [0], LoopScorer()) == [0, 1, 6, 0]


class NewlineTokenizer(SplitTokenizer):
    pieces = ["s", "\n", "\n\n", "f", "c"]


class NewlineScorer:
    """After 's' the target prefers '\\n' over '\\n\\n' by `split` logits; after 's\\n' it prefers 'f' over '\\n'
    by 1.73."""

    tokenizer = NewlineTokenizer()

    def __init__(self, split: float):
        self.split = split

    def score(self, prompt, out) -> dict:
        rows = np.zeros((len(out) + 1, len(NewlineTokenizer.pieces)))
        rows[:, 0] = 10.0
        rows[1] = [0.0, 10.0, 10.0 - self.split, 0.0, 0.0]
        rows[2] = [0.0, 8.27, 0.0, 10.0, 0.0]
        return {"rows": rows, "gaps": np.full(len(out), 5.0)}


@pytest.mark.parametrize("split, verdict", [(0.007, tr.TIE), (5.0, tr.FAILURE)])
def test_a_near_tied_split_a_token_earlier_explains_re_tokenized_text(planted, split, verdict):
    # ar wrote 's\nf'; the arm took '\n\n' after 's' (0.007 behind '\n') and wrote 's\n\n\nc'. Re-split greedily,
    # its text reads '\n' then '\n' against 'f', 1.73 apart; the text allows the near-tie one token earlier
    req = requests([("ar", [0, 1, 3]), ("linear-b16", [0, 2, 1, 4])], planted.prompt, NewlineTokenizer(), ids=False)
    d = by_arm(tr.triage(fake_run(profile()), req, scorer=NewlineScorer(split)))["linear-b16"]
    assert d.verdict == verdict
    if verdict == tr.TIE:
        assert (d.position, d.ref_text, d.arm_text) == (1, "\n", "\n\n") and d.margin == pytest.approx(0.007)
        assert "split as the arm's text allows, 1 token(s) before" in d.why
    else:   # no near-tied split of the same characters: the re-tokenized difference stands
        assert (d.position, d.ref_text, d.arm_text) == (2, "f", "\n") and d.margin == pytest.approx(1.73)
