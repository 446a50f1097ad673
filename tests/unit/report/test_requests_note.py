"""The method list's line on which prompts a cell sent, read from the records."""

import pandas as pd

from report.build import requests_note


def _requests(cells):
    rows = [{"arm": arm, "concurrency": c, "repetition": r, "warmup": w, "prompt_id": p}
            for (arm, c, r), prompts in cells.items() for w, p in [(True, "warm"), *((False, p) for p in prompts)]]
    return pd.DataFrame(rows)


def test_repetitions_that_repeat_their_prompts_say_so():
    cells = {(arm, c, r): (["p1", "p2"] if c == 1 else ["p1", "p2", "p3", "p4"]) for arm in ("ar", "tree")
             for c in (1, 4) for r in (1, 2, 3)}
    assert requests_note(_requests(cells)) == ("at C=1 a cell sends 2 distinct prompts, the same in every repetition; "
                                               "at C=4 a cell sends 4 distinct prompts, the same in every repetition "
                                               "(of 4 the run sent)")


def test_a_subset_drawn_afresh_each_repetition_is_named():
    cells = {("ar", 1, 1): ["p1", "p2"], ("ar", 1, 2): ["p3", "p1"], ("tree", 1, 1): ["p1", "p2"],
             ("tree", 1, 2): ["p3", "p1"]}
    assert requests_note(_requests(cells)) == ("at C=1 a cell sends 2 distinct prompts, a different mix in other "
                                               "repetitions (of 3 the run sent)")
    assert requests_note(_requests(cells).assign(warmup=True)) == "no measured request"
