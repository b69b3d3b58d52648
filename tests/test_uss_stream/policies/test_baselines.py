"""Hanawal et al.'s Algorithm 2, the supervised bandit, FixedDepth and Oracle, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uss_stream.policies import USSUCB, FixedDepth, Hanawal2017WD, Oracle, SupervisedUCB


def test_hanawal_rounds_by_hand():
    # C = (0, 0.9, 0.95). Algorithm 2: U_ij = p_ij + sqrt(1.5 ln t / n_j); S_t = {i < K : C_j - C_i >= U_ij}.
    policy = Hanawal2017WD(stage_costs=[0.0, 0.9, 0.05])
    depths = [policy.select()]
    policy.update([1, 1, 1])
    # t=2: sqrt(1.5 ln 2) = 1.0197 > 0.9: 1 not in S; i=2: C_3-C_2 = 0.05 >= 1.0197? no -> K.
    depths.append(policy.select())
    policy.update([1, 1, 1])
    # t=3: n = 2: sqrt(1.5 ln 3 / 2) = 0.9077 > 0.9 -> K.
    depths.append(policy.select())
    policy.update([1, 1, 1])
    # t=4: n = 3: sqrt(1.5 ln 4 / 3) = 0.8326: 0.9 >= 0.8326 and 0.95 >= 0.8326 -> 1.
    depths.append(policy.select())
    assert depths == [3, 3, 3, 1]
    assert math.sqrt(1.5 * math.log(3) / 2) > 0.9 > math.sqrt(1.5 * math.log(4) / 3)


def test_hanawal_has_no_lower_set():
    # C = (0, 0.1, 0.2), first stage disagrees with the others every time.
    # USS-UCB refuses depth 3 once stage 2 is known to beat stage 3 but keeps B^l;
    # Algorithm 2 only tests B^h. Both must be deterministic functions of the same stream.
    rows = np.array([[0, 1, 1]] * 50)
    alg2 = Hanawal2017WD(stage_costs=[0.0, 0.1, 0.1]).run(rows)
    # Stage 1 never beats stage 2 (p_12 = 1 > 0.1); stage 2 beats stage 3 once sqrt(1.5 ln t / n) <= 0.1,
    # which needs n >= 150 ln t: not within 50 rounds -> always K.
    assert alg2.tolist() == [3] * 50


def test_supervised_uses_error_rate_differences():
    # C = (0, 0.3, 0.5). Labels say stage 1 is always wrong, stages 2 and 3 always right.
    policy = SupervisedUCB(stage_costs=[0.0, 0.3, 0.2], f=lambda t: 1.0)
    assert policy.select() == 3
    policy.update([0, 1, 1], label=1)
    # No exploration (f = 1): U_12 = g1 - g2 = 1, U_13 = 1, U_23 = 0.
    # i=1: 0.3 > 1? no. i=2: B^l 0.3 <= 1; B^h 0.2 > 0 -> 2.
    assert policy.select() == 2
    assert policy.errors == [1, 0, 0]
    with pytest.raises(RuntimeError):
        policy.select()


def test_supervised_requires_label():
    policy = SupervisedUCB(stage_costs=[0.0, 0.3])
    policy.select()
    with pytest.raises(ValueError, match="label"):
        policy.update([0, 1])


def test_fixed_depth_and_oracle():
    assert FixedDepth(2, stage_costs=[0.0, 0.1, 0.3]).run(np.zeros((4, 3))).tolist() == [2, 2, 2, 2]
    # BSC case 5: C = (0, 0.11, 0.22), gamma = (0.4, 0.1, 0.05): totals 0.4, 0.21, 0.27 -> 2.
    assert Oracle(stage_costs=[0.0, 0.11, 0.11], error_rates=[0.4, 0.1, 0.05]).select() == 2
    # Tie: C = (0, 0.1), gamma = (0.2, 0.1): totals 0.2 and 0.2 -> the larger index (risk-averse).
    assert Oracle(stage_costs=[0.0, 0.1], error_rates=[0.2, 0.1]).select() == 2


@pytest.mark.parametrize(
    "policy",
    [
        USSUCB(stage_costs=[0.0, 0.1, 0.3]),
        Hanawal2017WD(stage_costs=[0.0, 0.1, 0.3]),
        FixedDepth(2, stage_costs=[0.0, 0.1, 0.3]),
        Oracle(stage_costs=[0.0, 0.1, 0.3], error_rates=[0.3, 0.1, 0.05]),
    ],
)
def test_update_length_must_match_depth(policy):
    depth = policy.select()
    with pytest.raises(ValueError, match="outputs"):
        policy.update([0] * (depth + 1))
