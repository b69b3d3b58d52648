"""W3C Trace Context headers: which of an input record's trace headers its decision may carry.

A decision and a dead letter carry their input's ``traceparent`` and ``tracestate`` headers (and
their CloudEvents forms in Kafka binary mode, ``ce_traceparent`` and ``ce_tracestate``), so that a
trace follows the event. They are copied only as `W3C Trace Context <https://www.w3.org/TR/trace-context/>`_
defines them, so that a header no tracer could use cannot make the decision too large for its
topic (the broker would refuse it, and every restart with it):

- a ``traceparent`` is ``version-trace_id-parent_id-flags`` in lowercase hex, 55 bytes in version
  ``00`` (version ``ff`` and all-zero ids are invalid); a later version is cut to the 55 bytes every
  version starts with, which is how its readers parse it. Only the first valid one is kept;
- ``tracestate`` headers go with a kept ``traceparent`` only, each a list of ``key=value`` members
  of the spec's grammar, together at most :data:`TRACESTATE_MEMBERS` members and
  :data:`TRACESTATE_BYTES` bytes (the spec's bounds); the headers past them are dropped.

Every other trace header is dropped. Other headers (those ``--propagate-header`` names) are copied as
they are; their size counts towards the decision's record limit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "TRACEPARENT_BYTES",
    "TRACESTATE_BYTES",
    "TRACESTATE_MEMBERS",
    "TRACE_HEADERS",
    "trace_checked",
    "traceparent",
    "tracestate_members",
]

#: Headers always copied from an input record onto its decision and dead letter (when valid): W3C
#: Trace Context and its CloudEvents attributes in Kafka binary mode (``ce_*``).
TRACE_HEADERS = ("traceparent", "tracestate", "ce_traceparent", "ce_tracestate")
#: A ``traceparent``'s length in version 00 (and the prefix every later version starts with).
TRACEPARENT_BYTES = 55
#: The most bytes of ``tracestate`` (all its headers together) the spec has vendors propagate.
TRACESTATE_BYTES = 512
#: The most ``tracestate`` list members the spec allows.
TRACESTATE_MEMBERS = 32

_TRACEPARENT = re.compile(rb"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
_KEY = rb"(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})"
_MEMBER = re.compile(_KEY + rb"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")


def traceparent(value: bytes | None) -> bytes | None:
    """``value`` as a valid ``traceparent`` (a later version cut to 55 bytes), or ``None``.

    >>> traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    b'00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    >>> traceparent(b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future")[-5:]
    b'b7-01'
    >>> traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"), traceparent(b"0" * 55)
    (None, None)
    """
    if value is None or len(value) < TRACEPARENT_BYTES:
        return None
    match = _TRACEPARENT.fullmatch(value, 0, TRACEPARENT_BYTES)
    if match is None:
        return None
    version, trace_id, parent_id = match.groups()
    if version == b"ff" or trace_id == b"0" * 32 or parent_id == b"0" * 16:
        return None
    if len(value) == TRACEPARENT_BYTES:
        return value
    if version == b"00" or value[TRACEPARENT_BYTES : TRACEPARENT_BYTES + 1] != b"-":
        return None
    return value[:TRACEPARENT_BYTES]


def tracestate_members(value: bytes | None) -> int | None:
    """How many list members a valid ``tracestate`` value has (``None``: invalid).

    >>> tracestate_members(b"rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"), tracestate_members(b"")
    (2, 0)
    >>> tracestate_members(b"Rojo=1"), tracestate_members(b"a=1," * 33)
    (None, None)
    """
    if value is None or len(value) > TRACESTATE_BYTES:
        return None
    members = [member.strip(b" \t") for member in value.split(b",")]
    members = [member for member in members if member]  # empty members are allowed
    if len(members) > TRACESTATE_MEMBERS or not all(_MEMBER.fullmatch(member) for member in members):
        return None
    return len(members)


def trace_checked(headers: Sequence[tuple[str, bytes | None]]) -> list[tuple[str, bytes]]:
    """``headers`` in order, the trace headers among them only as the module says (valid, bounded).

    Names are compared in any case; each form (``traceparent``, ``ce_traceparent``) on its own.

    >>> parent = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    >>> kept = trace_checked([("tracestate", b"k=v"), ("TraceParent", parent), ("traceparent", b"zz"),
    ...                       ("tenant", b"x" * 3), ("ce_tracestate", b"k=v")])
    >>> [name for name, _ in kept], kept[1][1] == parent
    (['tracestate', 'TraceParent', 'tenant'], True)
    """
    parents: dict[str, tuple[int, bytes]] = {}  # form's prefix -> (position, value) of its first valid one
    for position, (name, value) in enumerate(headers):
        lower = name.lower()
        if lower in ("traceparent", "ce_traceparent"):
            prefix = lower[: -len("traceparent")]
            checked = traceparent(value) if prefix not in parents else None
            if checked is not None:
                parents[prefix] = (position, checked)
    kept: list[tuple[str, bytes]] = []
    budgets = {prefix: [TRACESTATE_MEMBERS, TRACESTATE_BYTES] for prefix in parents}
    for position, (name, value) in enumerate(headers):
        lower = name.lower()
        if lower not in TRACE_HEADERS:
            kept.append((name, value))  # type: ignore[arg-type]
        elif lower.endswith("traceparent"):
            first = parents.get(lower[: -len("traceparent")])
            if first is not None and first[0] == position:
                kept.append((name, first[1]))
        else:
            budget = budgets.get(lower[: -len("tracestate")])
            members = tracestate_members(value)
            if budget is None or members is None or value is None:
                continue
            if members <= budget[0] and len(value) <= budget[1]:
                budget[0] -= members
                budget[1] -= len(value)
                kept.append((name, value))
    return kept
