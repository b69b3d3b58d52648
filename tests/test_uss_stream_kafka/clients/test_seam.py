"""The client seam without a broker: choosing a client, the missing extra, settings translation."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from tests import needs
from uss_stream_kafka import clients
from uss_stream_kafka.clients import ClientError


def test_an_unknown_client_is_refused_by_name():
    with pytest.raises(
        ValueError, match="client: must be one of auto, kafka-python, confluent, got 'rdkafka'"
    ):
        clients.consumer("rdkafka", bootstrap_servers="127.0.0.1:1")


@pytest.mark.parametrize("make", [clients.consumer, clients.producer, clients.admin])
def test_the_missing_confluent_extra_is_named(make, monkeypatch):
    for name in [m for m in sys.modules if m == "confluent_kafka" or m.startswith("confluent_kafka.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import fails: as if not installed
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'uss-stream\[confluent\]'"):
        make("confluent", bootstrap_servers="127.0.0.1:1")


def test_settings_are_translated_for_librdkafka():
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    from uss_stream_kafka.clients.librdkafka_config import librdkafka_config

    config = librdkafka_config(
        {
            "bootstrap_servers": ["a:1", "b:2"],
            "group_id": "g",
            "isolation_level": "read_committed",
            "partition_assignment_strategy": [RangePartitionAssignor()],
            "acks": -1,
            "compression_type": None,
            "ssl_check_hostname": False,
            "buffer_memory": 32 * 1024 * 1024,
            "enable.partition.eof": False,
        }
    )
    assert config == {
        "bootstrap.servers": "a:1,b:2",
        "group.id": "g",
        "isolation.level": "read_committed",
        "partition.assignment.strategy": "range",
        "acks": "all",
        "ssl.endpoint.identification.algorithm": "none",
        "queue.buffering.max.kbytes": "32768",
        "enable.partition.eof": False,
    }
    with pytest.raises(ValueError, match="'api_version' has no librdkafka equivalent"):
        librdkafka_config({"api_version": (4, 0)})


@pytest.mark.filterwarnings("ignore:Producer abort_transaction failed during close:RuntimeWarning")
def test_unreachable_brokers_are_a_retriable_error():
    """Nothing listens on port 1: kafka-python cannot bootstrap, librdkafka's first request times out."""
    with pytest.raises(clients.ClientError, match="Unable to bootstrap") as caught:
        clients.producer("kafka-python", bootstrap_servers="127.0.0.1:1", bootstrap_timeout_ms=500)
    assert caught.value.retriable and caught.value.timeout and not caught.value.fatal

    producer = clients.producer(
        "confluent", bootstrap_servers="127.0.0.1:1", transactional_id="t-unreachable"
    )
    with pytest.raises(clients.ClientError) as caught:
        producer.init_transactions(1.0)
    assert caught.value.timeout and caught.value.retriable and not caught.value.fatal
    producer.close(0)


