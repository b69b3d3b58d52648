"""The seam on kafka-python (pure Python; the default client).

A thin layer: kafka-python already speaks in the seam's terms (offsets of the next record, rebalance
listeners called inside ``poll``); this module converts partitions and errors and keeps, per
producer, the list of failed deliveries (one errback per record: kafka-python makes a future for
every record anyway).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from uss_stream.core.extras import require

from .base import (
    Admin,
    ClientError,
    Consumer,
    Producer,
    RebalanceCallback,
    Record,
    Records,
    TopicPartition,
    TopicSpec,
    UndecodableError,
)
from .kafka_python_group import repair_group_join

__all__ = ["KafkaPythonAdmin", "KafkaPythonConsumer", "KafkaPythonProducer"]

log = logging.getLogger("uss_stream_kafka")

#: kafka-python errors after which the client cannot go on (no abort, no retry helps).
_FATAL = ("ProducerFencedError", "InvalidProducerEpochError", "UnsupportedVersionError")


def _kafka() -> Any:
    return require("kafka", purpose="the kafka-python client")


def _forget_refused_offsets(producer: Any) -> None:
    """Drop the offsets a previous transaction could not add, before a new transaction begins.

    kafka-python (3.0.12) keeps the offsets of a ``TxnOffsetCommit`` the group coordinator refused
    for good (``UNKNOWN_MEMBER_ID`` or ``ILLEGAL_GENERATION`` after a rebalance) and sends them
    again with the next ``send_offsets_to_transaction``: the next transaction, of whatever
    partitions, would commit the aborted transaction's offsets, with its decisions aborted.
    Between two transactions nothing is legitimately pending, so the leftovers are dropped
    (a warning names them).

    >>> from types import SimpleNamespace
    >>> manager = SimpleNamespace(_pending_txn_offset_commits={"in-0": 2891})
    >>> _forget_refused_offsets(SimpleNamespace(_transaction_manager=manager))
    >>> manager._pending_txn_offset_commits
    {}
    >>> _forget_refused_offsets(SimpleNamespace())  # another kafka-python: nothing to drop
    """
    pending = getattr(getattr(producer, "_transaction_manager", None), "_pending_txn_offset_commits", None)
    if pending:
        log.warning(
            "dropping the offsets of an aborted transaction kafka-python kept: %s", sorted(map(str, pending))
        )
        pending.clear()


def _error(error: BaseException, what: str, transactional: bool = False) -> ClientError:
    """``error`` of kafka-python as a :class:`ClientError` (``what``: the operation that failed)."""
    errors = _kafka().errors
    broker = isinstance(error, errors.BrokerResponseError)
    name = getattr(error, "message", "") if broker else ""
    fatal = type(error).__name__ in _FATAL or isinstance(error, errors.AuthorizationError)
    timeout = isinstance(error, errors.KafkaTimeoutError)
    return ClientError(
        f"{what}: {error!r}",
        name=name or ("_TIMED_OUT" if timeout else type(error).__name__),
        code=getattr(error, "errno", None) if broker else None,
        retriable=bool(getattr(error, "retriable", False)) or timeout,
        abortable=transactional and not fatal,
        fatal=fatal,
        timeout=timeout,
    )


#: Every kafka-python client's settings unless given. kafka-python doubles the wait between two
#: attempts to reach a broker up to 30 s: a client that lived through an outage of a minute then
#: found the broker back only up to 30 s later (and a producer created meanwhile gave up
#: bootstrapping). Java's client and librdkafka retry at least every 1 s and 10 s.
CLIENT_DEFAULTS: dict[str, Any] = {"reconnect_backoff_max_ms": 1000}


def _create(kind: str, settings: dict[str, Any]) -> Any:
    """A kafka-python ``kind`` client (:data:`CLIENT_DEFAULTS` under ``settings``); failing to reach
    the brokers is a retriable :class:`ClientError`."""
    kafka = _kafka()
    try:
        return getattr(kafka, kind)(**{**CLIENT_DEFAULTS, **settings})
    except kafka.errors.KafkaError as error:
        raise _error(error, f"creating a {kind}") from error


def _call(what: str, call: Any, *args: Any) -> Any:
    """``call(*args)``, with kafka-python's errors as :class:`ClientError` (an outage: retriable).

    The offset queries block on the brokers: during a broker restart kafka-python raises its
    connection and timeout errors there, which the service retries only in the seam's terms.
    """
    try:
        return call(*args)
    except _kafka().errors.KafkaError as error:
        raise _error(error, what) from error


def _assignors(names: str) -> list[Any]:
    """kafka-python assignors for librdkafka's comma-separated names (``"range,roundrobin"``)."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    known = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    known["sticky"] = StickyPartitionAssignor
    try:
        return [known[name.strip()]() for name in names.split(",")]
    except KeyError as error:
        raise ValueError(
            f"partition_assignment_strategy: unknown assignor {error.args[0]!r}; one of {', '.join(known)}"
        ) from None


