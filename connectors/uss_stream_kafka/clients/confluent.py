"""The seam on confluent-kafka (librdkafka; extra ``uss-stream[confluent]``).

Where the per-record cost goes: :meth:`ConfluentConsumer.poll` takes up to ``max_records``
messages with one ``consume()`` call and groups them by partition in one pass; the columns are
built when first read. :meth:`ConfluentProducer.send` is one ``produce()`` call and no callback:
the producer is configured with ``delivery.report.only.error``, so Python runs only for the
records that failed, collected for :meth:`ConfluentProducer.take_errors`.

Settings are kafka-python's keyword names (translated by
:func:`~uss_stream_kafka.clients.librdkafka_config.librdkafka_config`) or librdkafka's
dotted names, passed through.
"""

from __future__ import annotations

import contextlib
import operator
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, repeat
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
from .librdkafka_config import librdkafka_config

__all__ = ["ConfluentAdmin", "ConfluentConsumer", "ConfluentProducer"]


def _ck() -> Any:
    return require("confluent_kafka", extra="confluent", purpose="the confluent-kafka client")


def _ck_admin() -> Any:
    return require("confluent_kafka.admin", extra="confluent", purpose="the confluent-kafka client")


def _created(factory: Callable[[dict[str, Any]], Any], config: dict[str, Any], role: str) -> Any:
    """``factory(config)``; librdkafka's refusal of a property (unknown, or a bad value) is a ``ValueError``.

    >>> _created(_ck().Consumer, {"group.id": "g", "debg": "cgrp"}, "consumer")
    Traceback (most recent call last):
    ...
    ValueError: consumer settings: No such configuration property: "debg"
    """
    ck = _ck()
    try:
        return factory(config)
    except ck.KafkaException as error:
        if error.args and error.args[0].code() == ck.KafkaError._INVALID_ARG:
            raise ValueError(f"{role} settings: {error.args[0].str()}") from None
        raise


#: librdkafka errors of a broker restart that librdkafka does not flag ``retriable()``: right after
#: the broker comes back, a partition's leader (the metadata) is briefly unknown; they pass.
_OUTAGE = (
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_UNKNOWN_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    # The group coordinator not found yet (after a broker restart, a commit answers "waiting for
    # coordinator" until the group's coordinator is up again): the next commit point retries.
    "_WAIT_COORD",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
)


def _error(error: Any, what: str) -> ClientError:
    """A ``KafkaError`` (or the ``KafkaException`` holding one) as a :class:`ClientError`."""
    ck = _ck()
    if isinstance(error, ck.KafkaException) and error.args and isinstance(error.args[0], ck.KafkaError):
        error = error.args[0]
    if not isinstance(error, ck.KafkaError):
        return ClientError(f"{what}: {error!r}")
    code = error.code()
    return ClientError(
        f"{what}: {error.str()}",
        name=error.name(),
        code=code if code >= 0 else None,
        retriable=(error.retriable() or error.name() in _OUTAGE) and code != ck.KafkaError._FATAL,
        abortable=error.txn_requires_abort(),
        # A consumer's fatal error reaches its messages as _FATAL, whose own fatal() is False.
        fatal=error.fatal() or code == ck.KafkaError._FATAL,
        timeout=code in (ck.KafkaError._TIMED_OUT, ck.KafkaError._MSG_TIMED_OUT),
    )


def _native(tp: TopicPartition, offset: int | None = None) -> Any:
    ck = _ck()
    if offset is None:
        return ck.TopicPartition(tp.topic, tp.partition)
    return ck.TopicPartition(tp.topic, tp.partition, offset)


def _seconds(timeout: float | None) -> float:
    return -1 if timeout is None else timeout


_message_error = operator.methodcaller("error")


class ConfluentRecords(Records):
    """A partition's ``Message`` list, seen as columns."""

    __slots__ = ()

    _value = operator.methodcaller("value")
    _key = operator.methodcaller("key")
    _offset = operator.methodcaller("offset")
    _headers = operator.methodcaller("headers")

    def record(self, index: int) -> Record:
        m = self._messages[index]
        kind, timestamp = m.timestamp()
        return Record(
            m.topic(),
            m.partition(),
            m.offset(),
            None if kind == _ck().TIMESTAMP_NOT_AVAILABLE else timestamp,
            m.key(),
            m.value(),
            tuple(m.headers() or ()),
        )


