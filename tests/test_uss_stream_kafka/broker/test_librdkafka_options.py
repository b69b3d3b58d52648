"""librdkafka's own properties in ``--consumer-option`` and ``--producer-option`` (``--client confluent``).

The options' keys used to be read as kafka-python names only (``queued.min.messages`` became
``queued_min_messages`` and was refused as no kafka-python setting), so a confluent user could not
pass a librdkafka property such as ``debug`` or ``queued.min.messages`` from the command line.
"""

from __future__ import annotations

import re
import signal
import subprocess
import uuid

import pytest
from conftest import COSTS, decisions_of, produce, read_all, stream
from test_cli import Service, wait_for_outputs
from test_startup_errors import command, last_line

from uss_stream.commands.cli import build_parser
from uss_stream.policies import USSUCB
from uss_stream_kafka import Application, ClientConfig, Topics
from uss_stream_kafka.cli.settings import KafkaSettings

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(240),
]

RUN = ["kafka", "run", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "i", "--output-topic", "o",
       "--dlq-topic", "d", "--state-topic", "s", "--group-id", "g", "--stage-costs", "0,0.15,0.2",
       "--metrics-port", "-1"]  # fmt: skip
NATIVE = ["--consumer-option", "queued.min.messages=1000", "--consumer-option", "debug=cgrp",
          "--consumer-option", "fetch_max_wait_ms=50", "--producer-option", "linger.ms=5"]  # fmt: skip


def settings(*extra: str) -> KafkaSettings:
    return KafkaSettings.from_args(build_parser().parse_args([*RUN, *extra]))


def test_confluent_keeps_librdkafka_properties_and_reads_underscored_names_as_kafka_pythons():
    chosen = settings("--client", "confluent", *NATIVE)
    consumer = chosen.consumer_options()
    assert consumer["queued.min.messages"] == 1000 and consumer["debug"] == "cgrp"
    assert consumer["fetch_max_wait_ms"] == 50  # a kafka-python name, translated by the client
    assert chosen.producer_options() == {"linger.ms": 5}
    # kafka-python keeps reading dotted names as its own (Java style), and refuses the others.
    assert settings("--producer-option", "linger.ms=5").producer_options() == {"linger_ms": 5}
    refused = "'debug' is not a kafka-python consumer setting"
    with pytest.raises(ValueError, match=rf"--consumer-option .*{refused}"):
        settings("--consumer-option", "debug=cgrp")
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


def test_the_confluent_service_passes_librdkafka_properties_to_librdkafka(bootstrap_servers, make_topics):
    """``debug=cgrp`` reaches librdkafka (its group-coordination debug lines appear in the log) and the
    service decides as usual; an unknown property is one line and exit 2."""
    pytest.importorskip("confluent_kafka", reason="the confluent client needs uss-stream[confluent]")
    topics = make_topics()
    values, outputs = stream(2_000)
    produce(bootstrap_servers, topics.input, values)
    service = Service(bootstrap_servers, topics, f"native-{uuid.uuid4().hex[:8]}", "--client", "confluent",
                      *NATIVE)  # fmt: skip
    try:
        wait_for_outputs(bootstrap_servers, topics.output, 2_000, service, timeout=120)
        service.process.send_signal(signal.SIGTERM)
        log = service.finish(timeout=60)
    finally:
        if service.process.poll() is None:
            service.process.kill()
            service.process.wait(10)
    # librdkafka's debug lines of the group coordination: "%7|<time>|CGRPSTATE|...".
    assert re.search(r"^%7\|[\d.]+\|CGRP\w*\|", log, re.MULTILINE), log[-3000:]
    decisions = read_all(bootstrap_servers, topics.output)
    assert [d["depth"] for d in decisions_of(decisions)] == USSUCB(COSTS).run(outputs).tolist()

    misspelt = command(bootstrap_servers, topics, "--client", "confluent", "--consumer-option", "debg=cgrp",
                       "--metrics-port", "-1")  # fmt: skip
    done = subprocess.run(misspelt, capture_output=True, text=True, timeout=150)
    assert done.returncode == 2, done.stderr[-3000:]
    assert 'consumer settings: No such configuration property: "debg"' in last_line(done.stderr)
