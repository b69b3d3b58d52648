"""The client seam's contract on a real broker, for both clients (kafka-python and confluent-kafka).

The expectations are Kafka's documented semantics, checked where possible with a reader that is
not the client under test (kafka-python's own ``KafkaConsumer`` / ``KafkaAdminClient`` from the
fixtures): offsets are those of the next record; a committed offset is what the group resumes
from; a ``read_committed`` consumer never sees an aborted transaction's records and its end offset
is the last stable offset; offsets sent to a transaction are committed only with it; two members
of a group split the partitions between them.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import committed_offsets, read_all, wait_for_metadata
from waiting import wait_until

from uss_stream_kafka import clients
from uss_stream_kafka.clients import ClientError, TopicPartition, TopicSpec

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(180),
]


@pytest.fixture(params=clients.CLIENTS)
def client(request: Any) -> str:
    return request.param


@pytest.fixture
def make_topic(admin: Any, bootstrap_servers: str) -> Iterator[Callable[..., str]]:
    """``make_topic(partitions=1, **configs) -> name``, created by kafka-python's admin, deleted after."""
    made: list[str] = []

    def make(partitions: int = 1, **configs: str) -> str:
        name = f"c-{uuid.uuid4().hex[:10]}"
        spec = {"num_partitions": partitions, "replication_factor": 1, "configs": configs}
        admin.create_topics({name: spec}, wait_for_metadata=True)
        wait_for_metadata(bootstrap_servers, {name: partitions})
        made.append(name)
        return name

    yield make
    if made:
        admin.delete_topics(made)


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """``closing(client) -> client``: closed when the test ends, even when it fails."""
    opened: list[Any] = []
    yield lambda opened_client: opened.append(opened_client) or opened_client
    for opened_client in reversed(opened):
        opened_client.close()


def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def poll_until(consumer: Any, done: Callable[[dict], bool], timeout: float = 60.0) -> dict[Any, list]:
    """Poll ``consumer`` until ``done(seen)``; ``seen[tp]``: tp's polled (offset, key, value) triples."""
    seen: dict[Any, list] = {}
    deadline = time.monotonic() + timeout
    while not done(seen):
        assert time.monotonic() < deadline, f"condition not reached in {timeout}s; seen {_counts(seen)}"
        for tp, records in consumer.poll(0.2).items():
            assert records.tp == tp
            seen.setdefault(tp, []).extend(zip(records.offsets, records.keys, records.values))
    return seen


def _counts(seen: dict[Any, list]) -> dict[Any, int]:
    return {tp: len(records) for tp, records in seen.items()}


def total(n: int) -> Callable[[dict], bool]:
    return lambda seen: sum(map(len, seen.values())) >= n


