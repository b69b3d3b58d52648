"""librdkafka's own properties in ``--consumer-option`` and ``--producer-option`` (``--client confluent``):
kept under their names for librdkafka, while the delivery settings stay the service's.

The options' keys used to be read as kafka-python names only (``queued.min.messages`` became
``queued_min_messages`` and was refused as no kafka-python setting), so a confluent user could not
pass a librdkafka property such as ``debug`` or ``queued.min.messages`` from the command line.
``broker/test_librdkafka_options.py`` shows librdkafka receiving them.
"""

from __future__ import annotations

import re

import pytest

from tests.test_uss_stream_kafka.helpers import NATIVE
from uss_stream.commands.cli import build_parser
from uss_stream_kafka import Application, ClientConfig, Topics
from uss_stream_kafka.cli.settings import KafkaSettings

RUN = ["kafka", "run", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "i", "--output-topic", "o",
       "--dlq-topic", "d", "--state-topic", "s", "--group-id", "g", "--stage-costs", "0,0.15,0.2",
       "--metrics-port", "-1"]  # fmt: skip


def settings(*extra: str) -> KafkaSettings:
    return KafkaSettings.from_args(build_parser().parse_args([*RUN, *extra]))


def test_confluent_keeps_librdkafka_properties_and_reads_underscored_names_as_kafka_pythons():
    chosen = settings("--client", "confluent", *NATIVE)
    consumer = chosen.consumer_options()
    assert consumer["queued.min.messages"] == 1000 and consumer["debug"] == "cgrp"
    assert consumer["fetch_max_wait_ms"] == 50  # a kafka-python name, translated by the client
    assert chosen.producer_options() == {"linger.ms": 5}
    # kafka-python keeps reading dotted names as its own (Java style), and refuses the others.
    python = ("--client", "kafka-python")
    assert settings(*python, "--producer-option", "linger.ms=5").producer_options() == {"linger_ms": 5}
    refused = "'debug' is not a kafka-python consumer setting"
    with pytest.raises(ValueError, match=rf"--consumer-option .*{refused}"):
        settings(*python, "--consumer-option", "debug=cgrp")
    # With confluent, an underscored name is still checked as kafka-python's, with a hint.
    hinted = "'fetch_wait' is not a kafka-python consumer setting (librdkafka's are dotted)"
    with pytest.raises(ValueError, match=re.escape(hinted)):
        settings("--client", "confluent", "--consumer-option", "fetch_wait=5")


@pytest.mark.parametrize("name", ["enable.idempotence", "transactional.id", "request.required.acks"])
def test_the_delivery_settings_stay_the_services_under_librdkafka_names_too(name):
    """librdkafka's names of acks, idempotence and the transactional id are refused like
    kafka-python's: passed unchanged, they would have undone the delivery guarantee."""
    with pytest.raises(ValueError, match=rf"producer_options: {re.escape(name)} are set by the service"):
        Application(ClientConfig("b:9092"), "g", Topics("i", "o", "d", "s"), http_port=None,
                    client_library="confluent", producer_options={name: "false"})  # fmt: skip
