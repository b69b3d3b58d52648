"""The client seam: the Kafka operations the service uses, independent of the client library.

Two implementations: :mod:`.kafka_python` (pure Python, the default) and :mod:`.confluent`
(librdkafka). The interface is shaped so that the librdkafka side pays no per-record Python cost
it can avoid:

* :meth:`Consumer.poll` returns, per partition, a :class:`Records` batch whose columns
  (``values``, ``keys``, ``offsets``) are built in one pass when first read; a full
  :class:`Record` is only made for the records that need one (:meth:`Records.record`, e.g. a
  dead letter);
* :meth:`Producer.send` returns nothing (no future per record); failed deliveries are collected
  by the producer and handed over by :meth:`Producer.take_errors` after :meth:`Producer.flush`.

Offsets follow Kafka's convention: a committed offset, a position and an end offset are each the
offset of the *next* record. Errors of the client library are raised as :class:`ClientError`,
which says what the caller may do about them (retry, abort the transaction, give up).

Settings are given with kafka-python's keyword names (``bootstrap_servers``, ``group_id``,
``isolation_level``, ``transactional_id``, ``compression_type``…), the names the rest of the
project uses; the librdkafka implementation translates them, and also accepts librdkafka's own
dotted names (``"queue.buffering.max.ms"``) unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = [
    "Admin",
    "ClientError",
    "Consumer",
    "Producer",
    "Record",
    "Records",
    "RebalanceCallback",
    "TopicPartition",
    "TopicSpec",
    "UndecodableError",
]


class TopicPartition(NamedTuple):
    """A partition of a topic; equal (and hashing equal) to kafka-python's ``TopicPartition``.

    Examples
    --------
    >>> tp = TopicPartition("events", 0)
    >>> tp.topic, tp.partition
    ('events', 0)
    >>> tp == ("events", 0)
    True
    """

    topic: str
    partition: int


class Record(NamedTuple):
    """One consumed record, with the fields a dead letter keeps.

    Examples
    --------
    >>> Record("events", 0, 41, 1700000000000, None, b"{}", ()).offset
    41
    """

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


class TopicSpec(NamedTuple):
    """A topic to create: ``partitions``, ``replication_factor`` and topic ``configs``.

    Examples
    --------
    >>> TopicSpec(3, configs={"cleanup.policy": "compact"})
    TopicSpec(partitions=3, replication_factor=1, configs={'cleanup.policy': 'compact'})
    """

    partitions: int = 1
    replication_factor: int = 1
    configs: Mapping[str, str] | None = None


#: ``callback(partitions)``: called from inside :meth:`Consumer.poll` on a rebalance.
RebalanceCallback = Callable[[list[TopicPartition]], None]


class ClientError(Exception):
    """An error of the client library, with what the caller may do about it.

    Parameters
    ----------
    message
        What failed, in words.
    name
        The library's name of the error (``"PRODUCER_FENCED"``, ``"TOPIC_ALREADY_EXISTS"``, or a
        local one such as ``"_TIMED_OUT"``); the two libraries spell some differently.
    code
        Kafka's protocol error code (``10``: message too large, ``90``: producer fenced…) if the
        broker gave one, else ``None``.
    retriable
        The same call may succeed if retried.
    abortable
        (Transactions) the open transaction must be aborted; the producer stays usable.
    fatal
        The client (e.g. a fenced transactional producer) cannot be used any more: replace it.
    timeout
        The call did not finish in its time limit.
    fenced
        A newer producer with the same transactional id exists (implies ``fatal``); by default
        derived from ``code`` / ``name``.

    Examples
    --------
    >>> error = ClientError("commit failed", name="REBALANCE_IN_PROGRESS", retriable=True)
    >>> error.retriable, error.fenced
    (True, False)
    >>> ClientError("fenced", code=90, fatal=True).fenced
    True
    """

    #: Protocol error codes that mean a newer producer with the same transactional id exists
    #: (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED), and librdkafka's local name for it.
    FENCED_CODES = frozenset({47, 90})
    FENCED_NAMES = frozenset({"_FENCED"})

    def __init__(
        self,
        message: str,
        *,
        name: str = "",
        code: int | None = None,
        retriable: bool = False,
        abortable: bool = False,
        fatal: bool = False,
        timeout: bool = False,
        fenced: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.name = name
        self.code = code
        self.retriable = retriable
        self.abortable = abortable
        self.fatal = fatal
        self.timeout = timeout
        #: The producer was fenced by a newer one with its transactional id (by default: from
        #: the code or name).
        self.fenced = (code in self.FENCED_CODES or name in self.FENCED_NAMES) if fenced is None else fenced


class UndecodableError(ClientError):
    """A fetched record batch could not be decoded (codec library missing, corrupt payload).

    ``tp`` and ``offset`` say where; the consumer's position stays there, so the caller seeks past
    the batch (``batch.next_offset`` when the client can read its header, else ``offset + 1``).

    Examples
    --------
    >>> UndecodableError("no zstd", tp=TopicPartition("events", 0), offset=300).offset
    300
    """

    def __init__(self, message: str, *, tp: TopicPartition, offset: int, batch: Any = None) -> None:
        super().__init__(message, name="UNDECODABLE_BATCH")
        self.tp = tp
        self.offset = offset
        #: :class:`uss_stream_kafka.clients.undecodable.UndecodableBatch` (raw bytes, offsets) if known.
        self.batch = batch


class Records(ABC):
    """The records of one partition from one :meth:`Consumer.poll`, in offset order.

    A client's batch wraps its own message objects; a subclass says how a message yields its
    value, key, offset and headers (``_value``, ``_key``, ``_offset``, ``_headers``: callables of
    one message, e.g. :func:`operator.attrgetter`) and builds a full :meth:`record`. The columns
    are lists built on access; slicing (``records[i:j]``) gives a :class:`Records` of the same kind.
    """

    __slots__ = ("_messages", "tp")

    _value: Callable[[Any], bytes | None]
    _key: Callable[[Any], bytes | None]
    _offset: Callable[[Any], int]
    _headers: Callable[[Any], Sequence[tuple[str, bytes]] | None]

    def __init__(self, tp: TopicPartition, messages: list[Any]) -> None:
        self.tp = tp
        self._messages = messages

    def __len__(self) -> int:
        return len(self._messages)

    def __getitem__(self, index: slice) -> Records:
        return type(self)(self.tp, self._messages[index])

    @property
    def values(self) -> list[bytes | None]:
        """The records' values."""
        return list(map(self._value, self._messages))

    @property
    def keys(self) -> list[bytes | None]:
        """The records' keys."""
        return list(map(self._key, self._messages))

    @property
    def offsets(self) -> list[int]:
        """The records' offsets (increasing; not necessarily consecutive)."""
        return list(map(self._offset, self._messages))

    @property
    def headers(self) -> list[Sequence[tuple[str, bytes]] | None]:
        """The records' headers (``None`` or empty for a record without)."""
        return list(map(self._headers, self._messages))

    @abstractmethod
    def record(self, index: int) -> Record:
        """The ``index``-th record in full (timestamp and headers too)."""

    @property
    def first_offset(self) -> int:
        """The offset of the first record (without building :attr:`offsets`)."""
        return self._offset(self._messages[0])

    @property
    def next_offset(self) -> int:
        """The offset after the last record: where the partition's consumption goes on."""
        return self._offset(self._messages[-1]) + 1


