"""Where a consumer stands against the end of its partitions (for ``exit_when_idle`` and catch-up).

An idle consumer is not necessarily a finished one: after a crash the group waits for the dead
member's session to expire before it assigns any partition, and a consumer without partitions
sees no record either. The services therefore stop on idleness only once partitions were assigned
and every one of them is read to its end offset (:class:`IdleGate`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["IdleGate", "lagging"]


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


class IdleGate:
    """Whether a consumer that saw no record for a while may stop (``exit_when_idle``).

    With partitions: once every one is read to its end offset. With none: only if the assignment
    stays empty through a second idle period after the subscribed topics' metadata was fetched
    (a group leader that assigned before a new topic's metadata arrived hands out nothing, and the
    fetch makes the group rebalance); call :meth:`assigned` at every assignment.
    """

    def __init__(self) -> None:
        self._empty_with_metadata = False

    def assigned(self) -> None:
        """A new assignment arrived."""
        self._empty_with_metadata = False

    def may_stop(self, consumer: Any) -> bool:
        """Whether the idle consumer is done (see the class docstring)."""
        if consumer.assignment():
            return not lagging(consumer)
        if self._empty_with_metadata:
            return True
        topics = consumer.subscription() or ()
        self._empty_with_metadata = all(consumer.partitions_for_topic(topic) for topic in topics)
        return False
