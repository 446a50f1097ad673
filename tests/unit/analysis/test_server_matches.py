"""An external arm is what it says it is: its declared kind and shape against its server's own description and τ.
Swapped URLs (the 'ar' arm pointed at a DFLASH server) fail, and the recommendation then passes the arm over."""

import numpy as np

from analysis.trust.checks import FAIL, NA, PASS, server_matches
from analysis.trust.kinds import Kind
from ddbench.core.profile import Arm

AR = Arm(id="ar", kind="ar", url="http://127.0.0.1:30000")
LINEAR = Arm(id="linear-b16", kind="linear", block_size=16, url="http://127.0.0.1:30001")


def info(**raw):
    return {"endpoints": {"/get_server_info": raw}}


def test_swapped_urls_fail_both_arms():
    dflash = info(speculative_algorithm="DFLASH", speculative_num_draft_tokens=16)
    plain = info(speculative_algorithm=None)
    ar_on_dflash = server_matches(AR, dflash, [5.69])
    assert ar_on_dflash.status == FAIL and "an 'ar' arm's server runs DFLASH" in ar_on_dflash.evidence
    assert "commits 5.69 tokens a step" in ar_on_dflash.evidence
    linear_on_ar = server_matches(LINEAR, plain, [1.0])
    assert linear_on_ar.status == FAIL and "runs no speculative algorithm" in linear_on_ar.evidence


def test_matching_servers_pass_and_a_contradicted_shape_fails():
    assert server_matches(AR, info(speculative_algorithm=None), [1.0]).status == PASS
    assert server_matches(LINEAR, info(speculative_algorithm="DFLASH", speculative_num_draft_tokens=16),
                          [4.7]).status == PASS
    wrong = server_matches(LINEAR, info(speculative_algorithm="DFLASH", speculative_num_draft_tokens=8), [4.7])
    assert wrong.status == FAIL and "speculative_num_draft_tokens 8 against the arm's block_size 16" in wrong.evidence


def test_ar_counts_its_prefill_token_without_a_step():
    # 16-token outputs: AR's own counters read 16 / 15 = 1.07 tokens a step
    assert server_matches(AR, info(speculative_algorithm="NONE"), [1.067], tokens=16).status == PASS
    assert server_matches(LINEAR, info(speculative_algorithm="DFLASH"), [1.067], tokens=16).status == FAIL
    assert server_matches(AR, info(speculative_algorithm="NONE"), [1.067], tokens=512).status == FAIL


def test_a_server_that_says_nothing_is_judged_by_its_tau_alone():
    # vLLM: no server_info, τ from its spec_decode counters
    assert server_matches(LINEAR, None, [1.0]).status == FAIL
    assert server_matches(AR, None, [np.nan]).status == NA
    assert server_matches(AR, {"endpoints": {"/get_server_info": {"error": "HTTP 404"}}}, [1.0]).status == PASS


def test_the_check_bars_the_recommendation():
    assert Kind.SERVER_MATCHES.bars
    assert server_matches(AR, None, [1.0]).kind is Kind.SERVER_MATCHES


def test_a_shape_field_that_is_not_a_number_is_named_not_a_crash():
    # runs recorded before scrub() kept size fields held "<redacted>" where SGLang's block size should be
    redacted = server_matches(LINEAR, info(speculative_algorithm="DFLASH", speculative_num_draft_tokens="<redacted>"),
                              [4.7])
    assert redacted.status == PASS
    assert "its speculative_num_draft_tokens '<redacted>' is not a number, so the arm's block_size is not checked" \
        in redacted.evidence


def test_a_mislabelled_block_is_caught_by_the_arms_own_requests():
    """A DFLASH server with a b16 drafter declared as block_size 8: its server info may say nothing of the block,
    but its requests commit more than 8 tokens a step and accept drafts deeper than 7."""
    import pandas as pd

    from analysis.trust.checks import shape_evidence

    b8 = Arm(id="linear-b8", kind="linear", block_size=8, url="http://127.0.0.1:30001")
    req = pd.DataFrame([{"arm": "linear-b8", "ok": True, "completion_tokens": 65, "spec_verify_ct": 6,
                         "spec_accepted_depth_histogram": [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]}])
    said = shape_evidence(b8, req)
    assert said == ["a request committed 10.67 tokens a verify step, which a block of 8 cannot",
                    "drafts accepted at depth 15, past a block of 8's 7"]
    check = server_matches(b8, info(speculative_algorithm="DFLASH"), [4.7], evidence=said)
    assert check.status == FAIL and "10.67 tokens a verify step" in check.evidence
    # the same requests under the block they came from, and a full b16 chain (16 x 4 + the prefill's token)
    assert shape_evidence(LINEAR, req) == []
    full = req.assign(arm="linear-b16", completion_tokens=65, spec_verify_ct=4)
    assert shape_evidence(LINEAR, full) == []


def test_a_tree_larger_than_its_declared_budget_is_caught():
    import pandas as pd

    from analysis.trust.checks import shape_evidence

    b7 = Arm(id="tree-b7-k4", kind="tree", block_size=16, budget=7, topk=4, url="http://127.0.0.1:30002")
    req = pd.DataFrame([{"arm": "tree-b7-k4", "ok": True, "completion_tokens": 65, "spec_verify_ct": 20,
                         "spec_avg_tree_nodes": 15.0}])
    assert shape_evidence(b7, req) == ["trees of 15.00 drafted nodes on average, more than the declared 7"]
    assert shape_evidence(b7, req.assign(spec_avg_tree_nodes=7.0)) == []
    # a linear arm's chain drafts its block less one
    assert shape_evidence(LINEAR, req.assign(arm="linear-b16", spec_avg_tree_nodes=15.0)) == []
