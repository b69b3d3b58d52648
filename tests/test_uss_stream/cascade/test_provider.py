"""Lazy feature acquisition: a stage's provider is called only when the stage is queried or trained."""

from __future__ import annotations

from collections import Counter

import pytest
from river import base

from uss_stream import CascadeClassifier, Stage
from uss_stream.policies import FixedDepth


class Constant(base.Classifier):
    """Always predicts ``label``; records the views it was queried on."""

    def __init__(self, label: int = 1) -> None:
        self.label = label
        self.seen: list[dict] = []

    def learn_one(self, x, y, **kwargs):
        return None

    def predict_proba_one(self, x, **kwargs):
        self.seen.append(dict(x))
        return {self.label: 1.0, 1 - self.label: 0.0}


def test_providers_of_unqueried_stages_are_never_called():
    calls: Counter[str] = Counter()

    def store(name, features):
        def fetch(x):
            calls[name] += 1
            return {f"{name}_{f}": x["id"] * 10 + k for k, f in enumerate(features)}

        return fetch

    deep = Constant()
    model = CascadeClassifier(
        stages=[
            Stage(Constant(), features=("id",), cost=0.0),
            Stage(Constant(), cost=0.1, provider=store("lab", ("a", "b"))),
            Stage(deep, cost=0.2, provider=store("scan", ("c",))),
        ],
        policy=FixedDepth(2),
        warm_up=0,
    )
    for event in range(5):
        decision = model.decide_one({"id": event})
        assert decision.depth == 2 and decision.cost == pytest.approx(0.1)
    assert calls == {"lab": 5}  # the third stage's provider never ran
    assert deep.seen == []
    model.learn_one({"id": 7}, 1)  # training every stage fetches every stage's features
    assert calls == {"lab": 6, "scan": 1}


def test_provider_answer_is_the_stage_view_cut_to_its_features():
    stage_model = Constant()
    model = CascadeClassifier(
        stages=[Stage(stage_model, features=("a",), cost=0.0, provider=lambda x: {"a": x["k"], "b": 2})],
        warm_up=0,
    )
    model.decide_one({"k": 3})
    assert stage_model.seen == [{"a": 3}]


def test_provider_must_be_callable():
    with pytest.raises(TypeError, match="provider"):
        Stage(Constant(), provider="feature-store")
