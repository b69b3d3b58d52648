"""Orchestration mode: decide the depth of each request now, learn from the sensors' later reports.

In orchestration mode the service does not receive the stage outputs with the event: it receives a
*request* ``{"id": ..., "context": ...}`` (context optional), decides how many stages to run with
:meth:`~uss_stream.pending.PendingDecisions.decide` and produces the *decision*
``{"id", "depth", "stages", "cost"}`` (plus the request's ``context``, if any). The sensor systems
run the stages and answer, later and in any order, with a *report* ``{"id", "outputs": [...]}``
that :meth:`~uss_stream.pending.PendingDecisions.report` joins to the pending decision by id.

One :class:`Orchestrator` process holds the one learner of all partitions: a single consumer, in
one group, subscribed to the requests and the reports topics, with manual commits. Every input
record yields exactly one decision, one applied report, or one dead letter (the connector's
:class:`~uss_stream_kafka.deadletter.DeadLetter` format, with the reasons of
:data:`~uss_stream_kafka.events.REASONS`). Decisions and dead letters are flushed before the learner's
checkpoint is written, and the checkpoint before the offsets are committed (at-least-once).
Scale-out (several instances sharing the learner) is out of scope: the requests and the reports
must reach the same learner. See ``docs/orchestration.md``.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import ConsumerRebalanceListener

from uss_stream.pending import PendingDecisions, RejectedReport
from uss_stream.policies.specs import parse_spec, spec_of
from uss_stream_kafka.app import DeliveryError
from uss_stream_kafka.checkpoint import CheckpointError, NewerFormatError, is_newer_format
from uss_stream_kafka.checkpointing import transactional_id
from uss_stream_kafka.config import ClientConfig, check_client_options
from uss_stream_kafka.deadletter import DeadLetter
from uss_stream_kafka.events import REASONS, InvalidEvent, json_scalar
from uss_stream_kafka.limits import record_limit
from uss_stream_kafka.processing import label_free_policy, policy_spec
from uss_stream_kafka.progress import IdleGate
from uss_stream_kafka.state_budget import StateBudget
from uss_stream_kafka.topics import Topics, create_topics

__all__ = [
    "ORCHESTRATION_CHECKPOINT_FORMAT",
    "OrchestrationSummary",
    "OrchestrationTopics",
    "Orchestrator",
    "create_orchestration_topics",
    "parse_checkpoint",
    "parse_report",
    "parse_request",
]

log = logging.getLogger("uss_stream_kafka.orchestration")

ORCHESTRATION_CHECKPOINT_FORMAT = "uss-stream/orchestration-checkpoint/v1"


@dataclass(frozen=True)
class OrchestrationTopics:
    """Topics of orchestration mode (all distinct; names checked like :class:`Topics`).

    Examples
    --------
    >>> OrchestrationTopics(requests="req", reports="rep", decisions="dec", dead_letter="dlq",
    ...                     state="state").all()
    ('req', 'rep', 'dec', 'dlq', 'state')
    >>> OrchestrationTopics(requests="req", reports="req", decisions="dec", dead_letter="dlq", state="s")
    Traceback (most recent call last):
    ...
    ValueError: topic 'req' is used for both input and labels; every role needs its own topic

    """

    requests: str
    reports: str
    decisions: str
    dead_letter: str
    state: str

    def __post_init__(self) -> None:
        self.as_topics()

    def as_topics(self) -> Topics:
        """The connector's :class:`Topics` (requests as input, reports as labels), to check and create."""
        return Topics(
            input=self.requests,
            output=self.decisions,
            dead_letter=self.dead_letter,
            state=self.state,
            labels=self.reports,
        )

    def all(self) -> tuple[str, ...]:
        """Every topic name."""
        return (self.requests, self.reports, self.decisions, self.dead_letter, self.state)


def create_orchestration_topics(
    admin: Any, topics: OrchestrationTopics, partitions: int = 1, replication_factor: int = 1
) -> dict[str, str]:
    """Create the topics with a ``KafkaAdminClient`` (state compacted); see :func:`create_topics`."""
    return create_topics(
        admin, topics.as_topics(), partitions=partitions, replication_factor=replication_factor
    )


def _kind(value: Any) -> str:
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "Infinity"


