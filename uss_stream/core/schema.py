"""Checks of JSON state documents: the object and its format tag, required fields, counts in range,
the discount.

Every learned state crosses its boundaries as plain JSON counts; a document read back is checked
field by field before anything is built from it, and each check raises :class:`ValueError` naming
the field (``state field 'decisions' must be ...``).

Examples
--------
>>> document = state_object({"format": "demo/1", "decisions": 3}, "demo/1", ("decisions",))
>>> state_count(document["decisions"], "decisions")
3
>>> state_count(-1, "decisions")
Traceback (most recent call last):
...
ValueError: state field 'decisions' must be an integer in 0..2**53, got -1
>>> state_object({"format": "demo/0"}, "demo/1")
Traceback (most recent call last):
...
ValueError: state document has format 'demo/0', expected 'demo/1'
"""

from __future__ import annotations

import json
from typing import Any, Self

from uss_stream.core.forgetting import check_discount

__all__ = [
    "MAX_COUNT",
    "JsonState",
    "is_count",
    "is_weight",
    "show",
    "state_count",
    "state_discount",
    "state_object",
]

#: The largest count a loaded state may hold: ``2**53``, beyond which a count is no longer exact
#: as a float (the decision rules compute with floats). At a billion decisions a second it takes
#: more than a hundred days of one stream to get there.
MAX_COUNT = 2**53


class JsonState:
    """``copy``, ``to_json``, ``from_json`` and ``==`` of counts kept as a JSON document: a
    subclass gives ``to_dict`` and the checking ``from_dict``, this the rest."""

    __slots__ = ()

    def copy(self) -> Self:
        """An independent copy."""
        return type(self).from_dict(self.to_dict())  # type: ignore[attr-defined]

    def to_json(self) -> str:
        """The counts as a JSON string."""
        return json.dumps(self.to_dict(), separators=(",", ":"))  # type: ignore[attr-defined]

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        """Load counts from a JSON string; see :meth:`from_dict` for the checks made."""
        try:
            document = json.loads(text)
        except (TypeError, ValueError, RecursionError) as error:
            raise ValueError(f"state document is not valid JSON: {error}") from error
        return cls.from_dict(document)  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self.to_dict() == other.to_dict()  # type: ignore[attr-defined]


def is_count(value: Any, high: int | None = MAX_COUNT) -> bool:
    """An integer (not a boolean) in ``0..high`` (``high=None``: unbounded).

    >>> is_count(3), is_count(True), is_count(2**53 + 1), is_count(2**53 + 1, high=None)
    (True, False, False, True)
    """
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value >= 0
        and (high is None or value <= high)
    )


def is_weight(value: Any) -> bool:
    """A discounted count: a number (not a boolean) in ``[0, 2**53]``; NaN and infinities fail the
    range test, and huge integers are compared exactly (no float cast).

    >>> is_weight(2.5), is_weight(float("nan")), is_weight(-0.5)
    (True, False, False)
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def show(value: Any) -> str:
    """``repr(value)``, shortened: a state document may hold anything, of any size.

    >>> show("x" * 100)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (102 characters)"
    """
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def state_object(document: Any, fmt: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``document`` if it is a JSON object with the format tag ``fmt`` and every ``required`` field."""
    if not isinstance(document, dict):
        raise ValueError(f"state document must be a JSON object, got {type(document).__name__}")
    if document.get("format") != fmt:
        raise ValueError(f"state document has format {show(document.get('format'))}, expected {fmt!r}")
    missing = [k for k in required if k not in document]
    if missing:
        raise ValueError(f"state document lacks field(s) {', '.join(missing)}")
    return document


def state_count(
    value: Any,
    name: str,
    low: int = 0,
    high: int | None = MAX_COUNT,
    *,
    expected: str | None = None,
    field: str = "state field",
) -> int:
    """``value`` if it is an integer in ``low..high`` (``high=None``: unbounded); else a
    :class:`ValueError` saying that the ``field`` ``name`` must be ``expected`` (default: the range).

    >>> state_count(0, "n_stages", 1, expected="an integer >= 1")
    Traceback (most recent call last):
    ...
    ValueError: state field 'n_stages' must be an integer >= 1, got 0
    """
    if not is_count(value, high) or value < low:
        if expected is None:
            expected = f"an integer in {low}..{'2**53' if high == MAX_COUNT else high}"
        raise ValueError(f"{field} {name!r} must be {expected}, got {show(value)}")
    return value


def state_discount(document: dict[str, Any]) -> float | None:
    """The document's ``discount`` (absent or ``None``: no forgetting), checked.

    >>> state_discount({"discount": 0.99}), state_discount({})
    (0.99, None)
    >>> state_discount({"discount": 1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: state field 'discount': discount must be a number with 0 < discount < 1 ..., got 1
    """
    try:
        return check_discount(document.get("discount"))
    except ValueError:
        raise ValueError(
            "state field 'discount': discount must be a number with 0 < discount < 1 "
            f"(None: no forgetting), got {show(document['discount'])}"
        ) from None
