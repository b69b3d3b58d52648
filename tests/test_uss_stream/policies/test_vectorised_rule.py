"""The vectorised decision rule returns exactly what select() returns, state by state."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uss_stream.core.stats import DisagreementStats
from uss_stream.policies import USSUCB, FixedDepth, Hanawal2017WD, Oracle, SupervisedUCB


@st.composite
def states(draw):
    n_stages = draw(st.integers(1, 5))
    decisions = draw(st.integers(0, 500))
    queried = sorted((draw(st.integers(0, decisions)) for _ in range(n_stages)), reverse=True)
    disagreements = [[0] * n_stages for _ in range(n_stages)]
    errors = []
    for j in range(n_stages):
        errors.append(draw(st.integers(0, queried[j])))
        for i in range(j):
            disagreements[i][j] = draw(st.integers(0, queried[j]))
    costs = [draw(st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.3, 0.5, 1.0])) for _ in range(n_stages)]
    return costs, decisions, queried, disagreements, errors


def policies_for(costs):
    return [
        USSUCB(stage_costs=costs),
        USSUCB(stage_costs=costs, alpha=1.5, f=lambda t: t * t),
        Hanawal2017WD(stage_costs=costs),
        SupervisedUCB(stage_costs=costs),
        FixedDepth(len(costs), stage_costs=costs),
        Oracle(stage_costs=costs, error_rates=np.linspace(0.4, 0.05, len(costs))),
    ]


@settings(max_examples=300, deadline=None)
@given(states())
def test_decide_many_equals_select(state):
    costs, decisions, queried, disagreements, errors = state
    stats = DisagreementStats(len(costs))
    stats.decisions, stats.queried, stats.disagreements = decisions, queried, disagreements
    for policy in policies_for(costs):
        document = policy.state_dict()
        document["stats"] = stats.to_dict()
        if isinstance(policy, SupervisedUCB):
            document["errors"] = errors
        policy.load_state_dict(document)
        many = policy.decide_many(
            np.array([decisions + 1]),
            np.array([queried]),
            np.array([disagreements]),
            np.array([errors]),
        )
        assert many.tolist() == [policy.select()], policy


def test_decide_many_on_a_batch_of_distinct_states():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 500)
    outputs = np.stack([truth ^ (rng.random(500) < p) for p in (0.3, 0.1, 0.05)], axis=1)
    policy = USSUCB(stage_costs=[0.0, 0.15, 0.2])
    rounds, queried, disagreements, expected = [], [], [], []
    for row in outputs.tolist():
        rounds.append(policy.stats.decisions + 1)
        queried.append(list(policy.stats.queried))
        disagreements.append([list(r) for r in policy.stats.disagreements])
        depth = policy.select()
        expected.append(depth)
        policy.update(row[:depth])
    fresh = USSUCB(stage_costs=[0.0, 0.15, 0.2])
    got = fresh.decide_many(np.array(rounds), np.array(queried), np.array(disagreements))
    assert got.tolist() == expected


def test_supervised_decide_many_needs_errors():
    with pytest.raises(ValueError, match="error counts"):
        SupervisedUCB(stage_costs=[0.0, 1.0]).decide_many(
            np.array([1]), np.zeros((1, 2), int), np.zeros((1, 2, 2), int)
        )
