"""Each polled record to its place: decisions, replays, labels and dead letters.

:class:`Dispatcher` handles one batch returned by ``poll`` (the caller holds the run's lock):

- an input record is decided by its partition's learner and the decision sent to the output
  topic, or it is rejected to the dead-letter topic; a record below the partition's
  ``replay_until`` (already delivered before a restart) is fed to the learner only;
- a labels record teaches its partition's learner (features mode: the stage models;
  orchestration: a report or a label, and a report that asks for its label sends the request to
  the output topic, like a decision);
- a record batch ``poll`` could not decode is dead-lettered whole and skipped
  (:meth:`~Dispatcher.skip_undecodable`).

A batch is the client seam's :class:`~uss_stream_kafka.clients.Records` per partition: the learner
decides a whole column of values at once, the decisions go out with one ``send_many``, and a full
record is only built for a dead letter.

No record is ever fed to a learner twice: records below a partition's next offset are dropped.
Everything is sent through the :class:`~uss_stream_kafka.runtime.commit.Committer`'s producer, in
its open transaction in exactly-once mode.

A decision and a dead letter carry the trace context of their input record: its headers named in
:data:`TRACE_HEADERS` (W3C Trace Context, and the same as CloudEvents attributes) when they are valid
(:mod:`~uss_stream_kafka.processing.tracecontext`), and those named by ``--propagate-header``
(:func:`carried_headers`). The headers count towards the decision's size: an input whose decision,
with its key and headers, would exceed the output topic's record limit is dead-lettered ``oversize``.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from uss_stream_kafka.clients import Records, TopicPartition, UndecodableError
from uss_stream_kafka.clients.limits import headers_bytes
from uss_stream_kafka.processing.deadletter import DeadLetter
from uss_stream_kafka.processing.events import InvalidEvent
from uss_stream_kafka.processing.tracecontext import TRACE_HEADERS, trace_checked
from uss_stream_kafka.runtime.commit import Committer
from uss_stream_kafka.runtime.context import LabelsPartitionState, PartitionState, RunContext

__all__ = ["TRACE_HEADERS", "Dispatcher", "carried_headers"]

Headers = Sequence[tuple[str, bytes]]


def carried_headers(columns: Sequence[Headers | None], names: Collection[str]) -> list[list] | None:
    """Per record, its headers named in ``names`` (any case), trace headers only valid ones
    (:func:`~uss_stream_kafka.processing.tracecontext.trace_checked`); ``None`` if no record has one.

    Examples
    --------
    >>> names = {"traceparent", "tenant"}
    >>> parent = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    >>> carried_headers([None, [("TraceParent", parent), ("x", b"1")], [("tenant", b"t")]], names)
    [[], [('TraceParent', b'00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')], [('tenant', b't')]]
    >>> carried_headers([None, [("x", b"1")], [("traceparent", b"0" * 1_000_000)]], names) is None
    True
    """
    if not any(columns):  # the common case: no record has a header
        return None
    carried: list[list] | None = None
    for i, headers in enumerate(columns):
        if not headers:
            continue
        kept = trace_checked([(name, value) for name, value in headers if name.lower() in names])
        if kept:
            if carried is None:
                carried = [[] for _ in columns]
            carried[i] = kept
    return carried


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
    output_bytes
        The largest record (key and value) the output topic accepts (``None``: unknown). An input
        whose decision (or a report whose label request) would be larger is dead-lettered
        ``oversize`` instead: the broker would refuse the record, and every restart with it.
    propagate
        Header names copied from an input record onto its decision and dead letter besides
        :data:`TRACE_HEADERS`.
    """

    def __init__(
        self,
        context: RunContext,
        committer: Committer,
        max_input_bytes: int,
        dead_letter_bytes: int | None,
        output_bytes: int | None = None,
        propagate: Iterable[str] = (),
    ) -> None:
        self._carried = frozenset(name.lower() for name in (*TRACE_HEADERS, *propagate))
        self.context = context
        self.committer = committer
        self.max_input_bytes = max_input_bytes
        self.dead_letter_bytes = dead_letter_bytes
        self.output_bytes = output_bytes
        self._timings: list[tuple[int, int]] = []
        self._batch_depths = [0] * (context.processor.n_stages + 1)
        self._partition_depths: list[tuple[int, list[int]]] = []  # for the learning metrics

    def discard_batch(self) -> None:
        """Forget the depths and timings of a batch whose transaction is aborted."""
        self._timings.clear()
        self._batch_depths = [0] * len(self._batch_depths)
        self._partition_depths.clear()

    def process(self, batch: Mapping[Any, Records], skip: Iterable[Any] = ()) -> None:
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
        if context.learning is not None:
            for partition, counts in self._partition_depths:
                context.learning.add_costs(partition, counts)
            self._partition_depths.clear()
        for depth in range(1, len(depths)):
            summary.depth_counts[depth - 1] += depths[depth]
            depths[depth] = 0
        self._timings.clear()
        summary.events += events
        self.committer.schedule.count(events)

    def _decide(self, state: PartitionState, records: Records) -> int:
        """Decide (or replay, or reject) a partition's records; returns how many were consumed."""
        records = _from(records, state.next_offset)  # never feed the learner a record twice
        if records is None:
            return 0
        consumed = len(records)
        if state.replay_until > records.first_offset:
            cut = bisect.bisect_left(records.offsets, state.replay_until)
            self._replay(state, records[:cut])
            if cut == consumed:
                return consumed
            records = records[cut:]
        values = records.values
        start = time.perf_counter_ns()
        payloads, depths, errors = state.learner.process_batch(values, self.max_input_bytes)
        self._timings.append((time.perf_counter_ns() - start, len(values)))
        keys = records.keys
        carried = carried_headers(records.headers, self._carried)
        counts = self._batch_depths
        if self.output_bytes is not None:
            self._refuse_oversize(state.learner, payloads, keys, depths, errors, carried)
        if None in payloads:  # rejected (or not to be answered)
            sent = [i for i, payload in enumerate(payloads) if payload is not None]
            payloads = [payloads[i] for i in sent]
            keys = [keys[i] for i in sent]
            depths = [depths[i] for i in sent]
            carried = None if carried is None else [carried[i] for i in sent]
        if any(errors):
            for i, error in enumerate(errors):
                if error is not None:
                    self._reject(state.dlq_partition, records, i, error.reason, error.detail)
        mix = [0] + [depths.count(depth) for depth in range(1, len(counts))]
        for depth in range(1, len(counts)):
            counts[depth] += mix[depth]
        if self.context.learning is not None:
            self._partition_depths.append((state.tp.partition, mix))
        self.committer.producer.send_many(
            self.context.topics.output, payloads, keys, state.out_partition, carried
        )
        state.next_offset = records.next_offset
        return consumed

    def _replay(self, state: PartitionState, records: Records) -> None:
        """Feed records whose results were already delivered to the learner, producing nothing."""
        state.learner.process_batch(records.values, self.max_input_bytes)
        state.next_offset = records.next_offset
        self.context.summary.replayed += len(records)
        self.context.metrics.replayed.inc(len(records))

    def _learn(self, labels: LabelsPartitionState, records: Records) -> None:
        context = self.context
        state = context.partitions.get(TopicPartition(context.topics.input, labels.tp.partition))
        records = _from(records, labels.next_offset)  # never feed the stages a label twice
        if records is None:
            return
        limit = self.max_input_bytes
        for i, value in enumerate(records.values):
            if state is None:
                self._reject(
                    labels.dlq_partition,
                    records,
                    i,
                    "processing_error",
                    f"no learner for input partition {labels.tp.partition} in this instance",
                )
            elif value is not None and len(value) > limit:
                detail = f"value has {len(value)} bytes, limit {limit}"
                self._reject(labels.dlq_partition, records, i, "oversize", detail)
            else:
                try:
                    answer = state.learner.learn(value)
                except InvalidEvent as error:
                    self._reject(labels.dlq_partition, records, i, error.reason, error.detail)
                else:
                    if answer is not None and self._too_large(answer, records.keys[i]):
                        detail = f"its label request has {len(answer)} bytes, {self._output_limit_text()}"
                        self._reject(labels.dlq_partition, records, i, "oversize", detail)
                    elif answer is not None:  # orchestration: the report asks for its event's label
                        self.committer.producer.send(
                            context.topics.output, answer, key=records.keys[i], partition=state.out_partition
                        )
        labels.next_offset = records.next_offset
        if state is not None:
            state.labels_offset = labels.next_offset
        context.summary.labels += len(records)
        context.metrics.labels.inc(len(records))

    def _refuse_oversize(
        self,
        learner: Any,
        payloads: list[bytes | None],
        keys: list[bytes | None],
        depths: list[int],
        errors: list[Any],
        carried: list[list] | None = None,
    ) -> None:
        """Turn, in place, each decision too large for the output topic into an ``oversize`` error.

        A decision's size is its value's, its key's and the ``carried`` headers' (one list per
        record, or ``None``: none). A learner that can (orchestration) withdraws the decision; the
        others keep what they learned from the event (its stage outputs, in outputs mode).
        """
        withdraw = getattr(learner, "withdraw", None)
        extra = [0] * len(payloads) if carried is None else [headers_bytes(headers) for headers in carried]
        longest = max(map(len, filter(None, payloads)), default=0)
        longest += max(map(len, filter(None, keys)), default=0) + max(extra, default=0)
        if longest <= (self.output_bytes or 0):
            return  # the common case: one pass in C over the batch
        for i, payload in enumerate(payloads):
            if payload is not None and self._too_large(payload, keys[i], extra[i]):
                with_headers = f" and {extra[i]} of headers" if extra[i] else ""
                detail = f"its decision has {len(payload)} bytes{with_headers}, {self._output_limit_text()}"
                errors[i] = InvalidEvent("oversize", detail)
                if withdraw is not None:
                    withdraw(payload)
                payloads[i], depths[i] = None, 0

    def _too_large(self, value: bytes, key: bytes | None, headers: int = 0) -> bool:
        return self.output_bytes is not None and len(value) + len(key or b"") + headers > self.output_bytes

    def _output_limit_text(self) -> str:
        topic = self.context.topics.output
        return f"output topic {topic!r} accepts {self.output_bytes} (key, value and headers)"

    def _reject(self, dlq_partition: int, records: Records, index: int, reason: str, detail: str) -> None:
        record = records.record(index)
        letter = DeadLetter.for_record(record, reason, detail)
        carried = (carried_headers([record.headers], self._carried) or [[]])[0]
        self._send_dead_letter(letter, dlq_partition, self.dead_letter_bytes, carried)

    def _send_dead_letter(
        self, letter: DeadLetter, dlq_partition: int, limit: int | None, carried: Headers = ()
    ) -> None:
        """Send ``letter``, with the input's ``carried`` headers after its own (within ``limit``)."""
        size = headers_bytes(carried)
        if limit is not None and size > limit // 4:
            carried = ()  # too large to go beside the envelope, which keeps every header of the input
        elif limit is not None:
            limit -= size
        key, value, headers = letter.to_record(self.max_input_bytes, limit)
        headers = [*headers, *carried]
        self.committer.producer.send(
            self.context.topics.dead_letter, value, key=key, partition=dlq_partition, headers=headers
        )
        self.context.summary.dead_letters[letter.reason] += 1
        self.context.metrics.dead_letter(letter.reason)

    def skip_undecodable(self, error: UndecodableError) -> None:
        """Dead-letter a record batch ``poll()`` could not decode and seek past it.

        Its records cannot be read, so the batch (raw bytes and offsets, when the client hands them
        over; else the first record's offset) is the dead letter; the offsets move past it only with
        that record (in the same transaction in exactly-once mode). Re-raises ``error`` for a
        partition this instance does not process.
        """
        context = self.context
        batch = error.batch
        with context.lock:
            state = context.partitions.get(error.tp) or context.labels.get(error.tp)
            if state is None:
                raise error
            if batch is None and 0 <= state.next_offset < error.offset:
                # Records before it are still to be processed (the partition was repositioned):
                # they are read again, and so is the undecodable record, in its turn.
                context.consumer.seek(error.tp, state.next_offset)
                return
            first = max(error.offset, state.next_offset)
            if batch is not None:  # kafka-python may have handed over the batch's first records
                first = max(first, batch.base_offset, context.consumer.position(error.tp) or 0)
            after = first + 1 if batch is None else batch.next_offset
            self.committer.begin()
            detail = str(error) if batch is None else batch.describe(first)
            log.error("%s/%d: %s; dead-lettered and skipped", error.tp.topic, error.tp.partition, detail)
            letter = DeadLetter(
                reason="undecodable_batch",
                error=detail,
                topic=error.tp.topic,
                partition=error.tp.partition,
                offset=first,
                timestamp=None,
                key=None,
                value=None if batch is None else batch.raw,
            )
            self._send_dead_letter(letter, state.dlq_partition, None)
            state.next_offset = after
            context.consumer.seek(error.tp, after)


def _from(records: Records, offset: int) -> Records | None:
    """The records at ``offset`` and after (``None`` if none)."""
    if records.first_offset < offset:
        records = records[bisect.bisect_left(records.offsets, offset) :]
    return records if len(records) else None
