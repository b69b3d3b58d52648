"""The batch codec of outputs mode: msgspec's fast path never changes a decision or a dead-letter reason.

``OutputsCodec.decode_many`` decodes with msgspec and falls back to ``json.loads`` wherever msgspec
refuses or might disagree. The expectations here come from ``json.loads`` and the event rules as
written in ``uss_stream_kafka.processing.events``' docstring, implemented again below (never from the codec),
and from the codec's own one-value path, which the batch must match record for record.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uss_stream.core.forgetting import EffectiveHorizon, effective_horizon
from uss_stream.rules.confidence import LogExploration
from uss_stream_kafka.processing.events import InvalidEvent, OutputsCodec

K = 3
COSTS = [0.0, 0.15, 0.35]
BIG = 2**70  # beyond 64 bits


def reference(value: bytes | None, max_bytes: int = 1 << 20) -> tuple[str, Any]:
    """``("ok", (id, outputs))`` or ``("rejected", reason)``: json.loads and the documented rules."""
    if value is not None and len(value) > max_bytes:
        return "rejected", "oversize"
    if value is None:
        return "rejected", "invalid_json"
    try:
        document = json.loads(value)
    except (ValueError, RecursionError):
        return "rejected", "invalid_json"
    if type(document) is not dict:
        return "rejected", "wrong_type"
    event_id = document.get("id")
    if event_id is None:
        return "rejected", "missing_field"
    if type(event_id) not in (str, int):
        return "rejected", "wrong_type"
    outputs = document.get("outputs")
    if outputs is None:
        return "rejected", "missing_field"
    if type(outputs) is not list:
        return "rejected", "wrong_type"
    if len(outputs) != K:
        return "rejected", "wrong_output_count"
    for output in outputs:
        if output is None or (type(output) is float and math.isnan(output)):
            return "rejected", "missing_output"
        if not (type(output) in (int, str, bool) or (type(output) is float and math.isfinite(output))):
            return "rejected", "wrong_type"
    return "ok", (event_id, outputs)


def batch_verdicts(values: list[bytes | None], max_bytes: int = 1 << 20) -> list[tuple[str, Any]]:
    positions, ids, outputs, errors = OutputsCodec(K, COSTS).decode_many(values, max_bytes)
    assert len(outputs) == K * len(positions) and len(ids) == len(positions)
    verdicts: list[tuple[str, Any]] = [("rejected", e.reason) if e else ("?", None) for e in errors]
    for n, position in enumerate(positions):
        assert errors[position] is None
        verdicts[position] = ("ok", (ids[n], outputs[n * K : (n + 1) * K]))
    assert all(kind != "?" for kind, _ in verdicts), "a value neither decided nor rejected"
    return verdicts


def typed(verdict: tuple[str, Any]) -> Any:
    """A verdict with the type of every id and output (1, 1.0 and True are different labels)."""
    kind, payload = verdict
    if kind != "ok":
        return verdict
    event_id, outputs = payload
    return kind, (type(event_id), event_id), [(type(o), o) for o in outputs]


def one_by_one(values: list[bytes | None], max_bytes: int = 1 << 20) -> list[Any]:
    """The codec's exact path per value: (id, outputs) or the full InvalidEvent message."""
    codec = OutputsCodec(K, COSTS)
    results = []
    for value in values:
        if value is not None and len(value) > max_bytes:
            results.append("oversize")
            continue
        try:
            results.append(typed(("ok", codec.decode(value))))
        except InvalidEvent as error:
            results.append(str(error))
    return results


def check(values: list[bytes | None], max_bytes: int = 1 << 20) -> None:
    batch = batch_verdicts(values, max_bytes)
    assert [typed(v) for v in batch] == [typed(reference(v, max_bytes)) for v in values]
    # ... and the details of every dead letter are those of the one-value path.
    _, _, _, errors = OutputsCodec(K, COSTS).decode_many(values, max_bytes)
    expected = one_by_one(values, max_bytes)
    for n, error in enumerate(errors):
        if error is not None and error.reason != "oversize":
            assert str(error) == expected[n]


