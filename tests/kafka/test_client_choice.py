"""Choosing the Kafka client of the service: ``--client``, ``USS_KAFKA_CLIENT``, a missing extra."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from uss_stream.cli import build_parser
from uss_stream_kafka import Application, ClientConfig, Topics

RUN = [
    "kafka", "run", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "IN", "--output-topic", "OUT",
    "--dlq-topic", "DLQ", "--state-topic", "STATE", "--group-id", "G", "--stage-costs", "0,0.15,0.2",
    "--metrics-port", "-1",
]  # fmt: skip
TOPICS = Topics(input="i", output="o", dead_letter="d", state="s")


def test_the_client_is_kafka_python_unless_chosen(monkeypatch):
    monkeypatch.delenv("USS_KAFKA_CLIENT", raising=False)
    assert build_parser().parse_args(RUN).client == "kafka-python"
    assert build_parser().parse_args([*RUN, "--client", "confluent"]).client == "confluent"
    monkeypatch.setenv("USS_KAFKA_CLIENT", "confluent")
    assert build_parser().parse_args(RUN).client == "confluent"
    assert Application(ClientConfig("b:9092"), "g", TOPICS, http_port=None).client_library == "kafka-python"


def test_an_unknown_client_is_refused_by_name():
    with pytest.raises(
        ValueError, match="client_library must be one of kafka-python, confluent, got 'rdkafka'"
    ):
        Application(ClientConfig("b:9092"), "g", TOPICS, client_library="rdkafka")


def test_the_confluent_client_without_its_extra_is_one_line_naming_the_extra():
    """Exit 2 (configuration) before any connection, with the pip command; no traceback."""
    code = (
        "import sys\n"
        "sys.modules['confluent_kafka'] = None  # as if confluent-kafka were not installed\n"
        "from uss_stream.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("USS_KAFKA")}
    done = subprocess.run(
        [sys.executable, "-c", code, *RUN, "--client", "confluent"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "pip install 'uss-stream[confluent]'" in done.stderr