def _load_object(value: bytes | None, max_bytes: int) -> dict[str, Any]:
    if value is not None and len(value) > max_bytes:
        raise InvalidEvent("oversize", f"{len(value)} bytes > {max_bytes}")
    if value is None:
        raise InvalidEvent("invalid_json", "the record has no value")
    try:
        document = json.loads(value)
    except ValueError as error:  # UnicodeDecodeError is a ValueError
        raise InvalidEvent("invalid_json", f"value is not UTF-8 JSON: {error}") from None
    except RecursionError:
        raise InvalidEvent("invalid_json", "value is JSON nested too deeply to decode") from None
    if not isinstance(document, dict):
        raise InvalidEvent("wrong_type", f"the value must be a JSON object, got {type(document).__name__}")
    decision_id = document.get("id")
    if decision_id is None:
        raise InvalidEvent("missing_field", "the value has no 'id'")
    if isinstance(decision_id, bool) or not isinstance(decision_id, (str, int)):
        raise InvalidEvent("wrong_type", f"'id' must be a string or an integer, got {decision_id!r}")
    return document


def parse_request(value: bytes | None, max_bytes: int = 1 << 20) -> tuple[str | int, Any]:
    """``(id, context)`` of a request; ``context`` is ``None`` when absent.

    Raises
    ------
    InvalidEvent
        With reason ``oversize``, ``invalid_json``, ``missing_field`` or ``wrong_type``.

    Examples
    --------
    >>> parse_request(b'{"id": "bag-1", "context": {"lane": 2}}')
    ('bag-1', {'lane': 2})
    >>> parse_request(b'{"id": true}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.events.InvalidEvent: wrong_type: 'id' must be a string or an integer, got True

    """
    document = _load_object(value, max_bytes)
    return document["id"], document.get("context")


def parse_report(value: bytes | None, max_bytes: int = 1 << 20) -> tuple[str | int, list[Any]]:
    """``(id, outputs)`` of a sensor report (the outputs' values are checked when applied).

    Examples
    --------
    >>> parse_report(b'{"id": 7, "outputs": [1, 0]}')
    (7, [1, 0])
    >>> parse_report(b'{"id": 7}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.events.InvalidEvent: missing_field: report 7 has no 'outputs'
    >>> parse_report(b'{"id": 7, "outputs": [[1]]}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.events.InvalidEvent: report_invalid: outputs[0] of 7 must be a label, got array

    """
    document = _load_object(value, max_bytes)
    decision_id, outputs = document["id"], document.get("outputs")
    if outputs is None:
        raise InvalidEvent("missing_field", f"report {decision_id!r} has no 'outputs'")
    if not isinstance(outputs, list):
        raise InvalidEvent("wrong_type", f"'outputs' of {decision_id!r} must be a list")
    for j, output in enumerate(outputs):
        # The labels kafka run accepts (null and NaN are left to PendingDecisions: missing outputs).
        if isinstance(output, (list, dict)) or (isinstance(output, float) and math.isinf(output)):
            raise InvalidEvent(
                "report_invalid",
                f"outputs[{j}] of {decision_id!r} must be a label, got {_kind(output)}",
            )
    return decision_id, outputs


def parse_checkpoint(value: bytes) -> dict[str, Any]:
    """The checkpoint document of a state record; ``ValueError`` if it is not one.

    Raises :class:`~uss_stream_kafka.checkpoint.NewerFormatError` (a ``ValueError``) for a
    checkpoint of a newer format version.

    >>> parse_checkpoint(b'{"format": "uss-stream/orchestration-checkpoint/v1", "state": {}}')["state"]
    {}
    >>> parse_checkpoint(b"[" * 100_000)
    Traceback (most recent call last):
    ...
    ValueError: checkpoint is JSON nested too deeply to decode

    """
    try:
        document = json.loads(value)
    except ValueError as error:
        raise ValueError(f"checkpoint is not JSON: {error}") from None
    except RecursionError:
        raise ValueError("checkpoint is JSON nested too deeply to decode") from None
    found = document.get("format") if isinstance(document, dict) else None
    if found != ORCHESTRATION_CHECKPOINT_FORMAT:
        if is_newer_format(found, ORCHESTRATION_CHECKPOINT_FORMAT):
            raise NewerFormatError(
                f"checkpoint has format {found!r}, written by a newer uss-stream than this one "
                f"({ORCHESTRATION_CHECKPOINT_FORMAT!r}): upgrade, or use a new state topic"
            )
        raise ValueError(f"checkpoint does not have format {ORCHESTRATION_CHECKPOINT_FORMAT!r}")
    return document