def produce(client: str, bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = clients.producer(client, bootstrap_servers=bootstrap)
    for i, value in enumerate(values):
        producer.send(topic, value, key=b"k%d" % i, partition=partition)
    producer.flush(30)
    assert producer.take_errors() == []
    producer.close(10)


def transactional(client: str, bootstrap: str) -> Any:
    """A transactional producer with a transactional id of its own."""
    return clients.producer(client, bootstrap_servers=bootstrap, transactional_id=f"tx-{uuid.uuid4().hex}")


def test_round_trip(client, bootstrap_servers, make_topic, closing):
    topic = make_topic()
    producer = closing(clients.producer(client, bootstrap_servers=bootstrap_servers))
    values = [b"v%d" % i for i in range(1_000)]
    producer.send(topic, b"first", key=b"key", partition=0, headers=[("h", b"1"), ("h2", b"")])
    producer.send_many(topic, values, keys=[b"k%d" % i for i in range(1_000)], partition=0)
    producer.send_many(topic, [b"last"], partition=0)
    producer.flush(30)
    assert producer.take_errors() == []

    # Independent reader: kafka-python sees exactly what was sent, in order.
    stored = read_all(bootstrap_servers, topic)
    assert [r.value for r in stored] == [b"first", *values, b"last"]
    assert [r.key for r in stored] == [b"key", *[b"k%d" % i for i in range(1_000)], None]
    assert list(stored[0].headers) == [("h", b"1"), ("h2", b"")]

    consumer = closing(clients.consumer(client, bootstrap_servers=bootstrap_servers))
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    assert consumer.assignment() == {tp}
    consumer.seek_to_beginning([tp])
    seen = poll_until(consumer, total(1_002))
    assert list(seen) == [tp]
    assert [offset for offset, _, _ in seen[tp]] == list(range(1_002))
    assert [value for _, _, value in seen[tp]] == [b"first", *values, b"last"]
    assert seen[tp][1][1] == b"k0" and seen[tp][-1][1] is None

    # A full record (what a dead letter keeps) has the headers and the broker's timestamp.
    consumer.seek(tp, 0)
    records = {}
    while not records:
        records = consumer.poll(1.0, max_records=5)
    batch = records[tp]
    # max_records caps the batch; the first poll after the seek starts at offset 0, without gaps.
    assert len(batch) <= 5 and list(batch.offsets) == list(range(len(batch)))
    record = batch.record(0)
    assert (record.topic, record.partition, record.offset) == (topic, 0, 0)
    assert (record.key, record.value, record.headers) == (b"key", b"first", (("h", b"1"), ("h2", b"")))
    assert record.timestamp == stored[0].timestamp
    assert batch[1:].offsets == batch.offsets[1:] and batch.next_offset == batch.offsets[-1] + 1


def test_send_many_into_a_full_local_queue_sends_every_record_in_order(
    bootstrap_servers, make_topic, closing
):
    """librdkafka's queue holds 10 records: ``send_many`` serves deliveries and goes on where it stopped."""
    topic = make_topic()
    settings = {"queue.buffering.max.messages": 10, "linger_ms": 0}
    producer = closing(clients.producer("confluent", bootstrap_servers=bootstrap_servers, **settings))
    values = [b"v%d" % i for i in range(500)]
    producer.send_many(topic, values, keys=[b"k%d" % i for i in range(500)], partition=0)
    producer.send_many(topic, values[:50], partition=0)
    producer.flush(30)
    assert producer.take_errors() == []
    stored = read_all(bootstrap_servers, topic)
    assert [r.value for r in stored] == [*values, *values[:50]]
    assert [r.key for r in stored] == [*[b"k%d" % i for i in range(500)], *[None] * 50]


def test_commit_and_committed(client, bootstrap_servers, make_topic, closing, admin):
    topic = make_topic()
    produce("kafka-python", bootstrap_servers, topic, [b"%d" % i for i in range(20)])
    name = group()
    tp = TopicPartition(topic, 0)
    settings = {"bootstrap_servers": bootstrap_servers, "group_id": name, "auto_offset_reset": "earliest"}
    first = closing(clients.consumer(client, **settings))
    first.assign([tp])
    assert first.committed(tp) is None
    poll_until(first, total(20))
    first.commit({tp: 3}, asynchronous=True)
    deadline = time.monotonic() + 60
    while first.committed(tp) != 3:  # an asynchronous commit completes in the background
        assert time.monotonic() < deadline
        first.poll(0.1)
    first.commit({tp: 12})
    assert first.committed(tp) == 12
    # The broker holds it (seen by another client library's admin).
    assert committed_offsets(admin, name, [tp])[tp] == 12
    first.close()

    # The group resumes from the committed offset: the next record delivered is offset 12.
    second = closing(clients.consumer(client, **settings))
    second.assign([tp])
    assert second.position(tp) == 12
    seen = poll_until(second, total(8))
    assert [offset for offset, _, _ in seen[tp]] == list(range(12, 20))


def test_seek_position_and_offsets(client, bootstrap_servers, make_topic, closing):
    topic = make_topic()
    produce("kafka-python", bootstrap_servers, topic, [b"%d" % i for i in range(50)])
    tp = TopicPartition(topic, 0)
    consumer = closing(clients.consumer(client, bootstrap_servers=bootstrap_servers))
    consumer.assign([tp])
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 50}
    # The default reset policy of both libraries is "latest": with nothing committed, the end.
    assert consumer.position(tp) == 50

    consumer.seek(tp, 7)
    assert consumer.position(tp) == 7
    seen = poll_until(consumer, total(1))
    offsets = [offset for offset, _, _ in seen[tp]]
    assert offsets == list(range(7, 7 + len(offsets)))
    assert consumer.position(tp) == 7 + len(offsets)

    consumer.seek(tp, 45)
    seen = poll_until(consumer, total(5))
    assert [value for _, _, value in seen[tp]] == [b"%d" % i for i in range(45, 50)]
    assert consumer.position(tp) == 50
    consumer.seek_to_beginning([tp])
    assert consumer.position(tp) == 0
    consumer.seek_to_end([tp])
    assert consumer.position(tp) == 50
    # The fetches told the consumer the partition's end (the high watermark).
    assert consumer.highwater(tp) == 50


