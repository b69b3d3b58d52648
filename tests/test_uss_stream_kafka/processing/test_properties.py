"""Hypothesis where it matters: the event codec on floats, NaN, infinities and deep nesting, and the
batch decider on non-i.i.d. streams against the one-at-a-time ``select``/``update`` loop.

The expectations are written here from the wire format's rules (``events.py``'s module docstring:
an output is a string, a boolean, an integer or a finite number; a null or NaN output is missing),
not read from the codec.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uss_stream.policies import USSUCB, Hanawal2017WD
from uss_stream.policies.batch import decide_batch, pair_disagreements
from uss_stream.policies.kernel import pair_order
from uss_stream_kafka import InvalidEvent
from uss_stream_kafka.processing.events import FeaturesCodec, OutputsCodec, _parse

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
)
#: Any JSON document Python's json module writes (NaN and infinities as NaN / Infinity).
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


def nested(depth: int, kind: str) -> bytes:
    """A value nested ``depth`` levels deep: arrays or objects."""
    if kind == "array":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def same(a: Any, b: Any) -> bool:
    """Equality that counts NaN equal to NaN (and tells 1, 1.0 and True apart)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and type(a) is type(b)


def _not_strict_json(name: str) -> Any:
    raise AssertionError(f"{name} in a decision: not strict JSON")


def output_verdict(value: Any) -> str | None:
    """The rule for one stage output: ``None`` (valid) or the reason it is rejected."""
    if value is None or (type(value) is float and math.isnan(value)):
        return "missing_output"
    if type(value) in (int, str, bool) or (type(value) is float and math.isfinite(value)):
        return None
    return "wrong_type"


def feature_verdict(value: Any) -> str | None:
    """The rule for one numeric-or-text feature: an output's rule, and a number within ±1e100
    (docs/kafka.md: a numeric feature beyond ±1e100 is ``wrong_type``)."""
    verdict = output_verdict(value)
    if verdict is None and type(value) in (int, float) and abs(value) > 1e100:
        return "wrong_type"
    return verdict


@settings(max_examples=300, deadline=None)
@given(DOCUMENTS)
def test_parse_is_json_loads_including_nan_and_infinities(document):
    value = json.dumps(document).encode()
    assert same(_parse(value), json.loads(value))


def nesting_of(document: Any) -> tuple[int, Any]:
    """``(depth, innermost value)`` of a value nested in one-element arrays / objects (iteratively)."""
    depth = 0
    while isinstance(document, (list, dict)):
        document = document[0] if isinstance(document, list) else document["a"]
        depth += 1
    return depth, document


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(1, 200_000), kind=st.sampled_from(["array", "object"]))
def test_any_nesting_depth_decodes_or_is_rejected_as_invalid_json(depth, kind):
    # json's decoder recurses: how deep it gets depends on the interpreter's recursion limit and on
    # the stack depth of the call, so the rule is: shallow values decode exactly, values deeper than
    # the recursion limit are rejected as invalid_json, and nothing else ever escapes.
    value = nested(depth, kind)
    try:
        parsed = _parse(value)
    except InvalidEvent as error:
        assert error.reason == "invalid_json"
        assert depth > 100
    else:
        assert nesting_of(parsed) == (depth, 1)
        assert depth <= sys.getrecursionlimit()
    event = b'{"id": 1, "outputs": [1, ' + value + b", 1]}"
    with pytest.raises(InvalidEvent) as caught:
        OutputsCodec(3, [0.0, 0.1, 0.2]).decode(event)
    assert caught.value.reason in ("wrong_type", "invalid_json")
    with pytest.raises(InvalidEvent) as caught:
        FeaturesCodec().decode(b'{"id": 1, "features": {"x": ' + value + b"}}")
    assert caught.value.reason in ("wrong_type", "invalid_json")


