"""ActiveCascadeClassifier: River's active-learning convention on a cascade whose policy asks for labels."""

from __future__ import annotations

import itertools

from river import active, datasets, evaluate, linear_model, metrics, preprocessing

from uss_stream import Stage
from uss_stream.cascade.active import ActiveCascadeClassifier
from uss_stream.policies import AuditedUSS, FixedDepth

COSTS = [0.0, 0.2]
EVENTS = 400


def _model(policy, warm_up=30):
    def scaled_logistic():
        return preprocessing.StandardScaler() | linear_model.LogisticRegression()

    stages = [
        Stage(
            scaled_logistic(), cost=COSTS[0], features=("empty_server_form_handler", "popup_window", "https")
        ),
        Stage(scaled_logistic(), cost=COSTS[1]),
    ]
    return ActiveCascadeClassifier(stages=stages, policy=policy, warm_up=warm_up)


def _stream():
    return itertools.islice(datasets.Phishing(), EVENTS)


def test_it_asks_for_the_warm_up_and_for_what_the_policy_requests_and_learns_only_from_those():
    model = _model(AuditedUSS(COSTS))
    assert isinstance(model, active.base.ActiveLearningClassifier)
    asked, warm_up_asked, requested = [], 0, 0
    for x, y in _stream():
        y_pred, ask = model.predict_one(x)
        proba, ask_again = model.predict_proba_one(x)  # the same event: the same decision
        decision = model._memo.decision
        assert ask is ask_again and y_pred == decision.prediction and proba == decision.proba
        # Independently of the class: the warm-up asks for every label, afterwards the policy decides.
        assert ask == (decision.warm_up or model.label_requested)
        warm_up_asked += decision.warm_up
        requested += (not decision.warm_up) and model.label_requested
        asked.append(ask)
        if ask:
            model.learn_one(x, y)
    assert warm_up_asked == 30 and asked[:30] == [True] * 30
    assert requested > 0 and sum(asked) == 30 + requested < EVENTS
    assert model.summary().labels_used == requested


def test_progressive_validation_counts_the_labels_it_asked_for():
    manual = _model(AuditedUSS(COSTS))
    used = 0
    for x, y in _stream():
        _, ask = manual.predict_one(x)
        if ask:
            used += 1
            manual.learn_one(x, y)
    model = _model(AuditedUSS(COSTS))
    *_, last = evaluate.iter_progressive_val_score(_stream(), model, metrics.Accuracy(), step=EVENTS)
    assert last["Samples used"] == used
    assert model.summary().labels_used == manual.summary().labels_used


def test_a_policy_that_never_asks_takes_the_warm_up_labels_only():
    model = _model(FixedDepth(1), warm_up=20)
    *_, last = evaluate.iter_progressive_val_score(_stream(), model, metrics.Accuracy(), step=EVENTS)
    assert last["Samples used"] == 20
    assert model.summary().labels_used == 0
