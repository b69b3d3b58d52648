"""The wire formats: input events in, decisions out, and why an event is rejected.

**Outputs mode** (the stage outputs were computed upstream)::

    in : {"id": "e1", "outputs": [1, 0, 1]}
    out: {"id":"e1","depth":2,"prediction":0,"cost":0.15}

``outputs`` holds one label per stage (``K`` of them, cheapest stage first); the service reveals
only the first ``depth`` to the policy. ``prediction`` is the output of the deepest queried stage
and ``cost`` is ``C_depth = c_1 + ... + c_depth``.

**Features mode** (the service runs the cascade)::

    in    : {"id": "e1", "features": {"age": 50, "bmi": 33.6}}
    labels: {"id": "e1", "features": {"age": 50, "bmi": 33.6}, "label": 1}
    out   : {"id": "e1", "depth": 1, "prediction": 1, "cost": 0.06, "outputs": [1],
             "proba": {"0": 0.2, "1": 0.8}, "warm_up": false}

An event is either decided as a whole or rejected as a whole, before the policy sees it: a
rejected event never changes the learner. :class:`InvalidEvent` carries one of :data:`REASONS`.
"""

from __future__ import annotations

import json
import json.scanner
import math
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii
from typing import Any

import msgspec

__all__ = [
    "REASONS",
    "FeaturesCodec",
    "InvalidEvent",
    "OutputsCodec",
    "json_scalar",
    "oversize",
]

#: Why an input record was sent to the dead-letter topic.
REASONS = (
    "oversize",  # the value is larger than the configured maximum
    "invalid_json",  # no value, not UTF-8, or not JSON
    "missing_field",  # a required field ("id", "outputs", "features", "label") is absent or null
    "wrong_type",  # the event is not an object, or a field has the wrong type
    "wrong_output_count",  # "outputs" does not hold one output per stage
    "missing_output",  # a stage output is null or NaN
    "processing_error",  # features mode: the cascade raised on the event
    "duplicate_request",  # orchestration mode: a request whose id was already decided
    "report_unknown",  # orchestration mode: a report for no known decision
    "report_duplicate",  # orchestration mode: a second report for a decision
    "report_expired",  # orchestration mode: a report for a decision that expired
    "report_too_many_outputs",  # orchestration mode: more outputs than the decided depth
    "report_invalid",  # orchestration mode: a report whose outputs are not valid
    "report_label_unknown",  # orchestration mode: a label for no known decision
    "report_label_not_requested",  # orchestration mode: a label for a decision that did not ask for it
    "report_label_duplicate",  # orchestration mode: a second label for a decision
    "report_label_expired",  # orchestration mode: a label that came after its request expired
    "report_label_invalid",  # orchestration mode: a label the policy cannot learn from
    "undecodable_batch",  # a fetched record batch could not be decoded (codec, corruption): skipped whole
    "invalid_payload",  # a registry format: no registry framing, or a body its schema cannot decode
    "unknown_schema",  # a registry format: the registry has no schema of the record's id
    "out_of_range",  # features mode: a feature outside its declared range (--feature-range)
    "outlier",  # features mode: a feature far outside the range its accepted values have shown
    "missing_key",  # --key-from: the record has no key, or the event no such field (or null)
    "invalid_key",  # --key-from: a key that is not text (UTF-8, a string or an integer), empty or too long
)

#: The largest magnitude of a numeric feature (features mode): beyond it a value is refused, so that
#: its square, and the sum of the squares of 10**8 such values, stay finite in a model's statistics
#: (a double ends at 1.8e308: one label with a feature of 1e300 would make them infinite for good).
MAX_FEATURE = 1e100

_loads = json.loads
_scan = json.scanner.make_scanner(json.JSONDecoder())
_ID_TYPES = (str, int)

#: A value with fewer brackets than this cannot be nested deeply enough to meet the recursion
#: limit (1000 by default) in either decoder; deeper ones take the exact path (json fails first).
_FAST_MAX_NESTING = 256


class _FastOutputsEvent(msgspec.Struct, gc=False):
    """The valid outputs-mode event as msgspec decodes it (other fields are parsed and ignored)."""

    id: str | int
    outputs: list[int | float | str | bool]


