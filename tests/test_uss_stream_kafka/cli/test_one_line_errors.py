"""Mistakes on the command line and brokers that cannot be reached: one line naming the subcommand, its
exit code (``cli/exit_codes.py``), no traceback, and nothing started.

In process through ``uss_stream.commands.cli.main`` (nothing listens on ``127.0.0.1:1``), except for
a confluent-kafka that fails to load, which needs a process of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests import needs
from uss_stream.commands.cli import main
from uss_stream_kafka.cli.commands import existing_line
from uss_stream_kafka.cli.exit_codes import exit_code, one_line_errors
from uss_stream_kafka.clients import ClientError, TopicSpec

SERVICE = ["--input-topic", "i", "--output-topic", "o", "--dlq-topic", "d", "--state-topic", "s",
           "--group-id", "g", "--metrics-port", "-1"]  # fmt: skip


@pytest.fixture(autouse=True)
def _no_service_variables(monkeypatch):
    for name in [
        name for name in os.environ if name.startswith("USS_KAFKA_") or name == "KAFKA_BOOTSTRAP_SERVERS"
    ]:
        monkeypatch.delenv(name)


def one_line(capsys, arguments: list[str]) -> tuple[int, str]:
    """Exit code and the one error line of ``uss-stream ARGUMENTS`` (asserting it is one, traceback-free)."""
    try:
        code = main(arguments)
    except SystemExit as exit:  # argparse's own usage errors
        code = exit.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert "Traceback" not in err and len(lines) == 1, err
    return code, lines[0]


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("::::", "'::::' is not host:port (an IPv6 address goes in brackets: [::1]:9092)"),
        ("::1:9092", "'::1:9092' is not host:port (an IPv6 address goes in brackets"),
        ("kafka:70000", "'kafka:70000': the port must be 1..65535"),
        ("a:9092,,b:9092", "'' is not host:port"),
    ],
)
def test_a_malformed_bootstrap_address_is_a_configuration_error(capsys, address, why):
    code, line = one_line(
        capsys, ["kafka", "run", "--bootstrap-servers", address, *SERVICE, "--stage-costs", "0,1"]
    )
    assert code == 2
    assert line.startswith("uss-stream kafka run: error: argument --bootstrap-servers: ")
    assert why in line and line.endswith("(env USS_KAFKA_BOOTSTRAP_SERVERS)")


def test_well_formed_bootstrap_addresses_are_taken():
    from uss_stream_kafka.cli.settings import KafkaSettings

    for address in ("kafka-0.kafka:9092,kafka-1.kafka:9092", "[::1]:9092", "10.0.0.1:19092", "broker"):
        settings = KafkaSettings("status", bootstrap_servers=address, state_topic="s", group_id="g")
        assert settings.bootstrap_servers == address


@pytest.mark.parametrize(("costs", "entry"), [("0,,1", 2), (",0,1", 1), ("0, ,1", 2)])
def test_an_empty_stage_cost_is_refused_not_dropped(capsys, costs, entry):
    code, line = one_line(
        capsys, ["kafka", "run", "--bootstrap-servers", "127.0.0.1:1", *SERVICE, "--stage-costs", costs]
    )
    assert code == 2 and f"got {costs!r} (entry {entry} is empty)" in line


def test_a_cascade_factory_given_as_a_path_is_a_configuration_error(capsys):
    arguments = ["kafka", "run", "--bootstrap-servers", "127.0.0.1:1", *SERVICE, "--mode", "features",
                 "--cascade-factory", "../../etc:passwd"]  # fmt: skip
    code, line = one_line(capsys, arguments)
    assert code == 2 and "(a module's import name, not a file), got '../../etc:passwd'" in line


@pytest.mark.parametrize(("rate", "refused"), [("1e-9", True), ("0.0002", True), ("0.0003", False)])
def test_a_demo_rate_slower_than_one_event_an_hour_is_refused_before_connecting(capsys, rate, refused):
    if not refused:
        from uss_stream_kafka.cli.settings import KafkaSettings

        settings = KafkaSettings("demo-producer", bootstrap_servers="b:1", input_topic="i", rate=rate)
        assert settings.rate == float(rate)
        return
    code, line = one_line(capsys, ["kafka", "demo-producer", "--bootstrap-servers", "127.0.0.1:1",
                                   "--input-topic", "i", "--rate", rate])  # fmt: skip
    assert code == 2 and line.startswith("uss-stream kafka demo-producer: error: argument --rate: must be 0")
    assert "at least 1/3600 (one event an hour)" in line and line.endswith("(env USS_KAFKA_RATE)")


def test_orchestrate_s_security_errors_name_orchestrate(capsys, monkeypatch):
    from uss_stream_kafka.clients import security
    from uss_stream_kafka.exceptions import SecurityCheckError

    def refused(config, timeout=10.0):
        raise SecurityCheckError("TLS handshake failed with 127.0.0.1:1: certificate verify failed")

    monkeypatch.setattr(security, "check_security", refused)
    arguments = ["kafka", "orchestrate", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "q",
                 "--reports-topic", "r", "--output-topic", "o", "--dlq-topic", "d", "--state-topic", "s",
                 "--group-id", "g", "--stage-costs", "0,1", "--metrics-port", "-1"]  # fmt: skip
    code, line = one_line(capsys, arguments)
    assert code == 7 and line.startswith("uss-stream kafka orchestrate: error: TLS handshake failed")


def test_an_unreachable_broker_under_confluent_kafka_is_exit_3_in_one_line(capsys):
    """librdkafka's "Broker transport failure" reached the user as a traceback (exit 1)."""
    ck = needs.module("confluent_kafka")  # the error object of the library under test
    from uss_stream_kafka.clients.confluent import _error

    def fails(args):
        try:
            raise ck.KafkaException(ck.KafkaError(ck.KafkaError._TRANSPORT, "Failed to get metadata"))
        except ck.KafkaException as error:
            raise _error(error, "cluster metadata") from error

    code = one_line_errors("run")(fails)(type("Args", (), {"bootstrap_servers": "nosuch.invalid:9092"})())
    line = capsys.readouterr().err.strip()
    assert code == 3 == exit_code(ClientError("x", name="_TRANSPORT", retriable=True))
    assert line.startswith(
        "uss-stream kafka run: error: cannot reach the Kafka brokers at nosuch.invalid:9092: "
    )
    assert "cluster metadata: " in line and "KafkaError{" not in line


