"""The decision service: consume events, decide, produce decisions, checkpoint the learners.

:class:`Application` owns the Kafka clients and the poll loop; a
:class:`~uss_stream_kafka.processing.Processor` says what to do with each event. One learner per
input partition; the loop, per batch of records returned by ``poll``:

1. decides every record (or rejects it to the dead-letter topic) and sends the results,
2. at a commit point (every ``commit_interval`` seconds / ``commit_every`` records), flushes the
   producer, checks that every record was delivered, and commits the offsets;
3. at a checkpoint (every ``checkpoint_interval`` seconds / ``checkpoint_every`` records, on a
   revocation and on shutdown), writes each changed learner's state with the offset it covers to the
   compacted state topic and flushes it, *before* committing.

On assignment the new partitions are paused; the loop then restores each learner from its
checkpoint and positions the consumer as :func:`~uss_stream_kafka.checkpoint.plan_restore` says,
and resumes them.

With ``guarantee="exactly-once"`` the producer is transactional: everything sent between two
commit points (decisions, dead letters) goes into one transaction, and a commit point writes every
changed learner's checkpoint and the consumer offsets into it too before committing it. If anything
fails the transaction is aborted, and every learner is restored from its last committed checkpoint
with the consumer positioned at the last committed offset. See ``docs/kafka.md`` for the delivery
guarantees.
"""

from __future__ import annotations

import bisect
import logging
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from uss_stream.stats import DisagreementStats
from uss_stream_kafka.checkpoint import Checkpoint, CheckpointStore, plan_restore
from uss_stream_kafka.config import ClientConfig, check_client_options
from uss_stream_kafka.deadletter import DeadLetter
from uss_stream_kafka.events import REASONS, InvalidEvent
from uss_stream_kafka.exceptions import CheckpointError, DeliveryError, MetricsEndpointError
from uss_stream_kafka.http import HttpEndpoint
from uss_stream_kafka.limits import record_limit
from uss_stream_kafka.metrics import ServiceMetrics
from uss_stream_kafka.processing import Processor
from uss_stream_kafka.progress import IdleGate
from uss_stream_kafka.relearn import LabelsLog
from uss_stream_kafka.topics import Topics, check_state_topic
from uss_stream_kafka.undecodable import undecodable_batch

__all__ = ["GUARANTEES", "Application", "DeliveryError", "MetricsEndpointError", "RunSummary"]

log = logging.getLogger("uss_stream_kafka")

#: Consumer settings tuned for throughput (overridable with ``consumer_options``).
CONSUMER_DEFAULTS: dict[str, Any] = {
    "fetch_max_bytes": 64 * 1024 * 1024,
    "max_partition_fetch_bytes": 8 * 1024 * 1024,
    "fetch_max_wait_ms": 100,
    "isolation_level": "read_committed",
    "session_timeout_ms": 45_000,
    "heartbeat_interval_ms": 3_000,
}

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

#: The delivery guarantees :class:`Application` offers.
GUARANTEES = ("at-least-once", "exactly-once")


@dataclass
class RunSummary:
    """What one :meth:`Application.run` did.

    ``events == sum(depth_counts) + sum(dead_letters.values()) + replayed`` when the run kept its
    partitions to the end (records of a partition revoked mid-batch are not double counted) and no
    transaction was aborted (``aborts``: records of an aborted transaction are processed again).
    """

    events: int = 0
    labels: int = 0
    replayed: int = 0
    depth_counts: list[int] = field(default_factory=list)
    dead_letters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    commits: int = 0
    checkpoints: int = 0
    restored: list[str] = field(default_factory=list)
    aborts: int = 0
    producer_replacements: int = 0
    shares: int = 0
    seconds: float = 0.0

    @property
    def decisions(self) -> int:
        return sum(self.depth_counts)


@dataclass
class _Partition:
    """A learner and the offsets of one input partition."""

    tp: Any
    learner: Any
    out_partition: int
    dlq_partition: int
    next_offset: int  # next record to process (-1: unknown until the first record)
    committed: int  # last committed offset known (-1: none)
    checkpointed: int  # offset covered by the last checkpoint written or restored (-1: none)
    replay_until: int  # records below this are replayed without producing
    # Exactly-once: the offset and learner state (None: empty) of the last committed transaction.
    base: tuple[int, dict[str, Any] | None] = (-1, None)
    # Features mode: the labels partition's offset the stage models learned up to (-1: none), the
    # one the last checkpoint covers, and the one of the last committed transaction.
    labels_offset: int = -1
    labels_checkpointed: int = -1
    labels_base: int = -1


@dataclass
class _LabelsPartition:
    tp: Any
    dlq_partition: int
    next_offset: int = -1
    committed: int = -1