class Consumer(ABC):
    """A consumer: a group member (:meth:`subscribe`) or manually assigned (:meth:`assign`).

    Offsets are never committed automatically; :meth:`commit` commits the given ones.
    """

    @abstractmethod
    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join the group on ``topics``; the callbacks run inside :meth:`poll` on rebalances.

        ``on_lost`` is for partitions taken away without a revocation (the member was expelled):
        their offsets must not be committed. Without it, ``on_revoke`` is called for them.
        """

    @abstractmethod
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions`` (no group membership)."""

    @abstractmethod
    def assignment(self) -> set[TopicPartition]:
        """The partitions currently assigned."""

    @abstractmethod
    def poll(self, timeout: float, max_records: int | None = None) -> dict[TopicPartition, Records]:
        """The records fetched within ``timeout`` seconds, per partition (``{}`` if none)."""

    @abstractmethod
    def subscription(self) -> set[str]:
        """The topics subscribed to (empty if none or manually assigned)."""

    @abstractmethod
    def partitions_for_topic(self, topic: str) -> set[int]:
        """The partitions of ``topic`` as the client's metadata knows them (empty if not known)."""

    @abstractmethod
    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching ``partitions`` until :meth:`resume` (also from an ``on_assign`` callback)."""

    @abstractmethod
    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch ``partitions`` again."""

    @abstractmethod
    def paused(self) -> set[TopicPartition]:
        """The partitions paused."""

    @abstractmethod
    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record :meth:`poll` returns for ``tp``."""

    @abstractmethod
    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        """Seek each partition to its first offset."""

    @abstractmethod
    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        """Seek each partition to its end offset."""

    @abstractmethod
    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record :meth:`poll` returns for ``tp``."""

    @abstractmethod
    def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset of ``tp``, ``None`` if it has none."""

    @abstractmethod
    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The first offset of each partition."""

    @abstractmethod
    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The end offset of each partition (for ``read_committed``: the last stable offset)."""

    @abstractmethod
    def highwater(self, tp: TopicPartition) -> int | None:
        """The end offset of ``tp`` as of the last fetch (no request; ``None`` before any)."""

    def fetch_state(self, partitions: Iterable[TopicPartition]) -> dict[str, Any]:
        """What the client library knows of its fetches of ``partitions``, for a stall's warning.

        Diagnostics only (read from the library's own bookkeeping where it has no public API):
        nothing by default.
        """
        return {}

    @abstractmethod
    def commit(self, offsets: Mapping[TopicPartition, int], asynchronous: bool = False) -> None:
        """Commit ``offsets`` (the next offset to consume of each partition).

        Waits for the broker's answer, unless ``asynchronous`` (then a failure is only logged by
        the library: for commits that a later one supersedes).
        """

    @abstractmethod
    def group_metadata(self) -> Any:
        """The member's group metadata, for :meth:`Producer.send_offsets_to_transaction`."""

    @abstractmethod
    def close(self) -> None:
        """Leave the group (revocation callbacks run) and release the connections; commits nothing."""


