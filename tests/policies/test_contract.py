"""The contract every policy keeps, checked on every policy and each of its ``_unit_test_params``.

* ``decide_many`` returns what ``select`` returns, on states the policy actually reached (a random
  cascade drives the select/update loop; every checkpoint's counts form one row of one batch);
* ``clone`` is an untrained copy with the same parameters and ``repr`` evaluates back to it;
* the learned state survives a JSON round trip: the restored policy decides as the original;
* bad input raises ``ValueError`` naming the offending parameter, and changes nothing.

New policies are found by walking :class:`~uss_stream.policies.Policy`'s subclasses, so a policy
added to the package is checked without editing this file.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import uss_stream.policies
from uss_stream.policies import Policy, SupervisedUCB
from uss_stream.stats import DisagreementStats


def _concrete_policies(root: type[Policy] = Policy) -> Iterator[type[Policy]]:
    for cls in root.__subclasses__():
        if not inspect.isabstract(cls) and cls.__module__.startswith("uss_stream."):
            yield cls
        yield from _concrete_policies(cls)


POLICIES = sorted(set(_concrete_policies()), key=lambda cls: cls.__name__)
CASES = [
    pytest.param(cls, params, id=f"{cls.__name__}-{i}")
    for cls in POLICIES
    for i, params in enumerate(cls._unit_test_params() if hasattr(cls, "_unit_test_params") else [None])
]

#: Bad values per constructor parameter; each must raise a ValueError whose message names it.
BAD_VALUES: dict[str, list[Any]] = {
    "stage_costs": [[], [0.0, -0.1], [0.0, float("nan")], [0.0, float("inf")]],
    "alpha": [0.0, -1.0, float("nan")],
    "discount": [0.0, 1.0, 1.5, -0.5, float("nan")],
    "depth": [0, -1, 1.5],
    "seed": [1.5, "seven", True],
    "error_rates": [[0.1], [1.5, 0.1], [-0.1, 0.1]],
}


def _trajectory(policy: Policy, steps: int, seed: int, flip: float = 0.4) -> tuple[list[tuple], list[int]]:
    """Drive ``policy`` on a random cascade; the state before each decision and the decision made.

    Stage ``j`` flips the label with probability ``flip / (j + 1)``, so disagreements and errors
    both occur. The state is read from the policy's own counts, as the replay engine reads them.
    """
    if getattr(policy, "sequential", False):
        pytest.skip(f"{type(policy).__name__} decides stage by stage (begin/step): there is no select()")
    rng = np.random.default_rng(seed)
    k = policy.n_stages
    states, depths = [], []
    for _ in range(steps):
        stats = policy.stats
        errors = policy.errors if isinstance(policy, SupervisedUCB) else [0] * k
        disagreements = [list(row) for row in stats.disagreements]
        states.append((stats.decisions + 1, list(stats.queried), disagreements, errors))
        depth = policy.select()
        depths.append(depth)
        label = int(rng.integers(0, 2))
        flips = rng.random(k) < flip / np.arange(1, k + 1)
        outputs = [label ^ int(flipped) for flipped in flips][:depth]
        _update(policy, outputs, label)
    return states, depths


def _update(policy: Policy, outputs: list[int], label: int) -> None:
    if isinstance(policy, SupervisedUCB):
        policy.update(outputs, label=label)
    else:
        policy.update(outputs)


def _reached_states(template: Policy) -> tuple[list[tuple], list[int]]:
    """States of fresh clones on cascades from near agreement (shallow is best) to strong disagreement."""
    states, depths = [], []
    for seed, flip in enumerate((0.02, 0.1, 0.4, 0.8)):
        more_states, more_depths = _trajectory(template.clone(), steps=300, seed=seed, flip=flip)
        states += more_states
        depths += more_depths
    return states, depths


def _need_params(params: dict[str, Any] | None) -> dict[str, Any]:
    assert params is not None, "every policy defines _unit_test_params (River style)"
    return params


@pytest.mark.parametrize(("cls", "params"), CASES)
def test_decide_many_equals_select_on_reached_states(cls: type[Policy], params: dict | None) -> None:
    policy = cls(**_need_params(params))
    states, depths = _reached_states(policy)
    rounds, queried, disagreements, errors = (np.array(column) for column in zip(*states))
    if cls.__name__ not in ("FixedDepth", "Oracle"):
        assert len(set(depths)) > 1, "the states reached cover more than one decision"
    many = policy.decide_many(rounds, queried, disagreements, errors)
    assert many.tolist() == depths
    for t in (0, len(states) // 2, len(states) - 1):  # a batch of one is the service's case
        row = slice(t, t + 1)
        one = policy.decide_many(rounds[row], queried[row], disagreements[row], errors[row])
        assert one.tolist() == [depths[t]]


@pytest.mark.parametrize(("cls", "params"), CASES)
def test_clone_and_repr_round_trip(cls: type[Policy], params: dict | None) -> None:
    params = _need_params(params)
    policy = cls(**params)
    for name, value in params.items():
        assert getattr(policy, name) == value, f"{name} is stored under its init name"
    _trajectory(policy, steps=30, seed=1)
    fresh = policy.clone()
    assert type(fresh) is cls and fresh is not policy
    assert repr(fresh) == repr(policy)
    assert fresh.stats.decisions == 0 and policy.stats.decisions == 30
    namespace = {c.__name__: c for c in POLICIES} | {"inf": math.inf, "nan": math.nan}
    rebuilt = eval(repr(policy), namespace)
    assert type(rebuilt) is cls and repr(rebuilt) == repr(policy)
    # the same decisions from the same events: parameters and nothing else make a policy
    assert _trajectory(rebuilt, 60, seed=2)[1] == _trajectory(fresh, 60, seed=2)[1]


@pytest.mark.parametrize(("cls", "params"), CASES)
def test_state_survives_a_json_round_trip(cls: type[Policy], params: dict | None) -> None:
    policy = cls(**_need_params(params))
    _trajectory(policy, steps=150, seed=3)
    document = json.loads(json.dumps(policy.state_dict()))
    restored = policy.clone()
    restored.load_state_dict(document)
    assert restored.state_dict() == policy.state_dict()
    assert _trajectory(restored, 100, seed=4)[1] == _trajectory(policy, 100, seed=4)[1]


@pytest.mark.parametrize(("cls", "params"), CASES)
def test_bad_input_raises_value_error_naming_the_parameter(cls: type[Policy], params: dict | None) -> None:
    params = _need_params(params)
    signature = inspect.signature(cls.__init__).parameters
    checked = 0
    for name, bad_values in BAD_VALUES.items():
        if name not in signature:
            continue
        for bad in bad_values:
            with pytest.raises(ValueError, match=name):
                cls(**{**params, name: bad})
            checked += 1
    assert checked, f"{cls.__name__} has none of the parameters checked here: add its bad values"
    policy = cls(**params)
    _trajectory(policy, steps=20, seed=5)
    before = policy.state_dict()
    wrong_policy = {**before, "policy": "NotAPolicy"}
    with pytest.raises(ValueError, match="NotAPolicy"):
        policy.load_state_dict(wrong_policy)
    wrong_shape = {**before, "stats": DisagreementStats(policy.n_stages + 1, policy.discount).to_dict()}
    with pytest.raises(ValueError, match=r"stages|counts"):
        policy.load_state_dict(wrong_shape)
    assert policy.state_dict() == before, "a rejected document changes nothing"
    depth = policy.select()
    with pytest.raises(ValueError, match="outputs"):
        _update(policy, [0] * (depth + 1), label=0)
    with pytest.raises(ValueError, match="no parameter"):
        policy.clone(not_a_parameter=1)


def test_every_exported_policy_is_checked() -> None:
    exported = {getattr(uss_stream.policies, name) for name in uss_stream.policies.__all__} - {Policy}
    assert exported <= set(POLICIES)
    assert len(CASES) >= len(POLICIES)


@pytest.mark.parametrize(("cls", "params"), CASES)
def test_supervised_capability_says_who_reads_error_counts(cls: type[Policy], params: dict | None) -> None:
    """``_supervised`` (River's capability flag) is what the replay reads, not the policy's class."""
    policy = cls(**_need_params(params))
    assert isinstance(policy._supervised, bool)
    states, depths = _reached_states(policy)
    rounds, queried, disagreements, errors = (np.array(column) for column in zip(*states))
    if policy._supervised:
        with pytest.raises(ValueError, match="error counts"):
            policy.decide_many(rounds, queried, disagreements, None)
    else:
        scrambled = np.random.default_rng(0).integers(0, 50, errors.shape)
        assert policy.decide_many(rounds, queried, disagreements, None).tolist() == depths
        assert policy.decide_many(rounds, queried, disagreements, scrambled).tolist() == depths