class ConfluentConsumer(Consumer):
    """A librdkafka consumer (``settings``: kafka-python names or librdkafka properties).

    ``max_poll_records`` (default 500) is the most messages one :meth:`poll` returns; offsets are
    never committed or stored automatically.
    """

    def __init__(self, **settings: Any) -> None:
        ck = _ck()
        self._max_records = int(settings.pop("max_poll_records", None) or 500)
        config = librdkafka_config(settings)
        config.update({"enable.auto.commit": False, "enable.auto.offset.store": False})
        config.setdefault("group.id", f"uss-stream-unused-{id(self):x}")  # librdkafka needs one
        self._reset = config.get("auto.offset.reset", "latest")
        self._cooperative = "cooperative" in str(config.get("partition.assignment.strategy", ""))
        self._consumer = _created(ck.Consumer, config, "consumer")
        # A consumer that never joins the group, made for one ask (see _watermarks).
        fresh = {key: value for key, value in config.items() if key != "group.instance.id"}
        fresh["group.id"] = f"uss-stream-offsets-{id(self):x}"
        self._fresh: Callable[[], Any] = lambda: _created(ck.Consumer, fresh, "consumer")
        self._paused: set[TopicPartition] = set()
        self._in_rebalance = False
        self._seeks: dict[TopicPartition, int] = {}
        self._pauses: set[TopicPartition] = set()  # asked for by an on_assign callback
        self._pending: ClientError | None = None  # the error that ended the last poll's messages
        self._subscription: set[str] = set()
        #: Offsets sought and not yet passed by a poll (librdkafka's position() does not show them).
        self._sought: dict[TopicPartition, int] = {}

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        def wrap(callback: RebalanceCallback | None, assigning: bool) -> Any:
            def called(consumer: Any, partitions: list[Any]) -> None:
                tps = [TopicPartition(p.topic, p.partition) for p in partitions]
                self._in_rebalance = assigning
                self._seeks.clear()
                self._pauses.clear()
                try:
                    if callback is not None:
                        callback(tps)
                finally:
                    self._in_rebalance = False
                if assigning:
                    # Seeks from the callback become the assignment's start offsets (librdkafka
                    # cannot seek a partition it has not started fetching).
                    seeks, self._seeks = self._seeks, {}
                    native = [_native(tp, seeks[tp]) if tp in seeks else _native(tp) for tp in tps]
                    if self._cooperative:
                        consumer.incremental_assign(native)
                    else:
                        consumer.assign(native)
                    pauses, self._pauses = self._pauses, set()
                    if pauses:  # likewise pauses: only an assigned partition can be paused
                        consumer.pause([_native(tp) for tp in pauses])
                        self._paused.update(pauses)
                else:
                    if self._cooperative:
                        consumer.incremental_unassign([_native(tp) for tp in tps])
                    self._paused.difference_update(tps)
                    for tp in tps:
                        self._sought.pop(tp, None)

            return called

        self._subscription = set(topics)
        self._consumer.subscribe(
            list(topics),
            on_assign=wrap(on_assign, True),
            on_revoke=wrap(on_revoke, False),
            on_lost=wrap(on_lost or on_revoke, False),
        )

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._consumer.assign([_native(tp) for tp in partitions])

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(p.topic, p.partition) for p in self._consumer.assignment()}

    def poll(self, timeout: float, max_records: int | None = None) -> dict[TopicPartition, Records]:
        if self._pending is not None:
            error, self._pending = self._pending, None
            raise error
        messages = self._consumer.consume(max_records or self._max_records, timeout)
        if not messages:
            return {}
        errors = list(map(_message_error, messages))
        # One pass in C when none failed (by identity: a KafkaError compares itself with codes, not None).
        if any(map(operator.is_not, errors, repeat(None))):
            messages = self._failed(messages, next(i for i, error in enumerate(errors) if error is not None))
        grouped = self._group(messages)
        if self._sought:
            for tp in grouped:
                self._sought.pop(tp, None)
        return {tp: ConfluentRecords(tp, run) for tp, run in grouped.items()}

    def _group(self, messages: list[Any]) -> dict[TopicPartition, list[Any]]:
        """``messages`` by partition, in one pass (none if a single partition is assigned).

        The assignment is that of the ``consume()`` that returned them: librdkafka drops the
        messages of partitions no longer assigned, and rebalances happen inside ``consume()``.
        """
        assigned = self._consumer.assignment()
        if len(assigned) == 1:
            return {TopicPartition(assigned[0].topic, assigned[0].partition): messages} if messages else {}
        grouped: dict[Any, list[Any]] = {}
        run_key: Any = None
        run: list[Any] = []
        if len({p.topic for p in assigned}) == 1:
            topic = assigned[0].topic
            for message in messages:
                key = message.partition()
                if key != run_key:
                    run = grouped.setdefault(key, [])
                    run_key = key
                run.append(message)
            return {TopicPartition(topic, partition): run for partition, run in grouped.items()}
        for message in messages:
            key = (message.topic(), message.partition())
            if key != run_key:
                run = grouped.setdefault(key, [])
                run_key = key
            run.append(message)
        return {TopicPartition(*key): run for key, run in grouped.items()}

    def _failed(self, messages: list[Any], index: int) -> list[Any]:
        """The messages before the error at ``index``; its error is raised by the next poll (now if none).

        The messages after it are not returned: their partitions are rewound to them, so nothing
        is skipped (a dead letter's handler seeks past the undecodable record itself).
        """
        ck = _ck()
        message = messages[index]
        tail = [m for m in messages[index + 1 :] if m.error() is None]
        for tp, run in self._group(tail).items():
            self._consumer.seek(_native(tp, run[0].offset()))
        error = message.error()
        if error.code() in (ck.KafkaError._BAD_MSG, ck.KafkaError._BAD_COMPRESSION):
            tp = TopicPartition(message.topic(), message.partition())
            failure: ClientError = UndecodableError(
                f"{tp.topic}/{tp.partition} offset {message.offset()}: {error.str()}",
                tp=tp,
                offset=message.offset(),
            )
        else:
            failure = _error(error, f"poll ({message.topic()}/{message.partition()})")
            # librdkafka recovers from every non-fatal consumer error by itself (a broker restart...).
            failure.retriable = failure.retriable or not failure.fatal
        if index == 0:
            raise failure
        self._pending = failure
        return messages[:index]

    def subscription(self) -> set[str]:
        return set(self._subscription)

    def partitions_for_topic(self, topic: str) -> set[int]:
        try:
            metadata = self._consumer.list_topics(topic, timeout=10).topics.get(topic)
        except _ck().KafkaException:
            return set()
        if metadata is None or metadata.error is not None:
            return set()
        return set(metadata.partitions)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        tps = list(partitions)
        if tps and self._in_rebalance:
            self._pauses.update(tps)
        elif tps:
            self._consumer.pause([_native(tp) for tp in tps])
            self._paused.update(tps)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        tps = list(partitions)
        if tps:
            self._consumer.resume([_native(tp) for tp in tps])
            self._paused.difference_update(tps)

    def paused(self) -> set[TopicPartition]:
        return self._paused & self.assignment()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._sought[tp] = offset
        if self._in_rebalance:
            self._seeks[tp] = offset
            return
        ck = _ck()
        try:
            self._consumer.seek(_native(tp, offset))
        except ck.KafkaException as error:
            if error.args[0].code() not in (ck.KafkaError._STATE, ck.KafkaError._OUTDATED):
                raise _error(error, f"seek {tp.topic}/{tp.partition}") from error
            # Not fetching yet (just assigned; _OUTDATED: its fetch is still being started, seen
            # under load with librdkafka 2.12): restart the partition's assignment at the offset.
            self._consumer.incremental_unassign([_native(tp)])
            self._consumer.incremental_assign([_native(tp, offset)])

    def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        ck = _ck()
        try:
            return self._consumer.get_watermark_offsets(_native(tp), timeout=30, cached=False)
        except ck.KafkaException as error:
            if error.args and error.args[0].code() == ck.KafkaError._UNKNOWN_PARTITION:
                # librdkafka may keep a partition count of 0 seen while the broker restarted until
                # its periodic refresh (topic.metadata.refresh.interval.ms, 5 min): a restore that
                # retried on it waited that long. Asking for the topic's metadata updates it, mostly;
                # where it does not, the offsets are listed from the partition's leader, which
                # offsets_for_times looks up afresh (timestamps -2 and -1: the earliest and latest).
                with contextlib.suppress(ck.KafkaException):
                    self._consumer.list_topics(tp.topic, timeout=5)
                with contextlib.suppress(ck.KafkaException):
                    return self._listed(tp, ck.OFFSET_BEGINNING), self._listed(tp, ck.OFFSET_END)
            if error.args and error.args[0].code() == ck.KafkaError._ALL_BROKERS_DOWN:
                # librdkafka can keep every connection down for minutes after a broker restart
                # although the broker is back (a CI run asked for 240 s): a new client connects anew.
                # The broker still down, it fails too, and the error stays the retriable one.
                with contextlib.suppress(ck.KafkaException):
                    return self._fresh_watermarks(tp)
            raise _error(error, f"offsets of {tp.topic}/{tp.partition}") from error

    def _fresh_watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        """``tp``'s offsets from a new librdkafka consumer with this one's connection settings
        (it never joins the group), closed after the one ask."""
        fresh = self._fresh()
        try:
            return fresh.get_watermark_offsets(_native(tp), timeout=5, cached=False)
        finally:
            fresh.close()

    def _listed(self, tp: TopicPartition, timestamp: int) -> int:
        """The offset ``ListOffsets`` gives for ``timestamp`` (``OFFSET_BEGINNING`` / ``OFFSET_END``)."""
        (found,) = self._consumer.offsets_for_times([_native(tp, timestamp)], timeout=5)
        if found.error is not None:
            raise _ck().KafkaException(found.error)
        return found.offset

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.seek(tp, _ck().OFFSET_BEGINNING)

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.seek(tp, _ck().OFFSET_END)

    def position(self, tp: TopicPartition) -> int:
        ck = _ck()
        sought = self._sought.get(tp)
        if sought is not None:
            if sought == ck.OFFSET_BEGINNING:
                return self._watermarks(tp)[0]
            return self._watermarks(tp)[1] if sought == ck.OFFSET_END else sought
        offset = self._consumer.position([_native(tp)])[0].offset
        if offset >= 0:
            return offset
        # Nothing fetched yet: where the first fetch starts (committed offset, else the reset policy).
        committed = self.committed(tp)
        if committed is not None:
            return committed
        low, high = self._watermarks(tp)
        return low if self._reset in ("earliest", "smallest", "beginning") else high

    def committed(self, tp: TopicPartition) -> int | None:
        try:
            offset = self._consumer.committed([_native(tp)], timeout=30)[0].offset
        except _ck().KafkaException as error:
            raise _error(error, f"committed offset of {tp.topic}/{tp.partition}") from error
        return offset if offset >= 0 else None

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._watermarks(tp)[0] for tp in partitions}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._watermarks(tp)[1] for tp in partitions}

    def highwater(self, tp: TopicPartition) -> int | None:
        try:
            high = self._consumer.get_watermark_offsets(_native(tp), cached=True)[1]
        except _ck().KafkaException:
            return None
        return high if high >= 0 else None

    def commit(self, offsets: Mapping[TopicPartition, int], asynchronous: bool = False) -> None:
        if not offsets:
            return
        native = [_native(tp, offset) for tp, offset in offsets.items()]
        try:
            if asynchronous:
                self._consumer.commit(offsets=native, asynchronous=True)
                return
            results = self._consumer.commit(offsets=native, asynchronous=False)
        except _ck().KafkaException as error:
            raise _error(error, "commit") from error
        for result in results or ():
            if result.error is not None:
                raise _error(result.error, f"commit {result.topic}/{result.partition}")

    def group_metadata(self) -> Any:
        return self._consumer.consumer_group_metadata()

    def close(self) -> None:
        self._consumer.close()


