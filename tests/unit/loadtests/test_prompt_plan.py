from collections import Counter
from itertools import islice, pairwise

import pytest

from ddbench.core.prompts import Message, Prompt
from loadtests import plan


def prompts(n):
    return [Prompt(id=f"p{i}", category="code", messages=[Message(role="user", content=str(i))]) for i in range(n)]


def test_order_is_a_permutation_fixed_by_the_seed():
    ps = prompts(20)
    assert plan.prompt_order(ps, 1) == plan.prompt_order(ps, 1)
    assert plan.prompt_order(ps, 1) != plan.prompt_order(ps, 2)
    assert sorted(p.id for p in plan.prompt_order(ps, 5)) == sorted(p.id for p in ps)


@pytest.mark.parametrize("users,warmup,measured", [(1, 2, 5), (4, 1, 3), (7, 0, 4), (64, 2, 2)])
def test_measured_multiset_depends_only_on_concurrency(users, warmup, measured):
    order = plan.prompt_order(prompts(11), 0)

    def measured_ids(user_order):
        return Counter(plan.closed_loop_prompt(order, u, i, users).id
                       for u in user_order for i in range(warmup, warmup + measured))

    forward = measured_ids(range(users))
    assert forward == measured_ids(reversed(range(users)))
    # the measured positions are exactly C*W .. C*(W+N)-1 of the cycled order
    expected = Counter(order[k % len(order)].id for k in range(users * warmup, users * (warmup + measured)))
    assert forward == expected


def test_constant_arrivals_are_evenly_spaced():
    assert list(islice(plan.arrivals(4.0, "constant", 0), 5)) == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_poisson_arrivals_are_seeded_and_have_the_asked_rate():
    a = list(islice(plan.arrivals(50.0, "poisson", 3), 5001))
    assert a == list(islice(plan.arrivals(50.0, "poisson", 3), 5001))
    assert a != list(islice(plan.arrivals(50.0, "poisson", 4), 5001))
    gaps = [b - a_ for a_, b in pairwise(a)]
    assert all(g >= 0 for g in gaps)
    assert 0.018 < sum(gaps) / len(gaps) < 0.022  # mean gap 1/rate, within 10% over 5000 gaps


def test_bad_rate_or_arrival_is_refused():
    with pytest.raises(ValueError, match="rate"):
        next(plan.arrivals(0, "constant", 0))
    with pytest.raises(ValueError, match="arrival"):
        next(plan.arrivals(1, "bursty", 0))


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_slots_split_one_schedule_between_processes(processes):
    taken = []
    for w in range(processes):
        s = plan.Slots(10.0, "constant", 0, w, processes, warmup=4, measured=20, duration_s=None)
        while (slot := s.take()) is not None:
            taken.append(slot)
    assert sorted(k for k, _ in taken) == list(range(24))
    assert all(abs(t - k / 10.0) < 1e-9 for k, t in taken)


def test_slots_stop_after_the_measured_duration():
    s = plan.Slots(10.0, "constant", 0, 0, 1, warmup=5, measured=None, duration_s=1.0)
    ks = []
    while (slot := s.take()) is not None:
        ks.append(slot[0])
    assert ks == list(range(15))  # 5 warmup slots, then slots due in [0.5 s, 1.5 s)
