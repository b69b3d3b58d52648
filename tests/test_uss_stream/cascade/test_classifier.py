"""CascadeClassifier against hand-computable expectations, with stub stages whose outputs we control.

Each stub stage ``Echo`` reads one feature and answers its value, so an event
``{"s1": o1, "s2": o2, "s3": o3}`` makes stage ``j`` output ``o_j``: the cascade sees exactly the
rows of an outputs matrix, which lets the tests compare it with ``USSUCB.run`` on the same rows.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from river import base, datasets, evaluate, linear_model, metrics, preprocessing

from uss_stream import CascadeClassifier, Stage
from uss_stream.cascade.classifier import ABSTAINED
from uss_stream.cascade.querying import EmptyViewWarning
from uss_stream.core.units import CostScaleWarning
from uss_stream.policies import USSKLUCB, USSUCB, FixedDepth


class Echo(base.Classifier):
    """Answers the value of the one feature it sees; abstains (``{}``) until it has learned enough."""

    _multiclass = True

    def __init__(self, silent_until: int = 0) -> None:
        self.silent_until = silent_until
        self._learned = 0
        self._predictions = 0

    def learn_one(self, x, y, **kwargs):
        self._learned += 1

    def predict_proba_one(self, x):
        self._predictions += 1
        if not x or self._learned < self.silent_until:
            return {}
        (value,) = x.values()
        return {value: 1.0}


class Broken(Echo):
    """Raises on the event whose feature is ``"boom"``."""

    def predict_proba_one(self, x):
        if "boom" in x.values():
            raise RuntimeError("stage failure")
        return super().predict_proba_one(x)


class RecordingDict(dict):
    """A dict that records every key read through the mapping interface."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read: set = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __iter__(self):
        self.read.update(super().keys())
        return super().__iter__()

    def keys(self):
        self.read.update(super().keys())
        return super().keys()

    def items(self):
        self.read.update(super().keys())
        return super().items()

    def values(self):
        self.read.update(super().keys())
        return super().values()


COSTS = [0.0, 0.3, 0.2]


def echo_cascade(costs=COSTS, warm_up=0, policy=None, silent_until=0):
    stages = [
        Stage(Echo(silent_until), features=(f"s{j + 1}",), cost=c, name=f"e{j + 1}")
        for j, c in enumerate(costs)
    ]
    return CascadeClassifier(stages=stages, policy=policy, warm_up=warm_up)