class Producer(ABC):
    """A producer; transactional if created with a ``transactional_id``.

    :meth:`send` only queues a record. Delivery is checked in bulk: :meth:`flush` waits for every
    queued record, then :meth:`take_errors` returns those that were not delivered.
    """

    @abstractmethod
    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        """Queue one record (to ``partition``, or the one the key's hash picks)."""

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        headers: Sequence[Sequence[tuple[str, bytes]] | None] | None = None,
    ) -> None:
        """Queue ``values`` (with ``keys``, and per record ``headers``), in order, to ``topic``."""
        send = self.send
        count = len(values)
        for value, key, carried in zip(values, keys or [None] * count, headers or [None] * count):
            send(topic, value, key, partition, carried)

    @abstractmethod
    def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued record is delivered or failed; :class:`ClientError` on timeout."""

    @abstractmethod
    def take_errors(self) -> list[ClientError]:
        """The delivery failures since the last call (each names topic and partition)."""

    @abstractmethod
    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id: fences older producers and aborts their open transaction."""

    @abstractmethod
    def begin_transaction(self) -> None:
        """Start a transaction: what is sent until its commit or abort belongs to it."""

    @abstractmethod
    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Commit the group's ``offsets`` with the transaction (only if it commits)."""

    @abstractmethod
    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush and commit the open transaction."""

    @abstractmethod
    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction: ``read_committed`` consumers never see its records."""

    @abstractmethod
    def close(self, timeout: float | None = None) -> None:
        """Send what is queued (within ``timeout``) and release the connections."""


class Admin(ABC):
    """Topic administration."""

    @abstractmethod
    def create_topics(self, topics: Mapping[str, TopicSpec]) -> dict[str, ClientError | None]:
        """Create ``topics``; per topic ``None`` or the error (``TOPIC_ALREADY_EXISTS``…).

        Returns once the created topics' partitions have leaders.
        """

    @abstractmethod
    def partitions(self, topics: Iterable[str]) -> dict[str, int]:
        """The number of partitions of each topic; :class:`ClientError` if one does not exist."""

    @abstractmethod
    def topic_config(self, topic: str) -> dict[str, str]:
        """The effective configuration of ``topic`` (defaults included)."""

    @abstractmethod
    def delete_topics(self, topics: Iterable[str]) -> None:
        """Delete ``topics``."""

    @abstractmethod
    def close(self) -> None:
        """Release the connections."""
