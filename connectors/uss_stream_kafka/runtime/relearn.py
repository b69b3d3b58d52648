"""Durable stage models in features mode: rebuilt by re-learning the retained labels log.

A features-mode learner is a :class:`uss_stream.CascadeClassifier`: its policy counts are JSON and
travel in the checkpoint, but its stages are arbitrary River models. They are not JSON, and a
pickled model in a topic would let whoever can write that topic run code in the service. So the
service never serialises them. Instead a checkpoint records, next to the input ``offset``, the
position ``labels_offset`` in the co-partitioned labels partition up to which the stages learned.
On a restore (restart, SIGKILL, partition move) and on the rewind after an aborted exactly-once
transaction, a fresh cascade from the factory re-learns the labels ``[log start, labels_offset)``
in offset order, and the labels consumer resumes at ``labels_offset``.

Why this is exact: River's online learners are deterministic functions of the sequence of
``learn_one`` calls they received, and the service feeds the labels of one partition in offset
order, one at a time, whatever the batching. Re-learning the same records in the same order
rebuilds the same models (and the cascade's count of learned labels, which ends its warm-up).
The records re-learned are those the service learned: ``read_committed`` (as the service's
consumer), skipping what it dead-lettered (too large or invalid).

What it requires:

* the labels topic keeps every record: ``retention.ms=-1`` (what ``create-topics`` sets) or a
  retention longer than the service's life; records deleted by retention are missing from the
  rebuilt models (a warning says how many offsets);
* restoring costs one pass over the partition's labels (a ``learn_one`` per label). The service
  keeps its group membership meanwhile (its consumer polls, every partition paused, about every
  second: ``keepalive``), ``/healthz`` reports the restore, and ``max_labels``
  (``--relearn-max-labels``) bounds it to the newest labels of each partition: the rebuilt models
  then differ from an uninterrupted run's, which learned the older ones too.

Examples
--------
The rebuild is the learner that learned the same labels in the same order (without a broker,
replaying a list of values as the labels partition would):

>>> from uss_stream_kafka.processing.processors import FeaturesProcessor
>>> from uss_stream_kafka.cli.demo import demo_records
>>> processor = FeaturesProcessor("uss_stream_kafka.cli.demo:pima_cascade")
>>> records = list(demo_records("features", 80, seed=1))
>>> live, rebuilt = processor.new_learner(), processor.new_learner()
>>> for _, label in records[:60]:
...     live.learn(label)
>>> learn_values(rebuilt, [label for _, label in records[:60]], max_bytes=1 << 20)
60
>>> [live.process(event) == rebuilt.process(event) for event, _ in records[60:63]]
[True, True, True]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from uss_stream_kafka.exceptions import CheckpointError
from uss_stream_kafka.processing.events import InvalidEvent

__all__ = ["KEEPALIVE_SECONDS", "LabelsLog", "learn_values"]

log = logging.getLogger("uss_stream_kafka")

#: Seconds between two calls of a re-learn's ``keepalive``.
KEEPALIVE_SECONDS = 1.0


def learn_values(
    learner: Any,
    values: Iterable[bytes | None],
    max_bytes: int,
    keepalive: Callable[[], None] | None = None,
) -> int:
    """Feed labelled values to ``learner`` as the service does; returns how many it learned.

    Values the service dead-letters (longer than ``max_bytes``, or refused by ``learner.learn``)
    are skipped, as they were the first time. ``keepalive`` is called every
    :data:`KEEPALIVE_SECONDS` or so, however slow the learner.
    """
    learned = 0
    kept = time.monotonic()
    for value in values:
        if keepalive is not None and time.monotonic() - kept >= KEEPALIVE_SECONDS:
            keepalive()
            kept = time.monotonic()
        if value is not None and len(value) > max_bytes:
            continue
        try:
            learner.learn(value)
        except InvalidEvent:
            continue
        learned += 1
    return learned


class LabelsLog:
    """Re-reads labels partitions from their start (a consumer without group, ``read_committed``).

    Parameters
    ----------
    consumer_kwargs
        Consumer settings (connection, security), kafka-python names.
    max_bytes
        The service's ``max_input_bytes``: larger labels were dead-lettered, not learned.
    timeout
        Seconds without progress after which :meth:`relearn` raises ``TimeoutError``.
    max_labels
        Re-learn at most the newest this many labels of a partition (``None``: all it retains).
    library
        The client library (see :data:`uss_stream_kafka.clients.CLIENTS`).
    """

    def __init__(
        self,
        consumer_kwargs: dict[str, Any],
        max_bytes: int,
        timeout: float = 60.0,
        library: str = "kafka-python",
        max_labels: int | None = None,
    ) -> None:
        self.library = library
        self.max_labels = max_labels
        self.consumer_kwargs = {**consumer_kwargs, "isolation_level": "read_committed"}
        self.max_bytes = max_bytes
        self.timeout = timeout
        self._consumer: Any = None

    def relearn(self, learner: Any, tp: Any, until: int, keepalive: Callable[[], None] | None = None) -> int:
        """Feed ``learner`` the labels of ``tp`` below offset ``until`` in order; returns how many it learned.

        From the newest ``max_labels`` on, if set; ``keepalive`` is called about every
        :data:`KEEPALIVE_SECONDS` (see :func:`learn_values`). Raises
        :class:`~uss_stream_kafka.exceptions.CheckpointError` if the partition ends before ``until``
        (the labels topic was recreated or truncated).
        """
        if until <= 0:
            return 0
        if self._consumer is None:
            from uss_stream_kafka import clients

            self._consumer = clients.consumer(
                self.library,
                **self.consumer_kwargs,
                group_id=None,
                enable_auto_commit=False,
                allow_auto_create_topics=False,
            )
        consumer = self._consumer
        consumer.assign([tp])
        start = consumer.beginning_offsets([tp])[tp]
        end = consumer.end_offsets([tp])[tp]
        if until > end:
            raise CheckpointError(
                f"the checkpoint says the stage models learned {tp.topic}/{tp.partition} up to offset "
                f"{until}, but the partition ends at {end}: the labels topic was recreated or truncated; "
                "delete the checkpoint (a tombstone for its key) or use a new state topic"
            )
        if start > 0:
            log.warning(
                "%s/%d: labels [0, %d) were deleted by retention: the rebuilt stage models miss them "
                "(give the labels topic retention.ms=-1)",
                tp.topic,
                tp.partition,
                min(start, until),
            )
        if self.max_labels is not None and until - self.max_labels > start:
            start = until - self.max_labels
            log.info("%s/%d: re-learning the newest %d labels only", tp.topic, tp.partition, self.max_labels)
        if start >= until:
            return 0
        consumer.seek(tp, start)
        started = time.monotonic()
        progress, position = started, start
        learned = 0
        while position < until:
            batch = consumer.poll(0.2, max_records=10_000).get(tp)
            if batch is not None:
                kept = [value for value, offset in zip(batch.values, batch.offsets) if offset < until]
                learned += learn_values(learner, kept, self.max_bytes, keepalive)
            if consumer.position(tp) > position:
                progress, position = time.monotonic(), consumer.position(tp)
            elif time.monotonic() - progress > self.timeout:
                raise TimeoutError(
                    f"could not re-read {tp.topic}/{tp.partition} up to offset {until} "
                    f"(at {position}) without progress for {self.timeout}s"
                )
        log.info(
            "rebuilt the stage models from %s/%d [%d, %d): %d labels learned in %.2fs",
            tp.topic,
            tp.partition,
            start,
            until,
            learned,
            time.monotonic() - started,
        )
        return learned

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
