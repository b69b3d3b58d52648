"""The decision service: consume events, decide, produce decisions, checkpoint the learners.

:class:`Application` runs the poll loop (:class:`~uss_stream_kafka.runtime.loop.PollLoop`) over the layers
:mod:`~uss_stream_kafka.runtime.wiring` builds; a
:class:`~uss_stream_kafka.processing.processors.Processor` says what to do with each event (one learner per
input partition). Per batch returned by ``poll``, the loop restores newly assigned partitions
(:mod:`~uss_stream_kafka.runtime.recovery`), decides or dead-letters every record
(:mod:`~uss_stream_kafka.runtime.dispatch`) and, when one is due, runs a commit point
(:mod:`~uss_stream_kafka.runtime.commit`: the commit and transaction protocol of both guarantees;
an aborted transaction rewinds to the last committed one), then refreshes the shared counts
(:mod:`~uss_stream_kafka.runtime.shared`). See ``docs/kafka.md`` for the delivery guarantees.
"""

from __future__ import annotations

import inspect
import logging
import time
from typing import Any

from uss_stream.core import compiled
from uss_stream_kafka.clients.config import ClientConfig
from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.exceptions import DeliveryError
from uss_stream_kafka.operations.http import HttpEndpoint, health_details, serve
from uss_stream_kafka.operations.learning_metrics import LearningMetrics
from uss_stream_kafka.operations.metrics import ServiceMetrics
from uss_stream_kafka.processing.processors import Processor
from uss_stream_kafka.runtime.commit import PRODUCER_DEFAULTS, CommitSchedule, Committer, transactional_id
from uss_stream_kafka.runtime.config import ServiceConfig
from uss_stream_kafka.runtime.context import RunContext, RunSummary
from uss_stream_kafka.runtime.loop import PollLoop
from uss_stream_kafka.runtime.recovery import Recovery
from uss_stream_kafka.runtime.startup import check_topics
from uss_stream_kafka.runtime.wiring import Layers, wire

__all__ = ["Application", "RunSummary"]

log = logging.getLogger("uss_stream_kafka")

#: The settings an application reads from its :class:`ServiceConfig`.
_SETTINGS = frozenset(ServiceConfig.field_names())


