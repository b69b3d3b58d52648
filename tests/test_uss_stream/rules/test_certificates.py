"""Certified windows (``Policy.certify_many``): a certificate is never wrong, and it is not vacuous.

The claim of a certificate is that every round of the window decides the window's depth, whatever
the stages' outputs, when every round queries that depth. It is checked against the policies' own
vectorised rule (``decide_many``, which equals ``select`` to the bit: ``test_vectorised_rule.py``)
on every state of the window, for the outputs that push the counts furthest either way (every
observed pair disagreeing in every round, none ever) and for random ones. The thresholds come from
the bounds' definitions computed by hand (``D/n + sqrt(α log t / n)`` against a cost gap).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uss_stream.policies import UEEUCB, USSKLUCB, USSTS, USSUCB, FixedDepth, Hanawal2017WD
from uss_stream.policies.kernel import pair_order
from uss_stream.rules.certificates import certain_depth_many, log_range

CERTIFYING = {
    "uss-ucb": lambda costs: USSUCB(costs, alpha=0.51),
    "uss-kl-ucb": lambda costs: USSKLUCB(costs),
    "hanawal": lambda costs: Hanawal2017WD(costs),
    "uee-ucb": lambda costs: UEEUCB(costs),
}


def window_states(queried, disagreements, depth, indicators):
    """The ``W`` states of a window from one state, each round querying ``depth`` stages and its
    pairs disagreeing as ``indicators`` (``W x P``) say: counts before each round."""
    n_stages = len(queried)
    upper_i, upper_j = pair_order(n_stages)
    width = len(indicators)
    observed = (upper_j < depth).astype(np.int64)
    steps = indicators * observed
    before = np.cumsum(steps, axis=0) - steps
    matrices = np.repeat(np.asarray(disagreements)[None], width, axis=0)
    matrices[:, upper_i, upper_j] += before
    asked = (np.arange(n_stages) < depth).astype(np.int64)
    rows = np.asarray(queried)[None, :] + np.arange(width)[:, None] * asked
    return rows, matrices


def decisions_in_window(policy, t, queried, disagreements, depth, indicators):
    rows, matrices = window_states(queried, disagreements, depth, indicators)
    return policy.decide_many(t + np.arange(len(indicators)), rows, matrices)


@st.composite
def states(draw):
    """A reachable state: counts decreasing with depth, disagreements below the deeper count."""
    n_stages = draw(st.integers(2, 5))
    costs = [0.0] + [draw(st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.3])) for _ in range(n_stages - 1)]
    top = draw(st.integers(0, 5_000))
    queried = sorted(draw(st.lists(st.integers(0, top), min_size=n_stages, max_size=n_stages)), reverse=True)
    matrix = [[0] * n_stages for _ in range(n_stages)]
    for j in range(n_stages):
        for i in range(j):
            matrix[i][j] = draw(st.integers(0, queried[j]))
    t = queried[0] + 1 + draw(st.integers(0, 10_000))
    return costs, t, queried, matrix


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    state=states(),
    name=st.sampled_from(sorted(CERTIFYING)),
    width=st.integers(1, 3_000),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_certified_window_decides_its_depth_at_every_round_whatever_the_outputs(state, name, width, seed):
    costs, t, queried, matrix = state
    policy = CERTIFYING[name](costs)
    depth = int(policy.decide_many(np.array([t]), np.array([queried]), np.array([matrix]))[0])
    certified = policy.certify_many(
        np.array([t]), np.array([queried]), np.array([matrix]), np.array([depth]), np.array([width])
    )
    if not certified[0]:
        return
    n_pairs = len(costs) * (len(costs) - 1) // 2
    rng = np.random.default_rng(seed)
    for indicators in (
        np.ones((width, n_pairs), dtype=np.int64),
        np.zeros((width, n_pairs), dtype=np.int64),
        (rng.random((width, n_pairs)) < rng.random()).astype(np.int64),
    ):
        decided = decisions_in_window(policy, t, queried, matrix, depth, indicators)
        assert (decided == depth).all(), (name, costs, t, queried, matrix, depth, width)


def test_uss_ucb_certifies_up_to_the_round_its_bound_reaches_the_cost_gap():
    """Stage 2 queried 100 times, disagreeing 5 times; C_2 - C_1 = 0.3. Depth 1 holds while
    0.05 + sqrt(0.51 log t / 100) < 0.3, i.e. t < exp(100 · 0.25² / 0.51): the window from round
    1000 may reach the round before, and no further."""
    policy = USSUCB([0.0, 0.3], alpha=0.51)
    crossing = math.exp(100 * 0.25**2 / 0.51)  # about 210 000
    last = math.ceil(crossing) - 1  # the last round that decides 1
    queried, matrix = np.array([[100, 100]]), np.array([[[0, 5], [0, 0]]])
    rounds = np.array([last, last + 1])
    assert policy.decide_many(rounds, np.repeat(queried, 2, 0), np.repeat(matrix, 2, 0)).tolist() == [1, 2]

    def certifies(width: int) -> bool:
        return bool(
            policy.certify_many(np.array([1000]), queried, matrix, np.array([1]), np.array([width]))[0]
        )

    assert certifies(last - 1000 + 1 - 10)  # up to ten rounds before the last round of depth 1
    assert not certifies(last - 1000 + 2)  # the window reaches the first round of depth 2


def test_an_observed_pair_is_certified_for_the_worst_outputs_only():
    """Depth 2 on two stages of costs (0, 0.1): stage 1 is not preferred while D/n >= 0.1.
    From D = 30, n = 100 a window of w rounds can bring the rate down to 30 / (99 + w):
    certified while that stays above 0.1 plus nothing (the KL test's 'surely not beaten')."""
    policy = USSKLUCB([0.0, 0.1])
    queried, matrix = np.array([[100, 100]]), np.array([[[0, 30], [0, 0]]])

    def certifies(width: int) -> bool:
        return bool(
            policy.certify_many(np.array([101]), queried, matrix, np.array([2]), np.array([width]))[0]
        )

    assert certifies(200)  # 30 / 299 > 0.1
    assert not certifies(202)  # 30 / 301 < 0.1: 201 rounds without disagreement would flip it


@pytest.mark.parametrize("width", [1, 10, 10**6])
def test_a_fixed_depth_is_certified_for_any_window_and_a_randomised_policy_never(width):
    args = (np.array([5]), np.array([[4, 4]]), np.array([[[0, 1], [0, 0]]]))
    assert FixedDepth(2, [0.0, 0.1]).certify_many(*args, np.array([2]), np.array([width])).tolist() == [True]
    assert FixedDepth(2, [0.0, 0.1]).certify_many(*args, np.array([1]), np.array([width])).tolist() == [False]
    assert USSTS([0.0, 0.1], seed=1).certify_many(*args, np.array([1]), np.array([width])).tolist() == [False]


def test_discounted_counts_are_never_certified():
    policy = USSUCB([0.0, 0.3], discount=0.99)
    args = (np.array([101]), np.array([[100.0, 100.0]]), np.array([[[0.0, 5.0], [0.0, 0.0]]]))
    assert policy.certify_many(*args, np.array([1]), np.array([10])).tolist() == [False]


def test_certify_many_refuses_a_width_below_one_and_a_depth_outside_the_cascade():
    policy = USSUCB([0.0, 0.3])
    args = (np.array([5]), np.array([[4, 4]]), np.array([[[0, 1], [0, 0]]]))
    with pytest.raises(ValueError, match="widths must be >= 1"):
        policy.certify_many(*args, np.array([1]), np.array([0]))
    with pytest.raises(ValueError, match=r"depths in 1\.\.2"):
        policy.certify_many(*args, np.array([3]), np.array([1]))


def test_the_three_valued_set_test_is_certain_only_when_every_open_comparison_is_irrelevant():
    # Pairs (0,1), (0,2), (1,2). Stage 1 surely beats both deeper stages: depth 1 whatever (1,2) does.
    sure = np.array([[True, True, False]])
    assert certain_depth_many(sure, np.array([[True, True, True]]), 3).tolist() == [1]
    # Stage 1 may or may not beat stage 3: depth 1 or not, uncertain.
    assert certain_depth_many(
        np.array([[True, False, False]]), np.array([[True, True, False]]), 3
    ).tolist() == [0]
    # Nothing is possibly beaten: depth K.
    nothing = np.zeros((1, 3), dtype=bool)
    assert certain_depth_many(nothing, nothing, 3).tolist() == [3]
    # Stage 2 surely beats 3 and is surely not beaten by 1, stage 1 surely beats nothing: depth 2.
    assert certain_depth_many(
        np.array([[False, False, True]]), np.array([[False, True, True]]), 3
    ).tolist() == [2]
    # With B^l, stage 2 possibly beaten by stage 1 (which surely is not admissible): uncertain.
    assert certain_depth_many(
        np.array([[False, False, True]]), np.array([[True, False, True]]), 3
    ).tolist() == [0]
    # Without B^l (Hanawal), the same comparisons decide depth 2.
    assert certain_depth_many(
        np.array([[False, False, True]]), np.array([[True, False, True]]), 3, check_lower=False
    ).tolist() == [2]


def test_the_logarithms_range_contains_both_logarithms_of_every_round_between():
    from uss_stream.rules.confidence import portable_log

    rounds = np.array([1, 2, 3, 10, 1000, 123_456, 2**40, 2**52])
    for first in rounds:
        for last in rounds[rounds >= first]:
            low, high = log_range(np.array([float(first)]), np.array([float(last)]))
            for t in {int(first), int(last), (int(first) + int(last)) // 2}:
                assert low[0] <= math.log(t) <= high[0]
                assert low[0] <= portable_log(t) <= high[0]
