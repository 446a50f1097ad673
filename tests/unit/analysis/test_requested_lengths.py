import pandas as pd

from analysis.trust.checks import FAIL, PASS, _requested_lengths


def requests(**cols):
    n = len(next(iter(cols.values())))
    return pd.DataFrame({"request_id": [f"r{i}" for i in range(n)], "arm": "ar", "ok": True, **cols})


def test_every_drawn_output_length_served_passes():
    (c,) = _requested_lengths(requests(target_output_tokens=[8, 24, 13], completion_tokens=[8, 24, 13]))
    assert c.status == PASS and "3 of 3" in c.evidence and "8-24" in c.evidence


def test_a_request_short_of_its_length_fails_naming_it():
    req = requests(target_output_tokens=[8, 24], completion_tokens=[8, 20], target_input_tokens=[64, 64],
                   prompt_tokens=[64, 64])
    out, inp = _requested_lengths(req)
    assert out.status == FAIL and "request r1: 20 for 24" in out.evidence
    assert inp.status == PASS and str(inp.scope) == "ar input"


def test_no_drawn_lengths_no_check():
    assert _requested_lengths(requests(completion_tokens=[8], target_output_tokens=[None])) == []
    assert _requested_lengths(requests(completion_tokens=[8])) == []