# Labels and ids the fast decoder and json.loads are most likely to read differently.
LABELS = st.one_of(
    st.integers(-3, 3),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([BIG, -BIG, 2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64, 0, -0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 5e-324]),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.sampled_from(["\ud800", "\udfff", "é", "\x00", "\x7f", '"', "\\", "\u2028"]),
    st.lists(st.integers(0, 1), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(0, 1), max_size=1),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def events(draw: st.DrawFn) -> bytes:
    document: dict[str, Any] = {}
    if draw(st.booleans()) or draw(st.booleans()):
        document["id"] = draw(st.one_of(st.text(max_size=6), st.integers(-(2**70), 2**70), LABELS))
    if draw(st.booleans()) or draw(st.booleans()):
        count = draw(st.sampled_from([K, K, K, K - 1, K + 1, 0]))
        document["outputs"] = draw(st.lists(LABELS, min_size=count, max_size=count))
    for _ in range(draw(st.integers(0, 2))):
        document[draw(st.text(max_size=3))] = draw(JSON)
    text = json.dumps(document, ensure_ascii=draw(st.booleans()), allow_nan=True)
    # A duplicated key (the last one wins in json.loads) and surrounding whitespace.
    if draw(st.booleans()) and len(text) > 2:
        key = draw(st.sampled_from(["id", "outputs", "i\\u0064", "x"]))
        text = text[:-1] + (", " if len(text) > 2 else "") + f'"{key}": ' + json.dumps(draw(LABELS)) + "}"
    text = draw(st.sampled_from(["", " ", "\n"])) + text + draw(st.sampled_from(["", " ", "\t"]))
    value = text.encode("utf-8", "surrogatepass")
    mutation = draw(st.sampled_from(["none"] * 6 + ["invalid_utf8", "truncate", "utf16", "bom", "trailing"]))
    if mutation == "invalid_utf8":
        at = draw(st.integers(0, len(value)))
        value = (
            value[:at]
            + draw(st.sampled_from([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]))
            + value[at:]
        )
    elif mutation == "truncate":
        value = value[: draw(st.integers(0, len(value)))]
    elif mutation == "utf16":
        value = text.encode("utf-16-le", "surrogatepass")
    elif mutation == "bom":
        value = b"\xef\xbb\xbf" + value
    elif mutation == "trailing":
        value += draw(st.sampled_from([b"x", b",", b" 1", b"}"]))
    return value


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(events(), min_size=1, max_size=8))
def test_decode_many_is_json_loads_and_the_rules_on_tricky_events(values):
    check(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=5))
def test_decode_many_on_arbitrary_bytes(values):
    check(values)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # msgspec refuses, json.loads accepts: decided or rejected as json.loads reads it.
        (b'{"id": 1, "outputs": [1, NaN, 1]}', ("rejected", "missing_output")),
        (b'{"id": 1, "outputs": [1, Infinity, 1]}', ("rejected", "wrong_type")),
        (b'{"id": 1, "outputs": [1, 1e400, 1]}', ("rejected", "wrong_type")),
        (b'{"id": 1, "outputs": [1, 0, 1], "x": NaN}', ("ok", (1, [1, 0, 1]))),
        (b'{"id": "\\ud800", "outputs": [1, 0, 1]}', ("ok", ("\ud800", [1, 0, 1]))),
        (b'{"id": 1, "outputs": [1, 0, 1], "x": "\\udfff"}', ("ok", (1, [1, 0, 1]))),
        (b'\xef\xbb\xbf{"id": 1, "outputs": [1, 0, 1]}', ("ok", (1, [1, 0, 1]))),
        ('{"id": 1, "outputs": [1, 0, 1]}'.encode("utf-16"), ("ok", (1, [1, 0, 1]))),
        # msgspec accepts the fields it reads but does not check the UTF-8 of those it skips.
        (b'{"id": 1, "outputs": [1, 0, 1], "x": "\xff"}', ("rejected", "invalid_json")),
        (b'{"id": 1, "outputs": [1, 0, 1], "x": "\xc0\x80"}', ("rejected", "invalid_json")),
        # Integers beyond 64 bits stay exact integers; duplicate keys: the last wins.
        (b'{"id": %d, "outputs": [%d, 0, 1]}' % (BIG, -BIG), ("ok", (BIG, [-BIG, 0, 1]))),
        (b'{"id": 1, "outputs": [1, 0, 1], "outputs": [1, 0]}', ("rejected", "wrong_output_count")),
        (b'{"id": 1, "outputs": [1, 0], "outputs": [1, 0, 1]}', ("ok", (1, [1, 0, 1]))),
        (b'{"id": true, "outputs": [1, 0, 1]}', ("rejected", "wrong_type")),
        (b'{"id": 1.0, "outputs": [1, 0, 1]}', ("rejected", "wrong_type")),
        (b'{"i\\u0064": "a", "outputs": [true, 1, 1.0]}', ("ok", ("a", [True, 1, 1.0]))),
        (b'{"id": "a", "outputs": [1, null, 1]}', ("rejected", "missing_output")),
        (None, ("rejected", "invalid_json")),
    ],
)
def test_decode_many_where_the_decoders_differ(value, expected):
    assert typed(batch_verdicts([value])[0]) == typed(expected) == typed(reference(value))
    check([value, b'{"id": "z", "outputs": [0, 0, 0]}'])


