"""CascadeClassifier(key=...): one learner per key, the keyed policy's decisions on the stages' outputs.

The stub stages answer a feature's value (``Echo``), so the cascade sees exactly the rows of an
outputs matrix and its depths can be compared with ``KeyedPolicy.run`` on the same rows.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_classifier import Echo

from uss_stream import ActiveCascadeClassifier, CascadeClassifier, Stage
from uss_stream.policies import USSKLUCB, AuditedUSS, KeyedPolicy

COSTS = [0.0, 0.1]


def cascade(**params) -> CascadeClassifier:
    stages = [Stage(Echo(), features=("s1",), cost=COSTS[0]), Stage(Echo(), features=("s2",), cost=COSTS[1])]
    return CascadeClassifier(stages, warm_up=0, **params)


def sites(n: int = 3000, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Site "north"'s stage 1 is reliable (best depth 1), "south"'s is not (best depth 2)."""
    rng = np.random.default_rng(seed)
    keys = rng.choice(["north", "south"], size=n, p=[0.7, 0.3]).tolist()
    truth = rng.integers(0, 2, size=n)
    flip = rng.random(n) < np.where(np.array(keys) == "north", 0.02, 0.4)
    return keys, np.stack([truth ^ flip, truth], axis=1)


def test_each_key_decides_as_the_keyed_policy_on_the_same_outputs():
    keys, outputs = sites()
    model = cascade(key="site")
    depths = [
        model.decide_one({"site": k, "s1": int(a), "s2": int(b)}).depth for k, (a, b) in zip(keys, outputs)
    ]
    assert depths == KeyedPolicy(USSKLUCB(COSTS)).run(keys, outputs).tolist()
    late = np.array(depths[-1000:]), np.array(keys[-1000:])
    assert (late[0][late[1] == "north"] == 1).mean() > 0.9 and (late[0][late[1] == "south"] == 2).mean() > 0.9


def test_the_key_can_be_a_callable_and_a_keyed_policy_sets_the_prior_and_bounds():
    evicted = []
    policy = KeyedPolicy(USSKLUCB(COSTS), prior_strength=0, max_keys=1, on_evict=evicted.append)
    model = cascade(key=lambda x: x["site"].upper(), policy=policy)
    model.decide_one({"site": "a", "s1": 1, "s2": 1})
    model.decide_one({"site": "b", "s1": 1, "s2": 1})
    assert evicted == ["A"] and model.policy_state()["keys"][0]["key"] == "B"
    with pytest.raises(TypeError, match="a KeyedPolicy needs key="):
        cascade(policy=policy)


def test_an_event_without_its_key_is_refused_and_nothing_is_counted():
    model = cascade(key="site")
    model.decide_one({"site": "a", "s1": 1, "s2": 0})
    before = model.policy_state()
    for event in (
        {"s1": 1, "s2": 0},
        {"site": None, "s1": 1, "s2": 0},
        {"site": float("nan"), "s1": 1, "s2": 0},
    ):
        with pytest.raises(ValueError, match="no key"):
            model.decide_one(event)
    assert model.policy_state() == before and model.summary().events == 1


def test_the_state_round_trips_through_json():
    keys, outputs = sites(800)
    events = [{"site": k, "s1": int(a), "s2": int(b)} for k, (a, b) in zip(keys, outputs)]
    model, twin = cascade(key="site"), cascade(key="site")
    for event in events[:500]:
        model.decide_one(event)
    twin.load_policy_state(json.loads(json.dumps(model.policy_state())))
    assert [model.decide_one(e).depth for e in events[500:]] == [
        twin.decide_one(e).depth for e in events[500:]
    ]


def test_the_summary_names_the_keys_that_differ_from_the_pool_and_their_verdicts():
    keys, outputs = sites(4000, seed=1)
    model = cascade(key="site")
    for key, (a, b) in zip(keys, outputs):
        event = {"site": key, "s1": int(a), "s2": int(b)}
        model.decide_one(event)
        model.learn_one(event, int(b))  # stage 2 is always right
    summary = model.summary()
    assert summary.keys_active == 2 and sum(summary.key_depths) == 2
    pool_depth = summary.next_depth
    assert {"north": 1, "south": 2}[summary.keys["key"].item()] != pool_depth
    state = model.learning_state()
    assert state["keys_active"] == 2 and state["policy_round"] == 4000
    keyed = model._keyed
    assert (
        keyed.label_evidence("south").labels + keyed.label_evidence("north").labels
        == keyed.label_evidence().labels
    )
    assert keyed.wd_report("south").best_depth == 2 and keyed.wd_report("north").best_depth == 1
    assert "2 keys" in str(summary)


def test_an_active_keyed_cascade_gives_each_keys_learner_the_labels_it_asked_for():
    stages = [Stage(Echo(), features=("s1",), cost=0.0), Stage(Echo(), features=("s2",), cost=0.5)]
    model = ActiveCascadeClassifier(stages, policy=AuditedUSS([0.0, 0.5]), warm_up=0, key="site")
    asked = 0
    for n in range(40):
        event = {"site": f"k{n % 2}", "s1": 0, "s2": 1}
        _, ask = model.predict_one(event)
        if ask:
            asked += 1
            model.learn_one(event, 1)
    learners = [model._keyed.learner(key) for key in ("k0", "k1")]
    assert asked > 0 and sum(learner.labels_received for learner in learners) == asked
    assert model.learning_state()["labels_answered_total"] == asked