@settings(max_examples=400, deadline=None)
@given(
    event_id=st.one_of(st.text(max_size=8), st.integers(-(2**70), 2**70)),
    outputs=st.lists(DOCUMENTS, min_size=3, max_size=3),
)
def test_outputs_are_accepted_exactly_when_every_one_is_a_finite_label(event_id, outputs):
    codec = OutputsCodec(3, [0.0, 0.15, 0.35])
    value = json.dumps({"id": event_id, "outputs": outputs}).encode()
    verdicts = [output_verdict(output) for output in outputs]
    first_error = next((verdict for verdict in verdicts if verdict is not None), None)
    if first_error is None:
        decoded_id, decoded = codec.decode(value)
        assert decoded_id == event_id and all(same(a, b) for a, b in zip(decoded, outputs))
        # Every accepted event's decision is strict JSON (no NaN / Infinity) with its values back.
        for depth in (1, 2, 3):
            payload = codec.encode(decoded_id, depth, decoded[depth - 1])
            document = json.loads(payload, parse_constant=_not_strict_json)
            assert document["id"] == event_id and same(document["prediction"], outputs[depth - 1])
            assert document["cost"] == [0.0, 0.15, 0.35][depth - 1]
    else:
        with pytest.raises(InvalidEvent) as caught:
            codec.decode(value)
        assert caught.value.reason == first_error


@pytest.mark.parametrize(
    "value, accepted",
    [
        (1e100, True),
        (-1e100, True),
        (math.nextafter(1e100, math.inf), False),
        (math.nextafter(-1e100, -math.inf), False),
        # The bound is the float 1e100, compared exactly: 10**100 + 1 is below it, int(1e100) + 1 past it.
        (10**100 + 1, True),
        (int(1e100), True),
        (int(1e100) + 1, False),
        (-int(1e100) - 1, False),
    ],
    ids=["1e100", "-1e100", "next float", "next float below", "10**100+1", "int(1e100)", "past", "-past"],
)
def test_a_numeric_feature_is_taken_up_to_1e100_in_magnitude_and_refused_just_past_it(value, accepted):
    value_bytes = json.dumps({"id": "e", "features": {"x": value}}).encode()
    if accepted:
        assert FeaturesCodec().decode(value_bytes)[1] == {"x": value}
    else:
        with pytest.raises(InvalidEvent) as caught:
            FeaturesCodec().decode(value_bytes)
        assert caught.value.reason == "wrong_type" and "within ±1e100" in str(caught.value)


@settings(max_examples=300, deadline=None)
@given(
    features=st.dictionaries(
        st.text(max_size=4),
        DOCUMENTS | st.sampled_from([1e100, math.nextafter(1e100, math.inf), int(1e100), int(1e100) + 1]),
        max_size=5,
    ),
    label=SCALARS,
)
def test_features_are_accepted_exactly_when_every_value_is_a_finite_scalar(features, label):
    codec = FeaturesCodec()
    value = json.dumps({"id": "e", "features": features, "label": label}).encode()
    bad = [
        name
        for name, feature in features.items()
        if feature is not None and feature_verdict(feature) is not None
    ]
    if bad:
        with pytest.raises(InvalidEvent) as caught:
            codec.decode(value)
        assert caught.value.reason == "wrong_type"
        return
    event_id, decoded = codec.decode(value)
    assert event_id == "e"
    assert decoded.keys() == {name for name, feature in features.items() if feature is not None}
    assert all(same(decoded[name], features[name]) for name in decoded)
    verdict = output_verdict(label)
    if verdict is None:
        assert same(codec.decode_label(value)[1], label)
    else:
        with pytest.raises(InvalidEvent) as caught:
            codec.decode_label(value)
        assert caught.value.reason == {"missing_output": "missing_field", "wrong_type": "wrong_type"}[verdict]


# -- the batch decider on non-i.i.d. streams ----------------------------------------------------------
def regime_switching(seed: int, n: int, k: int, switch: float, labels: int) -> list[list[int]]:
    """Outputs whose error rates follow a two-state Markov chain (sticky regimes), ``labels`` classes."""
    rng = np.random.default_rng(seed)
    regimes = [rng.uniform(0.0, 0.5, k), rng.uniform(0.0, 0.1, k)]
    regimes[0][-1] = regimes[1][-1] = 0.0
    truth = rng.integers(0, labels, n)
    state = 0
    rows = []
    for t in range(n):
        if rng.random() < switch:
            state = 1 - state
        wrong = rng.random(k) < regimes[state]
        shift = rng.integers(1, labels, k) if labels > 1 else np.zeros(k, dtype=np.int64)
        rows.append(((truth[t] + wrong * shift) % labels).tolist())
    return rows