def test_pause_and_resume(client, bootstrap_servers, make_topic, closing):
    topic = make_topic(partitions=2)
    produce("kafka-python", bootstrap_servers, topic, [b"a%d" % i for i in range(30)], partition=0)
    produce("kafka-python", bootstrap_servers, topic, [b"b%d" % i for i in range(30)], partition=1)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = closing(clients.consumer(client, bootstrap_servers=bootstrap_servers))
    consumer.assign([p0, p1])
    consumer.seek_to_beginning([p0, p1])
    consumer.pause([p0])
    assert consumer.paused() == {p0}
    seen = poll_until(consumer, lambda seen: len(seen.get(p1, ())) >= 30)
    # Partition 1 entirely, partition 0 not at all; a few more polls still bring nothing of it.
    for _ in range(5):
        for tp, records in consumer.poll(0.2).items():
            seen.setdefault(tp, []).extend(zip(records.offsets, records.keys, records.values))
    assert p0 not in seen and len(seen[p1]) == 30

    consumer.resume([p0])
    assert consumer.paused() == set()
    seen = poll_until(consumer, lambda seen: len(seen.get(p0, ())) >= 30)
    assert [value for _, _, value in seen[p0]] == [b"a%d" % i for i in range(30)]


def ends_until(consumer: Any, tp: TopicPartition, offset: int, timeout: float = 60.0) -> list[int]:
    """``consumer.end_offsets`` of ``tp`` observed until it is ``offset``."""
    observed: list[int] = []
    deadline = time.monotonic() + timeout
    while not observed or observed[-1] != offset:
        assert time.monotonic() < deadline, observed
        observed.append(consumer.end_offsets([tp])[tp])
    return observed


