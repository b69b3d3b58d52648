"""The practitioners' threshold rules at and near their thresholds, with expectations worked by hand.

The contract every sequential policy keeps (clone, JSON state, bad input, an independent reference
on reached states) is in ``test_contract.py``; here: the decision at each threshold, the entropy
of full probabilities against the two-class bound, the bandit's UCB1 choices and rewards step by
step, and the rules inside a ``CascadeClassifier`` and a sequential replay.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from river import base

from uss_stream import CascadeClassifier, Stage
from uss_stream.policies import ConfidenceThreshold, EntropyThreshold, ThresholdBandit
from uss_stream.replay.sequential import replay_sequential

# -(0.9 ln 0.9 + 0.1 ln 0.1) = 0.0948245 + 0.2302585
H_90_10 = 0.3250830
# -(0.8 ln 0.8 + 2 · 0.1 ln 0.1) = 0.1785148 + 0.4605170
H_80_10_10 = 0.6390318
# -(0.8 ln 0.8 + 0.2 ln 0.2) = 0.1785148 + 0.3218876
H_80_20 = 0.5004024


def _first_step(policy, confidence, proba=None) -> bool:
    policy.begin()
    going_on = policy.step(1, confidence, proba)
    if going_on:
        policy.step(1, 0.5)  # stage 2 of 2 ends the event
    return going_on


@pytest.mark.parametrize(
    ("confidence", "goes_on"),
    [
        (0.9, False),
        (math.nextafter(0.9, 0.0), True),
        (math.nextafter(0.9, 1.0), False),
        (1.0, False),
        (0.0, True),
        (None, True),
        (math.nan, True),
    ],
)
def test_the_confidence_threshold_stops_at_and_above_its_threshold(confidence, goes_on) -> None:
    policy = ConfidenceThreshold([0.0, 0.1], threshold=0.9)
    assert _first_step(policy, confidence) is goes_on
    assert policy.reason == ("last stage" if goes_on else "threshold")


def test_the_last_stage_always_ends_the_event_and_the_counts_are_the_events() -> None:
    policy = ConfidenceThreshold([0.0, 0.1, 0.2], threshold=0.9)
    policy.begin()
    assert policy.step("a", 0.5) and policy.step("b", 0.2)
    assert policy.step("b", 0.1) is False and policy.reason == "last stage"
    policy.begin()
    assert policy.step("a", 0.95) is False
    stats = policy.stats
    # two events; stage 1 queried twice, stages 2-3 once; stage 1 disagreed with 2 and 3 once
    assert (stats.decisions, stats.queried) == (2, [2, 1, 1])
    assert stats.disagreements[0][1:] == [1, 1] and stats.disagreements[1][2] == 0
    assert policy.contexts() is None


@pytest.mark.parametrize(
    ("threshold", "confidence", "proba", "goes_on"),
    [
        (H_90_10 + 1e-6, 0.9, {"a": 0.9, "b": 0.1}, False),
        (H_90_10 - 1e-6, 0.9, {"a": 0.9, "b": 0.1}, True),
        (H_90_10 + 1e-6, 0.9, None, False),  # two classes: the top probability says it all
        (H_90_10 - 1e-6, 0.9, None, True),
        (H_80_10_10 + 1e-6, 0.8, [0.8, 0.1, 0.1], False),
        (H_80_10_10 - 1e-6, 0.8, [0.8, 0.1, 0.1], True),
        (H_80_10_10 - 1e-6, 0.8, None, False),  # top probability only: the two-class entropy 0.5004
        (H_80_20 - 1e-6, 0.8, None, True),
        (0.01, 1.0, {"a": 1.0, "b": 0.0}, False),  # entropy 0 is below any threshold
        (0.6, None, None, True),  # an abstaining stage never answers
    ],
)
def test_the_entropy_threshold_stops_strictly_below_its_threshold(
    threshold, confidence, proba, goes_on
) -> None:
    policy = EntropyThreshold([0.0, 0.1], threshold=threshold)
    assert _first_step(policy, confidence, proba) is goes_on


def test_the_entropy_threshold_refuses_probabilities_outside_0_1_and_counts_nothing() -> None:
    policy = EntropyThreshold([0.0, 0.1], threshold=0.3)
    policy.begin()
    with pytest.raises(ValueError, match="proba"):
        policy.step(1, 0.9, [1.2, -0.2])
    assert policy.step(1, 0.9, [0.9, 0.1]) is True  # 0.325 >= 0.3: the event goes on as before
    assert policy.stats.queried == [0, 0]


def test_the_bandit_plays_every_arm_then_ucb1_as_computed_by_hand() -> None:
    policy = ThresholdBandit([0.0, 0.2], thresholds=(0.5, 0.9), explore=1.0)
    played = []
    # (stage 1's confidence, stage 2's confidence) of four events
    for first, second in [(0.8, 0.95), (0.8, 0.95), (0.8, 0.95), (0.8, 0.95)]:
        policy.begin()
        played.append(policy.arm)
        if policy.step(0, first):
            policy.step(0, second)
    # t = 1, 2: each arm once. Rewards: tau 0.5 stops at stage 1, 0.8 - 0; tau 0.9 goes on, 0.95 - 0.2.
    # t = 3: both played once, width 1 + C_K = 1.2, the bonus is equal: tau 0.5 (0.8 > 0.75).
    # t = 4: bonus 1.2·sqrt(2 ln 4) = 1.998131; tau 0.5: 0.8 + 1.998131/sqrt(2) = 2.212885,
    #        tau 0.9: 0.75 + 1.998131 = 2.748131: the less played arm.
    assert played == [0.5, 0.9, 0.5, 0.9]
    document = policy.state_dict()
    assert document["arms"]["plays"] == [2, 2]
    assert document["arms"]["rewards"] == pytest.approx([1.6, 1.5])
    table = policy.contexts()
    assert table["mean_reward"].tolist() == pytest.approx([0.8, 0.75])


def test_the_bandit_reward_of_an_abstaining_answer_is_minus_the_cost() -> None:
    policy = ThresholdBandit([0.1, 0.2], thresholds=(0.9,))
    policy.begin()
    assert policy.step(0, 0.3) is True
    assert policy.step(0, None) is False
    assert policy.state_dict()["arms"]["rewards"] == pytest.approx([-0.3])


def test_the_bandit_state_round_trips_and_a_bad_document_changes_nothing() -> None:
    policy = ThresholdBandit([0.0, 0.2], thresholds=(0.5, 0.9))
    policy.run(np.zeros((20, 2), dtype=int), np.tile([0.8, 0.95], (20, 1)))
    document = json.loads(json.dumps(policy.state_dict()))
    twin = ThresholdBandit([0.0, 0.2], thresholds=(0.5, 0.9))
    twin.load_state_dict(document)
    assert twin.state_dict() == policy.state_dict()
    for arms, message in [
        ({"plays": [10, 9], "rewards": [8.0, 6.75]}, "summing"),
        ({"plays": [10, 10], "rewards": [8.0, 10.5]}, "rewards"),
        ({"plays": [10, 10, 0], "rewards": [8.0, 7.5, 0.0]}, "each"),
        ({"plays": [10, 10]}, "plays and rewards"),
    ]:
        with pytest.raises(ValueError, match=message):
            twin.load_state_dict({**document, "arms": arms})
    assert twin.state_dict() == policy.state_dict()


class _Sure(base.Classifier):
    """A stage whose probabilities are read from the event: ``x[key]`` maps class to probability."""

    def __init__(self, key: str) -> None:
        self.key = key

    def learn_one(self, x, y):
        return None

    def predict_proba_one(self, x):
        return dict(x[self.key])

    def predict_one(self, x):
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.get)


def _cascade(policy) -> CascadeClassifier:
    stages = [Stage(_Sure("s1"), cost=0.0, features=("s1",)), Stage(_Sure("s2"), cost=0.1, features=("s2",))]
    return CascadeClassifier(stages, policy=policy, warm_up=0)


def test_a_cascade_stops_where_its_threshold_rule_says_with_the_stages_probabilities() -> None:
    cascade = _cascade(ConfidenceThreshold([0.0, 0.1], threshold=0.9))
    sure = cascade.decide_one({"s1": {"a": 0.9, "b": 0.1}, "s2": {"b": 1.0}})
    unsure = cascade.decide_one({"s1": {"a": 0.85, "b": 0.15}, "s2": {"b": 1.0}})
    assert (sure.depth, sure.prediction, sure.stopped, sure.cost) == (1, "a", "threshold", 0.0)
    assert (unsure.depth, unsure.prediction, unsure.stopped, unsure.cost) == (2, "b", "last stage", 0.1)
    # the entropy rule reads the full probabilities: three classes at (0.8, 0.1, 0.1) have entropy
    # 0.639, above 0.55, though the two-class bound of a top probability of 0.8 (0.500) is below
    cascade = _cascade(EntropyThreshold([0.0, 0.1], threshold=0.55))
    three = cascade.decide_one({"s1": {"a": 0.8, "b": 0.1, "c": 0.1}, "s2": {"b": 1.0}})
    two = cascade.decide_one({"s1": {"a": 0.8, "b": 0.2}, "s2": {"b": 1.0}})
    assert (three.depth, two.depth) == (2, 1)
    summary = cascade.summary()
    assert summary.stages["answered"].tolist() == [1, 1] and summary.contexts is None


def test_a_sequential_replay_passes_the_probabilities_to_the_entropy_rule() -> None:
    outputs = np.array([[0, 0], [0, 1]])
    labels = np.array([0, 1])
    probabilities = np.array([[[0.9, 0.1, 0.0], [1.0, 0.0, 0.0]], [[0.8, 0.1, 0.1], [0.0, 1.0, 0.0]]])
    confidences = probabilities.max(axis=2)
    policy = EntropyThreshold([0.0, 0.1], threshold=0.55)
    kwargs = {"stage_costs": [0.0, 0.1], "horizon": 2, "reps": 1, "sampling": "sequential", "n_bins": 2}
    full = replay_sequential(
        outputs, confidences, labels, policies={"e": policy}, probabilities=probabilities, **kwargs
    )
    top_only = replay_sequential(outputs, confidences, labels, policies={"e": policy}, **kwargs)
    # row 0: entropy 0.325 stops; row 1: 0.639 with the probabilities goes on, 0.500 without stops
    assert full.depths["e"].tolist() == [[1, 2]]
    assert top_only.depths["e"].tolist() == [[1, 1]]
    with pytest.raises(ValueError, match="probabilities"):
        replay_sequential(
            outputs, confidences, labels, policies={"e": policy}, probabilities=probabilities[:, :1], **kwargs
        )
