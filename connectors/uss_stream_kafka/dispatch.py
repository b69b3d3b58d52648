"""Each polled record to its place: decisions, replays, labels and dead letters.

:class:`Dispatcher` handles one batch returned by ``poll`` (the caller holds the run's lock):

- an input record is decided by its partition's learner and the decision sent to the output
  topic, or it is rejected to the dead-letter topic; a record below the partition's
  ``replay_until`` (already delivered before a restart) is fed to the learner only;
- a labels record (features mode) teaches its partition's stage models;
- a record batch ``poll`` could not decode is dead-lettered whole and skipped
  (:meth:`~Dispatcher.skip_undecodable`).

No record is ever fed to a learner twice: records below a partition's next offset are dropped.
Everything is sent through the :class:`~uss_stream_kafka.checkpointing.Committer`'s producer, in
its open transaction in exactly-once mode.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from uss_stream_kafka.checkpointing import Committer
from uss_stream_kafka.context import LabelsPartitionState, PartitionState, RunContext, offset_of
from uss_stream_kafka.deadletter import DeadLetter
from uss_stream_kafka.events import InvalidEvent
from uss_stream_kafka.undecodable import undecodable_batch

__all__ = ["Dispatcher"]

log = logging.getLogger("uss_stream_kafka")


class Dispatcher:
    """Decide, replay, learn or dead-letter the records of one polled batch.

    Parameters
    ----------
    context
        The run's shared state.
    committer
        Its producer sends the results; it counts the records towards the next commit point.
    max_input_bytes
        Larger values are dead-lettered (``oversize``); dead letters carry at most this many bytes.
    dead_letter_bytes
        The largest dead letter the broker accepts (``None``: unknown).
    """

    def __init__(
        self, context: RunContext, committer: Committer, max_input_bytes: int, dead_letter_bytes: int | None
    ) -> None:
        self.context = context
        self.committer = committer
        self.max_input_bytes = max_input_bytes
        self.dead_letter_bytes = dead_letter_bytes
        self._timings: list[tuple[int, int]] = []
        self._batch_depths = [0] * (context.processor.n_stages + 1)

    def discard_batch(self) -> None:
        """Forget the depths and timings of a batch whose transaction is aborted."""
        self._timings.clear()
        self._batch_depths = [0] * len(self._batch_depths)

    def process(self, batch: Mapping[Any, list[Any]], skip: Iterable[Any] = ()) -> None:
        """Handle ``batch`` (``poll``'s records by partition), except the partitions in ``skip``."""
        context = self.context
        summary = context.summary
        self.committer.begin()
        events = 0
        items = batch.items()
        if context.labels:  # inputs first: a label (report) may answer an input of this batch
            items = sorted(items, key=lambda item: item[0].topic != context.topics.input)
        for tp, records in items:
            if not records or tp in skip:  # fetched before the partition was (re)positioned
                continue
            state = context.partitions.get(tp)
            if state is not None:
                events += self._decide(state, records)
                continue
            labels = context.labels.get(tp)
            if labels is not None:
                self._learn(labels, records)
                continue
            log.debug(
                "dropping %d fetched records of %s (not restored or no longer assigned)", len(records), tp
            )
        depths = self._batch_depths
        context.metrics.record_batch(events, depths, self._timings)
        for depth in range(1, len(depths)):
            summary.depth_counts[depth - 1] += depths[depth]
            depths[depth] = 0
        self._timings.clear()
        summary.events += events
        self.committer.schedule.count(events)

    def _decide(self, state: PartitionState, records: list[Any]) -> int:
        """Decide (or replay, or reject) a partition's records; returns how many were consumed."""
        if records[0].offset < state.next_offset:  # never feed the learner a record twice
            records = records[bisect.bisect_left(records, state.next_offset, key=offset_of) :]
            if not records:
                return 0
        consumed = len(records)
        if state.replay_until > records[0].offset:
            cut = bisect.bisect_left(records, state.replay_until, key=offset_of)
            self._replay(state, records[:cut])
            records = records[cut:]
            if not records:
                return consumed
        values = [record.value for record in records]
        start = time.perf_counter_ns()
        payloads, depths, errors = state.learner.process_batch(values, self.max_input_bytes)
        self._timings.append((time.perf_counter_ns() - start, len(values)))
        send = self.committer.producer.send
        topic = self.context.topics.output
        partition = state.out_partition
        on_error = self.committer.on_delivery_error
        counts = self._batch_depths
        for record, payload, depth in zip(records, payloads, depths):
            if payload is not None:
                counts[depth] += 1
                send(topic, payload, key=record.key, partition=partition).add_errback(on_error)
        if any(errors):
            for record, error in zip(records, errors):
                if error is not None:
                    self._reject(state.dlq_partition, record, error.reason, error.detail)
        state.next_offset = records[-1].offset + 1
        return consumed

    def _replay(self, state: PartitionState, records: list[Any]) -> None:
        """Feed records whose results were already delivered to the learner, producing nothing."""
        state.learner.process_batch([record.value for record in records], self.max_input_bytes)
        state.next_offset = records[-1].offset + 1
        self.context.summary.replayed += len(records)
        self.context.metrics.replayed.inc(len(records))

    def _learn(self, labels: LabelsPartitionState, records: list[Any]) -> None:
        from kafka import TopicPartition

        context = self.context
        state = context.partitions.get(TopicPartition(context.topics.input, labels.tp.partition))
        if records[0].offset < labels.next_offset:  # never feed the stages a label twice
            records = records[bisect.bisect_left(records, labels.next_offset, key=offset_of) :]
            if not records:
                return
        limit = self.max_input_bytes
        for record in records:
            value = record.value
            if state is None:
                self._reject(
                    labels.dlq_partition,
                    record,
                    "processing_error",
                    f"no learner for input partition {labels.tp.partition} in this instance",
                )
            elif value is not None and len(value) > limit:
                self._reject(
                    labels.dlq_partition, record, "oversize", f"value has {len(value)} bytes, limit {limit}"
                )
            else:
                try:
                    state.learner.learn(value)
                except InvalidEvent as error:
                    self._reject(labels.dlq_partition, record, error.reason, error.detail)
        labels.next_offset = records[-1].offset + 1
        if state is not None:
            state.labels_offset = labels.next_offset
        context.summary.labels += len(records)
        context.metrics.labels.inc(len(records))

    def _reject(self, dlq_partition: int, record: Any, reason: str, detail: str) -> None:
        letter = DeadLetter.for_record(record, reason, detail)
        key, value, headers = letter.to_record(self.max_input_bytes, self.dead_letter_bytes)
        self.committer.producer.send(
            self.context.topics.dead_letter, value, key=key, headers=headers, partition=dlq_partition
        ).add_errback(self.committer.on_delivery_error)
        self.context.summary.dead_letters[reason] += 1
        self.context.metrics.dead_letter(reason)

    def skip_undecodable(self, error: Exception) -> None:
        """Dead-letter a record batch ``poll()`` could not decode and seek past it; else re-raise.

        Its records cannot be read, so the batch (raw bytes and offsets) is the dead letter; the
        offsets move past it only with that record (in the same transaction in exactly-once mode).
        """
        context = self.context
        batch = undecodable_batch(error)
        with context.lock:
            state = None
            if batch is not None:
                state = context.partitions.get(batch.tp) or context.labels.get(batch.tp)
            if state is None:
                raise error
            first = max(batch.base_offset, state.next_offset, context.consumer.position(batch.tp) or 0)
            self.committer.begin()
            detail = batch.describe(first)
            log.error("%s/%d: %s; dead-lettered and skipped", batch.tp.topic, batch.tp.partition, detail)
            letter = DeadLetter(
                reason="undecodable_batch",
                error=detail,
                topic=batch.tp.topic,
                partition=batch.tp.partition,
                offset=first,
                timestamp=None,
                key=None,
                value=batch.raw,
            )
            key, value, headers = letter.to_record(self.max_input_bytes)
            self.committer.producer.send(
                context.topics.dead_letter, value, key=key, headers=headers, partition=state.dlq_partition
            ).add_errback(self.committer.on_delivery_error)
            context.summary.dead_letters["undecodable_batch"] += 1
            context.metrics.dead_letter("undecodable_batch")
            state.next_offset = batch.next_offset
            context.consumer.seek(batch.tp, batch.next_offset)
