"""A stage that answers what is not a label or a probability, or raises while learning: a ``ValueError``
or ``RuntimeError`` naming the stage, and the cascade left as it was (no policy step half taken,
no label given to the policy for a training that failed)."""

from __future__ import annotations

import pandas as pd
import pytest
from river import base, linear_model

from uss_stream import CascadeClassifier, Stage
from uss_stream.policies import FixedDepth


class Answers(base.Classifier):
    """A stage whose answers are given: ``proba`` (or only a label, if ``proba`` is None)."""

    def __init__(self, proba=None, label=None, fails_to_learn=False):
        self.proba, self.label, self.fails_to_learn = proba, label, fails_to_learn
        self.learned = 0

    def learn_one(self, x, y):
        if self.fails_to_learn:
            raise KeyError("weight")
        self.learned += 1

    def predict_proba_one(self, x):
        if self.proba is None:
            raise NotImplementedError
        return dict(self.proba)

    def predict_one(self, x):
        return self.label


def cascade(first: base.Classifier, policy=None) -> CascadeClassifier:
    stages = [
        Stage(first, cost=0.0, name="cheap"),
        Stage(linear_model.LogisticRegression(), cost=1.0, name="dear"),
    ]
    return CascadeClassifier(stages, policy=policy, warm_up=0)


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        (
            Answers(proba={True: pd.NA, False: pd.NA}),
            r"stage 1 \(Answers\) answered probabilities that are not finite numbers",
        ),
        (
            Answers(proba={True: None, False: 1.0}),
            r"stage 1 \(Answers\) answered probabilities that are not finite",
        ),
        (
            Answers(proba={True: float("nan"), False: 0.5}),
            r"stage 1 \(Answers\) answered probabilities that are not finite",
        ),
        (Answers(label=pd.NA), r"the label of stage 1 \(Answers\) is missing or not comparable"),
        (Answers(label=["a"]), r"the label of stage 1 \(Answers\) must be a label"),
    ],
)
def test_a_stage_answering_no_number_or_no_label_raises_naming_it_and_the_step_is_undone(stage, message):
    model = cascade(stage)
    before = model.policy_state()
    with pytest.raises(ValueError, match=message):
        model.predict_one({"a": 1.0})
    assert model.policy_state() == before
    stage.proba, stage.label = {True: 0.8, False: 0.2}, None  # answers again: the next event is decided
    assert model.predict_one({"a": 2.0}) in (True, False)


def test_a_stage_abstaining_with_none_or_nan_is_still_an_abstention():
    for label in (None, float("nan")):
        assert cascade(Answers(label=label)).predict_one({"a": 1.0}) in (None, False, True)


def test_a_stage_raising_in_learn_one_is_named_and_the_policy_gets_no_label():
    stage = Answers(proba={True: 0.9, False: 0.1}, fails_to_learn=True)
    model = cascade(stage, policy=FixedDepth(2))  # both stages answer: a label counts for WD
    model.predict_one({"a": 1.0})
    with pytest.raises(
        RuntimeError, match=r"^stage 1 \(Answers\) failed to learn: KeyError: 'weight'$"
    ) as failed:
        model.learn_one({"a": 1.0}, True)
    assert isinstance(failed.value.__cause__, KeyError)
    assert (model.summary().learned, model.summary().wd.labels) == (0, 0)  # no label reached WD either
    stage.fails_to_learn = False
    model.predict_one({"a": 2.0})
    model.learn_one({"a": 2.0}, True)
    assert stage.learned == 1 and (model.summary().learned, model.summary().wd.labels) == (1, 1)
