"""The client seam without a broker: choosing a client, the missing extra, settings translation."""

from __future__ import annotations

import sys

import pytest

from uss_stream_kafka import clients


def test_an_unknown_client_is_refused_by_name():
    with pytest.raises(ValueError, match="client: must be one of kafka-python, confluent, got 'rdkafka'"):
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

    from uss_stream_kafka.clients.confluent import librdkafka_config

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
