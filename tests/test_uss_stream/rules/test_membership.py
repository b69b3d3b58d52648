"""set_membership agrees with the selection rule: min(B_l ∩ B_h ∪ {K}) is the selected depth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uss_stream.policies import USSUCB
from uss_stream.rules.membership import set_membership
from uss_stream.rules.selection_rule import select_depth


def _first_admissible(in_low, in_high):
    return next((i + 1 for i, (lo, hi) in enumerate(zip(in_low, in_high)) if lo and hi), len(in_low))


@pytest.mark.parametrize(("strict", "check_lower"), [(True, True), (False, False)])
def test_membership_matches_select_depth_on_random_states(strict, check_lower):
    rng = np.random.default_rng(7)
    for _ in range(3000):
        k = int(rng.integers(1, 7))
        costs = np.cumsum(rng.choice([0.0, 0.05, 0.1, 0.2, 0.5], size=k)).tolist()
        upper = rng.choice([0.0, 0.05, 0.1, 0.15, 0.3, 0.6, math.inf], size=(k, k))
        in_low, in_high = set_membership(costs, upper, strict=strict, check_lower=check_lower)
        expected = select_depth(
            costs, lambda i, j, upper=upper: float(upper[i][j]), strict=strict, check_lower=check_lower
        )
        assert _first_admissible(in_low, in_high) == expected
        assert in_low[0] and in_high[-1]  # {1} ⊂ B_l and {K} ⊂ B_h by definition
        if not check_lower:
            assert all(in_low)


def test_membership_matches_uss_ucb_along_a_stream():
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 2, size=1500)
    outputs = np.stack([truth ^ (rng.random(1500) < 0.2), truth ^ (rng.random(1500) < 0.05), truth], axis=1)
    policy = USSUCB(stage_costs=[0.0, 0.1, 0.1])
    for row in outputs:
        in_low, in_high = set_membership(policy.cumulative_costs, policy.upper_bounds())
        depth = policy.select()
        assert _first_admissible(in_low, in_high) == depth
        policy.update(row[:depth].tolist())


def test_by_hand():
    # C = (0, 0.2, 1.0); every pair observed once and agreeing, t = 2: U = sqrt(0.51 ln 2) = 0.5946.
    u = math.sqrt(0.51 * math.log(2))
    upper = [[0.0, u, u], [0.0, 0.0, u], [0.0, 0.0, 0.0]]
    in_low, in_high = set_membership([0.0, 0.2, 1.0], upper)
    # B_l: stage 2 (0.2 <= U), not stage 3 (1.0 > U). B_h: stage 2 (0.8 > U), not stage 1 (0.2 <= U).
    assert in_low == [True, True, False]
    assert in_high == [False, True, True]
