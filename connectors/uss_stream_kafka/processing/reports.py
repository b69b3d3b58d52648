"""The wire formats of orchestration mode's inputs: requests, sensor reports and late labels.

A *request* ``{"id": ..., "context": ...}`` arrives on the requests (input) topic. The feedback
(reports) topic carries two kinds of record, both keyed by the decision's id:

* a *report* ``{"id": ..., "outputs": [...]}``: the outputs of the stages the sensors ran;
* a *label* ``{"id": ..., "label": <JSON string, number or boolean>}``: the event's true label,
  sent when the service asked for it (a label-asking policy such as ``audited``; see
  ``docs/orchestration.md``).

A record holds ``outputs`` or ``label``, never both; one with neither or both, or whose values
are not labels, raises :class:`~uss_stream_kafka.processing.events.InvalidEvent` (the runtime dead-letters
it). These functions only check the format: whether a report or a label can be applied is
:class:`~uss_stream.pending.PendingDecisions`'s call.
"""

from __future__ import annotations

import json
import math
from typing import Any

from uss_stream_kafka.processing.events import InvalidEvent

__all__ = ["Label", "label_request", "parse_feedback", "parse_report", "parse_request"]


#: A label as the feedback topic carries it.
Label = str | int | float | bool


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (list, dict)):
        return "array" if isinstance(value, list) else "object"
    return "NaN" if value != value else "Infinity"


def _load_object(value: bytes | None, max_bytes: int) -> dict[str, Any]:
    if value is not None and len(value) > max_bytes:
        raise InvalidEvent("oversize", f"{len(value)} bytes > {max_bytes}")
    if value is None:
        raise InvalidEvent("invalid_json", "the record has no value")
    try:
        document = json.loads(value)
    except ValueError as error:  # UnicodeDecodeError is a ValueError
        raise InvalidEvent("invalid_json", f"value is not UTF-8 JSON: {error}") from None
    except RecursionError:
        raise InvalidEvent("invalid_json", "value is JSON nested too deeply to decode") from None
    if not isinstance(document, dict):
        raise InvalidEvent("wrong_type", f"the value must be a JSON object, got {type(document).__name__}")
    decision_id = document.get("id")
    if decision_id is None:
        raise InvalidEvent("missing_field", "the value has no 'id'")
    if isinstance(decision_id, bool) or not isinstance(decision_id, (str, int)):
        raise InvalidEvent("wrong_type", f"'id' must be a string or an integer, got {decision_id!r}")
    return document


def _is_label(value: Any) -> bool:
    """A label as ``kafka run`` accepts one: a string, an integer, a boolean or a finite number."""
    return isinstance(value, (str, int)) or (isinstance(value, float) and math.isfinite(value))


def parse_request(value: bytes | None, max_bytes: int = 1 << 20) -> tuple[str | int, Any]:
    """``(id, context)`` of a request; ``context`` is ``None`` when absent.

    Raises
    ------
    InvalidEvent
        With reason ``oversize``, ``invalid_json``, ``missing_field`` or ``wrong_type``.

    Examples
    --------
    >>> parse_request(b'{"id": "bag-1", "context": {"lane": 2}}')
    ('bag-1', {'lane': 2})
    >>> parse_request(b'{"id": true}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: wrong_type: 'id' must be a string or an integer, got True

    """
    document = _load_object(value, max_bytes)
    return document["id"], document.get("context")


def _outputs(decision_id: str | int, outputs: Any) -> list[Any]:
    if outputs is None:
        raise InvalidEvent("missing_field", f"report {decision_id!r} has no 'outputs'")
    if not isinstance(outputs, list):
        raise InvalidEvent("wrong_type", f"'outputs' of {decision_id!r} must be a list")
    for j, output in enumerate(outputs):
        # The labels kafka run accepts (null and NaN are left to PendingDecisions: missing outputs).
        if isinstance(output, (list, dict)) or (isinstance(output, float) and math.isinf(output)):
            raise InvalidEvent(
                "report_invalid",
                f"outputs[{j}] of {decision_id!r} must be a label, got {_kind(output)}",
            )
    return outputs


def parse_report(value: bytes | None, max_bytes: int = 1 << 20) -> tuple[str | int, list[Any]]:
    """``(id, outputs)`` of a sensor report (the outputs' values are checked when applied).

    Examples
    --------
    >>> parse_report(b'{"id": 7, "outputs": [1, 0]}')
    (7, [1, 0])
    >>> parse_report(b'{"id": 7}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: missing_field: report 7 has no 'outputs'
    >>> parse_report(b'{"id": 7, "outputs": [[1]]}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: report_invalid: outputs[0] of 7 must be a label, got array

    """
    document = _load_object(value, max_bytes)
    return document["id"], _outputs(document["id"], document.get("outputs"))


def parse_feedback(
    value: bytes | None, max_bytes: int = 1 << 20
) -> tuple[str | int, list[Any] | None, Label | None]:
    """``(id, outputs, None)`` of a report or ``(id, None, label)`` of a late label.

    A plain tuple: this runs once per record of the feedback topic.

    Raises
    ------
    InvalidEvent
        As :func:`parse_report`; ``report_invalid`` for a record with both ``outputs`` and
        ``label`` or a label that is not a JSON string, number or boolean; ``missing_field`` for a
        record with neither.

    Examples
    --------
    >>> parse_feedback(b'{"id": "bag-1", "outputs": [1, 0]}')
    ('bag-1', [1, 0], None)
    >>> parse_feedback(b'{"id": "bag-1", "label": "dog"}')
    ('bag-1', None, 'dog')
    >>> parse_feedback(b'{"id": 7, "outputs": [1], "label": 1}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: report_invalid: record 7 has both 'outputs' and 'label'...
    >>> parse_feedback(b'{"id": 7, "label": null}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: report_invalid: label of 7 must be a string, number or ... got null
    >>> parse_feedback(b'{"id": 7}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: missing_field: record 7 has neither 'outputs' nor 'label'

    """
    document = _load_object(value, max_bytes)
    decision_id = document["id"]
    outputs = document.get("outputs")
    if "label" not in document:
        if outputs is None:
            raise InvalidEvent("missing_field", f"record {decision_id!r} has neither 'outputs' nor 'label'")
        return decision_id, _outputs(decision_id, outputs), None
    if outputs is not None:
        raise InvalidEvent(
            "report_invalid",
            f"record {decision_id!r} has both 'outputs' and 'label' (a report holds outputs, a label "
            "record its label)",
        )
    label = document["label"]
    if not _is_label(label):
        raise InvalidEvent(
            "report_invalid",
            f"label of {decision_id!r} must be a string, number or boolean, got {_kind(label)}",
        )
    return decision_id, None, label


def label_request(decision_id: str | int) -> bytes:
    """The record asking the sensor side for the label of ``decision_id`` (to the decisions topic).

    >>> label_request("bag-1")
    b'{"id":"bag-1","label_requested":true}'

    """
    return json.dumps({"id": decision_id, "label_requested": True}, separators=(",", ":")).encode()