class InvalidEvent(ValueError):
    """An input record that cannot be decided; ``reason`` is one of :data:`REASONS`.

    >>> error = InvalidEvent("missing_field", "event has no 'outputs'")
    >>> error.reason, str(error)
    ('missing_field', "missing_field: event has no 'outputs'")

    """

    def __init__(self, reason: str, detail: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown dead-letter reason {reason!r}")
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# Raised to users under its public name (``uss_stream_kafka.InvalidEvent``), in tracebacks too.
InvalidEvent.__module__ = "uss_stream_kafka"


def json_scalar(value: Any) -> bytes:
    """Encode a label or id as compact JSON bytes (strings ASCII-escaped).

    >>> json_scalar(3), json_scalar("é"), json_scalar(True), json_scalar(0.5)
    (b'3', b'"\\\\u00e9"', b'true', b'0.5')

    """
    kind = type(value)
    if kind is int:
        return b"%d" % value
    if kind is str:
        return encode_basestring_ascii(value).encode()
    if kind is bool:
        return b"true" if value else b"false"
    return json.dumps(value, allow_nan=False, default=_to_builtin).encode()


def _to_builtin(value: Any) -> Any:
    """``json.dumps`` fallback for NumPy scalars and arrays."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if hasattr(value, "tolist") and callable(value.tolist):
        return value.tolist()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _parse(value: bytes | None) -> Any:
    """``json.loads(value)``, with a fast path for UTF-8 JSON without surrounding whitespace.

    The fast path runs json's C scanner directly; anything it does not accept whole goes through
    ``json.loads`` (so the result, and the error, are exactly ``json.loads``'s).
    """
    if value is None:
        raise InvalidEvent("invalid_json", "record has no value (null)")
    try:
        text = value.decode()
        document, end = _scan(text, 0)
        if end == len(text):
            return document
    except (ValueError, StopIteration, RecursionError):
        pass
    try:
        return _loads(value)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
        raise InvalidEvent("invalid_json", f"value is not UTF-8 JSON: {error}") from None
    except RecursionError:
        raise InvalidEvent("invalid_json", "value is JSON nested too deeply to decode") from None


def oversize(value: bytes, max_bytes: int) -> InvalidEvent:
    """Why a value longer than ``max_bytes`` is rejected.

    >>> str(oversize(b"12345", 4))
    'oversize: value has 5 bytes, the limit is 4'

    """
    return InvalidEvent("oversize", f"value has {len(value)} bytes, the limit is {max_bytes}")


def _shallow(value: bytes) -> bool:
    """Whether ``value`` has too few brackets to nest anywhere near the recursion limit."""
    return value.count(b"[") + value.count(b"{") < _FAST_MAX_NESTING


def _check_id(document: dict[str, Any]) -> Any:
    event_id = document.get("id")
    if event_id is None:
        raise InvalidEvent("missing_field", "event has no 'id'")
    if type(event_id) not in _ID_TYPES:
        raise InvalidEvent("wrong_type", f"'id' must be a string or an integer, got {_kind(event_id)}")
    return event_id


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _check_label(value: Any, where: str, null_reason: str) -> None:
    kind = type(value)
    if kind is int or kind is str or kind is bool:
        return
    if value is None:
        raise InvalidEvent(null_reason, f"{where} is null")
    if kind is float:
        if value != value:
            raise InvalidEvent(null_reason, f"{where} is NaN")
        if math.isinf(value):
            raise InvalidEvent("wrong_type", f"{where} must be finite, got {value}")
        return
    raise InvalidEvent("wrong_type", f"{where} must be a string, number or boolean, got {_kind(value)}")


class OutputsCodec:
    """Decode outputs-mode events and encode their decisions.

    Parameters
    ----------
    n_stages
        ``K``: every event must carry exactly ``K`` outputs.
    cumulative_costs
        ``C_1..C_K``, written as the decision's ``cost``.

    Examples
    --------
    >>> codec = OutputsCodec(3, [0.0, 0.15, 0.35])
    >>> codec.decode(b'{"id": "e1", "outputs": [1, 0, 1]}')
    ('e1', [1, 0, 1])
    >>> codec.encode("e1", 2, 0)
    b'{"id":"e1","depth":2,"prediction":0,"cost":0.15}'
    >>> codec.decode(b'{"id": "e2", "outputs": [1, NaN, 1]}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: missing_output: outputs[1] is NaN
    >>> codec.decode(b'{"id": "e3", "outputs": [1, 0]}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: wrong_output_count: 'outputs' must hold 3 stage outputs, got 2
    >>> codec.decode(b"[" * 100_000 + b"]" * 100_000)
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: invalid_json: value is JSON nested too deeply to decode

    """

    __slots__ = ("_costs", "_fast", "_keyed", "_n_stages", "_tails")

    #: Distinct (depth, prediction) decision tails kept encoded; labels are few in practice.
    MAX_CACHED_TAILS = 4096

    def __init__(self, n_stages: int, cumulative_costs: Sequence[float]) -> None:
        if len(cumulative_costs) != n_stages:
            raise ValueError(f"need {n_stages} cumulative costs, got {len(cumulative_costs)}")
        self._n_stages = n_stages
        self._costs = [b""] + [json.dumps(float(c)).encode() for c in cumulative_costs]
        self._tails: dict[tuple[int, type, Any], bytes] = {}
        self._fast = msgspec.json.Decoder(_FastOutputsEvent).decode
        self._keyed: dict[str, Any] = {}  # --key-from FIELD: msgspec decoders by field

    @property
    def encoded_costs(self) -> list[bytes]:
        """``C_1..C_K`` as each decision writes its ``cost`` (``json.dumps`` of the float).

        >>> OutputsCodec(2, [0, 0.1]).encoded_costs
        [b'0.0', b'0.1']
        """
        return self._costs[1:]

    def decode(self, value: bytes | None) -> tuple[Any, list[Any]]:
        """``(id, outputs)`` of a valid event; raises :class:`InvalidEvent` otherwise."""
        return self._check(_parse(value))

    def _check(self, document: Any) -> tuple[Any, list[Any]]:
        """``(id, outputs)`` of a decoded event; raises :class:`InvalidEvent` if it is not valid."""
        # Fast path: the common, valid event, checked with type identities only.
        if type(document) is dict:
            outputs = document.get("outputs")
            event_id = document.get("id")
            if type(outputs) is list and len(outputs) == self._n_stages and type(event_id) in _ID_TYPES:
                for output in outputs:
                    kind = type(output)
                    if not (
                        kind is int
                        or kind is str
                        or kind is bool
                        or (kind is float and abs(output) < math.inf)
                    ):
                        break
                else:
                    return event_id, outputs
        return self._explain(document)

    def decode_many(
        self, values: Sequence[bytes | None], max_bytes: int
    ) -> tuple[list[int], list[Any], list[Any], list[InvalidEvent | None]]:
        """Decode a batch: ``(positions, ids, outputs, errors)``, exactly as :meth:`decode` per value.

        ``positions`` are the indices of the valid events, ``ids`` their ids and ``outputs`` their
        outputs, flat (row-major); ``errors[i]`` is why value ``i`` was rejected (``None`` if it was
        not). Values longer than ``max_bytes`` are rejected as ``oversize``.

        A value is first decoded by msgspec (C, typed: the id and outputs are validated while
        parsed). It is accepted there only where msgspec and ``json.loads`` agree: ASCII input
        (msgspec does not check the UTF-8 of the fields it skips), nesting far from the recursion
        limit, and a result that passes :meth:`decode`'s checks. Anything msgspec refuses (NaN and
        infinity literals, numbers beyond a double, lone surrogates, a missing or mistyped field, a
        wrong output count ...) goes through :meth:`decode`, so the decisions and the dead-letter
        reasons are those of ``json.loads``.

        >>> codec = OutputsCodec(3, [0.0, 0.15, 0.35])
        >>> positions, ids, outputs, errors = codec.decode_many(
        ...     [b'{"id": "a", "outputs": [1, 0, 1]}', b'{"id": "b", "outputs": [1, NaN, 1]}',
        ...      b'{"id": 7, "outputs": [0, 0, 0], "x": 1}'], max_bytes=100)
        >>> positions, ids, outputs
        ([0, 2], ['a', 7], [1, 0, 1, 0, 0, 0])
        >>> errors
        [None, InvalidEvent('missing_output: outputs[1] is NaN'), None]

        """
        positions, ids, _, outputs, errors = self._decode(values, max_bytes, None)
        return positions, ids, outputs, errors

    def decode_keyed(
        self, values: Sequence[bytes | None], max_bytes: int, source: Any
    ) -> tuple[list[int], list[Any], list[str], list[Any], list[InvalidEvent | None]]:
        """:meth:`decode_many` with each valid event's key, the top-level field ``source.field``
        (a :class:`~uss_stream_kafka.processing.keys.KeySource`): ``(positions, ids, keys, outputs,
        errors)``. An event without a valid key is rejected (``missing_key``, ``invalid_key``) after
        the event itself was found valid.

        >>> from uss_stream_kafka.processing.keys import KeySource
        >>> codec = OutputsCodec(2, [0.0, 0.1])
        >>> positions, ids, keys, outputs, errors = codec.decode_keyed(
        ...     [b'{"id": 1, "site": "a", "outputs": [1, 0]}', b'{"id": 2, "outputs": [1, 1]}',
        ...      b'{"id": 3, "site": 7, "outputs": [0, 0]}'], 100, KeySource("site"))
        >>> positions, keys, outputs, [e and e.reason for e in errors]
        ([0, 2], ['a', '7'], [1, 0, 0, 0], [None, 'missing_key', None])

        """
        positions, ids, keys, outputs, errors = self._decode(values, max_bytes, source)
        return positions, ids, keys, outputs, errors

    def _decode(
        self, values: Sequence[bytes | None], max_bytes: int, source: Any
    ) -> tuple[list[int], list[Any], list[str], list[Any], list[InvalidEvent | None]]:
        """:meth:`decode_many`, with the keys of ``source`` (a ``KeySource`` with a field) if given."""
        from uss_stream_kafka.processing.keys import MAX_KEY_BYTES

        errors: list[InvalidEvent | None] = [None] * len(values)
        positions: list[int] = []
        ids: list[Any] = []
        keys: list[str] = []
        outputs: list[Any] = []
        keep_position, keep_id, keep_key, keep_outputs = (
            positions.append,
            ids.append,
            keys.append,
            outputs.extend,
        )
        fast = self._fast if source is None else self._keyed_decoder(source.field)
        n_stages = self._n_stages
        for position, value in enumerate(values):
            if (
                value is not None
                and len(value) <= max_bytes
                and value.isascii()
                and (len(value) < 2 * _FAST_MAX_NESTING or _shallow(value))
            ):
                try:
                    event = fast(value)
                except (msgspec.MsgspecError, RecursionError):
                    pass
                else:
                    row = event.outputs
                    if source is None and len(row) == n_stages:
                        keep_position(position)
                        keep_id(event.id)
                        keep_outputs(row)
                        continue
                    # ASCII: a key's characters are its bytes (other keys take the exact path)
                    key = None if source is None else event.key
                    if len(row) == n_stages and type(key) is str and 0 < len(key) <= MAX_KEY_BYTES:
                        keep_position(position)
                        keep_id(event.id)
                        keep_key(key)
                        keep_outputs(row)
                        continue
            if value is not None and len(value) > max_bytes:
                errors[position] = oversize(value, max_bytes)
                continue
            try:
                document = _parse(value)
                event_id, row = self._check(document)
                if source is not None:
                    keep_key(source.of_field(document))
            except InvalidEvent as error:
                errors[position] = error
                continue
            keep_position(position)
            keep_id(event_id)
            keep_outputs(row)
        return positions, ids, keys, outputs, errors

    def _keyed_decoder(self, field: str) -> Any:
        """msgspec's decoder of a valid event with its key field (a string; other keys take the slow path)."""
        decoders = self._keyed
        if field not in decoders:
            event = msgspec.defstruct(
                "_FastKeyedEvent",
                [("id", str | int), ("outputs", list[int | float | str | bool]), ("key", str)],
                rename={"key": field},
                gc=False,
            )
            decoders[field] = msgspec.json.Decoder(event).decode
        return decoders[field]

    def _explain(self, document: Any) -> tuple[Any, list[Any]]:
        """The slow path: name what is wrong with the event (or accept it)."""
        if not isinstance(document, dict):
            raise InvalidEvent("wrong_type", f"event must be a JSON object, got {_kind(document)}")
        event_id = _check_id(document)
        outputs = document.get("outputs")
        if outputs is None:
            raise InvalidEvent("missing_field", "event has no 'outputs'")
        if type(outputs) is not list:
            raise InvalidEvent("wrong_type", f"'outputs' must be an array, got {_kind(outputs)}")
        if len(outputs) != self._n_stages:
            raise InvalidEvent(
                "wrong_output_count",
                f"'outputs' must hold {self._n_stages} stage outputs, got {len(outputs)}",
            )
        for j, output in enumerate(outputs):
            _check_label(output, f"outputs[{j}]", "missing_output")
        return event_id, outputs

    def encode(self, event_id: Any, depth: int, prediction: Any) -> bytes:
        """The decision record's value."""
        return b'{"id":' + json_scalar(event_id) + self._tail(depth, prediction)

    def encode_many(self, ids: Sequence[Any], depths: Sequence[int], outputs: Sequence[Any]) -> list[bytes]:
        """The decision values of a batch, as :meth:`encode` per event.

        ``outputs`` is flat, as :meth:`decode_many` returns it: event ``n`` predicts
        ``outputs[n*K + depth - 1]``.

        >>> codec = OutputsCodec(2, [0.0, 0.1])
        >>> codec.encode_many(["a", 7], [1, 2], [1, 0, 1, 0])
        [b'{"id":"a","depth":1,"prediction":1,"cost":0.0}', b'{"id":7,"depth":2,"prediction":0,"cost":0.1}']

        """
        tails = self._tails
        tail_of = self._tail
        encode_text = encode_basestring_ascii
        payloads = []
        keep = payloads.append
        base = -1
        n_stages = self._n_stages
        for event_id, depth in zip(ids, depths):
            prediction = outputs[base + depth]
            base += n_stages
            tail = tails.get((depth, type(prediction), prediction)) or tail_of(depth, prediction)
            if type(event_id) is str:
                keep(('{"id":' + encode_text(event_id)).encode() + tail)
            else:
                keep(b'{"id":' + json_scalar(event_id) + tail)
        return payloads

    def _tail(self, depth: int, prediction: Any) -> bytes:
        """The decision's fields after the id (kept for the few distinct (depth, prediction) pairs)."""
        # The type is part of the key: 1, 1.0 and True are equal but encode differently.
        key = (depth, type(prediction), prediction)
        tail = self._tails.get(key)
        if tail is None:
            tail = b',"depth":%d,"prediction":%s,"cost":%s}' % (
                depth,
                json_scalar(prediction),
                self._costs[depth],
            )
            # 0.0 and -0.0 are equal keys that encode differently: float zeros are not kept.
            if len(self._tails) < self.MAX_CACHED_TAILS and not (
                type(prediction) is float and not prediction
            ):
                self._tails[key] = tail
        return tail


class FeaturesCodec:
    """Decode features-mode events and labels, encode the cascade's decisions.

    Examples
    --------
    >>> codec = FeaturesCodec()
    >>> codec.decode(b'{"id": 7, "features": {"age": 50, "bmi": 33.6, "insulin": null}}')
    (7, {'age': 50, 'bmi': 33.6})
    >>> codec.decode_label(b'{"id": 7, "features": {"age": 50}, "label": true}')
    ({'age': 50}, True)
    >>> codec.decode(b'{"id": 7, "features": [50, 33.6]}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: wrong_type: 'features' must be an object, got array
    >>> codec.decode_label(b'{"id": 7, "features": {"age": 1e300}, "label": true}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: wrong_type: feature 'age' must be within ±1e100, got 1e+300

    """

    __slots__ = ()

    def decode(self, value: bytes | None) -> tuple[Any, dict[str, Any]]:
        """``(id, features)``; null features are dropped (River's convention for a missing feature)."""
        document = _parse(value)
        if type(document) is not dict:
            raise InvalidEvent("wrong_type", f"event must be a JSON object, got {_kind(document)}")
        return _check_id(document), self._features(document)

    def decode_label(self, value: bytes | None) -> tuple[dict[str, Any], Any]:
        """``(features, label)`` of a labelled event."""
        document = _parse(value)
        if type(document) is not dict:
            raise InvalidEvent("wrong_type", f"labelled event must be a JSON object, got {_kind(document)}")
        features = self._features(document)
        if "label" not in document:
            raise InvalidEvent("missing_field", "labelled event has no 'label'")
        label = document["label"]
        _check_label(label, "'label'", "missing_field")
        return features, label

    @staticmethod
    def _features(document: dict[str, Any]) -> dict[str, Any]:
        features = document.get("features")
        if features is None:
            raise InvalidEvent("missing_field", "event has no 'features'")
        if type(features) is not dict:
            raise InvalidEvent("wrong_type", f"'features' must be an object, got {_kind(features)}")
        clean = {}
        for name, value in features.items():
            if value is None:
                continue
            kind = type(value)
            if kind is float and not math.isfinite(value):
                raise InvalidEvent("wrong_type", f"feature {name!r} must be finite, got {value}")
            if kind in (int, float) and not -MAX_FEATURE <= value <= MAX_FEATURE:
                shown = repr(value) if kind is float else f"an integer of {len(str(abs(value)))} digits"
                raise InvalidEvent("wrong_type", f"feature {name!r} must be within ±1e100, got {shown}")
            if kind not in (int, float, str, bool):
                raise InvalidEvent(
                    "wrong_type", f"feature {name!r} must be a number, string or boolean, got {_kind(value)}"
                )
            clean[name] = value
        return clean

    @staticmethod
    def encode(event_id: Any, decision: Any) -> bytes:
        """The decision record's value for a cascade ``Decision``."""
        document = {
            "id": event_id,
            "depth": int(decision.depth),
            "prediction": decision.prediction,
            "cost": float(decision.cost),
            "outputs": list(decision.outputs),
            "proba": {_key(label): float(p) for label, p in decision.proba.items()},
            "warm_up": bool(decision.warm_up),
        }
        return json.dumps(document, separators=(",", ":"), allow_nan=False, default=_to_builtin).encode()


def _key(label: Any) -> str:
    if type(label) is str:
        return label
    return json.dumps(label, default=_to_builtin)
