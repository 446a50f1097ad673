"""The report names what a rounds unit was at each level."""

from ddbench.core.profile import Load
from report.build import rounds_units


def test_each_level_says_whether_its_unit_was_one_request_or_a_block():
    load = Load(concurrency=[1, 8, 32], requests_per_user=2, schedule="rounds", unit_s={8: 6, 32: 6.5})
    assert rounds_units(load) == ("C=1: one request per user; C=8: a 6 s block, each user sending back to back; "
                                  "C=32: a 6.5 s block, each user sending back to back")