def noisy_outputs(n_events=2000, flip=0.1, seed=42):
    """Stage 1 is the truth with 10% of labels flipped; stages 2 and 3 are the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, size=n_events)
    return np.stack([truth ^ (rng.random(n_events) < flip), truth, truth], axis=1)


def event(row):
    return {f"s{j + 1}": int(v) for j, v in enumerate(row)}


def test_depths_equal_uss_ucb_run_on_the_same_outputs():
    outputs = noisy_outputs()
    cascade = echo_cascade(policy=USSUCB(stage_costs=COSTS))
    decisions = [cascade.decide_one(event(row)) for row in outputs]
    expected = USSUCB(stage_costs=COSTS).run(outputs)
    assert [d.depth for d in decisions] == expected.tolist()
    # Not a degenerate stream: the policy used both depth 1 and depth 3.
    assert set(expected.tolist()) == {1, 3}
    for decision, row in zip(decisions, outputs):
        assert decision.outputs == tuple(int(v) for v in row[: decision.depth])
        assert decision.prediction == row[decision.depth - 1]
        assert decision.proba == {row[decision.depth - 1]: 1.0}
        assert not decision.warm_up


def test_cost_accounting_is_the_hand_sum_of_cumulative_costs():
    outputs = noisy_outputs(n_events=500)
    cascade = echo_cascade()
    depths = [cascade.decide_one(event(row)).depth for row in outputs]
    cumulative = {1: 0.0, 2: 0.3, 3: 0.5}
    assert cascade.total_cost == pytest.approx(sum(cumulative[d] for d in depths))
    summary = cascade.summary()
    assert summary.events == 500
    assert summary.total_cost == pytest.approx(cascade.total_cost)
    assert summary.mean_cost == pytest.approx(cascade.total_cost / 500)
    assert summary.stages["answered"].tolist() == np.bincount(depths, minlength=4)[1:].tolist()
    assert summary.stages["queried"].tolist() == [500, sum(d >= 2 for d in depths), depths.count(3)]
    assert summary.stages["cumulative_cost"].tolist() == pytest.approx([0.0, 0.3, 0.5])


def test_decision_cost_is_the_cumulative_cost_of_its_depth():
    for depth, expected in ((1, 0.0), (2, 0.3), (3, 0.5)):
        cascade = echo_cascade(policy=FixedDepth(depth))
        decision = cascade.decide_one({"s1": 0, "s2": 1, "s3": 1})
        assert (decision.depth, decision.cost) == (depth, pytest.approx(expected))


def test_unqueried_stages_features_are_never_read():
    outputs = noisy_outputs(n_events=300)
    cascade = echo_cascade()
    seen_depths = set()
    for row in outputs:
        x = RecordingDict(event(row), unrelated=1.0)
        decision = cascade.decide_one(x)
        seen_depths.add(decision.depth)
        assert x.read == {f"s{j + 1}" for j in range(decision.depth)}
    assert seen_depths == {1, 3}


def test_predict_methods_read_only_the_queried_features_too():
    cascade = echo_cascade(policy=FixedDepth(1))
    x = RecordingDict(s1=1, s2=0, s3=0)
    assert cascade.predict_one(x) == 1
    assert cascade.predict_proba_one(x) == {1: 1.0}
    assert x.read == {"s1"}


def test_predict_one_then_predict_proba_one_is_one_policy_step():
    cascade = echo_cascade()
    policy = cascade._policy
    x = {"s1": 1, "s2": 1, "s3": 1}
    cascade.predict_one(x)
    cascade.predict_proba_one(dict(x))  # an equal dict is the same event
    assert policy.stats.decisions == 1
    assert cascade.summary().events == 1
    cascade.predict_proba_one({"s1": 0, "s2": 1, "s3": 1})  # a different event
    cascade.predict_one({"s1": 0, "s2": 1, "s3": 1})
    assert policy.stats.decisions == 2


def test_repeated_identical_events_are_one_step_each():
    # The same method called again on an equal but distinct dict means a new event (e.g. a scaler
    # maps every event to zeros before it has learned anything).
    cascade = echo_cascade(policy=FixedDepth(2))
    x = {"s1": 1, "s2": 1, "s3": 1}
    for _ in range(4):
        cascade.predict_one(dict(x))
    assert cascade._policy.stats.decisions == 4
    # The first predict_proba_one pairs with the last predict_one (an equal event, another method);
    # the second is a new event, which the third, on the very same object, reuses.
    for _ in range(3):
        cascade.predict_proba_one(x)
    assert cascade._policy.stats.decisions == 5
    assert cascade.summary().events == 5 and cascade.total_cost == pytest.approx(5 * 0.3)


def test_predicting_one_event_three_times_steps_and_spends_once():
    cascade = echo_cascade(policy=FixedDepth(3))  # C_3 = 0.5
    x = {"s1": 1, "s2": 0, "s3": 1}
    answers = [cascade.predict_one(x) for _ in range(3)] + [cascade.predict_proba_one(x)] * 2
    assert answers == [1, 1, 1, {1: 1.0}, {1: 1.0}]
    assert cascade._policy.stats.decisions == 1
    assert (cascade.summary().events, cascade.total_cost) == (1, pytest.approx(0.5))
    cascade.learn_one(x, 1)  # the event is over: the same object again is a new event
    cascade.predict_one(x)
    assert (cascade.summary().events, cascade.total_cost) == (2, pytest.approx(1.0))


def test_decide_one_always_steps_and_learn_one_ends_the_event():
    cascade = echo_cascade()
    policy = cascade._policy
    x = {"s1": 1, "s2": 1, "s3": 1}
    cascade.decide_one(x)
    cascade.decide_one(x)
    assert policy.stats.decisions == 2
    cascade.predict_one(x)  # both reuse the last decision
    cascade.predict_proba_one(x)
    assert policy.stats.decisions == 2
    cascade.learn_one(x, 1)
    cascade.predict_proba_one(x)  # the stages have learned: a new event
    assert policy.stats.decisions == 3


def test_a_dict_mutated_in_place_is_a_new_event():
    cascade = echo_cascade()
    x = {"s1": 1, "s2": 1, "s3": 1}
    cascade.predict_one(x)
    x["s1"] = 0
    cascade.predict_proba_one(x)
    assert cascade._policy.stats.decisions == 2


def test_one_step_per_event_inside_a_pipeline():
    cascade = echo_cascade()
    model = preprocessing.StandardScaler() | cascade
    x = {"s1": 1.0, "s2": 2.0, "s3": 3.0}
    model.predict_one(x)
    model.predict_proba_one(x)  # the scaler hands over a fresh, equal dict
    assert cascade._policy.stats.decisions == 1


def test_warm_up_answers_with_all_stages_without_stepping_the_policy():
    cascade = echo_cascade(warm_up=3)
    policy = cascade._policy
    x = {"s1": 0, "s2": 1, "s3": 1}
    for n_learned in range(3):
        decision = cascade.decide_one(x)
        assert (decision.depth, decision.warm_up, decision.prediction) == (3, True, 1)
        assert decision.cost == pytest.approx(0.5)
        assert policy.stats.decisions == 0
        cascade.learn_one(x, 1)
        assert cascade.summary().learned == n_learned + 1
    decision = cascade.decide_one(x)
    assert not decision.warm_up
    assert policy.stats.decisions == 1
    summary = cascade.summary()
    assert (summary.events, summary.warm_up_events) == (4, 3)


def test_after_warm_up_the_depths_equal_uss_ucb_on_the_remaining_rows():
    outputs = noisy_outputs(n_events=600)
    cascade = echo_cascade(warm_up=20, policy=USSUCB(stage_costs=COSTS))
    depths = []
    for row in outputs:
        x = event(row)
        depths.append(cascade.decide_one(x).depth)
        cascade.learn_one(x, int(row[-1]))
    # Event t is decided before its label is learned: events 1..20 are the warm-up.
    assert depths[:20] == [3] * 20
    assert depths[20:] == USSUCB(stage_costs=COSTS).run(outputs[20:]).tolist()


def test_warm_up_keeps_untrained_stages_out_of_the_disagreement_counts():
    # Stage 2 abstains until it has learned 5 labels; stages 1 and 3 always answer 1.
    def run(warm_up):
        stages = [
            Stage(Echo(), features=("a",), cost=0.0),
            Stage(Echo(silent_until=5), features=("a",), cost=0.0),
            Stage(Echo(), features=("a",), cost=0.0),
        ]
        cascade = CascadeClassifier(stages=stages, warm_up=warm_up)
        for _ in range(10):
            cascade.decide_one({"a": 1})
            cascade.learn_one({"a": 1}, 1)
        return cascade._policy.stats

    # Zero costs: every step queries all three stages.
    cold = run(warm_up=0)
    assert cold.queried == [10, 10, 10]
    # Events 1..5 are decided before the 5th label: stage 2 abstained and disagreed with 1 and 3.
    assert cold.disagreements[0][1] == 5
    assert cold.disagreements[1][2] == 5
    assert cold.disagreements[0][2] == 0
    warm = run(warm_up=5)
    assert warm.queried == [5, 5, 5]
    assert warm.disagreements == [[0, 0, 0], [0, 0, 0], [0, 0, 0]]


def test_abstaining_stage_is_reported_as_disagreeing():
    cascade = echo_cascade(policy=FixedDepth(3))
    with pytest.warns(EmptyViewWarning):  # stage 2's feature is missing: it abstains
        decision = cascade.decide_one({"s1": 1, "s3": 1})
    assert decision.outputs == (1, None, 1)
    stats = cascade._policy.stats
    assert (stats.disagreements[0][1], stats.disagreements[1][2], stats.disagreements[0][2]) == (1, 1, 0)
    assert ABSTAINED == ABSTAINED
    assert type(ABSTAINED)() != ABSTAINED  # only equal to itself


def test_default_policy_and_warm_up():
    cascade = CascadeClassifier(stages=[Stage(linear_model.LogisticRegression(), cost=0.0)])
    assert cascade.warm_up == 50
    # The default since "Beyond the paper" (docs/evidence/results.md).
    assert isinstance(cascade._policy, USSKLUCB)
    assert cascade._policy.alpha == 1.0 and cascade._policy.discount is None
    assert cascade._policy.stage_costs == [0.0]


def test_fixed_depth_policy_is_rebuilt_for_the_stage_costs():
    template = FixedDepth(2)
    cascade = echo_cascade(policy=template)
    assert cascade._policy is not template
    assert cascade._policy.cumulative_costs == pytest.approx((0.0, 0.3, 0.5))
    assert [cascade.decide_one({"s1": 0, "s2": 1, "s3": 1}).depth for _ in range(3)] == [2, 2, 2]
    assert template.stats.decisions == 0  # the template is never stepped


def test_binary_cascade_always_returns_both_classes():
    stages = [
        Stage(linear_model.LogisticRegression(), features=("a",), cost=0.0),
        Stage(Echo(silent_until=1), features=("b",), cost=0.1),
    ]
    cascade = CascadeClassifier(stages=stages, policy=FixedDepth(2))
    assert not cascade._multiclass
    assert cascade.predict_proba_one({"a": 1.0, "b": True}) == {False: 0.5, True: 0.5}
    assert cascade.predict_one({"a": 1.0, "b": True}) is None  # an abstaining stage predicts nothing
    cascade.learn_one({"a": 1.0, "b": True}, True)
    assert cascade.predict_proba_one({"a": 1.0, "b": True}) == {True: 1.0, False: 0.0}
    assert cascade.predict_one({"a": 1.0, "b": True}) is True


def test_a_failing_stage_does_not_leave_the_policy_waiting():
    stages = [
        Stage(Echo(), features=("s1",), cost=0.0),
        Stage(Broken(), features=("s2",), cost=0.0),
    ]
    cascade = CascadeClassifier(stages=stages, warm_up=0)
    cascade.decide_one({"s1": 1, "s2": 1})
    with pytest.raises(RuntimeError, match="stage failure"):
        cascade.decide_one({"s1": 1, "s2": "boom"})
    decision = cascade.decide_one({"s1": 1, "s2": 1})
    assert decision.depth == 2
    stats = cascade._policy.stats
    assert (stats.decisions, stats.queried) == (2, [2, 2])
    assert cascade.summary().events == 2


def test_missing_features_are_tolerated():
    stages = [
        Stage(linear_model.LogisticRegression(), features=("a", "b"), cost=0.0),
        Stage(linear_model.LogisticRegression(), features=("a", "b", "c"), cost=0.1),
    ]
    cascade = CascadeClassifier(stages=stages, warm_up=0)
    with pytest.warns(EmptyViewWarning) as caught:
        for x, y in [({"a": 1.0}, True), ({}, False), ({"c": 2.0, "z": 3.0}, True)]:
            cascade.learn_one(x, y)
            assert set(cascade.predict_proba_one(x)) == {False, True}
    # {} empties both stages' views; {"c", "z"} stage 1's again: one warning per stage.
    assert [str(w.message)[:14] for w in caught] == ["stage 'stage1'", "stage 'stage2'"]


def test_a_stage_whose_features_are_absent_warns_once():
    stages = [
        Stage(Echo(), features=("s1",), cost=0.0, name="cheap"),
        Stage(Echo(), features=("typo",), cost=0.1, name="dear"),
    ]
    cascade = CascadeClassifier(stages=stages, warm_up=0, policy=FixedDepth(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for value in (0, 1, 1, 0):
            cascade.predict_one({"s1": value, "s2": value})
            cascade.learn_one({"s1": value, "s2": value}, value)
    assert [w.category for w in caught] == [EmptyViewWarning]
    message = str(caught[0].message)
    assert message.startswith("stage 'dear': none of its features ('typo',) is in the event")
    assert "'s1', 's2'" in message
    # A clone is a new cascade: it warns again.
    with pytest.warns(EmptyViewWarning):
        cascade.clone().predict_one({"s1": 1})
    # A stage that names no feature reads nothing on purpose: no warning.
    prior = CascadeClassifier(stages=[Stage(Echo(), features=(), cost=0.0)], warm_up=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prior.predict_one({"s1": 1})


def test_learn_one_trains_every_stage_on_its_own_view():
    stages = [
        Stage(linear_model.LogisticRegression(), features=("a",), cost=0.0),
        Stage(linear_model.LogisticRegression(), cost=0.1),
    ]
    cascade = CascadeClassifier(stages=stages)
    cascade.learn_one({"a": 1.0, "b": 2.0}, True)
    assert set(stages[0].model.weights) == {"a"}
    assert set(stages[1].model.weights) == {"a", "b"}
    assert cascade._policy.stats.decisions == 0  # labels never reach the policy


def test_clone_gives_untrained_stages_and_a_fresh_policy():
    stages = [
        Stage(linear_model.LogisticRegression(), features=("a",), cost=0.0),
        Stage(linear_model.LogisticRegression(), cost=0.1),
    ]
    cascade = CascadeClassifier(stages=stages, warm_up=0)
    for _ in range(5):
        cascade.decide_one({"a": 1.0, "b": 2.0})
        cascade.learn_one({"a": 1.0, "b": 2.0}, True)
    clone = cascade.clone()
    assert all(not stage.model.weights for stage in clone.stages)
    assert all(stage.model.weights for stage in cascade.stages)
    assert clone._policy.stats.decisions == 0
    assert clone.summary().events == 0
    assert repr(clone) == repr(cascade)


def test_summary_membership_gives_the_next_depth():
    outputs = noisy_outputs(n_events=400)
    cascade = echo_cascade()
    for row in outputs[:-1]:
        cascade.decide_one(event(row))
        summary = cascade.summary()
        in_both = summary.stages["in_B_l"] & summary.stages["in_B_h"]
        expected = next((j + 1 for j, ok in enumerate(in_both) if ok), 3)
        assert summary.next_depth == expected
    assert cascade.decide_one(event(outputs[-1])).depth == summary.next_depth


def test_summary_disagreement_rates_and_other_policies():
    cascade = echo_cascade(policy=FixedDepth(3))
    for row in [(0, 1, 1), (1, 1, 0), (1, 1, 1), (0, 0, 0)]:
        cascade.decide_one(event(row))
    summary = cascade.summary()
    rates = summary.disagreement.to_numpy()
    # D_12 = 1, D_13 = 2, D_23 = 1 over 4 rounds.
    assert rates.tolist() == [[0.0, 0.25, 0.5], [0.25, 0.0, 0.25], [0.5, 0.25, 0.0]]
    assert summary.next_depth == 3
    assert summary.stages["in_B_l"].isna().all()
    assert list(summary.disagreement.columns) == ["e1", "e2", "e3"]
    assert "mean cost" in str(summary)


def test_progressive_validation_with_delay_in_a_pipeline():
    cascade = CascadeClassifier(
        stages=[
            Stage(linear_model.LogisticRegression(), features=("https", "popup_window"), cost=0.0),
            Stage(linear_model.LogisticRegression(), cost=0.2),
        ],
        warm_up=10,
    )
    model = preprocessing.StandardScaler() | cascade
    metric = evaluate.progressive_val_score(
        datasets.Phishing().take(300), model, metrics.Accuracy(), delay=25
    )
    summary = cascade.summary()
    # One decision per event, although the unfitted scaler maps the first 25 events to the same
    # dict. Label t arrives just before event t + 25 is decided: the 10th before event 35, so
    # events 1..34 are the warm-up.
    assert (summary.events, summary.learned, summary.warm_up_events) == (300, 300, 34)
    assert 0.75 < metric.get() <= 1.0


def test_stage_label_is_the_argmax_with_rivers_tie_break():
    from uss_stream.cascade.querying import argmax

    rng = np.random.default_rng(0)
    for _ in range(2000):
        n_labels = int(rng.integers(0, 5))
        values = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=n_labels)
        proba = dict(zip(rng.permutation(["a", "b", "c", "d", "e"])[:n_labels].tolist(), values.tolist()))
        assert argmax(proba) == (max(proba, key=proba.get) if proba else None)


def test_clone_with_attributes_is_an_independent_copy_of_the_trained_cascade():
    stages = [
        Stage(linear_model.LogisticRegression(), features=("a",), cost=0.0),
        Stage(linear_model.LogisticRegression(), cost=0.1),
    ]
    cascade = CascadeClassifier(stages=stages, warm_up=2)
    for value in (1.0, -1.0, 2.0):
        cascade.predict_one({"a": value, "b": -value})
        cascade.learn_one({"a": value, "b": -value}, value > 0)
    copy_ = cascade.clone(include_attributes=True)
    assert copy_._plan[1][0] is copy_.stages[1].model
    assert copy_.stages[1].model.weights == cascade.stages[1].model.weights
    assert copy_._policy.stats == cascade._policy.stats
    x = {"a": 0.5, "b": 0.1}
    assert copy_.decide_one(x) == cascade.decide_one(x)
    copy_.learn_one(x, False)
    assert copy_.stages[1].model.weights != cascade.stages[1].model.weights


def test_policy_state_carries_the_learned_depths_to_a_fresh_cascade():
    outputs = noisy_outputs(n_events=1500)
    first = echo_cascade(policy=USSUCB(stage_costs=COSTS))
    for row in outputs[:1000]:
        first.decide_one(event(row))
    restored = echo_cascade(policy=USSUCB(stage_costs=COSTS))
    restored.load_policy_state(json.loads(json.dumps(first.policy_state())))
    # The restored cascade continues the uninterrupted depth sequence.
    continued = [restored.decide_one(event(row)).depth for row in outputs[1000:]]
    assert continued == USSUCB(stage_costs=COSTS).run(outputs)[1000:].tolist()
    with pytest.raises(ValueError, match="stages"):
        echo_cascade(costs=[0.0, 0.3], policy=USSUCB(stage_costs=[0.0, 0.3])).load_policy_state(
            first.policy_state()
        )


def test_summary_cost_share_saved_and_accuracy_where_labels_came():
    # FixedDepth(1) after 2 warm-up events at depth 3: total 2 x 0.5 = 1.0 against 10 x C_3 = 5.0.
    cascade = echo_cascade(policy=FixedDepth(1), warm_up=2)
    answers = [1, 0, 1, 1, 0, 1, 1, 0, 0, 1]
    labels = [1, 0, 1, 0, 0, 1, 0, 0, 1, 1]  # the answers are right on 7 of the 10 events
    for answer, label in zip(answers, labels):
        x = {"s1": answer, "s2": label, "s3": label}
        cascade.predict_one(x)
        cascade.learn_one(x, label)
    cascade.learn_one({"s1": 1, "s2": 1, "s3": 1}, 0)  # a label without a decision: not scored
    summary = cascade.summary()
    assert summary.total_cost == pytest.approx(1.0) and summary.full_cascade_cost_total == pytest.approx(5.0)
    assert summary.cost_saved == pytest.approx(0.8)
    assert (summary.scored, summary.correct, summary.accuracy) == (10, 7, pytest.approx(0.7))
    assert "80.0% of the full cost saved; accuracy 70.00% on 10 labels" in str(summary)
    assert np.isnan(echo_cascade().summary().accuracy) and np.isnan(echo_cascade().summary().cost_saved)


def test_costs_in_dollars_with_the_price_of_an_error_are_the_same_cascade():
    outputs = noisy_outputs(n_events=400)
    stages = [Stage(Echo(), features=(f"s{j}",), cost=c) for j, c in enumerate([0.0, 30.0, 20.0], start=1)]
    dollars = CascadeClassifier(stages=stages, price_of_error=100.0, warm_up=0)
    errors = echo_cascade()  # the same stages at 0, 0.3 and 0.2 errors
    assert dollars.stage_costs == pytest.approx(errors.stage_costs)
    for row in outputs:
        assert dollars.decide_one(event(row)) == errors.decide_one(event(row))
    summary = dollars.summary()
    assert summary.price_of_error == 100.0
    assert f"({summary.mean_cost * 100:.4g} at 100 per error)" in str(summary)


@pytest.mark.parametrize(
    ("costs", "price", "warns"),
    [
        ([0.0, 0.6, 0.4], None, False),  # C_3 - C_1 = 1: depth 3 is still reachable
        ([0.0, 0.6, 0.5], None, True),  # 1.1: it is not
        ([10.0, 60.0, 40.0], 100.0, False),  # 100 dollars above stage 1, one error's price
        ([10.0, 60.0, 41.0], 100.0, True),
    ],
)
def test_the_cascade_warns_when_its_costs_leave_a_depth_unreachable(costs, price, warns):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stages = [Stage(Echo(), features=(f"s{j}",), cost=c) for j, c in enumerate(costs, start=1)]
        CascadeClassifier(stages=stages, price_of_error=price)
    assert [w.category for w in caught] == ([CostScaleWarning] if warns else [])
    if warns:
        assert "depth 3 can never be the best depth" in str(caught[0].message)
        assert caught[0].filename == __file__  # it points at the user's line


def test_summary_advises_when_labels_make_a_best_depth_certain_that_the_policy_does_not_choose():
    # Stage 2 disagrees with stage 1 on 30% of the events at an extra cost of 0.1: the label-free
    # policy goes to depth 2. On the disagreements each stage is right half of the time, so stage 2
    # buys nothing: with enough labels depth 1 is certainly best and WD is violated.
    rng = np.random.default_rng(3)
    cascade = echo_cascade(costs=[0.0, 0.1], warm_up=0)
    for _ in range(3000):
        truth = int(rng.integers(0, 2))
        disagree = rng.random() < 0.3
        first = truth ^ (disagree and rng.random() < 0.5)
        x = {"s1": first, "s2": first ^ disagree}
        cascade.predict_one(x)
        cascade.learn_one(x, truth)
    summary = cascade.summary()
    assert summary.next_depth == 2 and summary.wd.best_depth == 1 and summary.wd.best_depth_certain
    assert summary.wd_verdict == "violated"
    assert summary.advice.startswith("the labels show depth 1 is best with confidence")
    assert "advice: the labels show depth 1" in str(summary)
    # Where the labels agree with the policy, nothing to advise.
    assert echo_cascade().summary().advice is None