class Application:
    """A Kafka decision service: ``Application(...).run(processor)``.

    Parameters
    ----------
    client
        Connection and security settings of every client.
    group_id
        Consumer group; instances of the same group share the input partitions.
    topics
        Topic names; ``topics.labels`` only in features mode.
    commit_interval, commit_every
        Commit (after flushing) every ``commit_interval`` seconds and/or every ``commit_every``
        records (``0`` disables the count).
    checkpoint_interval, checkpoint_every
        Checkpoint (and commit) every ``checkpoint_interval`` seconds and/or ``checkpoint_every``
        records (``0`` disables either); also on revocation and shutdown.
    max_input_bytes
        Larger input values are dead-lettered with reason ``oversize``; dead letters carry at most
        this many bytes of the original value, and are capped as a whole (headers included) below
        the producer's ``max_request_size`` and the dead-letter topic's ``max.message.bytes``.
    max_poll_records
        Records per ``poll`` (one batch).
    auto_offset_reset
        Where a new group starts: ``"earliest"`` (default: nothing is skipped) or ``"latest"``.
    group_instance_id
        Static membership: a restarted instance with the same id takes its partitions back
        without waiting for the session timeout.
    guarantee
        ``"at-least-once"`` (default: a crash duplicates the decisions made since the last commit)
        or ``"exactly-once"`` (transactions: consumers reading with ``isolation_level=
        "read_committed"`` see each decision once). Exactly-once uses the transactional id
        ``uss-stream.<group_id>.<group_instance_id or host name>``: it must be stable across
        restarts of an instance (a restart fences its predecessor and aborts its open transaction)
        and distinct between the instances of a group.
    rebuild_models
        Features mode: checkpoints record how far the stage models learned from the labels
        partition, and a restored (or rewound) learner re-learns the retained labels log up to
        there, so that its River models are those of an uninterrupted run (see
        :mod:`uss_stream_kafka.relearn`). ``False``: the stages start as the factory builds them.
    shared_learning
        Outputs mode: every learner decides on its own counts plus the other input partitions'
        (their last checkpoints in the state topic, or the live counts of the partitions this
        instance holds), refreshed at every commit point. The checkpoints keep each partition's own
        counts. The shared counts lag by at most ``checkpoint_interval`` + ``commit_interval``; the
        depths then depend on timing and are no longer those of a lone learner.
    exit_when_idle
        Stop (gracefully) once no record arrived for this many seconds (``None``: run until
        :meth:`stop`). The clock starts when partitions are first assigned (not while the group
        waits for a dead member's session), and the service stops only if every assigned
        partition is read to its end offset.
    consumer_options, producer_options
        Extra kafka-python settings for the consumer / producer.
    http_host, http_port
        Serve ``/metrics`` and ``/healthz`` there; ``http_port=None`` disables it, ``0`` picks a port.
    health_timeout
        ``/healthz`` fails if the poll loop has not come back for this many seconds.

    Examples
    --------
    >>> from uss_stream_kafka import Application, ClientConfig, OutputsProcessor, Topics
    >>> app = Application(
    ...     ClientConfig("127.0.0.1:9092"), group_id="uss",
    ...     topics=Topics(input="events", output="decisions", dead_letter="events-dlq", state="uss-state"),
    ...     exit_when_idle=10.0, http_port=None)
    >>> app.health()[0]   # not running yet
    False

    ``app.run(OutputsProcessor(stage_costs=[0, 0.15, 0.2]))`` then serves until :meth:`stop`
    (or ten idle seconds) and returns a :class:`RunSummary`.
    """

    def __init__(
        self,
        client: ClientConfig,
        group_id: str,
        topics: Topics,
        *,
        commit_interval: float = 1.0,
        commit_every: int = 0,
        checkpoint_interval: float = 5.0,
        checkpoint_every: int = 0,
        max_input_bytes: int = 256 * 1024,
        max_poll_records: int = 5000,
        auto_offset_reset: str = "earliest",
        group_instance_id: str | None = None,
        guarantee: str = "at-least-once",
        rebuild_models: bool = True,
        shared_learning: bool = False,
        exit_when_idle: float | None = None,
        consumer_options: Mapping[str, Any] | None = None,
        producer_options: Mapping[str, Any] | None = None,
        http_host: str = "0.0.0.0",
        http_port: int | None = 9108,
        health_timeout: float = 60.0,
    ) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise ValueError(f"group_id must be a non-empty string, got {group_id!r}")
        for name, value in (
            ("commit_interval", commit_interval),
            ("checkpoint_interval", checkpoint_interval),
            ("health_timeout", health_timeout),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
        for name, value in (("commit_every", commit_every), ("checkpoint_every", checkpoint_every)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        for name, value in (("max_input_bytes", max_input_bytes), ("max_poll_records", max_poll_records)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(f"auto_offset_reset must be 'earliest' or 'latest', got {auto_offset_reset!r}")
        if guarantee not in GUARANTEES:
            raise ValueError(f"guarantee must be one of {', '.join(GUARANTEES)}, got {guarantee!r}")
        if exit_when_idle is not None and not exit_when_idle > 0:
            raise ValueError(f"exit_when_idle must be > 0 seconds or None, got {exit_when_idle!r}")
        self.client = client
        self.group_id = group_id
        self.topics = topics
        self.commit_interval = float(commit_interval)
        self.commit_every = commit_every
        self.checkpoint_interval = float(checkpoint_interval)
        self.checkpoint_every = checkpoint_every
        self.max_input_bytes = max_input_bytes
        self.max_poll_records = max_poll_records
        self.auto_offset_reset = auto_offset_reset
        self.group_instance_id = group_instance_id
        self.guarantee = guarantee
        self.rebuild_models = bool(rebuild_models)
        self.shared_learning = bool(shared_learning)
        self.exit_when_idle = exit_when_idle
        self.consumer_options = dict(consumer_options or {})
        self.producer_options = dict(producer_options or {})
        check_client_options("consumer", self.consumer_options, "consumer_options")
        check_client_options("producer", self.producer_options, "producer_options")
        owned = sorted(SERVICE_PRODUCER_SETTINGS.intersection(self.producer_options))
        if owned:
            raise ValueError(
                f"producer_options: {', '.join(owned)} are set by the service (acks=all, idempotence, "
                "transactions) for its delivery guarantee and cannot be overridden"
            )
        self.http_host = http_host
        self.http_port = http_port
        self.health_timeout = float(health_timeout)

        self.metrics: ServiceMetrics | None = None
        self.summary = RunSummary()
        self._http: HttpEndpoint | None = None
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._status = "created"
        self._started = time.monotonic()
        self._last_poll = self._started
        self._last_activity = self._started
        self._aborting = False
        self._assigned_once = False  # exit_when_idle counts only from the first assignment
        self._rebalancing = False  # between a revocation and the next assignment
        self._revocations = 0  # revocations so far: a restore interrupted by one stops
        self._idle_gate = IdleGate()
        # Set up by run():
        self._processor: Processor
        self._consumer: Any = None
        self._producer: Any = None
        self._store: CheckpointStore | None = None
        self._labels_log: LabelsLog | None = None
        self._partitions: dict[Any, _Partition] = {}
        self._labels: dict[Any, _LabelsPartition] = {}
        self._pending: set[Any] = set()
        # Exactly-once: a transaction is open; one was aborted (learners and positions to restore).
        self._in_transaction = False
        self._rewind_needed = False
        self._replaced_since_commit = False
        self._unshared: set[bytes] = set()  # checkpoint keys shared learning skips (warned once)
        self._replacements: list[float] = []  # monotonic times of the producer replacements
        # Send failures, appended by the producer's thread; checked at every flush. (Holding each
        # send's future instead would keep a second's worth of them alive through several garbage
        # collections, which costs more than the errback.)
        self._delivery_errors: list[BaseException] = []
        self._on_delivery_error = self._delivery_errors.append
        self._timings: list[tuple[int, int]] = []
        self._batch_depths: list[int] = []
        self._n_output = self._n_dlq = 1
        self._dead_letter_bytes: int | None = None  # the largest dead letter the broker accepts
        self._since_commit = self._since_checkpoint = 0
        self._last_commit = self._last_checkpoint = self._started

    @property
    def exactly_once(self) -> bool:
        """Whether the application runs transactionally (``guarantee="exactly-once"``)."""
        return self.guarantee == "exactly-once"

    @property
    def flush_timeout(self) -> float | None:
        """Seconds a flush may take in exactly-once mode: half the transaction timeout (``None``: unbounded).

        Past it the transaction is given up before the broker times it out, and the producer replaced.
        """
        if not self.exactly_once:
            return None
        return float(self.producer_options.get("transaction_timeout_ms", 60_000)) / 2_000

    @property
    def transactional_id(self) -> str | None:
        """The producer's transactional id in exactly-once mode (``None`` otherwise)."""
        if not self.exactly_once:
            return None
        return f"uss-stream.{self.group_id}.{self.group_instance_id or socket.gethostname()}"

    # -- control ---------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the loop to stop after the current batch (safe from signal handlers and other threads)."""
        self._stop.set()

    @property
    def http_address(self) -> tuple[str, int] | None:
        """``(host, port)`` of the metrics/health endpoint while it runs."""
        return None if self._http is None else (self.http_host, self._http.port)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)``: healthy while running and polling within ``health_timeout``."""
        now = time.monotonic()
        poll_age = now - self._last_poll
        healthy = self._status == "starting" or (self._status == "running" and poll_age < self.health_timeout)
        details: dict[str, Any] = {
            "status": self._status if healthy or self._status != "running" else "stalled",
            "group_id": self.group_id,
            "input_topic": self.topics.input,
            "assigned_partitions": sorted(tp.partition for tp in self._partitions),
            "last_poll_age_seconds": round(poll_age, 3),
            "events": self.summary.events,
            "decisions": self.summary.decisions,
        }
        if self.metrics is not None:
            details["last_commit_age_seconds"] = round(self.metrics.last_commit_age(), 3)
            details["last_checkpoint_age_seconds"] = round(self.metrics.last_checkpoint_age(), 3)
        return healthy, details

    # -- the run ---------------------------------------------------------------------------------
    def run(self, processor: Processor) -> RunSummary:
        """Serve until :meth:`stop` (or ``exit_when_idle``); a clean stop commits and checkpoints."""
        if self._status != "created":
            raise RuntimeError("an Application runs once; create a new one")
        if self.topics.labels is not None and processor.mode != "features":
            raise ValueError("a labels topic is only used in features mode")
        if self.shared_learning and processor.mode != "outputs":
            raise ValueError("shared_learning needs outputs mode: a cascade's counts are not shared")
        self._processor = processor
        self._status = "starting"
        self._started = time.monotonic()
        self.summary = RunSummary(depth_counts=[0] * processor.n_stages)
        self._batch_depths = [0] * (processor.n_stages + 1)
        try:
            self._setup()
            self._status = "running"
            self._loop()
            self._status = "stopping"
            while not self._commit_point(checkpoint=True):
                if self._stop.is_set():
                    raise DeliveryError(
                        "the last transaction was aborted at the stop: its records are processed "
                        "again at the next start"
                    )
                # Idle stop: redo the aborted transaction's records, then stop again.
                self._status = "running"
                self._loop()
                self._status = "stopping"
            self._consumer.close()
            self._consumer = None
        except BaseException:
            self._status = "failed"
            self._aborting = True
            raise
        finally:
            self._close()
            self.summary.seconds = time.monotonic() - self._started
        self._status = "stopped"
        log.info(
            "stopped: %d events, %d decisions %s, %d dead letters, %d replayed, %d commits, %d checkpoints",
            self.summary.events,
            self.summary.decisions,
            self.summary.depth_counts,
            sum(self.summary.dead_letters.values()),
            self.summary.replayed,
            self.summary.commits,
            self.summary.checkpoints,
        )
        return self.summary

    def _setup(self) -> None:
        from kafka import KafkaAdminClient, KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        processor = self._processor
        topics = self.topics
        admin = KafkaAdminClient(**self.client.kafka_kwargs("admin"))
        try:
            partitions = _partition_counts(admin, topics.all())
            self._check_state_topic(admin)
            producer_settings = {**PRODUCER_DEFAULTS, **self.producer_options}
            self._dead_letter_bytes = record_limit(admin, topics.dead_letter, producer_settings)
        finally:
            admin.close()
        if topics.labels is not None and partitions[topics.labels] != partitions[topics.input]:
            raise ValueError(
                f"labels topic {topics.labels!r} has {partitions[topics.labels]} partitions and input topic "
                f"{topics.input!r} {partitions[topics.input]}: they must be co-partitioned"
            )
        self._n_output = partitions[topics.output]
        self._n_dlq = partitions[topics.dead_letter]

        self.metrics = ServiceMetrics(processor.n_stages)
        if self.http_port is not None:
            try:
                self._http = HttpEndpoint(self.metrics.registry, self.health, self.http_host, self.http_port)
            except OSError as error:  # port in use, host not resolvable or not local
                raise MetricsEndpointError(
                    f"cannot serve /metrics on {self.http_host}:{self.http_port} "
                    f"({error.strerror or error}): is another instance using the port? "
                    "Pick another --metrics-port (0: any free port) "
                    "or -1 to disable the endpoint"
                ) from error
            self._http.start()
            log.info("metrics and health on http://%s:%d/metrics, /healthz", self.http_host, self._http.port)

        self._producer = self._new_producer()
        if self.exactly_once:
            log.info("exactly-once: transactional id %r", self.transactional_id)
        # read_committed: checkpoints of aborted transactions are never restored.
        self._store = CheckpointStore(
            topics.state, {**self.client.kafka_kwargs("state-reader"), "isolation_level": "read_committed"}
        )
        if topics.labels is not None and self.rebuild_models:
            self._labels_log = LabelsLog(self.client.kafka_kwargs("labels-reader"), self.max_input_bytes)
        consumer_settings = {
            **CONSUMER_DEFAULTS,
            **self.consumer_options,
            "group_id": self.group_id,
            "group_instance_id": self.group_instance_id,
            "enable_auto_commit": False,
            "auto_offset_reset": self.auto_offset_reset,
            "max_poll_records": self.max_poll_records,
            "allow_auto_create_topics": False,
            # Range keeps partition p of the input and labels topics on the same member.
            "partition_assignment_strategy": [RangePartitionAssignor()],
        }
        self._consumer = KafkaConsumer(**{**self.client.kafka_kwargs("consumer"), **consumer_settings})
        subscribed = [topics.input] if topics.labels is None else [topics.input, topics.labels]
        self._consumer.subscribe(subscribed, listener=_listener_for(self))
        log.info(
            "%s mode, group %r: %s -> %s (dead letters %s, state %s)",
            processor.mode,
            self.group_id,
            "+".join(subscribed),
            topics.output,
            topics.dead_letter,
            topics.state,
        )

    def _new_producer(self) -> Any:
        """The producer; in exactly-once mode it has fenced a previous incarnation (``init_transactions``)."""
        from kafka import KafkaProducer

        transactional = {"transactional_id": self.transactional_id} if self.exactly_once else {}
        producer = KafkaProducer(
            **{
                **self.client.kafka_kwargs("producer"),
                **PRODUCER_DEFAULTS,
                **self.producer_options,
                "acks": "all",
                "enable_idempotence": True,
                **transactional,
            }
        )
        # Send failures of this producer only: a replaced producer's late failures go elsewhere.
        self._delivery_errors = []
        self._on_delivery_error = self._delivery_errors.append
        if self.exactly_once:
            # Fences a previous incarnation and aborts its open transaction before anything is read.
            producer.init_transactions()
        return producer

    def _check_state_topic(self, admin: Any) -> None:
        try:
            check_state_topic(admin, self.topics.state)
        except ValueError:
            raise
        except Exception as error:  # e.g. DescribeConfigs not authorised: not fatal, but say so
            log.warning("could not check that state topic %r is compacted: %s", self.topics.state, error)

    def _loop(self) -> None:
        from kafka.errors import KafkaError

        consumer = self._consumer
        poll_ms = 250
        while not self._stop.is_set():
            try:
                batch = consumer.poll(timeout_ms=poll_ms)
            except Exception as error:
                self._skip_undecodable(error)
                continue
            now = time.monotonic()
            self._last_poll = now
            if self._rewind_needed:  # an abort in a rebalance listener: the batch predates the rewind
                self._rewind()
                continue
            restored = self._restore_pending() if self._pending else ()
            if batch:
                with self._lock:
                    try:
                        self._process(batch, skip=restored)
                    except KafkaError as error:
                        self._abandon_batch(error)
                self._last_activity = time.monotonic()
            elif (
                self.exit_when_idle is not None
                and self._assigned_once
                and now - self._last_activity >= self.exit_when_idle
            ):
                # Idle only counts once partitions were assigned, and ends at their end offsets.
                if not self._pending and not self._rebalancing and self._idle_gate.may_stop(consumer):
                    log.info("no record for %.1fs and caught up: stopping", now - self._last_activity)
                    break
                log.info("idle for %.1fs but not caught up: not stopping", now - self._last_activity)
                self._last_activity = now
            self._maybe_commit()

    def _abandon_batch(self, error: BaseException) -> None:
        """Exactly-once: a send refused mid-batch (e.g. the producer was fenced) aborts the transaction.

        Every learner and position is rewound at once to the last committed transaction (before the
        next commit point could commit the progress of the aborted one's earlier batches), and the
        records are processed again.
        """
        from kafka.errors import AuthorizationError, UnsupportedVersionError

        if not self.exactly_once or isinstance(error, (AuthorizationError, UnsupportedVersionError)):
            raise error
        self._timings.clear()
        self._batch_depths = [0] * len(self._batch_depths)
        self._abort(error)
        self._rewind()

    # -- processing ------------------------------------------------------------------------------
    def _process(self, batch: Mapping[Any, list[Any]], skip: Iterable[Any] = ()) -> None:
        summary = self.summary
        if self.exactly_once:
            self._begin()
        events = 0
        for tp, records in batch.items():
            if not records or tp in skip:  # fetched before the partition was (re)positioned
                continue
            state = self._partitions.get(tp)
            if state is not None:
                events += self._decide(state, records)
                continue
            labels = self._labels.get(tp)
            if labels is not None:
                self._learn(labels, records)
                continue
            log.debug(
                "dropping %d fetched records of %s (not restored or no longer assigned)", len(records), tp
            )
        depths = self._batch_depths
        metrics = self.metrics
        metrics.record_batch(events, depths, self._timings)
        for depth in range(1, len(depths)):
            summary.depth_counts[depth - 1] += depths[depth]
            depths[depth] = 0
        self._timings.clear()
        summary.events += events
        self._since_commit += events
        self._since_checkpoint += events

    def _decide(self, state: _Partition, records: list[Any]) -> int:
        """Decide (or replay, or reject) a partition's records; returns how many were consumed."""
        if records[0].offset < state.next_offset:  # never feed the learner a record twice
            records = records[bisect.bisect_left(records, state.next_offset, key=_offset) :]
            if not records:
                return 0
        consumed = len(records)
        if state.replay_until > records[0].offset:
            cut = bisect.bisect_left(records, state.replay_until, key=_offset)
            self._replay(state, records[:cut])
            records = records[cut:]
            if not records:
                return consumed
        values = [record.value for record in records]
        start = time.perf_counter_ns()
        payloads, depths, errors = state.learner.process_batch(values, self.max_input_bytes)
        self._timings.append((time.perf_counter_ns() - start, len(values)))
        send = self._producer.send
        topic = self.topics.output
        partition = state.out_partition
        on_error = self._on_delivery_error
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

    def _replay(self, state: _Partition, records: list[Any]) -> None:
        """Feed records whose results were already delivered to the learner, producing nothing."""
        state.learner.process_batch([record.value for record in records], self.max_input_bytes)
        state.next_offset = records[-1].offset + 1
        self.summary.replayed += len(records)
        self.metrics.replayed.inc(len(records))

    def _learn(self, labels: _LabelsPartition, records: list[Any]) -> None:
        from kafka import TopicPartition

        state = self._partitions.get(TopicPartition(self.topics.input, labels.tp.partition))
        if records[0].offset < labels.next_offset:  # never feed the stages a label twice
            records = records[bisect.bisect_left(records, labels.next_offset, key=_offset) :]
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
        self.summary.labels += len(records)
        self.metrics.labels.inc(len(records))

    def _reject(self, dlq_partition: int, record: Any, reason: str, detail: str) -> None:
        letter = DeadLetter.for_record(record, reason, detail)
        key, value, headers = letter.to_record(self.max_input_bytes, self._dead_letter_bytes)
        self._producer.send(
            self.topics.dead_letter, value, key=key, headers=headers, partition=dlq_partition
        ).add_errback(self._on_delivery_error)
        self.summary.dead_letters[reason] += 1
        self.metrics.dead_letter(reason)

    def _skip_undecodable(self, error: Exception) -> None:
        """Dead-letter a record batch ``poll()`` could not decode and seek past it; else re-raise.

        Its records cannot be read, so the batch (raw bytes and offsets) is the dead letter; the
        offsets move past it only with that record (in the same transaction in exactly-once mode).
        """
        batch = undecodable_batch(error)
        with self._lock:
            state = None if batch is None else (self._partitions.get(batch.tp) or self._labels.get(batch.tp))
            if state is None:
                raise error
            first = max(batch.base_offset, state.next_offset, self._consumer.position(batch.tp) or 0)
            if self.exactly_once:
                self._begin()
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
            self._producer.send(
                self.topics.dead_letter, value, key=key, headers=headers, partition=state.dlq_partition
            ).add_errback(self._on_delivery_error)
            self.summary.dead_letters["undecodable_batch"] += 1
            self.metrics.dead_letter("undecodable_batch")
            state.next_offset = batch.next_offset
            self._consumer.seek(batch.tp, batch.next_offset)
        self._maybe_commit()

    # -- commit points ---------------------------------------------------------------------------
    def _maybe_commit(self) -> None:
        now = time.monotonic()
        checkpoint = (self.checkpoint_every and self._since_checkpoint >= self.checkpoint_every) or (
            self.checkpoint_interval and now - self._last_checkpoint >= self.checkpoint_interval
        )
        if (
            checkpoint
            or (self.commit_every and self._since_commit >= self.commit_every)
            or now - self._last_commit >= self.commit_interval
        ):
            self._commit_point(checkpoint=bool(checkpoint))

    def _commit_point(self, checkpoint: bool) -> bool:
        """Flush, check delivery, checkpoint if asked, then commit every partition's progress.

        In exactly-once mode: commit the transaction (with checkpoints and offsets), or abort it,
        restore the learners and positions of the last committed one and return ``False``.
        """
        if self.exactly_once:
            with self._lock:
                committed = self._commit_transaction()
            if not committed:
                self._rewind()
            elif self.shared_learning:
                self._share()
            self._last_commit = time.monotonic()
            self._since_commit = 0
            return committed
        with self._lock:
            self._flush()
            if checkpoint:
                self._write_checkpoints(list(self._partitions.values()))
            offsets = self._offsets(list(self._partitions.values()) + list(self._labels.values()))
        self._commit(offsets)
        if self.shared_learning:
            self._share()
        self._last_commit = time.monotonic()
        self._since_commit = 0
        return True

    def _begin(self) -> None:
        if not self._in_transaction:
            self._producer.begin_transaction()
            self._in_transaction = True

    def _commit_transaction(self) -> bool:
        """Checkpoint every changed learner, add the offsets and commit; ``False`` if aborted."""
        from kafka.errors import AuthorizationError, KafkaError, UnsupportedVersionError

        states = list(self._partitions.values())
        offsets = self._offsets(states + list(self._labels.values()))
        if not self._in_transaction and not offsets:
            return True
        try:
            self._begin()
            self._flush()
            written = self._write_checkpoints(states)
            if offsets:
                self._producer.send_offsets_to_transaction(offsets, self._consumer.group_metadata())
            self._producer.commit_transaction()
        except (KafkaError, DeliveryError) as error:
            if isinstance(error, (AuthorizationError, UnsupportedVersionError)):
                raise
            self._abort(error)
            return False
        self._in_transaction = False
        self._replaced_since_commit = False
        for checkpoint in written:
            self._partitions[_input_partition(checkpoint)].base = (checkpoint.offset, checkpoint.state)
            if checkpoint.labels_offset is not None:
                self._partitions[_input_partition(checkpoint)].labels_base = checkpoint.labels_offset
        self._record_commit(offsets)
        return True

    def _abort(self, error: BaseException) -> None:
        """Abort the open transaction; the loop then restores the last committed state.

        A producer that cannot abort (fenced because the broker timed the transaction out, or
        stuck on a flush) is replaced, see :meth:`_replace_producer`.
        """
        from kafka.errors import KafkaError, KafkaTimeoutError

        log.warning("transaction aborted (%r): restoring the last committed state", error)
        self._delivery_errors.clear()
        if isinstance(error, KafkaTimeoutError) or _is_fenced(error):
            self._replace_producer(error)
        else:
            try:
                self._producer.abort_transaction()
            except KafkaError as abort_error:
                self._replace_producer(abort_error)
        self._in_transaction = False
        self._rewind_needed = True
        self.summary.aborts += 1
        self.metrics.aborts.inc()

    def _replace_producer(self, cause: BaseException) -> None:
        """Close the producer and start a new one with the same transactional id.

        Its ``init_transactions`` fences the old one and makes the broker abort the old open
        transaction. Fatal instead: a second replacement before a transaction commits, or the
        :data:`MAX_REPLACEMENTS`-th within :data:`REPLACEMENT_WINDOW` seconds; an instance that
        keeps being fenced most likely shares its transactional id with another one.
        """
        now = time.monotonic()
        recent = [t for t in self._replacements if now - t < REPLACEMENT_WINDOW]
        if self._replaced_since_commit or len(recent) + 1 >= MAX_REPLACEMENTS:
            raise DeliveryError(
                f"the transactional producer {self.transactional_id!r} failed again ({cause!r}) after "
                f"{len(recent)} replacement(s) in {REPLACEMENT_WINDOW:.0f}s: is another instance using "
                "the same transactional id (--group-instance-id)?"
            ) from cause
        self._replacements = [*recent, now]
        log.warning("replacing the transactional producer (%r): the new one fences it", cause)
        try:
            self._producer.close(timeout=1)
        except Exception as error:
            log.warning("closing the replaced producer: %s", error)
        self._producer = self._reconnected_producer()
        self._replaced_since_commit = True
        self.summary.producer_replacements += 1
        self.metrics.producer_replacements.inc()

    def _reconnected_producer(self) -> Any:
        """A new transactional producer, retried while the brokers cannot be reached (an outage).

        A replacement during an outage longer than kafka-python's bootstrap timeout (30 s) would
        otherwise end the service; it retries for up to :data:`REACHABLE_TIMEOUT` seconds. A stop
        requested meanwhile, or the deadline, ends the wait with :class:`DeliveryError`.
        """
        from kafka.errors import KafkaConnectionError, KafkaTimeoutError

        deadline = time.monotonic() + REACHABLE_TIMEOUT
        while True:
            try:
                return self._new_producer()
            except (KafkaTimeoutError, KafkaConnectionError) as error:
                if self._stop.is_set() or time.monotonic() >= deadline:
                    raise DeliveryError(
                        f"the brokers did not answer the new transactional producer: {error!r}"
                    ) from error
                log.warning("the brokers cannot be reached to replace the producer (%r): retrying", error)
                self._stop.wait(1.0)

    def _rewind(self) -> None:
        """Restore every learner to its last committed state and seek to the committed offsets.

        From memory: right after a commit, the broker may not serve its offsets and checkpoints yet.
        Features mode: the stage models are rebuilt from the labels log up to the committed position.
        """
        from kafka import TopicPartition

        consumer = self._consumer
        with self._lock:
            self._rewind_needed = False
            for state in self._partitions.values():
                offset, learner_state = state.base
                state.learner = self._processor.new_learner()
                if learner_state is not None:
                    state.learner.load_state_dict(learner_state)
                if self._labels_log is not None:
                    self._rebuild_models(state, state.labels_base)
                consumer.seek(state.tp, offset)
                state.next_offset = offset
                state.checkpointed = min(state.checkpointed, offset)
                state.replay_until = max(state.committed, offset)
            for labels in self._labels.values():
                learned = self._partitions.get(TopicPartition(self.topics.input, labels.tp.partition))
                if self._labels_log is not None and learned is not None and learned.labels_base >= 0:
                    consumer.seek(labels.tp, learned.labels_base)
                    labels.next_offset = learned.labels_base
                    continue
                if labels.committed >= 0:
                    consumer.seek(labels.tp, labels.committed)
                elif self.auto_offset_reset == "earliest":
                    consumer.seek_to_beginning(labels.tp)
                else:
                    consumer.seek_to_end(labels.tp)
                labels.next_offset = -1
        self._last_activity = time.monotonic()
        log.info("rewound %s to the last committed transaction", _names(self._partitions))
        if self.shared_learning:
            self._share()

    def _flush(self) -> None:
        """Wait for every record sent so far; raise :class:`DeliveryError` if any was not delivered.

        In exactly-once mode the wait is bounded (:attr:`flush_timeout`): a transaction that cannot
        be flushed in time is given up (kafka-python raises ``KafkaTimeoutError``).
        """
        self._producer.flush(self.flush_timeout)
        if self._delivery_errors:
            errors = self._delivery_errors
            raise DeliveryError(
                f"{len(errors)} decision/dead-letter record(s) were not delivered "
                f"(first error: {errors[0]!r}); offsets are not committed"
            )

    def _write_checkpoints(self, states: Iterable[_Partition]) -> list[Checkpoint]:
        """Write (and flush) the checkpoint of every learner that changed; returns them."""
        written: list[Checkpoint] = []
        changed = [
            state
            for state in states
            if state.next_offset > state.checkpointed
            or (state.next_offset >= 0 and state.labels_offset > state.labels_checkpointed)
        ]
        now = time.monotonic()
        if changed:
            if self.exactly_once:
                self._begin()
            written_at = time.time()
            description = self._processor.describe()
            futures = []
            for state in changed:
                checkpoint = Checkpoint(
                    topic=state.tp.topic,
                    partition=state.tp.partition,
                    offset=state.next_offset,
                    state=state.learner.state_dict(),
                    group_id=self.group_id,
                    processor=description,
                    written_at=written_at,
                    labels_offset=None if state.labels_offset < 0 else state.labels_offset,
                )
                written.append(checkpoint)
                futures.append(
                    self._producer.send(self.topics.state, checkpoint.to_bytes(), key=checkpoint.key)
                )
            self._producer.flush(self.flush_timeout)
            failed = [future for future in futures if not future.succeeded()]
            if failed:
                raise DeliveryError(f"checkpoint not written: {failed[0].exception!r}")
            for state in changed:
                state.checkpointed = state.next_offset
                state.labels_checkpointed = state.labels_offset
            self.summary.checkpoints += len(changed)
            self.metrics.checkpointed(len(changed))
        self._last_checkpoint = now
        self._since_checkpoint = 0
        return written

    @staticmethod
    def _offsets(states: Iterable[_Partition | _LabelsPartition]) -> dict[Any, Any]:
        from kafka.structs import OffsetAndMetadata

        return {
            state.tp: OffsetAndMetadata(state.next_offset, "", -1)
            for state in states
            if state.next_offset > state.committed
        }

    def _commit(self, offsets: dict[Any, Any]) -> None:
        from kafka.errors import (
            CommitFailedError,
            IllegalGenerationError,
            KafkaError,
            RebalanceInProgressError,
            UnknownMemberIdError,
        )

        if not offsets:
            return
        try:
            self._consumer.commit(offsets)
        except (
            CommitFailedError,
            RebalanceInProgressError,
            IllegalGenerationError,
            UnknownMemberIdError,
        ) as error:
            # The partitions are moving: the checkpoints written on revocation make the handover exact.
            log.warning("offset commit failed during a rebalance (%s); the checkpoints cover it", error)
            return
        except KafkaError as error:
            if not error.retriable:
                raise
            # Broker or coordinator unreachable: the next commit point commits these offsets too.
            log.warning("offset commit deferred, the broker is unreachable (%r)", error)
            return
        self._record_commit(offsets)

    def _record_commit(self, offsets: Mapping[Any, Any]) -> None:
        if not offsets:
            return
        for tp, offset in offsets.items():
            state = self._partitions.get(tp) or self._labels.get(tp)
            if state is not None:
                state.committed = offset.offset
        self.summary.commits += 1
        self.metrics.committed()
        self._update_lag(offsets)

    def _update_lag(self, offsets: Mapping[Any, Any]) -> None:
        for tp, offset in offsets.items():
            if tp.topic != self.topics.input:
                continue
            end = self._consumer.highwater(tp)
            if end is not None:
                self.metrics.lag.labels(partition=str(tp.partition)).set(max(0, end - offset.offset))

    # -- rebalances ------------------------------------------------------------------------------
    # The listener runs on kafka-python's IO thread while the main thread waits in poll(),
    # commit() or close(): it must not call blocking consumer methods, so it only flushes the
    # producer, writes checkpoints, commits asynchronously and pauses; restores happen in the loop.
    def _on_revoked(self, revoked: Iterable[Any]) -> None:
        revoked = set(revoked)
        self._rebalancing = True  # no idle exit until the new assignment
        with self._lock:
            self._revocations += 1
            self._pending -= revoked
            states = [self._partitions[tp] for tp in revoked if tp in self._partitions]
            labels = [self._labels[tp] for tp in revoked if tp in self._labels]
            offsets: dict[Any, Any] = {}
            if self.exactly_once:
                # The transaction holds every partition's output: commit it whole (or abort it).
                if not self._aborting and not self._commit_transaction():
                    log.warning("the revoked partitions restart from their last committed transaction")
            elif not self._aborting:
                self._flush()
                self._write_checkpoints(states)
                offsets = self._offsets(states + labels)
            for tp in revoked:
                self._partitions.pop(tp, None)
                self._labels.pop(tp, None)
            if self.metrics is not None:
                self.metrics.assigned.set(len(self._partitions))
        if offsets:
            self._consumer.commit_async(offsets)
        if states:
            log.info("revoked %s", _names(state.tp for state in states))

    def _on_lost(self, lost: Iterable[Any]) -> None:
        lost = set(lost)
        with self._lock:
            self._revocations += 1
            if self.exactly_once and self._in_transaction:
                # Its offsets can no longer be committed: the kept partitions restart from their last commit.
                self._abort(RuntimeError(f"partitions lost: {_names(lost)}"))
            self._pending -= lost
            for tp in lost:
                self._partitions.pop(tp, None)
                self._labels.pop(tp, None)
        log.warning("lost %s (group membership expired): their learners are dropped", _names(lost))

    def _on_assigned(self, assigned: Iterable[Any]) -> None:
        assigned = list(assigned)
        with self._lock:
            self._pending.update(tp for tp in assigned if tp.topic == self.topics.input)
            for tp in assigned:
                if tp.topic == self.topics.labels:
                    self._labels[tp] = _LabelsPartition(tp, dlq_partition=tp.partition % self._n_dlq)
        if assigned:
            # Nothing is fetched until the loop has restored the learners (and positioned the consumer).
            self._consumer.pause(*assigned)
        self._last_activity = time.monotonic()
        self._assigned_once = True
        self._rebalancing = False
        self._idle_gate.assigned()

    def _restore_pending(self) -> set[Any]:
        """Restore the learners of newly assigned partitions; returns the partitions restored."""
        from kafka import TopicPartition

        consumer = self._consumer
        with self._lock:
            pending = sorted(self._pending & consumer.assignment())
            self._pending.clear()
            revocations = self._revocations
        if not pending:
            return set()
        store = self._store
        store.refresh()
        starts = consumer.beginning_offsets(pending)
        ends = consumer.end_offsets(pending)
        restored = []
        for tp in pending:
            checkpoint = store.get(tp.topic, tp.partition)
            committed = consumer.committed(tp)
            plan = plan_restore(
                None if checkpoint is None else checkpoint.offset,
                committed,
                starts[tp],
                ends[tp],
                self.auto_offset_reset,
            )
            if checkpoint is not None and checkpoint.group_id and checkpoint.group_id != self.group_id:
                raise CheckpointError(
                    f"state topic {self.topics.state!r} holds a checkpoint of {tp.topic}/{tp.partition} "
                    f"written by group {checkpoint.group_id!r}, not {self.group_id!r}: every service "
                    "(consumer group) needs its own state topic"
                )
            learner = self._processor.new_learner()
            if plan.use_checkpoint:
                try:
                    learner.load_state_dict(checkpoint.state)
                except ValueError as error:
                    raise CheckpointError(
                        f"the checkpoint of {tp.topic}/{tp.partition} does not fit the configured processor "
                        f"({self._processor.describe()}): {error}; use a new state topic or delete the key"
                    ) from error
            if plan.warning:
                log.warning("%s/%d: %s", tp.topic, tp.partition, plan.warning)
            labels_from = self._restore_models(learner, tp, checkpoint if plan.use_checkpoint else None)
            seek = plan.seek
            if seek is None and self.exactly_once:
                # An explicit start, so that an abort before the first commit rewinds there.
                seek = starts[tp] if self.auto_offset_reset == "earliest" else ends[tp]
            try:
                if seek is not None:
                    consumer.seek(tp, seek)
            except ValueError:  # kafka-python: "Unassigned partition", revoked meanwhile
                revocations = -1
            state = _Partition(
                tp=tp,
                learner=learner,
                out_partition=tp.partition % self._n_output,
                dlq_partition=tp.partition % self._n_dlq,
                next_offset=-1 if seek is None else seek,
                committed=plan.committed,
                checkpointed=checkpoint.offset if plan.use_checkpoint else -1,
                replay_until=plan.replay_until,
                base=(-1 if seek is None else seek, checkpoint.state if plan.use_checkpoint else None),
                labels_offset=labels_from,
                labels_checkpointed=labels_from if plan.use_checkpoint else -1,
                labels_base=labels_from,
            )
            with self._lock:
                if self._revocations != revocations:
                    # A rebalance landed in the middle of the restore (Quix Streams #1146): the rest
                    # is restored again from the new assignment, never into revoked partitions.
                    log.warning(
                        "a rebalance revoked partitions during the restore of %s: restoring again "
                        "what the new assignment holds",
                        _names(pending),
                    )
                    break
                self._partitions[tp] = state
            to_resume = [tp]
            if self.topics.labels is not None:
                labels_tp = TopicPartition(self.topics.labels, tp.partition)
                if labels_tp in self._labels:
                    to_resume.append(labels_tp)
            consumer.resume(*to_resume)
            restored.append(
                f"{tp.topic}/{tp.partition}: "
                + (f"checkpoint @{checkpoint.offset}" if plan.use_checkpoint else "no checkpoint")
                + f", committed @{plan.committed}, start @{plan.seek if plan.seek is not None else 'reset'}"
                + (f", replay to @{plan.replay_until}" if plan.replay_until > (plan.seek or 0) else "")
                + (f", labels relearned to @{labels_from}" if labels_from >= 0 else "")
            )
        # Labels partitions whose input partition is not ours (mis-partitioned topics) still flow.
        with self._lock:
            orphans = [
                tp
                for tp in self._labels
                if TopicPartition(self.topics.input, tp.partition) not in self._partitions
                and tp in consumer.paused()
            ]
        if orphans:
            consumer.resume(*orphans)
        self.summary.restored.extend(restored)
        self.metrics.assigned.set(len(self._partitions))
        self._last_activity = time.monotonic()
        for line in restored:
            log.info("restored %s", line)
        if self.shared_learning:
            self._share()
        return set(pending)

    def _restore_models(self, learner: Any, tp: Any, checkpoint: Checkpoint | None) -> int:
        """Features mode: re-learn the labels the restored learner's stages had learned.

        Up to the checkpoint's ``labels_offset``, or without one to the group's committed offset of
        the labels partition, which the consumer is then positioned at. Returns that offset (``-1``:
        nothing to re-learn, the consumer keeps its own position).
        """
        from kafka import TopicPartition

        if self._labels_log is None:
            return -1
        labels_tp = TopicPartition(self.topics.labels, tp.partition)
        if checkpoint is not None and checkpoint.labels_offset is not None:
            until = checkpoint.labels_offset
        else:
            committed = self._consumer.committed(labels_tp)
            until = -1 if committed is None else committed
            if checkpoint is not None and until > 0:
                log.warning(
                    "%s/%d: the checkpoint does not say how far its stage models learned; "
                    "re-learning the labels up to the committed offset %d",
                    tp.topic,
                    tp.partition,
                    until,
                )
        if until < 0:
            return -1
        self._labels_log.relearn(learner, labels_tp, until)
        if labels_tp in self._labels:
            self._consumer.seek(labels_tp, until)
            self._labels[labels_tp].next_offset = until
        return until

    def _rebuild_models(self, state: _Partition, until: int) -> None:
        """Re-learn the labels below ``until`` into ``state``'s (new) learner; ``-1``: none."""
        from kafka import TopicPartition

        if until > 0:
            labels_tp = TopicPartition(self.topics.labels, state.tp.partition)
            self._labels_log.relearn(state.learner, labels_tp, until)
        state.labels_offset = until
        state.labels_checkpointed = min(state.labels_checkpointed, until)

    # -- shared learning -------------------------------------------------------------------------
    def _share(self) -> None:
        """Give every learner the counts of all the other input partitions.

        Partitions this instance holds contribute their live own counts; the others their last
        checkpoint read from the state topic (``read_committed``), if it was written by this group
        with this processor configuration.
        """
        if not self._partitions:
            return
        store = self._store
        store.refresh()
        description = self._processor.describe()
        with self._lock:
            local = {tp.partition: state.learner.own_stats() for tp, state in self._partitions.items()}
            if not local:
                return
            remote = DisagreementStats(self._processor.n_stages)
            for checkpoint in store.checkpoints():
                if checkpoint.topic != self.topics.input or checkpoint.partition in local:
                    continue
                if checkpoint.group_id != self.group_id or checkpoint.processor != description:
                    self._not_shared(
                        checkpoint,
                        f"written by group {checkpoint.group_id!r} with {checkpoint.processor}, "
                        f"not {self.group_id!r} with {description}",
                    )
                    continue
                try:
                    remote = remote.merge(DisagreementStats.from_dict(checkpoint.state.get("stats")))
                except (ValueError, AttributeError) as error:
                    self._not_shared(checkpoint, str(error))
            for tp, state in self._partitions.items():
                foreign = remote
                for partition, stats in local.items():
                    if partition != tp.partition:
                        foreign = foreign.merge(stats)
                state.learner.share(foreign)
        self.summary.shares += 1
        self.metrics.shares.inc()

    def _not_shared(self, checkpoint: Checkpoint, reason: str) -> None:
        """Warn, once per checkpoint key, that shared learning leaves a checkpoint out."""
        if checkpoint.key not in self._unshared:
            self._unshared.add(checkpoint.key)
            log.warning("not sharing the checkpoint of %s: %s", checkpoint.key.decode(), reason)

    # -- teardown --------------------------------------------------------------------------------
    def _close(self) -> None:
        if self._in_transaction and self._producer is not None:
            try:
                self._producer.abort_transaction()
            except Exception as error:
                log.warning("aborting the open transaction: %s", error)
        if self._consumer is not None:
            try:
                self._consumer.close(autocommit=False)
            except Exception as error:
                log.warning("closing the consumer: %s", error)
        if self._producer is not None:
            try:
                self._producer.close(timeout=10)
            except Exception as error:
                log.warning("closing the producer: %s", error)
        if self._store is not None:
            self._store.close()
        if self._labels_log is not None:
            self._labels_log.close()
        if self._http is not None:
            self._http.close()
            self._http = None


def _is_fenced(error: BaseException) -> bool:
    """Whether the producer was fenced: a newer epoch of its transactional id exists."""
    from kafka.errors import InvalidProducerEpochError, ProducerFencedError

    return isinstance(error, (ProducerFencedError, InvalidProducerEpochError))


def _input_partition(checkpoint: Checkpoint) -> Any:
    from kafka import TopicPartition

    return TopicPartition(checkpoint.topic, checkpoint.partition)


def _offset(record: Any) -> int:
    return record.offset


def _names(tps: Iterable[Any]) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(tps)) or "nothing"


def _partition_counts(admin: Any, names: Iterable[str]) -> dict[str, int]:
    names = list(names)
    described = admin.describe_topics(names)
    counts = {}
    missing = []
    for entry in described:
        if entry.get("error_code", 0) != 0 or not entry.get("partitions"):
            missing.append(entry.get("name"))
        else:
            counts[entry["name"]] = len(entry["partitions"])
    missing += [name for name in names if name not in counts and name not in missing]
    if missing:
        raise ValueError(
            f"topic(s) {', '.join(sorted(set(missing)))} do not exist; create them first "
            "(uss-stream kafka create-topics ...)"
        )
    return counts


def _listener_for(app: Application) -> Any:
    from kafka import ConsumerRebalanceListener

    class _Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            app._on_revoked(revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            app._on_assigned(assigned)

        def on_partitions_lost(self, lost: Any) -> None:
            app._on_lost(lost)

    return _Listener()