class ConfluentProducer(Producer):
    """A librdkafka producer (``settings``: kafka-python names or librdkafka properties)."""

    def __init__(self, **settings: Any) -> None:
        ck = _ck()
        config = librdkafka_config(settings)
        config.update(
            {"delivery.report.only.error": True, "on_delivery": self._failed, "error_cb": self._client_error}
        )
        self._errors: list[ClientError] = []
        #: A fatal error of the producer (e.g. fenced): every later call raises it.
        self._fatal: ClientError | None = None
        self._producer = _created(ck.Producer, config, "producer")
        self._produce = self._producer.produce

    def _client_error(self, error: Any) -> None:
        """librdkafka's error callback: a fatal error makes the producer unusable; others are retried."""
        if error.fatal() and self._fatal is None:
            self._fatal = _error(error, "producer")

    def _check(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def _failed(self, error: Any, message: Any) -> None:
        if error is None:
            return
        try:
            failure = _error(error, f"delivery to {message.topic()}[{message.partition()}]")
        except SystemError as pending:
            # A fatal error (e.g. fenced): confluent-kafka calls this with its KafkaException
            # pending, to be raised by the poll() / flush() serving the callback; any call into
            # Python meanwhile (reading the message, or importing confluent_kafka to build the
            # error: a loaded CI run) fails with that exception as its cause.
            raise pending.__cause__ or pending from None
        self._errors.append(failure)

    def _serve(self, flush: float | None = None) -> int:
        """librdkafka's ``flush(flush)`` (the records left), or one ``poll(0)`` if ``flush`` is None.

        A fatal error raised by either becomes :attr:`_fatal`.
        """
        try:
            if flush is None:
                self._producer.poll(0)
                return 0
            return self._producer.flush(flush)
        except _ck().KafkaException as error:
            self._fatal = self._fatal or _error(error, "producer")
            raise self._fatal from error

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        part = -1 if partition is None else partition
        try:
            if headers:
                self._produce(topic, value, key, part, headers=list(headers))
            else:
                self._produce(topic, value, key, part)
        except BufferError:  # the local queue is full: serve deliveries until there is room
            self._serve()
            self.send(topic, value, key, partition, headers)
        except _ck().KafkaException as error:
            raise _error(error, f"send to {topic}") from error

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        headers: Sequence[Sequence[tuple[str, bytes]] | None] | None = None,
    ) -> None:
        if headers is not None:  # the records that carry headers one by one (send: the same retries)
            super().send_many(topic, values, keys, partition, headers)
            self._serve()
            return
        produce = self._produce
        part = -1 if partition is None else partition
        records = zip(values, repeat(None) if keys is None else keys)
        while True:
            try:
                for value, key in records:
                    produce(topic, value, key, part)
            except BufferError:  # the local queue is full: serve deliveries, then send the rest
                self._serve()
                records = chain([(value, key)], records)
                continue
            except _ck().KafkaException as error:
                raise _error(error, f"send to {topic}") from error
            break
        self._serve()

    def flush(self, timeout: float | None = None) -> None:
        left = self._serve(_seconds(timeout))
        self._check()
        if left:
            raise ClientError(
                f"flush: {left} record(s) not delivered within {timeout}s",
                name="_TIMED_OUT",
                retriable=True,
                timeout=True,
            )

    def take_errors(self) -> list[ClientError]:
        errors, self._errors = self._errors, []
        return errors

    def _transaction(self, what: str, call: Any, *args: Any) -> None:
        self._check()
        try:
            call(*args)
        except _ck().KafkaException as error:
            failure = _error(error, what)
            # A fatal one (e.g. fenced while adding partitions): librdkafka's close() would try the
            # abort again, and confluent-kafka 2.16 then left a RuntimeWarning's exception pending
            # (a SystemError at the next call, which ended the service).
            if failure.fatal:
                self._fatal = self._fatal or failure
            raise failure from error

    def init_transactions(self, timeout: float | None = None) -> None:
        self._transaction("init_transactions", self._producer.init_transactions, _seconds(timeout))

    def begin_transaction(self) -> None:
        self._transaction("begin_transaction", self._producer.begin_transaction)

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_metadata: Any, timeout: float | None = None
    ) -> None:
        native = [_native(tp, offset) for tp, offset in offsets.items()]
        self._transaction(
            "send_offsets_to_transaction",
            self._producer.send_offsets_to_transaction,
            native,
            group_metadata,
            _seconds(timeout),
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._transaction("commit_transaction", self._producer.commit_transaction, _seconds(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._transaction("abort_transaction", self._producer.abort_transaction, _seconds(timeout))

    def close(self, timeout: float | None = None) -> None:
        if self._fatal is not None:
            return  # nothing can be sent or aborted any more (librdkafka frees it when collected)
        # Else librdkafka drops the rest when collected; confluent-kafka before 2.13 has no close()
        # (the extra takes >= 2.3; quixstreams, the benchmark's peer, caps it below 2.13).
        if self._serve(_seconds(timeout)) == 0 and hasattr(self._producer, "close"):
            self._producer.close()


class ConfluentAdmin(Admin):
    """A librdkafka ``AdminClient`` (``settings``: kafka-python names or librdkafka properties)."""

    def __init__(self, **settings: Any) -> None:
        #: An authentication failure librdkafka reported (it retries; the metadata wait fails on it).
        self._refused: ClientError | None = None
        config = {**librdkafka_config(settings), "error_cb": self._client_error}
        self._admin = _created(_ck_admin().AdminClient, config, "admin")

    def _client_error(self, error: Any) -> None:
        if error.code() == _ck().KafkaError._AUTHENTICATION and self._refused is None:
            self._refused = _error(error, "authentication")

    def _metadata(self, timeout: float = 30.0) -> dict[str, Any]:
        """The cluster's topics; a wrong credential fails at the broker's answer, not after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            wait = min(1.0, max(0.01, deadline - time.monotonic()))
            try:
                return self._admin.list_topics(timeout=wait).topics
            except _ck().KafkaException as error:
                self._admin.poll(0)  # serves the error callback
                if self._refused is not None:
                    raise self._refused from error
                if time.monotonic() >= deadline:
                    raise _error(error, "cluster metadata") from error

    def create_topics(self, topics: Mapping[str, TopicSpec]) -> dict[str, ClientError | None]:
        admin = _ck_admin()
        new = [
            admin.NewTopic(name, spec.partitions, spec.replication_factor, config=dict(spec.configs or {}))
            for name, spec in topics.items()
        ]
        result: dict[str, ClientError | None] = {}
        for name, future in self._admin.create_topics(new).items():
            try:
                future.result()
                result[name] = None
            except _ck().KafkaException as error:
                result[name] = _error(error, f"create topic {name!r}")
        created = [name for name, error in result.items() if error is None]
        while created:  # until every new partition has a leader
            metadata = self._metadata()
            if all(
                name in metadata
                and metadata[name].error is None
                and len(metadata[name].partitions) == topics[name].partitions
                and all(p.leader >= 0 for p in metadata[name].partitions.values())
                for name in created
            ):
                break
            time.sleep(0.05)
        return result

    def partitions(self, topics: Iterable[str]) -> dict[str, int]:
        names = list(topics)
        metadata = self._metadata()
        missing = [name for name in names if name not in metadata or metadata[name].error is not None]
        if missing:
            raise ClientError(
                f"topic(s) {', '.join(missing)} do not exist", name="UNKNOWN_TOPIC_OR_PARTITION"
            )
        return {name: len(metadata[name].partitions) for name in names}

    def topic_config(self, topic: str) -> dict[str, str]:
        admin = _ck_admin()
        resource = admin.ConfigResource(admin.ResourceType.TOPIC, topic)
        try:
            entries = self._admin.describe_configs([resource])[resource].result()
        except _ck().KafkaException as error:
            raise _error(error, f"configuration of topic {topic!r}") from error
        return {name: entry.value for name, entry in entries.items()}

    def delete_topics(self, topics: Iterable[str]) -> None:
        for future in self._admin.delete_topics(list(topics)).values():
            future.result()

    def close(self) -> None:
        """Nothing to release: librdkafka closes the admin client's connections when it is collected."""
