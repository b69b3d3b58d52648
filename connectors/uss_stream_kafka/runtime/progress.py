"""Where a consumer stands: against the end of its partitions (``exit_when_idle`` and catch-up),
and in its group (a rejoin after a lost membership).

An idle consumer is not necessarily a finished one: after a crash the group waits for the dead
member's session to expire before it assigns any partition, and a consumer without partitions
sees no record either. The services therefore stop on idleness only once partitions were assigned
and every one of them is read to its end offset (:class:`IdleGate`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from uss_stream_kafka.clients import ClientError

log = logging.getLogger("uss_stream_kafka")

__all__ = ["IdleGate", "RejoinWatch", "StallWatch", "lagging"]


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


class StallWatch:
    """Notice a consumer that fetches nothing while records wait on its partitions.

    A poll loop that runs but receives no record although its assigned partitions are behind their
    end offsets is stuck in the client (seen once with kafka-python 3.0.12 after a broker restart),
    and neither the loop's liveness nor ``exit_when_idle`` notices it. ``after`` seconds after the
    last record (or ``started``) the watch asks the broker how far behind the partitions are (at
    most once per ``after`` seconds; paused partitions, e.g. held during a restore, do not count),
    logs a warning that says where the consumer stands (with the client's own fetch state), seeks
    each lagging partition to its position again (the same next record; a client restarts its
    fetch of a partition on a seek), and keeps :attr:`stalled_since` set until a record arrives,
    so that ``/healthz`` reports the run ``stalled`` if that did not help (a liveness probe then
    restarts it; it resumes from its checkpoint).

    Examples
    --------
    >>> class Consumer:  # three records wait on partition 0; the consumer fetches none
    ...     def assignment(self): return {0}
    ...     def end_offsets(self, tps): return {0: 10}
    ...     def position(self, tp): return 7
    ...     def paused(self): return set()
    ...     def fetch_state(self, tps): return {}
    ...     def seek(self, tp, offset): print(f"seek {tp} to {offset}")
    >>> watch = StallWatch(after=30.0, started=0.0)
    >>> watch.fetched(100.0)
    >>> watch.check(Consumer(), now=120.0)  # 20 s without a record: not asked yet
    >>> watch.check(Consumer(), now=131.0)
    seek 0 to 7
    {0: 3}
    >>> watch.stalled_since
    100.0
    >>> watch.fetched(140.0)
    >>> watch.stalled_since is None
    True

    """

    def __init__(self, after: float = 30.0, started: float = 0.0) -> None:
        if not after > 0:
            raise ValueError(f"after must be > 0 seconds, got {after!r}")
        self.after = float(after)
        self.stalled_since: float | None = None
        self._last_record = float(started)
        self._checked = float("-inf")

    def fetched(self, now: float) -> None:
        """A record arrived at ``now``, or partitions were just restored: the consumer is not stalled."""
        self._last_record = now
        self.stalled_since = None

    def check(self, consumer: Any, now: float) -> dict[Any, int] | None:
        """The lagging partitions (``{partition: records behind}``) if the consumer is stalled, else None."""
        idle_since = self._last_record
        if now - idle_since < self.after or now - self._checked < self.after:
            return None
        self._checked = now
        paused = set(consumer.paused())
        fetching = [tp for tp in consumer.assignment() if tp not in paused]
        try:
            behind = lagging(consumer, fetching) if fetching else {}
        except ClientError as error:  # the broker does not answer: an outage, not a stall
            log.debug("stall check: %s", error)
            return None
        if not behind:
            self.stalled_since = None
            return None
        self.stalled_since = idle_since
        positions = {tp: consumer.position(tp) for tp in behind}
        log.warning(
            "no record for %.0fs while %d records wait (%s); paused: %s; client: %s: the client is not "
            "fetching; seeking each to its position again",
            now - idle_since,
            sum(behind.values()),
            ", ".join(f"{tp}: {n} behind at {positions[tp]}" for tp, n in behind.items()),
            sorted(map(str, paused)) or "none",
            consumer.fetch_state(behind),
        )
        for tp, position in positions.items():  # the same next record: drops the client's fetch state
            consumer.seek(tp, position)
        return behind


class RejoinWatch:
    """Notice a static member whose group membership expired and that never got an assignment back.

    A client declares its assignment lost when the group coordinator did not answer for
    ``session.timeout.ms`` (a broker outage longer than the session), then rejoins by itself. A
    static member's rejoin (``group.instance.id``) can hang in librdkafka (librdkafka #3437,
    confluent-kafka-go #494): loaded CI runs saw the service wait minutes after the loss with no
    partition and no error. ``grace`` seconds after a loss with no assignment since, the watch asks
    the broker for an end offset (at most once per ``every`` seconds). No answer: the outage goes
    on, and the client's own rejoin is still the way back. An answer: the rejoin is overdue, and
    :meth:`overdue` says so once. Replace the consumer then: a new static member takes over the
    instance id without a rebalance (KIP-345). The watch is then off until the next loss, so that a
    loss replaces the consumer at most once.

    Examples
    --------
    >>> class Consumer:  # no partition; the broker is down until ``up`` is set
    ...     up = False
    ...     def assignment(self): return set()
    ...     def end_offsets(self, tps):
    ...         if not self.up: raise ClientError("broker down", retriable=True)
    ...         return {tp: 0 for tp in tps}
    >>> consumer, watch = Consumer(), RejoinWatch(grace=60.0, every=5.0)
    >>> watch.lost(now=100.0)
    >>> watch.overdue(consumer, ["events/0"], now=159.0)  # within the grace: not asked
    False
    >>> watch.overdue(consumer, ["events/0"], now=160.0)  # asked; the broker is still down
    False
    >>> consumer.up = True
    >>> watch.overdue(consumer, ["events/0"], now=164.0)  # asked again only 5 s later
    False
    >>> watch.overdue(consumer, ["events/0"], now=165.0)
    True
    >>> watch.overdue(consumer, ["events/0"], now=300.0)  # once per loss
    False

    """

    def __init__(self, grace: float = 60.0, every: float = 5.0) -> None:
        if not (grace > 0 and every > 0):
            raise ValueError(f"grace and every must be > 0 seconds, got {grace!r} and {every!r}")
        self.grace = float(grace)
        self.every = float(every)
        #: Monotonic time of the loss still waiting for an assignment (``None``: nothing to watch).
        self.lost_since: float | None = None
        self._asked = float("-inf")

    def lost(self, now: float) -> None:
        """The client declared the assignment lost at ``now`` (its membership expired)."""
        if self.lost_since is None:
            self.lost_since = now

    def assigned(self) -> None:
        """An assignment arrived (an empty one too): the member rejoined."""
        self.lost_since = None

    def overdue(self, consumer: Any, probe: Iterable[Any], now: float) -> bool:
        """Whether to replace ``consumer``: no assignment ``grace`` s after the loss, the broker answering.

        ``probe``: partitions whose end offsets the broker is asked for.
        """
        lost_since = self.lost_since
        if lost_since is None or now - lost_since < self.grace or now - self._asked < self.every:
            return False
        self._asked = now
        if consumer.assignment():
            self.lost_since = None
            return False
        try:
            consumer.end_offsets(list(probe))
        except ClientError as error:  # the outage goes on: the client's rejoin waits for the broker
            log.debug("rejoin watch: %s", error)
            return False
        self.lost_since = None
        return True
