"""The decision service: consume events, decide, produce decisions, checkpoint the learners.

:class:`Application` runs the poll loop over the layers :mod:`~uss_stream_kafka.runtime.wiring` builds; a
:class:`~uss_stream_kafka.processing.processors.Processor` says what to do with each event (one learner per
input partition). Per batch returned by ``poll``, the loop restores newly assigned partitions
(:mod:`~uss_stream_kafka.runtime.recovery`), decides or dead-letters every record
(:mod:`~uss_stream_kafka.runtime.dispatch`) and, when one is due, runs a commit point
(:mod:`~uss_stream_kafka.runtime.commit`: the commit and transaction protocol of both guarantees;
an aborted transaction rewinds to the last committed one), then refreshes the shared counts
(:mod:`~uss_stream_kafka.runtime.shared`). See ``docs/kafka.md`` for the delivery guarantees.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from uss_stream_kafka.clients import ClientError, UndecodableError, resolve
from uss_stream_kafka.clients.config import ClientConfig
from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.exceptions import DeliveryError, MetricsEndpointError
from uss_stream_kafka.operations.http import HttpEndpoint, health_details, serve
from uss_stream_kafka.operations.learning_metrics import LearningMetrics
from uss_stream_kafka.operations.metrics import ServiceMetrics
from uss_stream_kafka.processing.processors import Processor
from uss_stream_kafka.runtime.commit import (
    MAX_REPLACEMENTS,  # noqa: F401 (re-exported)
    PRODUCER_DEFAULTS,
    CommitSchedule,
    Committer,
    fatal_error,
    transactional_id,
)
from uss_stream_kafka.runtime.context import RunContext, RunSummary
from uss_stream_kafka.runtime.dispatch import Dispatcher
from uss_stream_kafka.runtime.progress import IdleGate, StallWatch
from uss_stream_kafka.runtime.recovery import Recovery
from uss_stream_kafka.runtime.shared import SharedLearning
from uss_stream_kafka.runtime.startup import (  # noqa: F401 (CONSUMER_DEFAULTS: re-exported)
    CONSUMER_DEFAULTS,
    GUARANTEES,
    check_processor,
    check_settings,
    check_topics,
)
from uss_stream_kafka.runtime.wiring import Layers, wire

__all__ = ["GUARANTEES", "Application", "DeliveryError", "MetricsEndpointError", "RunSummary"]

log = logging.getLogger("uss_stream_kafka")


class Application:
    """A Kafka decision service: ``Application(...).run(processor)``.

    Parameters
    ----------
    client
        Connection and security settings of every client.
    group_id
        Consumer group; instances of the same group share the input partitions.
    topics
        Topic names; ``topics.labels`` in features mode (labels) and orchestration (reports).
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
        :mod:`uss_stream_kafka.runtime.relearn`). ``False``: the stages start as the factory builds them.
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
        Extra settings for the consumer / producer (kafka-python names, translated for
        ``confluent``; librdkafka's dotted names too with ``confluent``).
    client_library
        The Kafka client: ``"kafka-python"`` (default, pure Python), ``"confluent"``
        (librdkafka, 3x faster; extra ``uss-stream[confluent]``) or ``"auto"`` (confluent when it
        is installed, else kafka-python; the command line's default; logged). Both keep every
        guarantee.
    propagate_headers
        Names of input headers copied onto the record's decision and dead letter, besides the
        trace context (``traceparent``, ``tracestate``; see
        :data:`~uss_stream_kafka.runtime.dispatch.TRACE_HEADERS`), which always is.
    http_host, http_port
        Serve ``/metrics`` and ``/healthz`` there; ``http_port=None`` disables it, ``0`` picks a port.
    health_timeout
        ``/healthz`` fails if the poll loop has not come back for this many seconds, or a restore
        (features mode: the re-learn of the labels) has not finished within them (status
        ``restoring`` while it runs).
    relearn_max_labels
        Features mode: re-learn at most the newest this many labels of each partition on a restore
        (``None``: every label the topic retains), bounding the restore's time.
    learning_metrics
        Serve the learning metrics (:mod:`~uss_stream_kafka.operations.learning_metrics`: cost, chosen depth,
        disagreement rates, WD verdict, labels, pending decisions); ``False`` leaves them out.

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
        client_library: str = "kafka-python",
        learning_metrics: bool = True,
        relearn_max_labels: int | None = None,
        propagate_headers: Sequence[str] = (),
    ) -> None:
        check_settings(**locals())
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
        self.relearn_max_labels = relearn_max_labels
        self.shared_learning = bool(shared_learning)
        self.exit_when_idle = exit_when_idle
        self.client_library = resolve(client_library)
        self.propagate_headers = tuple(propagate_headers)
        if client_library == "auto":
            log.info(
                "client: %s (--client auto: confluent-kafka is %sinstalled)",
                self.client_library,
                "" if self.client_library == "confluent" else "not ",
            )
        self.consumer_options = dict(consumer_options or {})
        self.producer_options = dict(producer_options or {})
        self.http_host = http_host
        self.http_port = http_port
        self.health_timeout = float(health_timeout)
        self.learning_metrics = bool(learning_metrics)

        self._context = RunContext(topics, group_id)
        self._committer = Committer(
            self._context,
            client,
            self.producer_options,
            exactly_once=self.exactly_once,
            transactional_id=self.transactional_id,
            schedule=CommitSchedule(
                self.commit_interval, commit_every, self.checkpoint_interval, checkpoint_every
            ),
            library=self.client_library,
        )
        self._http: HttpEndpoint | None = None
        self._status = "created"
        self._started = time.monotonic()
        self._last_poll = self._started
        self._idle_gate = IdleGate()
        self._stall_watch = StallWatch(started=self._started)
        # Set up by run() (see uss_stream_kafka.runtime.wiring):
        self._layers: Layers | None = None
        self._recovery: Recovery | None = None
        self._dispatcher: Dispatcher | None = None
        self._sharing: SharedLearning | None = None
        self._stopped_learners: dict[int, Any] | None = None

    @property
    def exactly_once(self) -> bool:
        """Whether the application runs transactionally (``guarantee="exactly-once"``)."""
        return self.guarantee == "exactly-once"

    @property
    def flush_timeout(self) -> float | None:
        """Seconds a flush may take in exactly-once mode: half the transaction timeout (``None``: unbounded).

        Past it the transaction is given up before the broker times it out, and the producer replaced.
        """
        return self._committer.flush_timeout

    @property
    def transactional_id(self) -> str | None:
        """The producer's transactional id in exactly-once mode (``None`` otherwise)."""
        if not self.exactly_once:
            return None
        return transactional_id(self.group_id, self.group_instance_id)

    @property
    def summary(self) -> RunSummary:
        """What the run did so far (a new one per :meth:`run`)."""
        return self._context.summary

    @property
    def metrics(self) -> ServiceMetrics | None:
        """The run's Prometheus metrics (``None`` until it starts)."""
        return self._context.metrics

    @metrics.setter
    def metrics(self, metrics: ServiceMetrics | None) -> None:
        self._context.metrics = metrics

    def learners(self) -> dict[int, Any]:
        """The learners of the assigned input partitions by partition number (after a clean stop: those
        it held at the stop)."""
        if self._stopped_learners is not None:
            return dict(self._stopped_learners)
        with self._context.lock:
            return {tp.partition: state.learner for tp, state in self._context.partitions.items()}

    @property
    def _partitions(self) -> dict[Any, Any]:
        """The assigned input partitions' state (the learners), by ``TopicPartition``."""
        return self._context.partitions

    @property
    def _producer(self) -> Any:
        """The live producer (the commit protocol's; it changes when it is replaced)."""
        return self._committer.producer

    # -- control ---------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the loop to stop after the current batch (safe from signal handlers and other threads)."""
        self._context.stop.set()

    @property
    def http_address(self) -> tuple[str, int] | None:
        """``(host, port)`` of the metrics/health endpoint while it runs."""
        return None if self._http is None else (self.http_host, self._http.port)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)``: healthy while running, polling within ``health_timeout`` and, with
        records waiting on its partitions, receiving one within ``health_timeout`` (:class:`StallWatch`)."""
        now = time.monotonic()
        poll_age = now - self._last_poll
        stalled_since = self._stall_watch.stalled_since
        fetching = stalled_since is None or now - stalled_since < self.health_timeout
        healthy = self._status == "starting" or (
            self._status == "running" and poll_age < self.health_timeout and fetching
        )
        status = self._status if healthy or self._status != "running" else "stalled"
        restoring = None if self._recovery is None else self._recovery.restoring_since
        if restoring is not None and self._status == "running":
            healthy, status = now - restoring < self.health_timeout, "restoring"
        details = health_details(self._context, status, poll_age)
        if restoring is not None:
            details["restoring_seconds"] = round(now - restoring, 3)
        return healthy, details

    # -- the run ---------------------------------------------------------------------------------
    def run(self, processor: Processor) -> RunSummary:
        """Serve until :meth:`stop` (or ``exit_when_idle``); a clean stop commits and checkpoints."""
        if self._status != "created":
            raise RuntimeError("an Application runs once; create a new one")
        check_processor(processor.mode, self.topics.labels, self.shared_learning)
        context = self._context
        context.processor = processor
        self._status = "starting"
        self._started = time.monotonic()
        context.summary = RunSummary(depth_counts=[0] * processor.n_stages)
        try:
            self._setup()
            self._status = "running"
            self._loop()
            self._status = "stopping"
            while not self._commit_point(checkpoint=True):
                if context.stop.is_set():
                    raise DeliveryError(
                        "the last transaction was aborted at the stop: its records are processed "
                        "again at the next start"
                    )
                # Idle stop: redo the aborted transaction's records, then stop again.
                self._status = "running"
                self._loop()
                self._status = "stopping"
            self._stopped_learners = self.learners()
            context.consumer.close()
            context.consumer = None
        except BaseException:
            self._status = "failed"
            context.aborting = True
            raise
        finally:
            self._close()
            self.summary.seconds = time.monotonic() - self._started
        self._status = "stopped"
        log.info("stopped: %s", self.summary.describe())
        return self.summary

    def _setup(self) -> None:
        context = self._context
        partitions, limits = check_topics(
            self.client_library, self.client, self.topics, {**PRODUCER_DEFAULTS, **self.producer_options}
        )
        context.metrics = ServiceMetrics(context.processor.n_stages)
        if self.learning_metrics:
            context.learning = LearningMetrics(context.processor.stage_costs)
            context.metrics.registry.register(context.learning)
        if self.http_port is not None:
            self._http = serve(context.metrics.registry, self.health, self.http_host, self.http_port)
        self._committer.start()
        self._layers = wire(self, self._committer, self._idle_gate, partitions, limits)
        self._recovery = self._layers.recovery
        self._dispatcher = self._layers.dispatcher
        self._sharing = self._layers.sharing

    def _loop(self) -> None:
        context = self._context
        recovery = self._recovery
        while not context.stop.is_set():
            consumer = context.consumer  # a consumer that failed for good is replaced
            try:
                batch = consumer.poll(0.25)
            except UndecodableError as error:
                self._dispatcher.skip_undecodable(error)
                self._maybe_commit()
                continue
            except ClientError as error:
                if error.fatal and not error.retriable:
                    recovery.replace_consumer(error)
                    continue
                if not error.retriable:
                    raise
                log.warning("poll: %s (the client retries)", error)
                context.stop.wait(0.25)
                self._maybe_commit()
                continue
            now = time.monotonic()
            self._last_poll = now
            # An abort in a rebalance listener: the batch predates the rewind.
            if self._committer.rewind_needed:
                recovery.rewind()
                continue
            restored = recovery.restore_pending() if recovery.pending else ()
            if restored:  # a partition just restored has not been waited for yet
                self._stall_watch.fetched(now)
            if recovery.held:
                recovery.release_labels()
            if batch:
                with context.lock:
                    try:
                        self._dispatcher.process(batch, skip=restored)
                    except ClientError as error:
                        self._abandon_batch(error)
                context.last_activity = time.monotonic()
                self._stall_watch.fetched(context.last_activity)
            elif (
                self.exit_when_idle is not None
                and recovery.assigned_once
                and now - context.last_activity >= self.exit_when_idle
            ):
                # Idle only counts once partitions were assigned, and ends at their end offsets.
                if not recovery.pending and not recovery.rebalancing and self._idle_gate.may_stop(consumer):
                    log.info("no record for %.1fs and caught up: stopping", now - context.last_activity)
                    break
                log.info("idle for %.1fs but not caught up: not stopping", now - context.last_activity)
                context.last_activity = now
            if not batch and not (recovery.pending or recovery.rebalancing):
                self._stall_watch.check(consumer, now)
            if context.learning is not None and context.learning.due(now):
                with context.lock:
                    learners = {tp.partition: state.learner for tp, state in context.partitions.items()}
                    context.learning.refresh(learners, now)
            self._maybe_commit()

    def _abandon_batch(self, error: BaseException) -> None:
        """Exactly-once: a send refused mid-batch (e.g. the producer was fenced) aborts the transaction.

        Every learner and position is rewound at once to the last committed transaction (before the
        next commit point could commit the progress of the aborted one's earlier batches), and the
        records are processed again.
        """
        if not self.exactly_once or fatal_error(error):
            raise error
        self._dispatcher.discard_batch()
        self._committer.abort(error)
        self._recovery.rewind()

    # -- commit points ---------------------------------------------------------------------------
    def _maybe_commit(self) -> None:
        now = time.monotonic()
        schedule = self._committer.schedule
        checkpoint = schedule.checkpoint_due(now)
        if checkpoint or schedule.commit_due(now):
            self._commit_point(checkpoint=checkpoint)

    def _commit_point(self, checkpoint: bool) -> bool:
        """Commit (see :meth:`Committer.commit_point`); rewind if the transaction was aborted."""
        committed = self._committer.commit_point(checkpoint)
        if not committed:
            self._recovery.rewind()
        elif self._sharing is not None:
            self._sharing.share()
        self._committer.schedule.committed()
        return committed

    # -- teardown --------------------------------------------------------------------------------
    def _close(self) -> None:
        context = self._context
        self._committer.abort_open_transaction()
        if context.consumer is not None:
            try:
                context.consumer.close()
            except Exception as error:
                log.warning("closing the consumer: %s", error)
        self._committer.close()
        if self._layers is not None:
            self._layers.close()
        if self._http is not None:
            self._http.close()
            self._http = None