def test_transactions_committed_and_aborted(client, bootstrap_servers, make_topic, closing):
    topic = make_topic()
    tp = TopicPartition(topic, 0)
    producer = closing(
        clients.producer(
            client, bootstrap_servers=bootstrap_servers, transactional_id=f"tx-{uuid.uuid4().hex}"
        )
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.send_many(topic, [b"kept-1", b"kept-2"], partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.send_many(topic, [b"dropped-1", b"dropped-2", b"dropped-3"], partition=0)
    producer.flush(30)
    producer.abort_transaction(30)

    # An open transaction: read_committed's end offset is the last stable offset, before it.
    producer.begin_transaction()
    producer.send(topic, b"kept-3", partition=0)
    producer.flush(30)
    committed_reader = closing(
        clients.consumer(client, bootstrap_servers=bootstrap_servers, isolation_level="read_committed")
    )
    uncommitted_reader = closing(
        clients.consumer(client, bootstrap_servers=bootstrap_servers, isolation_level="read_uncommitted")
    )
    # 2 records + commit marker, 3 records + abort marker: the open transaction starts at offset 7.
    # (The markers are written after commit/abort return: the last stable offset gets there.)
    observed = ends_until(committed_reader, tp, 7)
    assert max(observed) == 7
    assert uncommitted_reader.end_offsets([tp]) == {tp: 8}
    producer.commit_transaction(30)
    ends_until(committed_reader, tp, 9)

    committed_reader.assign([tp])
    committed_reader.seek_to_beginning([tp])
    seen = poll_until(committed_reader, total(3))
    assert [value for _, _, value in seen[tp]] == [b"kept-1", b"kept-2", b"kept-3"]
    assert [offset for offset, _, _ in seen[tp]] == [0, 1, 7]
    uncommitted_reader.assign([tp])
    uncommitted_reader.seek_to_beginning([tp])
    seen = poll_until(uncommitted_reader, total(6))
    assert [offset for offset, _, _ in seen[tp]] == [0, 1, 3, 4, 5, 7]
    # The independent reader agrees.
    assert [r.value for r in read_all(bootstrap_servers, topic, isolation_level="read_committed")] == [
        b"kept-1",
        b"kept-2",
        b"kept-3",
    ]


def test_offsets_sent_to_a_transaction(client, bootstrap_servers, make_topic, closing, admin):
    source, target = make_topic(), make_topic()
    produce("kafka-python", bootstrap_servers, source, [b"%d" % i for i in range(10)])
    name = group()
    tp = TopicPartition(source, 0)
    consumer = closing(
        clients.consumer(
            client, bootstrap_servers=bootstrap_servers, group_id=name, auto_offset_reset="earliest"
        )
    )
    consumer.subscribe([source])
    poll_until(consumer, total(10))
    producer = closing(
        clients.producer(
            client, bootstrap_servers=bootstrap_servers, transactional_id=f"tx-{uuid.uuid4().hex}"
        )
    )
    producer.init_transactions(30)

    def committed_becomes(offset: int) -> list[int | None]:
        """The group's committed offsets observed until it is ``offset`` (markers are written after
        the commit returns; until then the broker reports the offset unstable or the previous one)."""
        observed: list[int | None] = []

        def reached() -> bool:
            found = committed_offsets(admin, name, [tp])[tp]
            observed.append(None if found < 0 else found)
            return observed[-1] == offset

        wait_until(reached, lambda: f"committed offset {offset} (observed {observed})", timeout=60)
        return observed

    producer.begin_transaction()
    producer.send(target, b"copied up to 6", partition=0)
    producer.send_offsets_to_transaction({tp: 6}, consumer.group_metadata(), 30)
    producer.commit_transaction(30)
    assert set(committed_becomes(6)) <= {None, 6}
    assert consumer.committed(tp) == 6

    producer.begin_transaction()
    producer.send(target, b"copied up to 10", partition=0)
    producer.send_offsets_to_transaction({tp: 10}, consumer.group_metadata(), 30)
    producer.abort_transaction(30)
    # The aborted transaction's offsets are never committed: until the next transaction's (8)
    # are, the committed offset stays 6.
    producer.begin_transaction()
    producer.send(target, b"copied up to 8", partition=0)
    producer.send_offsets_to_transaction({tp: 8}, consumer.group_metadata(), 30)
    producer.commit_transaction(30)
    assert set(committed_becomes(8)) <= {6, 8}
    outputs = read_all(bootstrap_servers, target, isolation_level="read_committed")
    assert [r.value for r in outputs] == [b"copied up to 6", b"copied up to 8"]


def test_offsets_a_group_refused_are_not_committed_by_the_next_transaction(
    client, bootstrap_servers, make_topic, closing, admin
):
    """A member that left the group cannot add offsets to a transaction (``UNKNOWN_MEMBER_ID``): the
    transaction is aborted, and the next one, which adds another partition's offset, commits only
    that. kafka-python 3.0.12 kept the refused offsets and sent them with the next transaction's
    (the service drops them at ``begin_transaction``): the aborted transaction's offset was then
    committed with its decisions aborted."""
    source = make_topic(partitions=2)
    produce("kafka-python", bootstrap_servers, source, [b"%d" % i for i in range(10)], partition=0)
    produce("kafka-python", bootstrap_servers, source, [b"%d" % i for i in range(10)], partition=1)
    name = group()
    settings = {"bootstrap_servers": bootstrap_servers, "group_id": name, "auto_offset_reset": "earliest"}
    gone = clients.consumer(client, **settings)
    try:
        gone.subscribe([source])
        poll_until(gone, total(20))
        stale = gone.group_metadata()
    finally:
        gone.close()  # leaves the group: its member id is unknown from now on
    member = closing(clients.consumer(client, **settings))
    member.subscribe([source])
    poll_until(member, total(20))
    first, second = TopicPartition(source, 0), TopicPartition(source, 1)
    producer = closing(transactional(client, bootstrap_servers))
    producer.init_transactions(30)

    producer.begin_transaction()
    with pytest.raises(ClientError) as refused:
        producer.send_offsets_to_transaction({first: 7}, stale, 30)
        producer.commit_transaction(30)
    assert refused.value.abortable and not refused.value.fatal, refused.value
    producer.abort_transaction(30)

    producer.begin_transaction()
    producer.send_offsets_to_transaction({second: 3}, member.group_metadata(), 30)
    producer.commit_transaction(30)
    wait_until(lambda: committed_offsets(admin, name, [second])[second] == 3, "the second offset committed")
    assert committed_offsets(admin, name, [first, second]) == {first: -1, second: 3}


def _assignor(name: str) -> Any:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    return {"range": RangePartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}[name]()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_rebalance_callbacks_with_two_members(client, assignor, bootstrap_servers, make_topic, closing):
    """Eager (range: everything revoked, then assigned) or incremental (cooperative-sticky: only
    what moves): either way each member's callbacks add up to its assignment."""
    topic = make_topic(partitions=2)
    both = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    name = group()
    events: dict[str, list[tuple[str, set]]] = {"a": [], "b": []}

    def member(label: str) -> Any:
        consumer = closing(
            clients.consumer(
                client,
                bootstrap_servers=bootstrap_servers,
                group_id=name,
                partition_assignment_strategy=[_assignor(assignor)],
                # A group leader whose metadata lacks the new topic assigns nothing until its next
                # metadata refresh (kafka-python: 5 minutes by default; seen under load).
                metadata_max_age_ms=2_000,
            )
        )
        consumer.subscribe(
            [topic],
            on_assign=lambda tps: events[label].append(("assigned", set(tps))),
            on_revoke=lambda tps: events[label].append(("revoked", set(tps))),
        )
        return consumer

    def owned(label: str) -> set:
        held: set = set()
        for kind, tps in events[label]:
            held = held | tps if kind == "assigned" else held - tps
        return held

    a = member("a")
    deadline = time.monotonic() + 60
    while owned("a") != both:
        assert time.monotonic() < deadline, events
        a.poll(0.2)
    assert a.assignment() == both

    b = member("b")
    deadline = time.monotonic() + 90
    while not (len(owned("a")) == 1 and len(owned("b")) == 1):
        assert time.monotonic() < deadline, events
        a.poll(0.1)
        b.poll(0.1)
    # The partitions are split; what a member was told it owns is its assignment.
    assert owned("a") | owned("b") == both and owned("a") == a.assignment() and owned("b") == b.assignment()
    # A gave up the partition B now has, and was told so.
    assert any(kind == "revoked" and owned("b") <= tps for kind, tps in events["a"])


def test_admin_topics(client, bootstrap_servers, closing, admin):
    client_admin = closing(clients.admin(client, bootstrap_servers=bootstrap_servers))
    name, compacted = f"c-{uuid.uuid4().hex[:10]}", f"c-{uuid.uuid4().hex[:10]}"
    try:
        specs = {name: TopicSpec(3), compacted: TopicSpec(1, configs={"cleanup.policy": "compact"})}
        assert client_admin.create_topics(specs) == {name: None, compacted: None}
        again = client_admin.create_topics({name: TopicSpec(3)})
        assert again[name] is not None and again[name].code == 36  # TOPIC_ALREADY_EXISTS
        assert client_admin.partitions([name, compacted]) == {name: 3, compacted: 1}
        # Seen by the other library's admin too.
        described = {t["name"]: len(t["partitions"]) for t in admin.describe_topics([name, compacted])}
        assert described == {name: 3, compacted: 1}
        assert client_admin.topic_config(compacted)["cleanup.policy"] == "compact"
        assert client_admin.topic_config(name)["cleanup.policy"] == "delete"
        with pytest.raises(ClientError, match="do not exist") as missing:
            client_admin.partitions([name, "c-no-such-topic"])
        assert missing.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
    finally:
        admin.delete_topics([name, compacted])


def test_a_failed_delivery_is_reported(client, bootstrap_servers, make_topic, closing):
    """A record the broker refuses (larger than the topic's max.message.bytes) is a delivery error."""
    topic = make_topic(**{"max.message.bytes": "2000"})
    producer = closing(clients.producer(client, bootstrap_servers=bootstrap_servers, linger_ms=0))
    producer.send(topic, b"small", partition=0)
    producer.flush(30)
    producer.send(topic, b"x" * 10_000, partition=0)
    producer.flush(30)
    errors = producer.take_errors()
    # Kafka's error 10, MESSAGE_TOO_LARGE; the topic and partition are named.
    assert len(errors) == 1 and errors[0].code == 10 and f"{topic}[0]" in str(errors[0])
    assert not errors[0].retriable
    assert producer.take_errors() == []
    assert [r.value for r in read_all(bootstrap_servers, topic)] == [b"small"]


def test_an_undecodable_batch_is_named_kafka_python(bootstrap_servers, make_topic, closing, monkeypatch):
    """kafka-python: a batch whose payload fails to decode is an UndecodableError naming its offsets.

    The failure is simulated by a gzip decoder that raises (a broker validates what it stores, so
    a corrupt payload cannot be produced); librdkafka decodes every codec itself.
    """
    import kafka.record.default_records as default_records

    from uss_stream_kafka.clients import UndecodableError

    topic = make_topic()
    produce("kafka-python", bootstrap_servers, topic, [b"plain-%d" % i for i in range(10)])
    producer = closing(
        clients.producer(
            "confluent", bootstrap_servers=bootstrap_servers, compression_type="gzip", linger_ms=50
        )
    )
    # Compressible even one by one: librdkafka sends a batch uncompressed if gzip would not shrink it.
    producer.send_many(topic, [b"zipped-%d " % i + b"z" * 200 for i in range(20)], partition=0)
    producer.flush(30)
    produce("kafka-python", bootstrap_servers, topic, [b"after-%d" % i for i in range(5)])

    def corrupt(payload: bytes) -> bytes:
        raise OSError("Not a gzipped file")

    monkeypatch.setattr(default_records, "gzip_decode", corrupt)
    tp = TopicPartition(topic, 0)
    consumer = closing(clients.consumer("kafka-python", bootstrap_servers=bootstrap_servers))
    consumer.assign([tp])
    consumer.seek_to_beginning([tp])
    values: list[bytes] = []
    skipped: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    while len(values) < 15:
        assert time.monotonic() < deadline, (values, skipped)
        try:
            for records in consumer.poll(0.2).values():
                values.extend(records.values)
        except UndecodableError as error:
            assert error.tp == tp and error.batch is not None and error.batch.codec == "gzip"
            skipped.append((error.offset, error.batch.next_offset))
            consumer.seek(tp, error.batch.next_offset)
    # Every plain record, none of the gzip batches', whose offsets tile 10..29.
    assert values == [b"plain-%d" % i for i in range(10)] + [b"after-%d" % i for i in range(5)]
    assert skipped[0][0] == 10 and skipped[-1][1] == 30
    assert all(end == start for (_, end), (start, _) in itertools.pairwise(skipped))


def test_every_codec_of_both_producers_is_consumed(client, bootstrap_servers, make_topic, closing, admin):
    """gzip, snappy, lz4 and zstd batches, from kafka-python and from librdkafka, read by ``client``."""
    from test_compression import CODECS, stored_bytes

    topic = make_topic()
    expected: list[bytes] = []
    for codec in CODECS:
        for producer_client in clients.CLIENTS:
            values = [b'{"codec": "%s", "by": "%s", "i": %d}' % (codec.encode(), producer_client.encode(), i)
                      for i in range(300)]  # fmt: skip
            producer = clients.producer(
                producer_client, bootstrap_servers=bootstrap_servers, compression_type=codec, linger_ms=50
            )
            producer.send_many(topic, values, partition=0)
            producer.flush(30)
            assert producer.take_errors() == []
            producer.close(10)
            expected += values
    # The broker really holds compressed batches: far fewer bytes than the values themselves.
    assert stored_bytes(admin, topic) < sum(map(len, expected)) / 2

    tp = TopicPartition(topic, 0)
    consumer = closing(clients.consumer(client, bootstrap_servers=bootstrap_servers))
    consumer.assign([tp])
    consumer.seek_to_beginning([tp])
    seen = poll_until(consumer, total(len(expected)))
    assert [value for _, _, value in seen[tp]] == expected
    assert [offset for offset, _, _ in seen[tp]] == list(range(len(expected)))


def test_a_newer_producer_fences_the_older_one(client, bootstrap_servers, make_topic, closing):
    """Kafka's zombie fencing: ``init_transactions`` with the same transactional id makes the older
    producer's open transaction abort and its next transactional call fail as fenced."""
    topic = make_topic()
    transactional_id = f"tx-{uuid.uuid4().hex}"
    settings = {"bootstrap_servers": bootstrap_servers, "transactional_id": transactional_id}
    older = closing(clients.producer(client, **settings))
    older.init_transactions(30)
    older.begin_transaction()
    older.send(topic, b"zombie", partition=0)
    older.flush(30)

    newer = closing(clients.producer(client, **settings))
    newer.init_transactions(60)
    newer.begin_transaction()
    newer.send(topic, b"live", partition=0)
    newer.commit_transaction(30)

    with pytest.raises(ClientError) as caught:
        older.send(topic, b"zombie again", partition=0)
        older.flush(30)
        older.commit_transaction(30)
    assert caught.value.fenced and caught.value.fatal, repr(caught.value)
    committed = read_all(bootstrap_servers, topic, isolation_level="read_committed")
    assert [r.value for r in committed] == [b"live"]


def test_the_service_s_kafka_python_clients_on_the_broker_retry_a_lost_broker_every_second(
    bootstrap_servers, make_topic, closing
):
    """The seam's kafka-python clients, connected to the real broker, run with the service's 1 s
    reconnect ceiling (kafka-python's own is 30 s); a user's value wins."""
    topic = make_topic()
    producer = closing(clients.producer("kafka-python", bootstrap_servers=bootstrap_servers))
    consumer = closing(
        clients.consumer("kafka-python", bootstrap_servers=bootstrap_servers, group_id=group())
    )
    mine = closing(
        clients.producer("kafka-python", bootstrap_servers=bootstrap_servers, reconnect_backoff_max_ms=5000)
    )
    producer.send(topic, b"reached", partition=0)
    producer.flush(30)
    assert producer.take_errors() == []
    assert producer._producer.config["reconnect_backoff_max_ms"] == 1000
    assert consumer._consumer.config["reconnect_backoff_max_ms"] == 1000
    assert mine._producer.config["reconnect_backoff_max_ms"] == 5000
