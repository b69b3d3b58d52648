"""Bad input is rejected with an error naming the parameter, and leaves the learned state untouched."""

from __future__ import annotations

import math

import pytest

from uss_stream.core.instances import Instance
from uss_stream.policies import USSUCB, FixedDepth


@pytest.mark.parametrize(
    ("costs", "message"),
    [
        ([], "at least one"),
        ([0.0, -0.1], r"stage_costs\[1\] must be >= 0"),
        ([0.0, math.inf], r"stage_costs\[1\] must be finite"),
        ([0.0, math.nan], r"stage_costs\[1\] must be finite"),
        ([0.0, "a"], r"stage_costs\[1\] must be a number"),
        ("0,1", "sequence"),
        (None, "sequence"),
    ],
)
def test_bad_costs(costs, message):
    with pytest.raises(ValueError, match=message):
        USSUCB(stage_costs=costs)


@pytest.mark.parametrize("alpha", [0, -1, math.nan, math.inf, "1"])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        USSUCB(stage_costs=[0.0, 1.0], alpha=alpha)


def test_bad_exploration_function():
    with pytest.raises(ValueError, match="f must"):
        USSUCB(stage_costs=[0.0, 1.0], f=3)
    policy = USSUCB(stage_costs=[0.0, 1.0], f=lambda t: 0.5)
    with pytest.raises(ValueError, match=r"f\(t\) >= 1"):
        policy.select()


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ([1, 0], "outputs must hold the outputs of the 3"),
        ([1, None, 0], r"outputs\[1\] is missing"),
        ([1, math.nan, 0], r"outputs\[1\] is NaN"),
        ("abc", "sequence"),
    ],
)
def test_bad_update_keeps_state_and_pending_decision(outputs, message):
    policy = USSUCB(stage_costs=[0.0, 0.1, 0.2])
    assert policy.select() == 3
    before = policy.state_dict()
    with pytest.raises(ValueError, match=message):
        policy.update(outputs)
    assert policy.state_dict() == before
    policy.update([1, 1, 1])  # the decision is still pending and can be answered
    assert policy.stats.queried == [1, 1, 1]


def test_protocol_misuse():
    policy = USSUCB(stage_costs=[0.0, 0.1])
    with pytest.raises(RuntimeError, match="without a preceding select"):
        policy.update([1])
    policy.select()
    with pytest.raises(RuntimeError, match="before update"):
        policy.select()


def test_run_with_wrong_width():
    with pytest.raises(ValueError, match="3 columns"):
        USSUCB(stage_costs=[0.0, 0.1, 0.2]).run([[1, 0]])


def test_malformed_state_document():
    policy = USSUCB(stage_costs=[0.0, 0.1])
    with pytest.raises(ValueError, match="for policy 'Other'"):
        policy.load_state_dict({"policy": "Other", "stats": {}})
    with pytest.raises(ValueError, match="format"):
        policy.load_state_dict({"policy": "USSUCB", "stats": {"format": "x"}})
    other = USSUCB(stage_costs=[0.0, 0.1, 0.2]).state_dict()
    with pytest.raises(ValueError, match="3 stages, the policy has 2"):
        policy.load_state_dict(other)


def test_fixed_depth_and_instance_arguments():
    with pytest.raises(ValueError, match="depth must be <="):
        FixedDepth(3, stage_costs=[0.0, 1.0])
    with pytest.raises(ValueError, match="depth must be an integer"):
        FixedDepth(0)
    with pytest.raises(ValueError, match="exactly one"):
        Instance([0.0], cumulative_costs=[0.0])
    with pytest.raises(ValueError, match="non-decreasing"):
        Instance(cumulative_costs=[0.5, 0.1])
    with pytest.raises(ValueError, match="error_rates must have shape"):
        Instance(stage_costs=[0.0, 1.0], error_rates=[0.1])
    with pytest.raises(ValueError, match="no error_rates"):
        _ = Instance(stage_costs=[0.0, 1.0]).optimal_depth
