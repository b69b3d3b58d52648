"""The feature-range guard of features mode, where its logic lives (no broker).

One label with a feature of 1e10 (or 9e99), on a feature otherwise within 0..1, took a River
logistic regression to accuracy 0.00, before and after a restart (``fb_labels.py``). The guard
refuses such a value on the decision path and the learning path; the rule (``docs/kafka.md``,
"Feature-range guard"): a declared range ``[LO, HI]``; a learned one, once a feature has
``MIN_SEEN`` accepted values, ``[lo - MARGIN·s, hi + MARGIN·s]`` with ``s = max(hi - lo, |lo|, |hi|)``
(1 if 0). Expected values are computed here from that rule, the boundaries with ``math.nextafter``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from river import linear_model

from uss_stream import CascadeClassifier, Stage
from uss_stream_kafka import Application, ClientConfig, Topics
from uss_stream_kafka.cli.settings import KafkaSettings
from uss_stream_kafka.processing.events import REASONS, InvalidEvent
from uss_stream_kafka.processing.feature_guard import MARGIN, MIN_SEEN, FeatureGuard, OutOfRange
from uss_stream_kafka.processing.processors import FeaturesProcessor
from uss_stream_kafka.runtime.config import ServiceConfig


def lr_cascade() -> CascadeClassifier:
    """The probe's cascade: a logistic regression on ``x``, then one on every feature."""
    return CascadeClassifier(
        [
            Stage(linear_model.LogisticRegression(), features=("x",), cost=0.0),
            Stage(linear_model.LogisticRegression(), cost=0.1),
        ],
        warm_up=0,
    )


def _label(i: int, x: float) -> bytes:
    return json.dumps({"id": f"l{i}", "features": {"x": x}, "label": bool(x > 0)}).encode()


def _event(i: int, x: float) -> bytes:
    return json.dumps({"id": f"t{i}", "features": {"x": x}}).encode()


def _refusal(guard: FeatureGuard, features: dict) -> str | None:
    try:
        guard.accept(features)
    except OutOfRange as error:
        return error.reason
    return None


def _seen(guard: FeatureGuard, values) -> FeatureGuard:
    for value in values:
        guard.accept({"x": value})
    return guard


# -- the rule, at its boundaries ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "refused"),
    [(0.0, False), (400.0, False), (math.nextafter(400.0, math.inf), True), (-1e-300, True), (1e10, True)],
)
def test_a_declared_range_accepts_its_bounds_and_nothing_beyond(value, refused):
    guard = FeatureGuard({"x": (0.0, 400.0)})
    assert _refusal(guard, {"x": value}) == ("out_of_range" if refused else None)


def test_a_declared_range_replaces_the_learned_one_and_one_bound_may_be_open():
    guard = _seen(FeatureGuard({"x": (0.0, math.inf)}), [0.5] * MIN_SEEN)
    assert _refusal(guard, {"x": 9e99}) is None  # far outside what x has shown, but declared open
    assert _refusal(guard, {"x": -1.0}) == "out_of_range"
    assert "x" not in guard.state_dict()  # a declared feature is not learned


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0.0, 1.0), (100.0, 200.0), (-3.0, 2.0), (0.0, 0.0), (1e-3, 2e-3)],
)
def test_the_learned_range_accepts_up_to_margin_scales_beyond_either_end(lo, hi):
    scale = max(hi - lo, abs(lo), abs(hi)) or 1.0
    low, high = lo - MARGIN * scale, hi + MARGIN * scale
    values = np.linspace(lo, hi, MIN_SEEN).tolist()
    for value, refused in [
        (high, False),
        (low, False),
        (math.nextafter(high, math.inf), True),
        (math.nextafter(low, -math.inf), True),
    ]:
        guard = _seen(FeatureGuard(), values)
        assert _refusal(guard, {"x": value}) == ("outlier" if refused else None), (lo, hi, value)


def test_the_learned_range_guards_from_the_min_seen_th_accepted_value_on():
    guard = _seen(FeatureGuard(), [0.5] * (MIN_SEEN - 1))
    assert _refusal(guard.new(), {"x": 1e10}) is None  # a new guard has learned nothing
    twin = FeatureGuard()
    twin.load_state_dict(guard.state_dict())
    assert _refusal(twin, {"x": 1e10}) is None  # MIN_SEEN - 1 values: not guarding yet (and learned)
    guard.accept({"x": 0.5})
    assert _refusal(guard, {"x": 1e10}) == "outlier"


