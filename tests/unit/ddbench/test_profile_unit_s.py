"""load.unit_s: the length of a rounds unit, per level."""

import pytest
from pydantic import ValidationError

from ddbench.core.profile import Load


def test_a_unit_length_is_given_per_level_or_for_all():
    load = Load(concurrency=[1, 8], requests_per_user=4, schedule="rounds", unit_s={8: 6})
    assert load.unit_seconds(1) is None and load.unit_seconds(8) == 6
    assert Load(concurrency=[1, 8], requests_per_user=4, schedule="rounds", unit_s=3).unit_seconds(1) == 3
    # unset, it stays out of the dump (and so out of the digests of runs recorded before it)
    assert "unit_s" not in Load(concurrency=[1], requests_per_user=4, schedule="rounds").model_dump()


@pytest.mark.parametrize("kw, says", [
    ({"schedule": "interleaved", "unit_s": 6}, "needs schedule 'rounds'"),
    ({"schedule": "rounds", "unit_s": {32: 6}}, "levels [32] that the plan does not run"),
    ({"schedule": "rounds", "unit_s": 0}, "greater than 0"),
])
def test_a_unit_length_outside_the_rounds_schedule_or_its_levels_is_refused(kw, says):
    with pytest.raises(ValidationError, match=says.replace("[", r"\[").replace("]", r"\]")):
        Load(concurrency=[1, 8], requests_per_user=4, **kw)