BROKEN = textwrap.dedent(
    """
    import logging, sys
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    from uss_stream_kafka.clients import resolve
    print(resolve("auto"), resolve("auto"))
    """
)


def test_auto_takes_kafka_python_when_confluent_kafka_is_installed_but_does_not_load(tmp_path):
    package = tmp_path / "confluent_kafka"
    package.mkdir()
    (package / "__init__.py").write_text(
        "raise OSError('librdkafka.so.1: cannot open shared object file: No such file or directory')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", BROKEN], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["kafka-python", "kafka-python"]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("--client auto:")]
    assert warnings == [
        "--client auto: confluent-kafka is installed but does not load (OSError: librdkafka.so.1: cannot "
        "open shared object file: No such file or directory): using kafka-python"
    ]


class ExistingTopics:
    """A seam ``Admin`` whose topics all exist already, with ``counts`` partitions."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def create_topics(self, topics: dict[str, TopicSpec]) -> dict[str, ClientError]:
        return {name: ClientError("exists", name="TOPIC_ALREADY_EXISTS", code=36) for name in topics}

    def partitions(self, topics):
        return {name: self.counts[name] for name in topics}

    def topic_config(self, topic: str) -> dict[str, str]:
        return {"cleanup.policy": "compact"}

    def close(self) -> None:
        pass


def test_create_topics_says_when_an_existing_topic_has_another_partition_count(capsys, monkeypatch):
    from uss_stream_kafka import clients

    counts = {"i": 1, "o": 4, "d": 4, "s": 1}
    monkeypatch.setattr(clients, "admin", lambda client, **settings: ExistingTopics(counts))
    arguments = ["kafka", "create-topics", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "i",
                 "--output-topic", "o", "--dlq-topic", "d", "--state-topic", "s",
                 "--partitions", "4"]  # fmt: skip
    assert main(arguments) == 0
    assert capsys.readouterr().out.splitlines() == [
        "i: exists with 1 partition, not the 4 asked for (the partitions of an existing topic are not "
        "changed)",
        "o: exists",
        "d: exists",
        "s: exists",  # the state topic: its own count (--state-partitions, 1)
    ]
    assert existing_line("exists", 2, 4).startswith("exists with 2 partitions, not the 4")