@pytest.mark.parametrize("depth", [10, 200, 255, 256, 400, 990, 999, 1000, 5000])
@pytest.mark.parametrize("kind", ["array", "object"])
def test_deep_nesting_in_an_ignored_field_takes_the_exact_path(depth, kind):
    inner = b"[" * depth + b"]" * depth if kind == "array" else b'{"a":' * depth + b"1" + b"}" * depth
    value = b'{"id": 1, "outputs": [1, 0, 1], "x": ' + inner + b"}"
    verdict = batch_verdicts([value])[0]
    if depth < 256:  # far from any recursion limit: decoded
        assert verdict == ("ok", (1, [1, 0, 1]))
    else:  # json.loads decides, from the stack the service calls it at: decoded or invalid_json
        assert verdict in (("ok", (1, [1, 0, 1])), ("rejected", "invalid_json"))
    if depth >= 1000:  # deeper than the interpreter's recursion limit
        assert verdict == ("rejected", "invalid_json")


def test_oversize_is_checked_before_decoding():
    small, large = (
        b'{"id": 1, "outputs": [1, 0, 1]}',
        b'{"id": 2, "outputs": [1, 0, 1], "p": "' + b"x" * 50 + b'"}',
    )
    verdicts = batch_verdicts([small, large, None], max_bytes=40)
    assert verdicts == [("ok", (1, [1, 0, 1])), ("rejected", "oversize"), ("rejected", "invalid_json")]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.text(max_size=5), st.integers(-(2**70), 2**70)),
            st.integers(1, K),
            st.lists(
                st.one_of(
                    st.integers(-(2**70), 2**70),
                    st.booleans(),
                    st.text(max_size=3),
                    st.floats(allow_nan=False, allow_infinity=False),
                ),
                min_size=K,
                max_size=K,
            ),
        ),
        max_size=20,
    )
)
def test_encode_many_writes_each_decision_as_strict_ascii_json(decisions):
    codec = OutputsCodec(K, COSTS)
    ids = [d[0] for d in decisions]
    depths = [d[1] for d in decisions]
    flat = [o for d in decisions for o in d[2]]
    payloads = codec.encode_many(ids, depths, flat)
    assert payloads == [codec.encode(i, depth, row[depth - 1]) for i, depth, row in decisions]
    for payload, (event_id, depth, row) in zip(payloads, decisions):
        assert payload.isascii()
        decoded = json.loads(payload, parse_constant=lambda name: pytest.fail(f"{name} is not strict JSON"))
        assert list(decoded) == ["id", "depth", "prediction", "cost"]
        assert typed(("ok", (decoded["id"], [decoded["prediction"]]))) == typed(
            ("ok", (event_id, [row[depth - 1]]))
        )
        assert decoded["depth"] == depth and decoded["cost"] == COSTS[depth - 1]


@pytest.mark.parametrize("discount", [None, 0.5, 0.999])
def test_horizon_and_log_tables_equal_the_scalar_functions_as_a_stream_grows(discount):
    horizon, log_f = EffectiveHorizon(discount), LogExploration(discount=discount)
    start = 1
    for size in [1, 3, 2, 50, 7, 400, 5000, 1]:
        rounds = [*range(start, start + size), 1, start]
        expected = [effective_horizon(t, discount) for t in rounds]
        assert horizon.many(np.array(rounds)).tolist() == expected
        logs = log_f.many(np.array(rounds)).tolist()
        assert logs == [math.log(h) for h in expected]
        start += size


# -- long batches: one bad value among good ones, values that join into events -------------------------
GOOD = [
    json.dumps({"id": f"g{i}", "outputs": [i % 2, 1, i % 3]}, separators=(",", ":")).encode()
    for i in range(64)
]
#: Bad values and the reason each gets alone, as ``json.loads`` and the documented rules read it.
POISON = [
    (b'{"id":"p","outputs":[1,NaN,1]}', "missing_output"),
    (b'{"id":"p","outputs":[1,0]}', "wrong_output_count"),
    (b'{"id":"p","outputs":[1,0,1]', "invalid_json"),
    (b'{"id":true,"outputs":[1,0,1]}', "wrong_type"),
    (b'{"outputs":[1,0,1]}', "missing_field"),
    (b'{"id":"p","outputs":[1,null,1]}', "missing_output"),
    (b'{"id":"p\x00","outputs":[1,0,1]}', "invalid_json"),
    (b"[1,0,1]", "wrong_type"),
    (None, "invalid_json"),
]


