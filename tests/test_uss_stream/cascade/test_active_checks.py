"""The checks that fit an active learner, on every configuration of :class:`ActiveCascadeClassifier`.

River's ``check_estimator`` assumes ``predict_one`` returns a label; an active learner returns
``(label, ask)``. River's own checks unwrap that pair where they read predictions, except the binary
check (``check_predict_proba_one_binary``), which ``ActiveCascadeClassifier._unit_test_skips``
names and which runs here on the unwrapped probabilities. Added to them, the active learner's own
contract, per configuration: every prediction is a pair whose ``ask`` is a ``bool`` that the
prediction methods agree on, one event is one step however often it is predicted, the warm-up asks
for every label, and progressive validation learns from exactly the labels asked for.

The configurations are ``ActiveCascadeClassifier._unit_test_params()``: the four of
:class:`CascadeClassifier` and one whose policy (AuditedUSS) asks for labels.
"""

from __future__ import annotations

import itertools

import pytest
from estimator_checks import river_check_params
from river import datasets, evaluate, metrics

from uss_stream.cascade.active import ActiveCascadeClassifier

EVENTS = 150


def _estimators():
    for params in ActiveCascadeClassifier._unit_test_params():
        yield ActiveCascadeClassifier(**params)


CONFIGURATIONS = [
    pytest.param(estimator, id=str(position)) for position, estimator in enumerate(_estimators())
]


def _stream():
    return itertools.islice(datasets.Phishing(), EVENTS)


@pytest.mark.parametrize(("estimator", "check"), river_check_params(_estimators()))
def test_rivers_checks(estimator, check):
    check(estimator.clone())


def test_every_configuration_is_checked_and_only_the_binary_check_is_left_to_this_file():
    configurations = list(_estimators())
    assert len(configurations) == 5
    assert [type(model.policy).__name__ for model in configurations] == [
        "NoneType", "NoneType", "NoneType", "FixedDepth", "AuditedUSS",
    ]  # fmt: skip
    assert all(model._unit_test_skips() == {"check_predict_proba_one_binary"} for model in configurations)
    assert [model._multiclass for model in configurations] == [False, False, True, False, False]


@pytest.mark.parametrize(
    "estimator", [config for config in CONFIGURATIONS if not config.values[0]._multiclass]
)
def test_binary_probabilities_have_both_classes_from_the_first_event(estimator):
    # River's check_predict_proba_one_binary, on the probabilities of the (probabilities, ask) pair;
    # River applies it to binary classifiers only (not to configuration 2, multiclass).
    model = estimator.clone()
    for x, y in _stream():
        proba, _ = model.predict_proba_one(x)
        assert set(proba) == {False, True}
        model.learn_one(x, y)


@pytest.mark.parametrize("estimator", CONFIGURATIONS)
def test_predictions_are_pairs_and_one_event_is_one_step(estimator):
    model = estimator.clone()
    warm_up, asked = model.warm_up, []
    for n, (x, y) in enumerate(_stream()):
        label, ask = model.predict_one(x)
        proba, ask_again = model.predict_proba_one(x)
        label_again, ask_third = model.predict_one(x)
        assert type(ask) is bool and ask is ask_again is ask_third
        assert label == label_again and (label is None or proba[label] == max(proba.values()))
        assert model.summary().events == n + 1  # three predictions, one event
        # The warm-up asks for every label until the stages have learned warm_up of them.
        if sum(asked) < warm_up:
            assert ask
        asked.append(ask)
        if ask:
            model.learn_one(x, y)
    summary = model.summary()
    assert summary.learned == sum(asked) and summary.scored == sum(asked)
    if model.policy is None or not model.policy.asks_for_labels:
        assert sum(asked) == warm_up  # a label-free policy asks for the warm-up only


@pytest.mark.parametrize("estimator", CONFIGURATIONS)
def test_progressive_validation_learns_exactly_the_labels_asked_for(estimator):
    manual, asked = estimator.clone(), 0
    for x, y in _stream():
        _, ask = manual.predict_one(x)
        if ask:
            asked += 1
            manual.learn_one(x, y)
    model = estimator.clone()
    *_, last = evaluate.iter_progressive_val_score(_stream(), model, metrics.Accuracy(), step=EVENTS)
    assert last["Samples used"] == asked == model.summary().learned
