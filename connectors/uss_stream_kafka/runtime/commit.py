"""The commit / transaction protocol: commit points, checkpoints, the producer and its replacement.

:class:`Committer` puts at-least-once and exactly-once behind one interface (Quix Streams keeps it
in its ``ProcessingContext`` and ``Checkpoint``; the application only asks for a commit point):

- :meth:`~Committer.begin` before anything is sent (opens a transaction in exactly-once mode);
- :meth:`~Committer.commit_point`: at-least-once, flush the producer, check that every record was
  delivered, write the checkpoints if asked (each changed learner's state with the offset it
  covers, to the compacted state topic, flushed *before* committing), and commit the offsets;
  exactly-once, write every changed learner's checkpoint and the consumer offsets into the open
  transaction and commit it, or :meth:`~Committer.abort` it: the caller then rewinds to the last
  committed transaction (:meth:`Recovery.rewind <uss_stream_kafka.runtime.recovery.Recovery.rewind>`);
- :meth:`~Committer.handover`: the same for partitions being revoked;
- :meth:`~Committer.new_producer` is the one place the producer is created; a producer that cannot
  abort is replaced by a new one with the same transactional id, at most
  :data:`MAX_REPLACEMENTS` - 1 times within :data:`REPLACEMENT_WINDOW` seconds and once between
  two commits.

When a commit point is due is counted by a :class:`CommitSchedule`.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any

from uss_stream_kafka import clients
from uss_stream_kafka.clients import ClientError
from uss_stream_kafka.clients.config import ClientConfig
from uss_stream_kafka.clients.librdkafka_config import kafka_python_name
from uss_stream_kafka.exceptions import DeliveryError
from uss_stream_kafka.runtime.checkpoint import Checkpoint
from uss_stream_kafka.runtime.context import LabelsPartitionState, PartitionState, RunContext

__all__ = [
    "MAX_REPLACEMENTS",
    "PRODUCER_DEFAULTS",
    "REACHABLE_TIMEOUT",
    "REPLACEMENT_WINDOW",
    "SERVICE_PRODUCER_SETTINGS",
    "CommitSchedule",
    "Committer",
    "fatal_error",
    "transactional_id",
]

log = logging.getLogger("uss_stream_kafka")

#: Producer settings tuned for throughput (overridable with ``producer_options``).
PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger_ms": 20,
    "batch_size": 512 * 1024,
    "max_request_size": 4 * 1024 * 1024,
}

#: Producer settings the delivery guarantees depend on: not overridable.
SERVICE_PRODUCER_SETTINGS = frozenset({"acks", "enable_idempotence", "transactional_id"})

#: Exactly-once: this many producer replacements within ``REPLACEMENT_WINDOW`` seconds are fatal.
MAX_REPLACEMENTS = 3
REPLACEMENT_WINDOW = 600.0
#: Exactly-once: seconds a producer replacement waits for unreachable brokers (a broker restart).
REACHABLE_TIMEOUT = 300.0

#: Protocol error codes no retry, abort or new producer helps with: authorisation failures
#: (topic, group, cluster, transactional id), a broker too old for transactions, SASL.
FATAL_CODES = frozenset({29, 30, 31, 35, 53, 58})
#: Kafka's error code of a static member fenced by another with its ``group.instance.id``, or by its
#: own rejoin: librdkafka, its session timed out in a broker outage, rejoins with a new member id,
#: and a commit sent meanwhile under the old one is refused with it.
FENCED_INSTANCE_ID = 82
#: Offset commits refused because the group is rebalancing (or this member left it).
REBALANCE_CODES = frozenset({22, 25, 27})
REBALANCE_NAMES = frozenset({"CommitFailedError", "_ASSIGNMENT_LOST", "_STATE"})


def fatal_error(error: BaseException) -> bool:
    """Whether ``error`` ends the service: an authorisation or broker-version failure.

    >>> fatal_error(ClientError("denied", name="TOPIC_AUTHORIZATION_FAILED", code=29, fatal=True))
    True
    >>> fatal_error(ClientError("fenced", code=90, fatal=True)), fatal_error(DeliveryError("late"))
    (False, False)
    """
    return isinstance(error, ClientError) and error.code in FATAL_CODES


def transactional_id(group_id: str, group_instance_id: str | None) -> str:
    """The transactional id of an instance: stable across its restarts, distinct within its group.

    >>> transactional_id("uss", "w1")
    'uss-stream.uss.w1'
    """
    return f"uss-stream.{group_id}.{group_instance_id or socket.gethostname()}"


class CommitSchedule:
    """When the next commit point is due, and whether it writes the checkpoints.

    Parameters
    ----------
    commit_interval, commit_every
        A commit point every ``commit_interval`` seconds and/or every ``commit_every`` records
        (``0`` disables the count).
    checkpoint_interval, checkpoint_every
        Checkpoint (and commit) every ``checkpoint_interval`` seconds and/or ``checkpoint_every``
        records (``0`` disables either).

    Examples
    --------
    >>> schedule = CommitSchedule(commit_interval=60.0, commit_every=100, checkpoint_interval=0.0,
    ...                           checkpoint_every=250)
    >>> schedule.count(100)
    >>> now = time.monotonic()
    >>> schedule.checkpoint_due(now), schedule.commit_due(now)
    (False, True)
    >>> schedule.committed()
    >>> schedule.count(150)
    >>> schedule.checkpoint_due(now), schedule.commit_due(now)
    (True, True)
    """

    def __init__(
        self, commit_interval: float, commit_every: int, checkpoint_interval: float, checkpoint_every: int
    ) -> None:
        self.commit_interval = commit_interval
        self.commit_every = commit_every
        self.checkpoint_interval = checkpoint_interval
        self.checkpoint_every = checkpoint_every
        self._since_commit = self._since_checkpoint = 0
        self._last_commit = self._last_checkpoint = time.monotonic()

    def count(self, events: int) -> None:
        """Count ``events`` records processed towards the next commit point and checkpoint."""
        self._since_commit += events
        self._since_checkpoint += events

    def checkpoint_due(self, now: float) -> bool:
        """Whether the next commit point writes the checkpoints (``checkpoint_every`` / ``_interval``)."""
        return bool(
            (self.checkpoint_every and self._since_checkpoint >= self.checkpoint_every)
            or (self.checkpoint_interval and now - self._last_checkpoint >= self.checkpoint_interval)
        )

    def commit_due(self, now: float) -> bool:
        """Whether a commit point is due (``commit_every`` records or ``commit_interval`` seconds)."""
        return bool(
            (self.commit_every and self._since_commit >= self.commit_every)
            or now - self._last_commit >= self.commit_interval
        )

    def committed(self) -> None:
        """Restart the commit clock and count (at the end of a commit point)."""
        self._last_commit = time.monotonic()
        self._since_commit = 0

    def checkpointed(self, now: float) -> None:
        """Restart the checkpoint clock and count (the checkpoints were written at ``now``)."""
        self._last_checkpoint = now
        self._since_checkpoint = 0


class Committer:
    """The commit / transaction protocol of one run (see the module's docstring).

    Parameters
    ----------
    context
        The run's shared state: partitions, lock, summary, metrics, consumer.
    client
        Connection settings of the producer.
    library
        The client library (one of :data:`uss_stream_kafka.clients.CLIENTS`).
    producer_options
        Extra producer settings (kafka-python names; librdkafka's dotted ones with ``confluent``),
        not those of :data:`SERVICE_PRODUCER_SETTINGS`.
    exactly_once
        Transactions (``True``) or at-least-once commits.
    transactional_id
        The producer's transactional id (exactly-once only).
    schedule
        When a commit point (a checkpoint) is due; :meth:`write_checkpoints` restarts its checkpoint clock.

    Examples
    --------
    >>> from uss_stream_kafka.clients.topics import Topics
    >>> context = RunContext(Topics("i", "o", "d", "s"), group_id="g")
    >>> committer = Committer(context, ClientConfig("127.0.0.1:9092"), {}, exactly_once=True,
    ...                       transactional_id="uss-stream.g.w1", schedule=CommitSchedule(1.0, 0, 5.0, 0))
    >>> committer.flush_timeout   # half kafka-python's default transaction timeout
    30.0
    """

    def __init__(
        self,
        context: RunContext,
        client: ClientConfig,
        producer_options: Mapping[str, Any],
        *,
        exactly_once: bool,
        transactional_id: str | None,
        schedule: CommitSchedule,
        library: str = "kafka-python",
    ) -> None:
        # Under librdkafka's names too (the confluent client passes those unchanged).
        owned = sorted(k for k in producer_options if kafka_python_name(k) in SERVICE_PRODUCER_SETTINGS)
        if owned:
            raise ValueError(
                f"producer_options: {', '.join(owned)} are set by the service (acks=all, idempotence, "
                "transactions) for its delivery guarantee and cannot be overridden"
            )
        self.context = context
        self.client = client
        self.producer_options = dict(producer_options)
        self.exactly_once = exactly_once
        self.transactional_id = transactional_id
        self.schedule = schedule
        self.library = library
        self.producer: clients.Producer | None = None
        # Exactly-once: a transaction is open; one was aborted (learners and positions to restore).
        self.in_transaction = False
        self.rewind_needed = False
        #: The consumer was fenced in an offset commit: the loop replaces it before its next poll.
        self.consumer_fenced: ClientError | None = None
        self._replaced_since_commit = False
        self._replacements: list[float] = []  # monotonic times of the producer replacements

    @property
    def flush_timeout(self) -> float | None:
        """Seconds a flush may take in exactly-once mode: half the transaction timeout (``None``: unbounded).

        Past it the transaction is given up before the broker times it out, and the producer replaced.
        """
        if not self.exactly_once:
            return None
        return float(self.producer_options.get("transaction_timeout_ms", 60_000)) / 2_000

    # -- the producer ----------------------------------------------------------------------------
    def new_producer(self) -> clients.Producer:
        """The producer; in exactly-once mode it has fenced a previous incarnation (``init_transactions``)."""
        transactional = {"transactional_id": self.transactional_id} if self.exactly_once else {}
        producer = clients.producer(
            self.library,
            **{
                **self.client.kafka_kwargs("producer"),
                **PRODUCER_DEFAULTS,
                **self.producer_options,
                "acks": "all",
                "enable_idempotence": True,
                **transactional,
            },
        )
        if self.exactly_once:
            # Fences a previous incarnation and aborts its open transaction before anything is read.
            try:
                producer.init_transactions(self._call_timeout)
            except BaseException:
                producer.close(timeout=0)
                raise
        return producer

    @property
    def _call_timeout(self) -> float:
        """Seconds a transactional call may block (librdkafka's otherwise wait forever)."""
        return self.flush_timeout or 30.0

    def start(self) -> None:
        """Create the producer (exactly-once: fence the previous incarnation of the instance)."""
        self.producer = self.new_producer()
        if self.exactly_once:
            log.info("exactly-once: transactional id %r", self.transactional_id)

    def replace_producer(self, cause: BaseException) -> None:
        """Close the producer and start a new one with the same transactional id.

        Its ``init_transactions`` fences the old one and makes the broker abort the old open
        transaction. Fatal instead: a second replacement before a transaction commits, or the
        :data:`MAX_REPLACEMENTS`-th within :data:`REPLACEMENT_WINDOW` seconds; an instance that
        keeps being fenced most likely shares its transactional id with another one. A replacement
        caused by a timeout (a broker restart, a starved broker) counts for neither rule.
        """
        now = time.monotonic()
        recent = [t for t in self._replacements if now - t < REPLACEMENT_WINDOW]
        # A timeout (records or a transactional call not answered in time: an outage, a starved
        # broker) says nothing of another instance: it is neither counted nor fatal.
        outage = isinstance(cause, ClientError) and cause.timeout and not cause.fenced
        if not outage and (self._replaced_since_commit or len(recent) + 1 >= MAX_REPLACEMENTS):
            raise DeliveryError(
                f"the transactional producer {self.transactional_id!r} failed again ({cause!r}) after "
                f"{len(recent)} replacement(s) in {REPLACEMENT_WINDOW:.0f}s: is another instance using "
                "the same transactional id (--group-instance-id)?"
            ) from cause
        self._replacements = recent if outage else [*recent, now]
        log.warning("replacing the transactional producer (%r): the new one fences it", cause)
        try:
            self.producer.close(timeout=1)
        except Exception as error:
            log.warning("closing the replaced producer: %s", error)
        self.producer = self._reconnected_producer()
        self._replaced_since_commit = self._replaced_since_commit or not outage
        self.context.summary.producer_replacements += 1
        self.context.metrics.producer_replacements.inc()

    def _reconnected_producer(self) -> Any:
        """A new transactional producer, retried while the brokers cannot be reached (an outage).

        A replacement during an outage longer than kafka-python's bootstrap timeout (30 s) would
        otherwise end the service; it retries for up to :data:`REACHABLE_TIMEOUT` seconds. A stop
        requested meanwhile, or the deadline, ends the wait with :class:`DeliveryError`.
        """
        stop = self.context.stop
        deadline = time.monotonic() + REACHABLE_TIMEOUT
        while True:
            try:
                return self.new_producer()
            except ClientError as error:
                if not (error.retriable or error.timeout):
                    raise
                if stop.is_set() or time.monotonic() >= deadline:
                    raise DeliveryError(
                        f"the brokers did not answer the new transactional producer: {error!r}"
                    ) from error
                log.warning("the brokers cannot be reached to replace the producer (%r): retrying", error)
                stop.wait(1.0)

    def abort_open_transaction(self) -> None:
        """Teardown: abort the open transaction, if any (failures are only logged)."""
        if self.in_transaction and self.producer is not None:
            try:
                self.producer.abort_transaction()
            except Exception as error:
                log.warning("aborting the open transaction: %s", error)

    def close(self) -> None:
        """Teardown: close the producer (failures are only logged)."""
        if self.producer is not None:
            try:
                self.producer.close(timeout=10)
            except Exception as error:
                log.warning("closing the producer: %s", error)

    # -- commit points ---------------------------------------------------------------------------
    def begin(self) -> None:
        """Exactly-once: open a transaction unless one is open (at-least-once: nothing to do)."""
        if self.exactly_once and not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True

    def commit_point(self, checkpoint: bool) -> bool:
        """Flush, check delivery, checkpoint if asked, then commit every partition's progress.

        In exactly-once mode: commit the transaction (with checkpoints and offsets), or abort it and
        return ``False`` (the caller restores the learners and positions of the last committed one).
        """
        context = self.context
        if self.exactly_once:
            with context.lock:
                return self.commit_transaction()
        with context.lock:
            self.flush()
            if checkpoint:
                self.write_checkpoints(list(context.partitions.values()))
            offsets = self.offsets(list(context.partitions.values()) + list(context.labels.values()))
        self._commit(offsets)
        return True

    def handover(self, states: list[PartitionState], labels: list[LabelsPartitionState]) -> dict[Any, Any]:
        """Revocation of ``states`` and ``labels``: make their progress durable before they move.

        Exactly-once: the transaction holds every partition's output, so it is committed whole (or
        aborted). At-least-once: flush, checkpoint them, and return their offsets, which the
        rebalance listener commits asynchronously.
        """
        if self.exactly_once:
            if not self.commit_transaction():
                log.warning("the revoked partitions restart from their last committed transaction")
            return {}
        self.flush()
        self.write_checkpoints(states)
        return self.offsets(states + labels)

    def commit_transaction(self) -> bool:
        """Checkpoint every changed learner, add the offsets and commit; ``False`` if aborted."""
        context = self.context
        states = list(context.partitions.values())
        offsets = self.offsets(states + list(context.labels.values()))
        if not self.in_transaction and not offsets:
            return True
        try:
            self.begin()
            self.flush()
            written = self.write_checkpoints(states)
            if offsets:
                self.producer.send_offsets_to_transaction(
                    offsets, context.consumer.group_metadata(), self._call_timeout
                )
            self.producer.commit_transaction(self._call_timeout)
        except (ClientError, DeliveryError) as error:
            if fatal_error(error):
                raise
            self.abort(error)
            return False
        self.in_transaction = False
        self._replaced_since_commit = False
        for checkpoint in written:
            state = context.partitions[clients.TopicPartition(checkpoint.topic, checkpoint.partition)]
            state.base = (checkpoint.offset, checkpoint.state)
            if checkpoint.labels_offset is not None:
                state.labels_base = checkpoint.labels_offset
        self._record_commit(offsets)
        return True

    def abort(self, error: BaseException) -> None:
        """Abort the open transaction; the loop then restores the last committed state.

        A producer that cannot abort (fenced because the broker timed the transaction out, or
        stuck on a flush) is replaced, see :meth:`replace_producer`.
        """
        log.warning("transaction aborted (%r): restoring the last committed state", error)
        self.producer.take_errors()
        if isinstance(error, ClientError) and (error.timeout or error.fenced or error.fatal):
            self.replace_producer(error)
        else:
            try:
                self.producer.abort_transaction(self._call_timeout)
            except ClientError as abort_error:
                self.replace_producer(abort_error)
        self.in_transaction = False
        self.rewind_needed = True
        self.context.summary.aborts += 1
        self.context.metrics.aborts.inc()

    def flush(self) -> None:
        """Wait for every record sent so far; raise :class:`DeliveryError` if any was not delivered.

        In exactly-once mode the wait is bounded (:attr:`flush_timeout`): a transaction that cannot
        be flushed in time is given up (a :class:`ClientError` with ``timeout``).
        """
        self.producer.flush(self.flush_timeout)
        errors = self.producer.take_errors()
        if errors:
            raise DeliveryError(
                f"{len(errors)} decision/dead-letter record(s) were not delivered "
                f"(first error: {errors[0]!r}); offsets are not committed"
            )

    def write_checkpoints(self, states: Iterable[PartitionState]) -> list[Checkpoint]:
        """Write (and flush) the checkpoint of every learner that changed; returns them."""
        context = self.context
        written: list[Checkpoint] = []
        changed = [
            state
            for state in states
            if state.next_offset > state.checkpointed
            or (state.next_offset >= 0 and state.labels_offset > state.labels_checkpointed)
        ]
        now = time.monotonic()
        if changed:
            self.begin()
            written_at = time.time()
            description = context.processor.describe()
            for state in changed:
                checkpoint = Checkpoint(
                    topic=state.tp.topic,
                    partition=state.tp.partition,
                    offset=state.next_offset,
                    state=state.learner.state_dict(),
                    group_id=context.group_id,
                    processor=description,
                    written_at=written_at,
                    labels_offset=None if state.labels_offset < 0 else state.labels_offset,
                )
                written.append(checkpoint)
                self.producer.send(context.topics.state, checkpoint.to_bytes(), key=checkpoint.key)
            self.producer.flush(self.flush_timeout)
            failed = self.producer.take_errors()
            if failed:
                raise DeliveryError(f"checkpoint (or a record before it) not written: {failed[0]!r}")
            for state in changed:
                state.checkpointed = state.next_offset
                state.labels_checkpointed = state.labels_offset
            context.summary.checkpoints += len(changed)
            context.metrics.checkpointed(len(changed))
        self.schedule.checkpointed(now)
        return written

    @staticmethod
    def offsets(states: Iterable[PartitionState | LabelsPartitionState]) -> dict[Any, int]:
        """The offsets to commit: those of ``states`` past their last commit."""
        return {state.tp: state.next_offset for state in states if state.next_offset > state.committed}

    def _commit(self, offsets: dict[Any, int]) -> None:
        if not offsets:
            return
        try:
            self.context.consumer.commit(offsets)
        except ClientError as error:
            if error.code in REBALANCE_CODES or error.name in REBALANCE_NAMES:
                # The partitions are moving: the checkpoints written on revocation make the handover exact.
                log.warning("offset commit failed during a rebalance (%s); the checkpoints cover it", error)
                return
            if error.code == FENCED_INSTANCE_ID:
                # A static member fenced (after a broker outage, by its own rejoin): its consumer
                # cannot go on, whether its library says so (librdkafka: a fatal error on the next
                # poll) or not (kafka-python). The loop replaces it; these offsets' records are
                # decided again (at least once).
                log.warning("offset commit failed, the consumer was fenced (%s); it will be replaced", error)
                self.consumer_fenced = error
                return
            if not (error.retriable or error.timeout):
                raise
            # Broker or coordinator unreachable: the next commit point commits these offsets too.
            log.warning("offset commit deferred, the broker is unreachable (%r)", error)
            return
        self._record_commit(offsets)

    def _record_commit(self, offsets: Mapping[Any, Any]) -> None:
        if not offsets:
            return
        context = self.context
        for tp, offset in offsets.items():
            state = context.partitions.get(tp) or context.labels.get(tp)
            if state is not None:
                state.committed = offset
        context.summary.commits += 1
        context.metrics.committed()
        self._update_lag(offsets)

    def _update_lag(self, offsets: Mapping[Any, Any]) -> None:
        context = self.context
        for tp, offset in offsets.items():
            if tp not in context.partitions:  # a labels partition, or one revoked since
                continue
            end = context.consumer.highwater(tp)
            if end is not None:
                context.metrics.set_lag(tp.partition, max(0, end - offset))