@pytest.mark.parametrize(
    "name",
    # Kafka's retriable coordinator errors (RetriableException in the Java client) and librdkafka's
    # "waiting for coordinator": a commit right after a broker restart meets them.
    ["_WAIT_COORD", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"],
)
def test_a_coordinator_not_found_yet_is_retriable_on_confluent(name):
    ck = needs.module("confluent_kafka")
    from uss_stream_kafka.clients.confluent import _error

    error = _error(ck.KafkaException(ck.KafkaError(getattr(ck.KafkaError, name))), "commit")
    assert error.retriable and not error.fatal and error.name == name


def test_a_fenced_producer_is_not_retriable_on_confluent():
    ck = needs.module("confluent_kafka")
    from uss_stream_kafka.clients.confluent import _error

    assert not _error(ck.KafkaException(ck.KafkaError(ck.KafkaError._FENCED)), "commit").retriable


class _LostPartitions:
    """librdkafka's consumer after a broker restart left it a partition count of 0 for a topic:
    ``get_watermark_offsets`` answers "Unknown partition" without asking the broker; ``ListOffsets``
    (``offsets_for_times``, which looks the leader up afresh) answers, or fails as given."""

    def __init__(self, ck, listed: dict[int, int] | None) -> None:
        self.ck, self.listed, self.asked = ck, listed, []

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        self.asked.append("watermarks")
        raise self.ck.KafkaException(self.ck.KafkaError(self.ck.KafkaError._UNKNOWN_PARTITION))

    def list_topics(self, topic=None, timeout=-1):
        self.asked.append("metadata")

    def offsets_for_times(self, partitions, timeout=-1):
        self.asked.append("list offsets")
        (partition,) = partitions
        if self.listed is None:
            raise self.ck.KafkaException(self.ck.KafkaError(self.ck.KafkaError._TRANSPORT))
        if self.listed == "error":  # answered, with the partition's error (its offset means nothing)
            error = self.ck.KafkaError(self.ck.KafkaError.NOT_LEADER_FOR_PARTITION)
            return [
                SimpleNamespace(topic=partition.topic, partition=partition.partition, offset=-1, error=error)
            ]
        return [self.ck.TopicPartition(partition.topic, partition.partition, self.listed[partition.offset])]


@pytest.mark.parametrize(
    "listed", [{-2: 3, -1: 10}, None, "error"], ids=["listed", "listing fails too", "listed with an error"]
)
def test_offsets_of_a_partition_librdkafka_lost_are_listed_from_its_leader(listed):
    ck = needs.module("confluent_kafka")
    from uss_stream_kafka.clients import TopicPartition
    from uss_stream_kafka.clients.confluent import ConfluentConsumer

    consumer = ConfluentConsumer(bootstrap_servers="127.0.0.1:1", group_id="lost-partitions")
    consumer._consumer.close()
    consumer._consumer = lost = _LostPartitions(ck, listed)
    tp = TopicPartition("state", 0)
    if listed is None or listed == "error":  # the error stays the retriable one: the restore asks again
        with pytest.raises(ClientError, match=r"offsets of state/0: .*Unknown partition") as raised:
            consumer.end_offsets([tp])
        assert raised.value.retriable
    else:
        assert consumer.end_offsets([tp]) == {tp: 10}
        assert consumer.beginning_offsets([tp]) == {tp: 3}
    assert lost.asked[:3] == ["watermarks", "metadata", "list offsets"]


class _Disconnected:
    """librdkafka's consumer that kept every connection down after a broker restart although the
    broker is back: ``get_watermark_offsets`` answers "All broker connections are down"."""

    def __init__(self, ck, answer: tuple[int, int] | None) -> None:
        self.ck, self.answer, self.asked, self.closed = ck, answer, [], False

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        self.asked.append((partition.topic, partition.partition, timeout, cached))
        if self.answer is None:
            raise self.ck.KafkaException(self.ck.KafkaError(self.ck.KafkaError._ALL_BROKERS_DOWN))
        return self.answer

    def close(self):
        self.closed = True


@pytest.mark.parametrize("broker_back", [True, False], ids=["broker back", "broker still down"])
def test_offsets_are_asked_anew_when_every_connection_of_librdkafka_stays_down(broker_back):
    ck = needs.module("confluent_kafka")
    from uss_stream_kafka.clients import TopicPartition
    from uss_stream_kafka.clients.confluent import ConfluentConsumer

    consumer = ConfluentConsumer(bootstrap_servers="127.0.0.1:1", group_id="down", group_instance_id="down-1")
    consumer._consumer.close()
    consumer._consumer = _Disconnected(ck, None)
    fresh: list[_Disconnected] = []

    def new_client() -> _Disconnected:
        fresh.append(_Disconnected(ck, (3, 10) if broker_back else None))
        return fresh[-1]

    consumer._fresh = new_client
    tp = TopicPartition("state", 0)
    if broker_back:
        assert consumer.end_offsets([tp]) == {tp: 10}
    else:  # the error stays the retriable one: the restore asks again
        with pytest.raises(ClientError, match=r"offsets of state/0: .*All broker connections") as raised:
            consumer.end_offsets([tp])
        assert raised.value.retriable
    assert [client.asked for client in fresh] == [[("state", 0, 5, False)]]  # once, from the broker
    assert all(client.closed for client in fresh)


def test_the_new_client_for_offsets_never_joins_the_group(monkeypatch):
    needs.module("confluent_kafka")
    from uss_stream_kafka.clients import confluent as seam

    made = []
    consumer = seam.ConfluentConsumer(bootstrap_servers="127.0.0.1:1", group_id="g", group_instance_id="g-1")
    consumer._consumer.close()
    monkeypatch.setattr(seam, "_created", lambda _, config, role: made.append(config) or _Disconnected(0, 0))
    consumer._fresh().close()
    (config,) = made
    assert config["bootstrap.servers"] == "127.0.0.1:1"
    assert "group.instance.id" not in config and config["group.id"].startswith("uss-stream-offsets-")