def blocks(seed: int, n: int, k: int) -> list[list[int]]:
    """Long runs of one repeated row, then an abrupt change: speculation windows grow, then break."""
    rng = np.random.default_rng(seed)
    rows: list[list[int]] = []
    while len(rows) < n:
        rows += [rng.integers(0, 2, k).tolist()] * int(rng.integers(1, 1_500))
    return rows[:n]


def loop_depths(policy: Any, rows: list[list[int]]) -> list[int]:
    depths = []
    for row in rows:
        depth = policy.select()
        policy.update(row[:depth])
        depths.append(depth)
    return depths


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["markov", "blocks"]),
    n_stages=st.integers(2, 5),
    n=st.integers(1, 6_000),
    warm=st.integers(0, 400),
    switch=st.sampled_from([0.0005, 0.01, 0.2]),
    labels=st.integers(1, 3),
    rule=st.sampled_from(["uss-ucb", "uss-ucb alpha 2", "algorithm 2"]),
    guess=st.integers(1, 5),
    data=st.data(),
)
def test_batched_depths_equal_the_loop_on_non_iid_streams(
    seed, kind, n_stages, n, warm, switch, labels, rule, guess, data
):
    rows = (
        regime_switching(seed, warm + n, n_stages, switch, labels)
        if kind == "markov"
        else blocks(seed, warm + n, n_stages)
    )
    costs = data.draw(st.lists(st.sampled_from([0.0, 0.02, 0.1, 0.3]), min_size=n_stages, max_size=n_stages))

    def new() -> Any:
        if rule == "algorithm 2":
            return Hanawal2017WD(costs)
        return USSUCB(costs, alpha=2.0 if rule.endswith("2") else 0.51)

    looped, batched = new(), new()
    expected = loop_depths(looped, rows)
    loop_depths(batched, rows[:warm])
    flat = [value for row in rows[warm:] for value in row]
    assert decide_batch(batched, flat, guess=min(guess, n_stages)) == expected[warm:]
    assert batched.state_dict() == looped.state_dict()


@settings(max_examples=300, deadline=None)
@given(
    n_stages=st.integers(2, 4),
    data=st.data(),
    label=st.sampled_from(
        [
            st.integers(0, 1),
            st.integers(0, 255) | st.booleans(),
            st.integers(-300, 300) | st.booleans(),
            st.integers(-(2**70), 2**70),
            st.integers(0, 2) | st.booleans() | st.floats(0, 2) | st.sampled_from(["0", "1", ""]),
        ]
    ),
)
def test_disagreements_are_python_inequality_whatever_the_labels(n_stages, data, label):
    """Labels in 0..255 are read as bytes, others converted: either way ``a != b`` as Python says."""
    rows = data.draw(st.lists(st.lists(label, min_size=n_stages, max_size=n_stages), min_size=1, max_size=40))
    flat = [value for row in rows for value in row]
    pairs = list(zip(*(a.tolist() for a in pair_order(n_stages))))
    expected = [[int(row[i] != row[j]) for i, j in pairs] for row in rows]
    assert pair_disagreements(flat, n_stages).tolist() == expected


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.bool_])
def test_disagreements_of_a_numpy_array_are_those_of_its_list(dtype):
    """``decide_batch`` takes any sequence: an array's values count, not the bytes of its memory."""
    rng = np.random.default_rng(3)
    flat = rng.integers(0, 2, 3 * 500).astype(dtype)
    assert pair_disagreements(flat, 3).tolist() == pair_disagreements(flat.tolist(), 3).tolist()
    batched, looped = USSUCB([0, 0.15, 0.2]), USSUCB([0, 0.15, 0.2])
    assert decide_batch(batched, flat) == looped.run(flat.reshape(-1, 3)).tolist()