def test_a_refused_record_widens_no_range_and_only_numbers_are_checked():
    guard = _seen(FeatureGuard(), [0.0, 1.0] * MIN_SEEN)
    before = guard.state_dict()
    assert _refusal(guard, {"x": 0.5, "y": 3.0, "z": 9e99}) is None  # y, z: not seen before
    assert _refusal(guard, {"x": 1e10, "w": 5.0}) == "outlier"
    assert guard.state_dict() == {**before, "x": [0.0, 1.0, 2 * MIN_SEEN + 1], "y": [3.0, 3.0, 1],
                                  "z": [9e99, 9e99, 1]}  # fmt: skip
    assert _refusal(guard, {"x": True, "s": "1e10"}) is None  # a boolean, a string: not numbers


def test_learned_ranges_off_leaves_only_the_declared_ones():
    guard = _seen(FeatureGuard({"y": (0, 1)}, learned=False), [0.5] * MIN_SEEN)
    assert _refusal(guard, {"x": 1e10}) is None
    assert _refusal(guard, {"y": 2}) == "out_of_range"
    assert guard.state_dict() == {}


def test_the_reasons_are_dead_letter_reasons():
    assert {"out_of_range", "outlier"} <= set(REASONS)


@pytest.mark.parametrize(
    "document",
    [[], {"x": [1.0, 0.0, 3]}, {"x": [0.0, 1.0]}, {"x": [0.0, math.inf, 3]}, {"x": [0.0, 1.0, 0]},
     {"x": [0.0, 1.0, 2.5]}, {f"f{i}": [0.0, 1.0, 1] for i in range(257)}],
)  # fmt: skip
def test_invalid_learned_ranges_are_refused_and_nothing_is_replaced(document):
    guard = _seen(FeatureGuard(), [0.5] * MIN_SEEN)
    with pytest.raises(ValueError):
        guard.load_state_dict(document)
    assert guard.state_dict() == {"x": [0.5, 0.5, MIN_SEEN]}


# -- in the learner: the decision path and the label (learning) path ---------------------------------
def _trained(learned: bool = True, poison: float | None = None):
    """A learner fed the probe's labels (x ~ N(0,1), label x > 0) with a poison label among them."""
    processor = FeaturesProcessor(lr_cascade, guard=FeatureGuard(learned=learned))
    learner = processor.new_learner()
    xs = np.random.default_rng(1).normal(size=600)
    refused = []
    for i, x in enumerate(xs[:400]):
        if i == 200 and poison is not None:
            try:
                learner.learn(json.dumps({"id": "p10", "features": {"x": poison}, "label": False}).encode())
            except InvalidEvent as error:
                refused.append(error.reason)
        learner.learn(_label(i, float(x)))
    return processor, learner, xs[400:], refused


def _accuracy(learner, xs) -> float:
    right = 0
    for i, x in enumerate(xs):
        decision = json.loads(learner.process(_event(i, float(x)))[0])
        right += decision["prediction"] == bool(x > 0)
    return right / len(xs)


@pytest.mark.parametrize("poison", [9e99, 1e10])
def test_a_poison_label_is_refused_and_the_models_stay_accurate(poison):
    _, spoilt, test, refused = _trained(learned=False, poison=poison)
    assert refused == [] and _accuracy(spoilt, test) < 0.6  # what the guard prevents (0.00 in the probe)
    _, learner, test, refused = _trained(poison=poison)
    assert refused == ["outlier"]
    assert _accuracy(learner, test) >= 0.9


def test_a_poison_event_is_refused_without_changing_the_learner():
    _, learner, test, _ = _trained()
    before = learner.state_dict()
    with pytest.raises(InvalidEvent, match=r"outlier: feature 'x' = 1e\+100 is outside its learned range"):
        learner.process(_event(0, 1e100))
    assert learner.state_dict() == before  # policy counts and learned ranges
    learner.process(_event(1, float(test[0])))
    assert learner.state_dict()["stats"]["decisions"] == before["stats"]["decisions"] + 1