@pytest.mark.parametrize(("poison", "reason"), POISON)
@pytest.mark.parametrize("at", [0, 1, 31, 32, 63])
def test_one_poison_value_among_good_ones_is_dead_lettered_alone(poison, reason, at):
    values: list[bytes | None] = list(GOOD)
    values[at] = poison
    positions, ids, outputs, errors = OutputsCodec(K, COSTS).decode_many(values, 1 << 20)
    assert positions == [i for i in range(64) if i != at]
    assert ids == [f"g{i}" for i in positions]
    assert outputs == [o for i in positions for o in (i % 2, 1, i % 3)]
    assert [e is None for e in errors] == [i != at for i in range(64)]
    assert errors[at].reason == reason == reference(poison)[1]
    assert str(errors[at]) == one_by_one([poison])[0]


def test_values_that_are_halves_of_events_are_not_read_as_the_events_they_join_into():
    # Joined by a comma, each pair reads as two valid events; alone, each value is invalid JSON.
    pairs = [
        (b'{"id":"a","outputs":[1,0,1]},{"id":"b","outputs":[1,0', b"1]}"),
        (b'{"id":"a","outputs":[1,0,1]},{"id":"b","outputs":[1,0', b'{"x":1}]}'),
        (b'{"id":"a","x":"}', b'{","outputs":[1,0,1]}'),
        (b'{"id":"a","outputs":[1,0,1],"x":"', b'"}'),
        (b'{"id":"a","outputs":[1,0,1]} {"id":"b","outputs":[1,0,1]}', b'{"id":"c","outputs":[1,0,1]}'),
    ]
    for first, second in pairs:
        values = [*GOOD[:10], first, second, *GOOD[10:20]]
        check(values)
        verdicts = batch_verdicts(values)
        assert [verdicts[10][0], verdicts[11][0]] == [reference(first)[0], reference(second)[0]]
        assert verdicts[10] == ("rejected", "invalid_json")


@st.composite
def mostly_good_batches(draw: st.DrawFn) -> list[bytes | None]:
    """Compact valid events (msgspec's fast path takes them), some replaced by tricky ones or re-cut."""
    count = draw(st.integers(8, 40))
    values: list[bytes | None] = [
        json.dumps(
            {
                "id": draw(st.one_of(st.text(max_size=4), st.integers(-(2**70), 2**70))),
                "outputs": [i % 2, 1, 0],
            },
            separators=(",", ":"),
            ensure_ascii=draw(st.booleans()),
        ).encode("utf-8", "surrogatepass")
        for i in range(count)
    ]
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, count - 1))
        if draw(st.booleans()):
            values[at] = draw(events())
        elif at + 1 < count:  # two neighbours cut elsewhere: their text joined by a comma is unchanged
            text = values[at] + b"," + values[at + 1]
            cut = draw(st.integers(0, len(text)))
            values[at], values[at + 1] = text[:cut], text[cut + 1 :] if cut < len(text) else b""
    return values


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mostly_good_batches())
def test_decode_many_of_mostly_good_batches_is_json_loads_and_the_rules(values):
    check(values)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.lists(
            st.one_of(
                st.text(max_size=5), st.sampled_from(['","', ",", '"', "\\", "\x7f", "\ud800", "é", ""])
            )
        ),
        st.lists(st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 2**63, -(2**63) - 1]))),
    ),
    st.data(),
)
def test_encode_many_of_tricky_ids_of_one_type_is_encode_per_event(ids, data):
    codec = OutputsCodec(K, COSTS)
    depths = [data.draw(st.integers(1, K)) for _ in ids]
    flat = [
        data.draw(st.one_of(st.integers(0, 2), st.booleans(), st.sampled_from([0.5, "a"])))
        for _ in ids
        for _ in range(K)
    ]
    expected = [
        codec.encode(i, depth, flat[n * K + depth - 1]) for n, (i, depth) in enumerate(zip(ids, depths))
    ]
    assert OutputsCodec(K, COSTS).encode_many(ids, depths, flat) == expected


@pytest.mark.parametrize("first, second", [(0.0, -0.0), (-0.0, 0.0)])
def test_a_zero_prediction_keeps_its_sign_whichever_zero_came_first(first, second):
    codec = OutputsCodec(1, [0.5])
    for many in (False, True):
        encoded = [
            codec.encode_many(["e"], [1], [value])[0] if many else codec.encode("e", 1, value)
            for value in (first, second)
        ]
        assert [json.loads(p)["prediction"] for p in encoded] == [first, second]
        assert [str(json.loads(p)["prediction"]) for p in encoded] == [str(first), str(second)]
