"""CascadeClassifier with a sequential policy: stage by stage, the same depths as the policy on a log."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from estimator_checks import river_check_params
from river import base, datasets, linear_model, naive_bayes, preprocessing, tree

from uss_stream import CascadeClassifier, Stage
from uss_stream.policies import FixedDepth, SequentialKLUCB

CHEAP = ("empty_server_form_handler", "popup_window", "https")


def phishing_stages():
    return [
        Stage(linear_model.LogisticRegression(), features=CHEAP, cost=0.0),
        Stage(linear_model.LogisticRegression(), cost=0.02),
        Stage(tree.HoeffdingTreeClassifier(), cost=0.03),
    ]


def _estimators():
    yield CascadeClassifier(
        stages=[
            Stage(linear_model.LogisticRegression(), features=CHEAP, cost=0.0),
            Stage(linear_model.LogisticRegression(), cost=0.05),
            Stage(preprocessing.StandardScaler() | linear_model.LogisticRegression(), cost=0.05),
        ],
        policy=SequentialKLUCB([0.0, 0.05, 0.05], n_bins=2),
        warm_up=5,
    )
    yield CascadeClassifier(
        stages=[
            Stage(naive_bayes.GaussianNB(), cost=0.0, name="nb"),
            Stage(tree.HoeffdingTreeClassifier(), cost=0.05, name="tree"),
        ],
        policy=SequentialKLUCB([0.0, 0.05]),
        warm_up=0,
    )


@pytest.mark.parametrize(("estimator", "check"), river_check_params(_estimators()))
def test_river_checks_pass_with_a_sequential_policy(estimator, check):
    check(estimator.clone())


def test_depths_equal_the_policy_on_the_logged_outputs_and_confidences():
    # Every stage learns every label, so a twin set of stages trained the same way answers the
    # same: log all stages' labels and confidences, then run the policy on the log by itself.
    warm_up = 30
    stages = phishing_stages()
    twins = [copy.deepcopy(stage) for stage in stages]
    cascade = CascadeClassifier(stages, policy=SequentialKLUCB([0.0, 0.02, 0.03]), warm_up=warm_up)
    scaler = preprocessing.StandardScaler()
    depths, outputs, confidences, stopped = [], [], [], []
    for i, (x, y) in enumerate(datasets.Phishing()):
        scaler.learn_one(x)
        x = scaler.transform_one(x)
        decision = cascade.decide_one(x)
        if i >= warm_up:
            row_outputs, row_confidences = [], []
            for twin in twins:
                view = {f: x[f] for f in twin.features} if twin.features else x
                proba = twin.model.predict_proba_one(view)
                label = max(proba, key=proba.get)  # trained by now; no exact ties on these models
                row_outputs.append(label)
                row_confidences.append(proba[label])
            depths.append(decision.depth)
            outputs.append(row_outputs)
            confidences.append(row_confidences)
            stopped.append(decision.stopped)
            assert decision.outputs == tuple(row_outputs[: decision.depth])
        else:
            assert decision.stopped == "warm-up" and decision.depth == 3
        cascade.learn_one(x, y)
        for twin in twins:
            twin.model.learn_one({f: x[f] for f in twin.features} if twin.features else x, y)
    alone = SequentialKLUCB([0.0, 0.02, 0.03])
    expected = alone.run(np.array(outputs), np.array(confidences))
    assert depths == expected.tolist()
    assert set(stopped) == {"cost test", "last stage"}
    assert all((s == "last stage") == (d == 3) for s, d in zip(stopped, depths))
    summary = cascade.summary()
    assert summary.next_depth is None
    assert summary.contexts["events"].groupby(summary.contexts["stage"]).sum()[1] == len(depths)
    assert summary.stages["answered"].tolist() == [
        int(np.sum(np.array(depths) == d)) + (warm_up if d == 3 else 0) for d in (1, 2, 3)
    ]
    assert "contexts:" in str(summary)


def test_fixed_depth_decisions_say_so():
    cascade = CascadeClassifier(phishing_stages(), policy=FixedDepth(2), warm_up=1)
    x, y = next(iter(datasets.Phishing()))
    assert cascade.decide_one(x).stopped == "warm-up"
    cascade.learn_one(x, y)
    decision = cascade.decide_one(x)
    assert (decision.depth, decision.stopped) == (2, "fixed depth")
    assert cascade.summary().contexts is None


class Failing(base.Classifier):
    def learn_one(self, x, y):
        pass

    def predict_proba_one(self, x):
        raise RuntimeError("sensor offline")


def test_a_failing_stage_withdraws_the_event():
    cascade = CascadeClassifier(
        [Stage(linear_model.LogisticRegression(), cost=0.0), Stage(Failing(), cost=0.1)],
        policy=SequentialKLUCB([0.0, 0.1]),
        warm_up=0,
    )
    x = {"a": 1.0}
    with pytest.raises(RuntimeError, match="sensor offline"):
        cascade.decide_one(x)  # first event: forced exploration reaches the failing stage
    state = cascade.policy_state()
    assert state["contexts"]["decisions"] == 0
    with pytest.raises(RuntimeError, match="sensor offline"):
        cascade.decide_one(x)  # the policy was not left waiting in the middle of an event


def test_an_abstaining_stage_is_reported_with_no_confidence():
    # An untrained GaussianNB answers {}: reported as ABSTAINED with confidence None (cell 0).
    cascade = CascadeClassifier(
        [Stage(naive_bayes.GaussianNB(), cost=0.0), Stage(linear_model.LogisticRegression(), cost=0.1)],
        policy=SequentialKLUCB([0.0, 0.1]),
        warm_up=0,
    )
    decision = cascade.decide_one({"a": 1.0})
    assert decision.outputs[0] is None and decision.depth == 2
    cells = cascade._policy.context_stats.cells[0]
    assert cells[0].decisions == 1