class Application:
    """A Kafka decision service: ``Application(...).run(processor)``.

    Parameters
    ----------
    client
        Connection and security settings of every client.
    config
        Every setting below, checked once (:class:`~uss_stream_kafka.runtime.config.ServiceConfig`;
        the command line's way). Without it, the settings are given as keywords and the application
        builds its config from them (:attr:`config`); either way ``app.<setting>`` reads them.
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
    feature_ranges, learned_ranges
        Features mode: the feature-range guard
        (:mod:`~uss_stream_kafka.processing.feature_guard`). An event or a label with a numeric
        feature outside its ``feature_ranges`` entry ``(low, high)`` is dead-lettered
        ``out_of_range``; with ``learned_ranges`` (default) one far outside the range the
        feature's accepted values have shown is dead-lettered ``outlier``. Either way the cascade
        neither decides nor learns from it.
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
        group_id: str | None = None,
        topics: Topics | None = None,
        *,
        config: ServiceConfig | None = None,
        **settings: Any,
    ) -> None:
        if config is None:
            config = ServiceConfig(group_id, topics, **settings)  # type: ignore[arg-type]
        elif group_id is not None or topics is not None or settings:
            raise TypeError("give Application a config or its settings as keywords, not both")
        self.client = client
        self.config = config
        if config.client_library == "auto":
            log.info(
                "client: %s (--client auto: confluent-kafka is %sinstalled)",
                config.library,
                "" if config.library == "confluent" else "not ",
            )
        log.info("decisions: %s", compiled.status())
        self._context = RunContext(config.topics, config.group_id)
        self._committer = Committer(
            self._context,
            client,
            config.producer_options,
            exactly_once=config.exactly_once,
            transactional_id=self.transactional_id,
            schedule=CommitSchedule(
                config.commit_interval,
                config.commit_every,
                config.checkpoint_interval,
                config.checkpoint_every,
            ),
            library=config.library,
        )
        self._http: HttpEndpoint | None = None
        self._status = "created"
        self._started = time.monotonic()
        self._loop = PollLoop(
            self._context,
            self._committer,
            exit_when_idle=config.exit_when_idle,
            exactly_once=config.exactly_once,
            started=self._started,
        )
        # Set up by run() (see uss_stream_kafka.runtime.wiring):
        self._layers: Layers | None = None
        self._recovery: Recovery | None = None
        self._stopped_learners: dict[int, Any] | None = None

    def __getattr__(self, name: str) -> Any:
        """The settings of :attr:`config` read as the application's own (``app.max_input_bytes``)."""
        if name in _SETTINGS:
            return getattr(self.__dict__["config"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def client_library(self) -> str:
        """The Kafka client library (``client_library="auto"`` resolved)."""
        return self.config.library

    @property
    def exactly_once(self) -> bool:
        """Whether the application runs transactionally (``guarantee="exactly-once"``)."""
        return self.config.exactly_once

    @property
    def flush_timeout(self) -> float | None:
        """Seconds a flush may take in exactly-once mode: half the transaction timeout (``None``: unbounded).

        Past it the transaction is given up before the broker times it out, and the producer replaced.
        """
        return self._committer.flush_timeout

    @property
    def transactional_id(self) -> str | None:
        """The producer's transactional id in exactly-once mode (``None`` otherwise)."""
        if not self.config.exactly_once:
            return None
        return transactional_id(self.config.group_id, self.config.group_instance_id)

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
            return self._context.learners()

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
        return None if self._http is None else (self.config.http_host, self._http.port)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)``: healthy while running, polling within ``health_timeout`` and, with
        records waiting on its partitions, receiving one within ``health_timeout`` (:class:`StallWatch`)."""
        now = time.monotonic()
        poll_age = now - self._loop.last_poll
        stalled_since = self._loop.stall_watch.stalled_since
        timeout = self.config.health_timeout
        fetching = stalled_since is None or now - stalled_since < timeout
        healthy = self._status == "starting" or (
            self._status == "running" and poll_age < timeout and fetching
        )
        status = self._status if healthy or self._status != "running" else "stalled"
        restoring = None if self._recovery is None else self._recovery.restoring_since
        if restoring is not None and self._status == "running":
            healthy, status = now - restoring < timeout, "restoring"
        details = health_details(self._context, status, poll_age)
        if restoring is not None:
            details["restoring_seconds"] = round(now - restoring, 3)
        return healthy, details

    # -- the run ---------------------------------------------------------------------------------
    def run(self, processor: Processor) -> RunSummary:
        """Serve until :meth:`stop` (or ``exit_when_idle``); a clean stop commits and checkpoints."""
        if self._status != "created":
            raise RuntimeError("an Application runs once; create a new one")
        self.config.check_processor(processor.mode)
        if processor.mode == "features":
            processor = processor.guarded(self.config.feature_guard())
        context = self._context
        context.processor = processor
        self._status = "starting"
        self._started = time.monotonic()
        context.summary = RunSummary(depth_counts=[0] * processor.n_stages)
        try:
            self._setup()
            self._status = "running"
            self._loop.run()
            self._status = "stopping"
            while not self._loop.commit_point(checkpoint=True):
                if context.stop.is_set():
                    raise DeliveryError(
                        "the last transaction was aborted at the stop: its records are processed "
                        "again at the next start"
                    )
                # Idle stop: redo the aborted transaction's records, then stop again.
                self._status = "running"
                self._loop.run()
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
        context, config = self._context, self.config
        partitions, limits = check_topics(
            config.library,
            self.client,
            config.topics,
            {**PRODUCER_DEFAULTS, **config.producer_options},
        )
        context.metrics = ServiceMetrics(context.processor.n_stages)
        if config.learning_metrics:
            context.learning = LearningMetrics(context.processor.stage_costs)
            context.metrics.registry.register(context.learning)
        if config.http_port is not None:
            self._http = serve(context.metrics.registry, self.health, config.http_host, config.http_port)
        self._committer.start()
        self._layers = wire(
            config, self.client, context, self._committer, self._loop.idle_gate, partitions, limits
        )
        self._recovery = self._layers.recovery
        self._loop.layers = self._layers

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


def _signature() -> inspect.Signature:
    """``Application``'s signature as ``help`` and ``inspect`` show it: the client, ``group_id`` and
    ``topics``, then ``config`` or the other settings of :class:`ServiceConfig` by keyword."""
    own = list(inspect.signature(Application.__init__).parameters.values())[1:5]
    keyword = inspect.Parameter.KEYWORD_ONLY
    settings = inspect.signature(ServiceConfig).parameters.values()
    rest = [item.replace(kind=keyword) for item in settings if item.default is not item.empty]
    return inspect.Signature([*own, *rest])


Application.__signature__ = _signature()  # type: ignore[attr-defined]
