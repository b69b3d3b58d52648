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
    """Whether the consumer may stop on idleness: every assigned partition is read to its end offset.

    An empty assignment counts as caught up only once the metadata of every subscribed topic is
    known: a group leader that assigned before a new topic's metadata arrived hands out nothing,
    and the group rebalances again as soon as the metadata comes.
    """
    if not consumer.assignment():
        return all(consumer.partitions_for_topic(topic) for topic in consumer.subscription() or ())
    return not lagging(consumer)