def _native(tp: TopicPartition) -> Any:
    return _kafka().TopicPartition(tp.topic, tp.partition)


class KafkaPythonRecords(Records):
    """A partition's ``ConsumerRecord`` list, seen as columns."""

    __slots__ = ()

    _value = operator.attrgetter("value")
    _key = operator.attrgetter("key")
    _offset = operator.attrgetter("offset")
    _headers = operator.attrgetter("headers")

    def record(self, index: int) -> Record:
        r = self._messages[index]
        return Record(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, tuple(r.headers or ()))


class KafkaPythonConsumer(Consumer):
    """A ``KafkaConsumer`` (``settings``: its keyword arguments; auto-commit is off)."""

    def __init__(self, **settings: Any) -> None:
        repair_group_join()  # kafka-python 3.0's group join loses assignments under load
        assignors = settings.get("partition_assignment_strategy")
        if isinstance(assignors, str):  # librdkafka's spelling: "range", "roundrobin"...
            settings["partition_assignment_strategy"] = _assignors(assignors)
        self._consumer = _create("KafkaConsumer", {**settings, "enable_auto_commit": False})

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        kafka = _kafka()

        def call(callback: RebalanceCallback | None, partitions: Iterable[Any]) -> None:
            if callback is not None:
                callback([TopicPartition(tp.topic, tp.partition) for tp in partitions])

        class Listener(kafka.ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                call(on_revoke, revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                call(on_assign, assigned)

            def on_partitions_lost(self, lost: Any) -> None:
                call(on_lost or on_revoke, lost)

        self._consumer.subscribe(list(topics), listener=Listener())

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._consumer.assign([_native(tp) for tp in partitions])

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(tp.topic, tp.partition) for tp in self._consumer.assignment()}

    def poll(self, timeout: float, max_records: int | None = None) -> dict[TopicPartition, Records]:
        try:
            fetched = self._consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        except Exception as error:
            from .undecodable import undecodable_batch

            batch = undecodable_batch(error)
            if batch is not None:
                tp = TopicPartition(batch.tp.topic, batch.tp.partition)
                raise UndecodableError(
                    batch.describe(batch.base_offset), tp=tp, offset=batch.base_offset, batch=batch
                ) from error
            if isinstance(error, _kafka().errors.KafkaError):
                raise _error(error, "poll") from error
            raise
        return {
            TopicPartition(tp.topic, tp.partition): KafkaPythonRecords(TopicPartition(*tp), records)
            for tp, records in fetched.items()
            if records
        }

    def subscription(self) -> set[str]:
        return set(self._consumer.subscription() or ())

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(self._consumer.partitions_for_topic(topic) or ())

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._consumer.pause(*map(_native, partitions))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._consumer.resume(*map(_native, partitions))

    def paused(self) -> set[TopicPartition]:
        return {TopicPartition(tp.topic, tp.partition) for tp in self._consumer.paused()}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._consumer.seek(_native(tp), offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        native = [_native(tp) for tp in partitions]
        if native:
            self._consumer.seek_to_beginning(*native)

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        native = [_native(tp) for tp in partitions]
        if native:
            self._consumer.seek_to_end(*native)

    def position(self, tp: TopicPartition) -> int:
        return _call("position", self._consumer.position, _native(tp))

    def committed(self, tp: TopicPartition) -> int | None:
        return _call("committed", self._consumer.committed, _native(tp))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        native = [_native(tp) for tp in partitions]
        found = _call("beginning_offsets", self._consumer.beginning_offsets, native)
        return {TopicPartition(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = _call("end_offsets", self._consumer.end_offsets, [_native(tp) for tp in partitions])
        return {TopicPartition(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def highwater(self, tp: TopicPartition) -> int | None:
        return self._consumer.highwater(_native(tp))

    def fetch_state(self, partitions: Iterable[TopicPartition]) -> dict[str, Any]:
        """kafka-python 3.0's fetch bookkeeping (private attributes: best effort, never raises)."""
        try:
            fetcher, subscriptions = self._consumer._fetcher, self._consumer._subscription
            parked = set(fetcher._paused_completed_fetches) | set(fetcher._paused_partition_records)
            queued = {fetch.topic_partition for fetch in list(fetcher._completed_fetches)}
            in_flight = sorted(fetcher._nodes_with_pending_fetch_requests)
            state: dict[str, Any] = {"nodes_with_a_fetch_in_flight": in_flight}
            coordinator = self._consumer._coordinator
            if coordinator.group_id is not None:  # poll() fetches nothing until the group is ready
                join = getattr(coordinator, "_join_task", None)
                state["group"] = {
                    "coordinator": coordinator.coordinator_id,
                    "state": str(coordinator.state),
                    "rejoin_needed": coordinator.rejoin_needed,
                    "generation": coordinator._generation.generation_id,
                    "join_in_flight": join is not None and not join.is_done,
                }
            for tp in partitions:
                native = _native(tp)
                partition = subscriptions.assignment.get(native)
                state[str(tp)] = {
                    "fetchable": subscriptions.is_fetchable(native),
                    "awaiting_reset": None if partition is None else partition.awaiting_reset,
                    "awaiting_validation": getattr(partition, "_awaiting_validation", None),
                    "parked_while_paused": native in parked,
                    "completed_fetch_queued": native in queued,
                }
            return state
        except Exception as error:  # another kafka-python line: its internals differ
            return {"unavailable": repr(error)}

    def commit(self, offsets: Mapping[TopicPartition, int], asynchronous: bool = False) -> None:
        structs = _kafka().structs
        native = {_native(tp): structs.OffsetAndMetadata(offset, "", -1) for tp, offset in offsets.items()}
        try:
            if asynchronous:
                self._consumer.commit_async(native)
            else:
                self._consumer.commit(native)
        except _kafka().errors.KafkaError as error:
            raise _error(error, "commit") from error

    def group_metadata(self) -> Any:
        return self._consumer.group_metadata()

    def close(self) -> None:
        self._consumer.close(autocommit=False)


class KafkaPythonProducer(Producer):
    """A ``KafkaProducer`` (``settings``: its keyword arguments)."""

    def __init__(self, **settings: Any) -> None:
        self._producer = _create("KafkaProducer", settings)
        self._errors: list[ClientError] = []
        self._transactional = settings.get("transactional_id") is not None
        self._errbacks: dict[tuple[str, int | None], Any] = {}
        #: A delivery failed as fenced: kafka-python then tries to bump its epoch and fails its
        #: next transactional calls with a generic error, which is reported as fenced too.
        self._fenced = False

    def _failed(self, topic: str, partition: int | None) -> Any:
        """The errback of the records sent to ``topic`` / ``partition`` (one per destination)."""
        errback = self._errbacks.get((topic, partition))
        if errback is None:

            def errback(error: BaseException) -> None:
                failure = _error(error, f"delivery to {topic}[{partition}]")
                failure.__cause__ = error
                self._fenced = self._fenced or failure.fenced
                self._errors.append(failure)

            self._errbacks[topic, partition] = errback
        return errback

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        try:
            future = self._producer.send(
                topic, value, key=key, partition=partition, headers=list(headers) if headers else None
            )
        except _kafka().errors.KafkaError as error:
            raise _error(error, f"send to {topic}", self._transactional) from error
        future.add_errback(self._failed(topic, partition))

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        headers: Sequence[Sequence[tuple[str, bytes]] | None] | None = None,
    ) -> None:
        send = self._producer.send
        errback = self._failed(topic, partition)
        count = len(values)
        try:
            if headers is not None:
                for value, key, carried in zip(values, keys or [None] * count, headers):
                    carried = list(carried) if carried else None
                    send(topic, value, key=key, partition=partition, headers=carried).add_errback(errback)
                return
            for value, key in zip(values, keys if keys is not None else [None] * count):
                send(topic, value, key=key, partition=partition).add_errback(errback)
        except _kafka().errors.KafkaError as error:
            raise _error(error, f"send to {topic}", self._transactional) from error

    def flush(self, timeout: float | None = None) -> None:
        try:
            self._producer.flush(timeout)
        except _kafka().errors.KafkaError as error:
            raise _error(error, "flush", self._transactional) from error

    def take_errors(self) -> list[ClientError]:
        errors, self._errors = self._errors, []
        return errors

    def _transaction(self, what: str, call: Any, *args: Any) -> None:
        try:
            call(*args)
        except _kafka().errors.KafkaError as error:
            failure = _error(error, what, transactional=True)
            if self._fenced or failure.fenced:
                failure.fenced, failure.fatal, failure.abortable = True, True, False
            raise failure from error

    def init_transactions(self, timeout: float | None = None) -> None:
        self._transaction("init_transactions", self._producer.init_transactions)

    def begin_transaction(self) -> None:
        _forget_refused_offsets(self._producer)
        self._transaction("begin_transaction", self._producer.begin_transaction)

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_metadata: Any, timeout: float | None = None
    ) -> None:
        structs = _kafka().structs
        native = {_native(tp): structs.OffsetAndMetadata(offset, "", -1) for tp, offset in offsets.items()}
        self._transaction(
            "send_offsets_to_transaction", self._producer.send_offsets_to_transaction, native, group_metadata
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._transaction("commit_transaction", self._producer.commit_transaction)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._transaction("abort_transaction", self._producer.abort_transaction)

    def close(self, timeout: float | None = None) -> None:
        self._producer.close(timeout=timeout)


class KafkaPythonAdmin(Admin):
    """A ``KafkaAdminClient`` (``settings``: its keyword arguments)."""

    def __init__(self, **settings: Any) -> None:
        self._admin = _create("KafkaAdminClient", settings)

    def create_topics(self, topics: Mapping[str, TopicSpec]) -> dict[str, ClientError | None]:
        specs = {
            name: {
                "num_partitions": spec.partitions,
                "replication_factor": spec.replication_factor,
                "configs": dict(spec.configs or {}),
            }
            for name, spec in topics.items()
        }
        response = self._admin.create_topics(specs, raise_errors=False, wait_for_metadata=True)
        errors = _kafka().errors
        result: dict[str, ClientError | None] = {}
        for entry in response["topics"]:
            name, code = entry["name"], entry["error_code"]
            if code == 0:
                result[name] = None
                continue
            error = errors.for_code(code)
            result[name] = ClientError(
                f"create topic {name!r}: {entry.get('error_message') or error.description}",
                name=error.message,
                code=code,
                retriable=error.retriable,
            )
        return result

    def partitions(self, topics: Iterable[str]) -> dict[str, int]:
        names = list(topics)
        counts = {
            entry["name"]: len(entry["partitions"])
            for entry in self._admin.describe_topics(names)
            if entry.get("error_code", 0) == 0 and entry.get("partitions")
        }
        missing = [name for name in names if name not in counts]
        if missing:
            raise ClientError(
                f"topic(s) {', '.join(missing)} do not exist", name="UNKNOWN_TOPIC_OR_PARTITION"
            )
        return counts

    def topic_config(self, topic: str) -> dict[str, str]:
        admin = _kafka().admin
        resource = admin.ConfigResource(admin.ConfigResourceType.TOPIC, topic)
        described = self._admin.describe_configs([resource], config_filter="all")
        return {name: entry["value"] for name, entry in described.get("topic", {}).get(topic, {}).items()}

    def delete_topics(self, topics: Iterable[str]) -> None:
        self._admin.delete_topics(list(topics))

    def close(self) -> None:
        self._admin.close()
