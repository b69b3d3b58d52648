"""Discounted (drift-aware) statistics: counts by hand, JSON, merge, validation, every policy, the cascade."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from uss_stream.core.forgetting import DRIFT_DISCOUNT, EffectiveHorizon, check_discount, effective_horizon
from uss_stream.core.stats import DisagreementStats
from uss_stream.policies import USSKLUCB, USSTS, USSUCB, FixedDepth, Hanawal2017WD, SupervisedUCB


def discounted(stream, discount=0.5, n_stages=3):
    stats = DisagreementStats(n_stages, discount=discount)
    for outputs in stream:
        stats.decisions += 1
        stats.record(outputs)
    return stats


def test_discounted_counts_by_hand():
    stats = discounted([[1, 0, 1], [1, 1], [0]])
    # Round 1 (weight 1/4 at the end): n = (1, 1, 1), D12 = D23 = 1.
    # Round 2 (weight 1/2): n = (1, 1, 0), no disagreement. Round 3 (weight 1): n = (1, 0, 0).
    assert stats.queried == [1.75, 0.75, 0.25]
    assert stats.disagreements == [[0.0, 0.25, 0.0], [0.0, 0.0, 0.25], [0.0, 0.0, 0.0]]
    assert stats.decisions == 3 and stats.discount == 0.5
    assert stats.disagreement_rate(0, 1) == pytest.approx(1 / 3)


def test_effective_horizon_by_hand():
    assert effective_horizon(1, 0.9) == 1.0
    assert effective_horizon(3, 0.9) == pytest.approx(1 + 0.9 + 0.81)
    assert effective_horizon(10_000, 0.999) == pytest.approx((1 - 0.999**10_000) / 0.001)
    assert effective_horizon(7, None) == 7.0
    horizon = EffectiveHorizon(0.9)
    assert horizon.many(np.array([3, 1, 3])).tolist() == [horizon(3), 1.0, horizon(3)]


def test_discounted_uss_ucb_bound_by_hand():
    policy = USSUCB([0.0, 0.1], alpha=0.5, discount=0.5)
    for outputs in ([0, 1], [0, 0]):
        policy.select()
        policy.update(outputs)
    # n_2 = 1.5, D_12 = 0.5, tau_3 = 1 + 0.5 + 0.25 = 1.75
    expected = 0.5 / 1.5 + math.sqrt(0.5 * math.log(1.75) / 1.5)
    assert policy.upper_bounds()[0, 1] == pytest.approx(expected, rel=1e-15)


def test_discounted_supervised_errors_by_hand():
    policy = SupervisedUCB([0.0, 0.1], discount=0.5)
    policy.select()
    policy.update([0, 1], label=1)
    policy.select()
    policy.update([1, 1], label=1)
    assert policy.errors == [0.5, 0.0]
    restored = SupervisedUCB([0.0, 0.1], discount=0.5)
    restored.load_state_dict(json.loads(json.dumps(policy.state_dict())))
    assert restored.errors == [0.5, 0.0]


def test_json_round_trip_is_exact():
    rng = np.random.default_rng(0)
    stream = [rng.integers(0, 2, size=int(rng.integers(1, 4))).tolist() for _ in range(200)]
    stats = discounted(stream, discount=0.987)
    loaded = DisagreementStats.from_json(stats.to_json())
    assert loaded == stats and loaded.queried == stats.queried and loaded.discount == 0.987
    assert stats.to_dict()["discount"] == 0.987
    assert "discount" not in DisagreementStats(2).to_dict()  # plain counts: the document is unchanged


def test_merge_sums_discounted_counts_of_the_same_discount():
    a, b = discounted([[1, 0, 1], [0]]), discounted([[1, 1, 0]])
    merged = a.merge(b)
    assert merged.queried == [a.queried[j] + b.queried[j] for j in range(3)]
    assert merged.disagreements[1][2] == a.disagreements[1][2] + b.disagreements[1][2]
    assert merged.decisions == 3 and merged.discount == 0.5
    with pytest.raises(ValueError, match=r"cannot merge statistics with discount 0\.5 and 0\.9"):
        a.merge(discounted([[1]], discount=0.9))
    with pytest.raises(ValueError, match=r"cannot merge statistics with discount 0\.5 and None"):
        a.merge(DisagreementStats(3))


def _document(**changes):
    document = discounted([[1, 0, 1], [1, 1]]).to_dict()
    document.update(changes)
    return document


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"discount": 1.5}, "state field 'discount': discount must be a number with 0 < discount < 1"),
        ({"discount": "0.5"}, "state field 'discount'"),
        ({"queried": [1.5, -0.5, 0.5]}, r"queried\[1\]' must be a finite number >= 0"),
        ({"queried": [1.5, math.inf, 0.5]}, r"queried\[1\]' must be a finite number >= 0"),
        ({"queried": [1.5, 1.5, 2.0]}, "non-increasing"),
        ({"disagreements": [[0, 2.0, 0], [0, 0, 0.5], [0, 0, 0]]}, r"disagreements\[0\]\[1\]'=2.0 exceeds"),
        ({"decisions": 1}, "exceeds 'decisions'"),
    ],
)
def test_malformed_discounted_state_is_rejected(changes, message):
    with pytest.raises(ValueError, match=message):
        DisagreementStats.from_dict(_document(**changes))


def test_policies_refuse_a_state_with_another_discount():
    document = USSUCB([0.0, 0.1], discount=0.9).state_dict()
    with pytest.raises(ValueError, match=r"state document has discount 0\.9, the policy has None"):
        USSUCB([0.0, 0.1]).load_state_dict(document)


@pytest.mark.parametrize("discount", [0, 1, -0.5, 1.5, math.nan, "0.9", True])
@pytest.mark.parametrize("policy_class", [USSUCB, Hanawal2017WD, USSTS, USSKLUCB, SupervisedUCB])
def test_bad_discount_is_rejected_by_every_learning_policy(policy_class, discount):
    with pytest.raises(ValueError, match="discount must be a number with 0 < discount < 1"):
        policy_class([0.0, 0.1], discount=discount)


def test_check_discount_accepts_numpy_numbers():
    assert check_discount(np.float64(0.99)) == 0.99 and check_discount(None) is None


def test_discounted_policies_run_and_restore_identically():
    rng = np.random.default_rng(4)
    outputs = rng.integers(0, 2, size=(600, 3))
    costs = [0.0, 0.1, 0.2]
    for template in (
        USSUCB(costs, discount=0.99),
        Hanawal2017WD(costs, discount=0.99),
        USSTS(costs, seed=1, discount=0.99),
        USSKLUCB(costs, discount=0.99),
    ):
        whole = template.clone().run(outputs)
        first = template.clone()
        first.run(outputs[:300])
        second = template.clone()
        second.load_state_dict(json.loads(json.dumps(first.state_dict())))
        assert np.array_equal(np.concatenate([whole[:300], second.run(outputs[300:])]), whole), template


def test_forgetting_recovers_where_plain_counts_do_not():
    # 3000 rounds where stage 1 disagrees with stage 2 half of the time, then 3000 where it never does.
    rng = np.random.default_rng(0)
    first = np.stack([rng.integers(0, 2, 3000), np.zeros(3000, int)], axis=1)
    second = np.zeros((3000, 2), int)
    outputs = np.concatenate([first, second])
    costs = [0.0, 0.2]
    plain = USSKLUCB(costs).run(outputs)[-1000:]
    forgetting = USSKLUCB(costs, discount=DRIFT_DISCOUNT).run(outputs)[-1000:]
    assert (plain == 1).mean() < 0.01 and (forgetting == 1).mean() > 0.9


def test_cascade_takes_a_discounted_template():
    from river import linear_model

    from uss_stream import CascadeClassifier, Stage

    stages = [
        Stage(linear_model.LogisticRegression(), cost=0.0),
        Stage(linear_model.LogisticRegression(), cost=0.1),
    ]
    cascade = CascadeClassifier(stages=stages, policy=USSKLUCB([0.0, 0.1], discount=0.999))
    assert cascade._policy.discount == 0.999 and cascade._policy.stats.discount == 0.999
    fixed = CascadeClassifier(stages=stages, policy=FixedDepth(1))
    assert fixed._policy.discount is None


def test_replay_cli_specs_take_a_discount():
    from uss_stream.commands.replay import parse_policy

    costs, gamma = [0.0, 0.1, 0.2], [0.3, 0.2, 0.1]
    name, policy = parse_policy("uss-ucb:alpha=1,discount=0.99", costs, gamma)
    assert name == "uss-ucb:alpha=1,discount=0.99" and policy.discount == 0.99 and policy.alpha == 1.0
    name, policy = parse_policy("alg2:discount=0.9", costs, gamma)
    assert name == "alg2:discount=0.9" and isinstance(policy, Hanawal2017WD) and policy.discount == 0.9
    name, policy = parse_policy("uss-ts:seed=3,discount=0.9", costs, gamma)
    assert name == "uss-ts:seed=3,discount=0.9" and (policy.seed, policy.discount) == (3, 0.9)
    assert parse_policy("supervised:discount=0.5", costs, gamma)[1].discount == 0.5
    with pytest.raises(ValueError, match="--policy 'uss-kl-ucb:discount=1': discount must be"):
        parse_policy("uss-kl-ucb:discount=1", costs, gamma)
    with pytest.raises(ValueError, match="unknown parameter"):
        parse_policy("fixed:depth=1,discount=0.9", costs, gamma)
