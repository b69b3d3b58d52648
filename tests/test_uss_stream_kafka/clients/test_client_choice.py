"""Choosing the Kafka client: ``--client`` (``auto`` by default), ``USS_KAFKA_CLIENT``, a missing extra."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from tests import needs
from uss_stream.commands.cli import build_parser
from uss_stream_kafka import Application, ClientConfig, Topics
from uss_stream_kafka.cli.settings import KafkaSettings

RUN = [
    "kafka", "run", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "IN", "--output-topic", "OUT",
    "--dlq-topic", "DLQ", "--state-topic", "STATE", "--group-id", "G", "--stage-costs", "0,0.15,0.2",
    "--metrics-port", "-1",
]  # fmt: skip
TOPICS = Topics(input="i", output="o", dead_letter="d", state="s")


def test_the_client_is_auto_unless_chosen(monkeypatch):
    monkeypatch.delenv("USS_KAFKA_CLIENT", raising=False)
    assert build_parser().parse_args(RUN).client == "auto"
    assert build_parser().parse_args([*RUN, "--client", "kafka-python"]).client == "kafka-python"
    monkeypatch.setenv("USS_KAFKA_CLIENT", "confluent")
    assert build_parser().parse_args(RUN).client == "confluent"
    # The library's Application keeps an explicit default.
    assert Application(ClientConfig("b:9092"), "g", TOPICS, http_port=None).client_library == "kafka-python"


def test_auto_takes_confluent_kafka_when_it_is_installed(caplog, monkeypatch):
    needs.module("confluent_kafka")
    monkeypatch.delenv("USS_KAFKA_CLIENT", raising=False)
    caplog.set_level(logging.INFO, logger="uss_stream_kafka")
    app = Application(ClientConfig("b:9092"), "g", TOPICS, http_port=None, client_library="auto")
    assert app.client_library == "confluent"
    assert "client: confluent (--client auto: confluent-kafka is installed)" in caplog.messages
    settings = KafkaSettings.from_args(build_parser().parse_args(RUN))
    assert settings.client == "auto" and settings.librdkafka  # librdkafka's own options are taken


# With confluent-kafka hidden (as if not installed): auto is kafka-python, said in the log, and
# librdkafka's dotted options are refused as they are for kafka-python.
HIDDEN = """
import logging, sys
sys.modules["confluent_kafka"] = None
logging.basicConfig(level=logging.INFO, format="%(message)s")
from uss_stream.commands.cli import build_parser
from uss_stream_kafka import Application, ClientConfig, Topics
from uss_stream_kafka.cli.settings import KafkaSettings
topics = Topics("i", "o", "d", "s")
app = Application(ClientConfig("b:9092"), "g", topics, http_port=None, client_library="auto")
settings = KafkaSettings.from_args(build_parser().parse_args(sys.argv[1:]))
print(app.client_library, settings.client, settings.librdkafka)
"""


def test_auto_takes_kafka_python_when_confluent_kafka_is_missing():
    env = {key: value for key, value in os.environ.items() if not key.startswith("USS_KAFKA")}
    done = subprocess.run(
        [sys.executable, "-c", HIDDEN, *RUN], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["kafka-python", "auto", "False"]
    assert "client: kafka-python (--client auto: confluent-kafka is not installed)" in done.stderr


def test_an_unknown_client_is_refused_by_name():
    with pytest.raises(
        ValueError, match="client_library must be one of auto, kafka-python, confluent, got 'rdkafka'"
    ):
        Application(ClientConfig("b:9092"), "g", TOPICS, client_library="rdkafka")


def test_the_confluent_client_without_its_extra_is_one_line_naming_the_extra():
    """Exit 2 (configuration) before any connection, with the pip command; no traceback."""
    code = (
        "import sys\n"
        "sys.modules['confluent_kafka'] = None  # as if confluent-kafka were not installed\n"
        "from uss_stream.commands.cli import main\n"
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


def test_the_service_says_which_path_decides(caplog, monkeypatch):
    """The compiled kernels or the pure path (here forced by USS_STREAM_PURE=1), in the start-up log."""
    caplog.set_level(logging.INFO, logger="uss_stream_kafka")
    monkeypatch.setenv("USS_STREAM_PURE", "1")
    Application(ClientConfig("b:9092"), "g", TOPICS, http_port=None)
    assert "decisions: pure Python/NumPy: USS_STREAM_PURE=1" in caplog.messages
