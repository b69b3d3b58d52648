"""Starting the service: the checks of its topics, and its consumer.

:func:`check_topics` checks that the topics exist, fit together, and what they accept;
:func:`new_consumer` is the one place the service's consumer is created (the producer's is
:meth:`Committer.new_producer <uss_stream_kafka.runtime.commit.Committer.new_producer>`).

Examples
--------
>>> from uss_stream_kafka.clients import ClientError
>>> class Admin:  # a stand-in answering as the client seam's Admin does
...     def partitions(self, names):
...         if "nope" in names:
...             raise ClientError("topic(s) nope do not exist", name="UNKNOWN_TOPIC_OR_PARTITION")
...         return {name: 2 for name in names}
>>> partition_counts(Admin(), ["events", "decisions"])
{'events': 2, 'decisions': 2}
>>> partition_counts(Admin(), ["events", "nope"])
Traceback (most recent call last):
...
ValueError: topic(s) nope do not exist; create them first (uss-stream kafka create-topics ...)
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from uss_stream_kafka import clients
from uss_stream_kafka.clients import ClientError
from uss_stream_kafka.clients.config import ClientConfig
from uss_stream_kafka.clients.limits import RecordLimits, check_record_limits, record_limit
from uss_stream_kafka.clients.topics import Topics, check_state_topic

__all__ = [
    "CONSUMER_DEFAULTS",
    "LIBRARY_CONSUMER_DEFAULTS",
    "check_topics",
    "freeze_startup_heap",
    "library_defaults",
    "new_consumer",
    "partition_counts",
    "wait_for_metadata",
]

log = logging.getLogger("uss_stream_kafka")

#: Seconds the consumer may take to learn the partitions of the (existing) topics it subscribes to.
METADATA_TIMEOUT = 60.0

#: Consumer settings tuned for throughput (overridable with ``consumer_options``).
CONSUMER_DEFAULTS: dict[str, Any] = {
    "fetch_max_bytes": 64 * 1024 * 1024,
    "max_partition_fetch_bytes": 8 * 1024 * 1024,
    "fetch_max_wait_ms": 100,
    "isolation_level": "read_committed",
    "session_timeout_ms": 45_000,
    "heartbeat_interval_ms": 3_000,
}

#: Consumer settings of one client library on top of :data:`CONSUMER_DEFAULTS` (see ``docs/kafka.md``,
#: "Defaults that do not stall"). librdkafka fetches on its own threads until a partition's local
#: queue holds ``queued.min.messages``, then rechecks every ``fetch.queue.backoff.ms`` (1 s by
#: default): a service deciding faster than one fetch a second waited up to a second per fetch.
LIBRARY_CONSUMER_DEFAULTS: dict[str, dict[str, Any]] = {
    "kafka-python": {},
    "confluent": {"fetch.queue.backoff.ms": 10},
}


def library_defaults(library: str) -> dict[str, Any]:
    """The consumer defaults of client ``library`` on top of :data:`CONSUMER_DEFAULTS`.

    >>> library_defaults("confluent"), library_defaults("kafka-python")
    ({'fetch.queue.backoff.ms': 10}, {})
    """
    return dict(LIBRARY_CONSUMER_DEFAULTS[library])


def new_consumer(
    library: str,
    client: ClientConfig,
    subscribe: list[str],
    callbacks: Mapping[str, Any],
    settings: Mapping[str, Any],
) -> clients.Consumer:
    """The service's consumer (client ``library``) of the topics ``subscribe``, with rebalance ``callbacks``.

    ``settings`` (the group, ``consumer_options``, ...) override :data:`CONSUMER_DEFAULTS`; the
    offsets are committed by the service only, and the range assignor keeps partition ``p`` of the
    input and labels topics on the same member.
    """
    consumer_settings = {
        **CONSUMER_DEFAULTS,
        **library_defaults(library),
        **settings,
        "enable_auto_commit": False,
        "allow_auto_create_topics": False,
        # Range keeps partition p of the input and labels topics on the same member.
        "partition_assignment_strategy": "range",
    }
    consumer = clients.consumer(library, **{**client.kafka_kwargs("consumer"), **consumer_settings})
    try:
        wait_for_metadata(consumer, subscribe)
    except BaseException:
        consumer.close()
        raise
    consumer.subscribe(subscribe, **callbacks)
    return consumer


def wait_for_metadata(consumer: Any, topics: Iterable[str], timeout: float = METADATA_TIMEOUT) -> None:
    """Wait until ``consumer`` knows the partitions of every topic in ``topics``.

    A group whose leader computes the assignment before a new topic's metadata reached it assigns
    none of that topic's partitions, and only a metadata refresh (minutes later) repairs it; the
    topics were checked with the admin client, so their metadata arrives within seconds. Raises
    ``ValueError`` naming the topics still unknown after ``timeout`` seconds.

    >>> class Consumer:  # answers partitions_for_topic as KafkaConsumer does: after some refreshes
    ...     calls = 0
    ...     def partitions_for_topic(self, topic):
    ...         self.calls += 1
    ...         return {0, 1} if self.calls > 2 else set()
    >>> consumer = Consumer()
    >>> wait_for_metadata(consumer, ["events"], timeout=5)
    >>> consumer.calls
    3
    >>> wait_for_metadata(type("Never", (), {"partitions_for_topic": lambda self, t: set()})(), ["x"], 0)
    Traceback (most recent call last):
    ...
    ValueError: the consumer got no partition metadata for topic(s) x within 0s
    """
    deadline = time.monotonic() + timeout
    missing = list(topics)
    while True:
        missing = [topic for topic in missing if not consumer.partitions_for_topic(topic)]
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise ValueError(
                f"the consumer got no partition metadata for topic(s) {', '.join(missing)} "
                f"within {timeout:g}s"
            )
        time.sleep(0.2)


def freeze_startup_heap() -> None:
    """Exempt every object alive now from the garbage collector's later passes (:func:`gc.freeze`).

    The command line calls it once, after start-up (modules, policy, settings) and before the
    loop. A full collection otherwise walks that whole start-up heap, tens of thousands of objects
    that live as long as the process, only to find them reachable: with it, the confluent service's
    CPU per event fell from 2.07-2.14 µs to 1.65-1.70 µs (K = 3, 200 000 events, three
    interleaved runs each). Objects frozen are never freed, so it is called once, at start-up,
    when nothing alive is meant to be dropped.

    Examples
    --------
    >>> import gc
    >>> freeze_startup_heap()
    >>> gc.get_freeze_count() > 0
    True
    >>> gc.unfreeze()
    """
    gc.collect()
    gc.freeze()


def check_topics(
    library: str, client: ClientConfig, topics: Topics, producer_settings: Mapping[str, Any]
) -> tuple[dict[str, int], RecordLimits]:
    """Check the service's topics (an admin of ``library``); their partition counts, their record limits.

    Every topic must exist, the labels topic (if any) must have as many partitions as the input
    topic, and the state topic should be compacted (a warning if that cannot be checked). The
    limits are the largest records the broker and the producer accept on the topics the service
    writes (:func:`~uss_stream_kafka.clients.limits.record_limit`); a topic whose limit is too small for the
    service is refused (:func:`~uss_stream_kafka.clients.limits.check_record_limits`).
    """
    admin = clients.admin(library, **client.kafka_kwargs("admin"))
    try:
        return _check_topics(admin, topics, producer_settings)
    finally:
        admin.close()


def _check_topics(
    admin: Any, topics: Topics, producer_settings: Mapping[str, Any]
) -> tuple[dict[str, int], RecordLimits]:
    partitions = partition_counts(admin, topics.all())
    try:
        check_state_topic(admin, topics.state)
    except ValueError:
        raise
    except Exception as error:  # e.g. DescribeConfigs not authorised: not fatal, but say so
        log.warning("could not check that state topic %r is compacted: %s", topics.state, error)
    written = (topics.output, topics.dead_letter, topics.state)
    limits = RecordLimits(*(record_limit(admin, topic, producer_settings) for topic in written))
    check_record_limits(limits, topics.output, topics.dead_letter, topics.state)
    if topics.labels is not None and partitions[topics.labels] != partitions[topics.input]:
        raise ValueError(
            f"labels topic {topics.labels!r} has {partitions[topics.labels]} partitions and input topic "
            f"{topics.input!r} {partitions[topics.input]}: they must be co-partitioned"
        )
    return partitions, limits


def partition_counts(admin: Any, names: Iterable[str]) -> dict[str, int]:
    """The partition count of each topic in ``names``; a clear error names those that do not exist."""
    try:
        return admin.partitions(list(names))
    except ClientError as error:
        if error.name != "UNKNOWN_TOPIC_OR_PARTITION":
            raise
        raise ValueError(f"{error}; create them first (uss-stream kafka create-topics ...)") from None
