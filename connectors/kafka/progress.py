"""Where a consumer stands against the end of its partitions (for ``exit_when_idle`` and catch-up).

An idle consumer is not necessarily a finished one: after a crash the group waits for the dead
member's session to expire before it assigns any partition, and a consumer without partitions
sees no record either. The services therefore stop on idleness only once partitions were assigned
and every one of them is read to its end offset (:func:`caught_up`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["caught_up", "lagging"]


def lagging(consumer: Any, partitions: Iterable[Any] | None = None) -> dict[Any, int]:
    """``{partition: records left}`` for the partitions (default: the assignment) not read to their end.

    The end offsets are the broker's at the time of the call (the last stable offset for a
    ``read_committed`` consumer).
    """
    tps = list(consumer.assignment() if partitions is None else partitions)
    if not tps:
        return {}
    ends = consumer.end_offsets(tps)
    behind = {}
    for tp in tps:
        position = consumer.position(tp)
        end = ends.get(tp)
        if end is not None and position is not None and position < end:
            behind[tp] = end - position
    return behind


def caught_up(consumer: Any) -> bool:
    """Whether every assigned partition is read to its end offset."""
    return not lagging(consumer)