@dataclass
class OrchestrationSummary:
    """What one :meth:`Orchestrator.run` did.

    ``requests + reports == decisions + applied + sum(dead_letters.values())``.
    """

    requests: int = 0
    reports: int = 0
    decisions: int = 0
    applied: int = 0
    depth_counts: list[int] = field(default_factory=list)
    dead_letters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    checkpoints: int = 0
    restored: bool = False
    seconds: float = 0.0


class Orchestrator:
    """The orchestration-mode service: one learner, requests in, decisions out, reports joined by id.

    Parameters
    ----------
    client
        Connection and security settings.
    group_id
        Consumer group (also the checkpoint's key, ``orchestration:<group_id>``).
    topics
        The five topics.
    stage_costs
        ``c_1, ..., c_K`` (the cost of each stage).
    stage_names
        Names of the stages in the decisions (default ``stage1`` ... ``stageK``).
    alpha
        Shorthand for ``policy="uss-ucb:alpha=A"``; give it or ``policy``, not both.
    policy
        A label-free policy's spec (:mod:`uss_stream.policies.specs`), e.g. ``"uss-ucb:alpha=0.51"``;
        the checkpoint records it and a restart with another one is refused. With neither: the
        library's default (USS-KL-UCB), as on the command line.
    max_age_decisions, max_age_seconds
        A pending decision expires after that many later decisions / seconds (``None``: never); its
        late report is then dead-lettered as ``report_expired``. Whatever they are, the
        checkpoint stays within the state topic's record limit: a warning at half of it, and past
        90% the oldest pending decisions expire (see :mod:`uss_stream_kafka.state_budget`).
    checkpoint_every, checkpoint_interval
        Checkpoint (and commit) after that many records / seconds (0: off, as in
        :class:`~uss_stream_kafka.app.Application`), and at shutdown.
    guarantee
        ``"at-least-once"`` (the default) or ``"exactly-once"``: the decisions, dead letters,
        checkpoint and offsets since the last checkpoint are one transaction (transactional id
        ``uss-stream.<group_id>.<group_instance_id or host name>``), so a ``read_committed``
        reader sees each decision once and the restored learner is the one that made them.
    exit_when_idle
        Stop after that many seconds without records (``None``: run until :meth:`stop`), counted
        from the assignment of the partitions, and only once they are read to their end offsets.
    max_input_bytes, max_dead_letter_bytes
        Larger inputs are dead-lettered as ``oversize``; dead letters keep at most that many bytes
        of the value, and are capped as a whole (headers included) below the producer's
        ``max_request_size`` and the dead-letter topic's ``max.message.bytes``.
    consumer_options, producer_options
        Extra kafka-python settings of the consumer / producer.

    Examples
    --------
    >>> from uss_stream_kafka import ClientConfig
    >>> topics = OrchestrationTopics("req", "rep", "dec", "dlq", "state")
    >>> orchestrator = Orchestrator(ClientConfig("127.0.0.1:9092"), group_id="g", topics=topics,
    ...                             stage_costs=[0.0, 0.1, 0.2], stage_names=["xray", "ct", "manual"])
    >>> orchestrator.decision("bag-1", 2, None)
    {'id': 'bag-1', 'depth': 2, 'stages': ['xray', 'ct'], 'cost': 0.1}

    """

    def __init__(
        self,
        client: ClientConfig,
        *,
        group_id: str,
        topics: OrchestrationTopics,
        stage_costs: Sequence[float],
        stage_names: Sequence[str] | None = None,
        alpha: float | None = None,
        policy: str | None = None,
        max_age_decisions: int | None = None,
        max_age_seconds: float | None = None,
        checkpoint_every: int = 10_000,
        checkpoint_interval: float = 5.0,
        guarantee: str = "at-least-once",
        exit_when_idle: float | None = None,
        max_input_bytes: int = 1 << 20,
        max_dead_letter_bytes: int = 1 << 20,
        consumer_options: Mapping[str, Any] | None = None,
        producer_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.topics = topics
        self.stage_costs = [float(c) for c in stage_costs]
        k = len(self.stage_costs)
        self.stage_names = (
            list(stage_names) if stage_names is not None else [f"stage{i + 1}" for i in range(k)]
        )
        if len(self.stage_names) != k or len(set(self.stage_names)) != k:
            raise ValueError(f"stage_names must be {k} distinct names, got {self.stage_names!r}")
        self.alpha = alpha
        learner, self.policy = label_free_policy(
            policy_spec(policy, alpha), self.stage_costs, "orchestration"
        )
        self.book = PendingDecisions(
            learner,
            max_age_decisions=max_age_decisions,
            max_age_seconds=max_age_seconds,
        )
        self._cumulative = [sum(self.stage_costs[: d + 1]) for d in range(k)]
        if checkpoint_every < 0 or not checkpoint_interval >= 0:
            raise ValueError("checkpoint_every and checkpoint_interval must be >= 0 (0: off)")
        self.checkpoint_every = checkpoint_every
        self.checkpoint_interval = checkpoint_interval
        if guarantee not in ("at-least-once", "exactly-once"):
            raise ValueError(f"guarantee must be 'at-least-once' or 'exactly-once', got {guarantee!r}")
        self.guarantee = guarantee
        self._in_transaction = False
        self.exit_when_idle = exit_when_idle
        self.max_input_bytes = max_input_bytes
        self.max_dead_letter_bytes = max_dead_letter_bytes
        self.consumer_options = dict(consumer_options or {})
        self.producer_options = dict(producer_options or {})
        check_client_options("consumer", self.consumer_options, "consumer_options")
        check_client_options("producer", self.producer_options, "producer_options")
        self.summary = OrchestrationSummary(depth_counts=[0] * k)
        self._stop = threading.Event()
        #: Set once the consumer has its partitions (and restored partitions are positioned).
        self.ready = threading.Event()
        #: Set once the poll loop runs (:meth:`stop` is then honoured at the next batch).
        self.serving = threading.Event()
        self._offsets: dict[Any, int] = {}  # TopicPartition -> next offset to process
        self._restored_offsets: dict[str, int] = {}
        self._futures: list[Any] = []
        self._dead_letter_bytes: int | None = None  # the largest dead letter the broker accepts
        self._budget: Any = None  # StateBudget (set by run): the checkpoint within the state topic's limit
        self._held_reports: list[Any] = []  # reports partitions paused until the requests caught up
        self._requests_end: dict[Any, int] | None = None
        self._assigned_at: float | None = None
        self._idle_gate = IdleGate()
        self._consumer: Any = None
        self._producer: Any = None

    # -- pure parts ------------------------------------------------------------------------------
    @property
    def checkpoint_key(self) -> bytes:
        """Key of this group's checkpoint on the state topic."""
        return f"orchestration:{self.group_id}".encode()

    def decision(self, decision_id: str | int, depth: int, context: Any) -> dict[str, Any]:
        """The decision document for ``depth`` (``cost`` is the cumulative cost of the stages run)."""
        document: dict[str, Any] = {
            "id": decision_id,
            "depth": depth,
            "stages": self.stage_names[:depth],
            "cost": self._cumulative[depth - 1],
        }
        if context is not None:
            document["context"] = context
        return document

    def checkpoint_document(self) -> dict[str, Any]:
        """The checkpoint: learner state (statistics, pending decisions, counters) and offsets covered."""
        return {
            "format": ORCHESTRATION_CHECKPOINT_FORMAT,
            "group_id": self.group_id,
            "stage_costs": self.stage_costs,
            "stage_names": self.stage_names,
            "policy": self.policy,
            "offsets": {
                **self._restored_offsets,
                **{f"{tp.topic}/{tp.partition}": offset for tp, offset in self._offsets.items()},
            },
            "written_at": time.time(),
            "state": self.book.state_dict(),
        }

    def restore(self, document: Mapping[str, Any]) -> None:
        """Load a :meth:`checkpoint_document` (raises ``ValueError`` if it does not fit this service)."""
        if document.get("format") != ORCHESTRATION_CHECKPOINT_FORMAT:
            raise ValueError(f"checkpoint does not have format {ORCHESTRATION_CHECKPOINT_FORMAT!r}")
        if document.get("stage_costs") != self.stage_costs:
            raise ValueError(
                f"checkpoint is for stage costs {document.get('stage_costs')}, "
                f"the service has {self.stage_costs}"
            )
        recorded = document.get("policy")
        if recorded is None and "alpha" in document:  # written before the policy was recorded
            recorded = spec_of(parse_spec(f"uss-ucb:alpha={document['alpha']!r}").build(self.stage_costs))
        if recorded is not None and recorded != self.policy:
            raise ValueError(
                f"checkpoint was written with --policy {recorded}, the service runs --policy "
                f"{self.policy}: a restart must keep the policy (use a new state topic to change it)"
            )
        offsets = document.get("offsets")
        if not isinstance(offsets, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in offsets.values()
        ):
            raise ValueError("checkpoint 'offsets' must map 'topic/partition' to offsets")
        self.book.load_state_dict(document.get("state"))  # type: ignore[arg-type]
        self._restored_offsets = dict(offsets)
        self.summary.restored = True

    # -- service loop ----------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask :meth:`run` to finish its batch, checkpoint and return (thread- and signal-safe)."""
        self._stop.set()

    def run(self) -> OrchestrationSummary:
        """Serve until :meth:`stop` or ``exit_when_idle``; checkpoints at the end."""
        from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

        started = time.monotonic()
        exactly_once = self.guarantee == "exactly-once"
        producer_settings = {"linger_ms": 2, "acks": "all", **self.producer_options}
        if exactly_once:
            instance = self.consumer_options.get("group_instance_id")
            producer_settings |= {
                "acks": "all",
                "enable_idempotence": True,
                "transactional_id": transactional_id(self.group_id, instance),
            }
        admin = KafkaAdminClient(**self.client.kafka_kwargs("orchestrator-admin"))
        try:
            self._dead_letter_bytes = record_limit(admin, self.topics.dead_letter, producer_settings)
            state_bytes = record_limit(admin, self.topics.state, producer_settings)
        finally:
            admin.close()
        self._producer = KafkaProducer(
            **{**self.client.kafka_kwargs("orchestrator-producer"), **producer_settings}
        )
        if exactly_once:
            # Fences the previous incarnation and aborts its open transaction, whose checkpoint
            # would otherwise hold the state topic's last stable offset until it times out.
            self._producer.init_transactions()
        self._read_checkpoint()
        self._budget = StateBudget(self.book, state_bytes - len(self.checkpoint_key))
        self._consumer = KafkaConsumer(
            **{
                **self.client.kafka_kwargs("orchestrator-consumer"),
                "auto_offset_reset": "earliest",
                "max_poll_records": 5_000,
                "fetch_max_wait_ms": 20,
                **self.consumer_options,
                **({"isolation_level": "read_committed"} if exactly_once else {}),
                "group_id": self.group_id,
                "enable_auto_commit": False,
            }
        )
        try:
            self._consumer.subscribe([self.topics.requests, self.topics.reports], listener=_Rebalance(self))
            self._loop()
            self._checkpoint()
        finally:
            self._consumer.close(autocommit=False)
            self._producer.close()
            self.summary.seconds = time.monotonic() - started
        return self.summary

    def _loop(self) -> None:
        last_batch = 0.0
        last_checkpoint = time.monotonic()
        since_checkpoint = 0
        requests_topic = self.topics.requests
        self.serving.set()
        while not self._stop.is_set():
            batch = self._consumer.poll(timeout_ms=50)
            now = time.monotonic()
            if self._held_reports:
                self._release_reports()
            # The idle clock starts at the assignment, not while the group waits for a dead member.
            idle_since = max(last_batch, self._assigned_at or now)
            if batch:
                last_batch = now
                # Requests first: a report in the same batch may answer a request of this batch.
                for tp in sorted(batch, key=lambda tp: (tp.topic != requests_topic, tp.partition)):
                    records = batch[tp]
                    handle = self._request if tp.topic == requests_topic else self._report
                    for record in records:
                        handle(record)
                    self._offsets[tp] = records[-1].offset + 1
                    since_checkpoint += len(records)
            else:
                self.book.expire()
                if self.exit_when_idle is not None and now - idle_since >= self.exit_when_idle:
                    rebalancing = self._assigned_at is None
                    if (
                        not self._held_reports
                        and not rebalancing
                        and self._idle_gate.may_stop(self._consumer)
                    ):
                        break
                    log.info("idle but not caught up: not stopping")
                    last_batch = now
            every, interval = self.checkpoint_every, self.checkpoint_interval
            if (every and since_checkpoint >= every) or (
                interval and since_checkpoint and now - last_checkpoint >= interval
            ):
                self._checkpoint()
                last_checkpoint, since_checkpoint = time.monotonic(), 0

    def _request(self, record: Any) -> None:
        self.summary.requests += 1
        try:
            decision_id, context = parse_request(record.value, self.max_input_bytes)
        except InvalidEvent as error:
            self._dead_letter(record, error.reason, error.detail)
            return
        try:
            depth = self.book.decide(decision_id)
        except ValueError as error:
            self._dead_letter(record, "duplicate_request", str(error))
            return
        value = json.dumps(self.decision(decision_id, depth, context), separators=(",", ":")).encode()
        self._send(self.topics.decisions, json_scalar(decision_id), value)
        self.summary.decisions += 1
        self.summary.depth_counts[depth - 1] += 1

    def _report(self, record: Any) -> None:
        self.summary.reports += 1
        try:
            decision_id, outputs = parse_report(record.value, self.max_input_bytes)
            self.book.report(decision_id, outputs)
        except InvalidEvent as error:
            self._dead_letter(record, error.reason, error.detail)
        except RejectedReport as error:
            self._dead_letter(record, f"report_{error.reason}", str(error))
        else:
            self.summary.applied += 1

    def _dead_letter(self, record: Any, reason: str, error: str) -> None:
        letter = DeadLetter.for_record(record, reason, error)
        key, value, headers = letter.to_record(self.max_dead_letter_bytes, self._dead_letter_bytes)
        self._send(self.topics.dead_letter, key, value, headers)
        self.summary.dead_letters[reason] += 1

    def _send(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None:
        if self.guarantee == "exactly-once" and not self._in_transaction:
            self._producer.begin_transaction()
            self._in_transaction = True
        self._futures.append(self._producer.send(topic, value=value, key=key, headers=headers))

    def _flush(self) -> None:
        """Flush the producer; raise :class:`DeliveryError` if the broker refused a record."""
        self._producer.flush()
        failed = [f.exception for f in self._futures if f.failed()]
        self._futures = []
        if failed:
            raise DeliveryError(f"{len(failed)} record(s) not delivered, first: {failed[0]!r}")

    def _checkpoint(self) -> None:
        """Flush outputs, write the checkpoint, flush it, then commit the offsets it covers.

        Exactly-once: the checkpoint and the offsets join the open transaction, which is committed.
        """
        from kafka.structs import OffsetAndMetadata

        self._flush()
        value = self._budget.encode(self.checkpoint_document)
        self._send(self.topics.state, self.checkpoint_key, value)
        self._flush()
        self.summary.checkpoints += 1
        if self.guarantee == "exactly-once":
            offsets = {tp: OffsetAndMetadata(o, "", -1) for tp, o in self._offsets.items()}
            if offsets:
                self._producer.send_offsets_to_transaction(offsets, self._consumer.group_metadata())
            self._producer.commit_transaction()
            self._in_transaction = False
        elif self._offsets:
            self._consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in self._offsets.items()})

    def _read_checkpoint(self) -> None:
        """Load the last checkpoint of this group from the state topic, if there is one."""
        from kafka import KafkaConsumer, TopicPartition

        reader = KafkaConsumer(
            **{
                **self.client.kafka_kwargs("orchestrator-state"),
                "enable_auto_commit": False,
                "group_id": None,
                # Checkpoints of aborted transactions are never restored.
                "isolation_level": "read_committed",
            }
        )
        try:
            partitions = [
                TopicPartition(self.topics.state, p)
                for p in sorted(reader.partitions_for_topic(self.topics.state) or ())
            ]
            if not partitions:
                raise ValueError(f"state topic {self.topics.state!r} does not exist")
            reader.assign(partitions)
            reader.seek_to_beginning(*partitions)
            end = reader.end_offsets(partitions)
            latest: dict[str, Any] | None = None
            newer: str | None = None
            deadline = time.monotonic() + 60.0
            while any(reader.position(tp) < end[tp] for tp in partitions):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not read state topic {self.topics.state!r} to its end")
                for records in reader.poll(timeout_ms=200).values():
                    for record in records:
                        if record.key != self.checkpoint_key:
                            continue
                        newer = None
                        if record.value is None:
                            latest = None
                            continue
                        try:
                            latest = parse_checkpoint(record.value)
                        except NewerFormatError as error:
                            newer = str(error)
                        except ValueError as error:
                            log.warning(
                                "ignoring an invalid checkpoint at %s/%d@%d (the previous one stays): %s",
                                record.topic,
                                record.partition,
                                record.offset,
                                error,
                            )
        finally:
            reader.close()
        if newer is not None:
            raise CheckpointError(f"the checkpoint of group {self.group_id!r}: {newer}")
        if latest is not None:
            try:
                self.restore(latest)
            except (ValueError, TypeError, KeyError, AttributeError) as error:
                raise CheckpointError(
                    f"the checkpoint of group {self.group_id!r} on {self.topics.state!r} does not fit "
                    f"this orchestrator: {error}; use a new state topic or group"
                ) from error
            log.info(
                "restored the learner of group %s: %d pending decisions, offsets %s",
                self.group_id,
                self.book.pending,
                self._restored_offsets,
            )

    def _on_assigned(self, partitions: Sequence[Any]) -> None:
        for tp in partitions:
            offset = self._restored_offsets.get(f"{tp.topic}/{tp.partition}")
            if offset is not None:
                self._consumer.seek(tp, offset)
                self._offsets[tp] = offset
        # Reports wait until the requests are read to their end offsets (see _release_reports).
        reports = [tp for tp in partitions if tp.topic == self.topics.reports]
        if reports:
            self._consumer.pause(*reports)
        self._held_reports = reports
        self._requests_end = None
        self._assigned_at = time.monotonic()
        self._idle_gate.assigned()
        self.ready.set()

    def _release_reports(self) -> None:
        """Resume the reports once the requests are read to the end offsets they had at assignment.

        After a restart with both topics backlogged, a report read before its request would be
        judged unknown; holding the reports back until the requests have caught up (a bounded
        wait: the end offsets are those of the assignment) makes every report find its decision.
        """
        consumer = self._consumer
        requests = [tp for tp in consumer.assignment() if tp.topic == self.topics.requests]
        if self._requests_end is None:
            self._requests_end = consumer.end_offsets(requests) if requests else {}
        if any(consumer.position(tp) < end for tp, end in self._requests_end.items()):
            return
        consumer.resume(*self._held_reports)
        log.info(
            "requests read to their end offsets %s: reading the reports",
            {f"{tp.topic}/{tp.partition}": end for tp, end in self._requests_end.items()},
        )
        self._held_reports = []

    def _on_revoked(self, partitions: Sequence[Any]) -> None:
        self._assigned_at = None  # a rebalance: the idle clock waits for the next assignment
        # No commit here (the kafka-python IO thread cannot block): the offsets of the revoked
        # partitions stay in the next checkpoint; records processed since the last commit are
        # processed again by the partitions' next owner (at-least-once).
        for tp in partitions:
            offset = self._offsets.pop(tp, None)
            if offset is not None:
                self._restored_offsets[f"{tp.topic}/{tp.partition}"] = offset


class _Rebalance(ConsumerRebalanceListener):
    """kafka-python rebalance listener: seek restored partitions, keep the offsets of revoked ones."""

    def __init__(self, orchestrator: Orchestrator) -> None:
        self._orchestrator = orchestrator

    def on_partitions_assigned(self, assigned: Sequence[Any]) -> None:
        self._orchestrator._on_assigned(assigned)

    def on_partitions_revoked(self, revoked: Sequence[Any]) -> None:
        self._orchestrator._on_revoked(revoked)