def test_the_learned_ranges_survive_a_restart_through_the_checkpoint():
    processor, learner, _, _ = _trained()
    document = json.loads(json.dumps(learner.state_dict()))  # as the state topic holds it
    assert document["feature_ranges"]["x"][2] == 400
    restored = processor.new_learner()
    restored.load_state_dict(document)
    with pytest.raises(InvalidEvent, match="outlier"):
        restored.learn(_label(0, 1e10).replace(b"true", b"false"))
    # A checkpoint written before the guard (no ranges) still loads: nothing learned yet.
    old = {key: value for key, value in document.items() if key != "feature_ranges"}
    fresh = processor.new_learner()
    fresh.load_state_dict(old)
    assert fresh.state_dict()["feature_ranges"] == {}
    assert fresh.state_dict()["stats"] == document["stats"]


# -- configuration: flags -> settings -> ServiceConfig -> Application -> processor -------------------
def _settings(*ranges: str, **extra):
    extra.setdefault("feature_range", ranges)
    return KafkaSettings(
        "run", bootstrap_servers="b:9092", input_topic="i", output_topic="o", dlq_topic="d",
        state_topic="s", group_id="g", labels_topic="l", mode="features",
        cascade_factory="uss_stream_kafka.cli.demo:pima_cascade", **extra,
    )  # fmt: skip


def test_feature_ranges_flow_from_the_flags_to_the_service_config():
    config = _settings("glucose=0:400", "age=18:").service_config()
    assert config.feature_ranges == {"glucose": (0.0, 400.0), "age": (18.0, math.inf)}
    assert config.learned_ranges is True
    assert _settings(no_learned_ranges=True).service_config().learned_ranges is False
    # The variable holds them comma-separated.
    from_variable = _settings(feature_range="glucose=0:400,age=18:").service_config()
    assert from_variable.feature_ranges == config.feature_ranges


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        (("glucose=400:0",), "LO <= HI"),
        (("glucose",), "NAME=LO:HI"),
        (("glucose=a:b",), "NAME=LO:HI"),
        (("glucose=:",), "NAME=LO:HI"),
        (("glucose=0:1", "glucose=0:2"), "given twice"),
    ],
)
def test_bad_feature_ranges_are_refused_naming_the_flag(ranges, message):
    with pytest.raises(ValueError, match=rf"--feature-range \(env USS_KAFKA_FEATURE_RANGE\): .*{message}"):
        _settings(*ranges)


def test_feature_ranges_are_refused_outside_features_mode():
    with pytest.raises(ValueError, match=r"--feature-range .* is for features mode"):
        KafkaSettings("run", bootstrap_servers="b:9092", input_topic="i", output_topic="o", dlq_topic="d",
                      state_topic="s", group_id="g", stage_costs="0,1", feature_range=("x=0:1",))  # fmt: skip
    topics = Topics("in", "out", "dlq", "state")
    with pytest.raises(ValueError, match="feature_ranges needs features mode"):
        ServiceConfig("g", topics, feature_ranges={"x": (0, 1)}).check_processor("outputs")
    with pytest.raises(ValueError, match="low <= high"):
        ServiceConfig("g", topics, feature_ranges={"x": (1, 0)})


def test_the_application_runs_the_processor_with_its_configured_guard(monkeypatch):
    topics = Topics("in", "out", "dlq", "state", labels="labels")
    app = Application(
        ClientConfig("127.0.0.1:1"), group_id="g", topics=topics, http_port=None,
        feature_ranges={"x": (0, 1)}, learned_ranges=False,
    )  # fmt: skip

    class Started(Exception):
        pass

    def set_up() -> None:
        raise Started

    monkeypatch.setattr(app, "_setup", set_up)
    processor = FeaturesProcessor(lr_cascade)
    with pytest.raises(Started):
        app.run(processor)
    learner = app._context.processor.new_learner()
    with pytest.raises(InvalidEvent, match="out_of_range"):
        learner.process(_event(0, 2.0))
    for _ in range(MIN_SEEN):
        learner._guard.accept({"y": 0.5})
    learner._guard.accept({"y": 1e10})  # learned ranges off: only x's declared range is checked
    assert learner._guard.state_dict() == {}
    assert processor.guard.declared == {}  # the caller's processor is left as it was
