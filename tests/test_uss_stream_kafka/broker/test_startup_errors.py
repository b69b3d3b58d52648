"""Issue 16 item 11: startup and configuration errors of ``uss-stream kafka run`` are one line on
stderr and a distinct exit code (see ``connectors/uss_stream_kafka/cli/exit_codes.py`` and ``docs/kafka.md``).
"""

from __future__ import annotations

import socket
import sys

import pytest
from conftest import produce

from tests.test_uss_stream_kafka.helpers import ServiceTopics, command, last_line, run_to_exit
from uss_stream_kafka.runtime.checkpoint import Checkpoint

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(120),
]


@pytest.mark.parametrize(
    ("extra", "code", "needle"),
    [
        (("--metrics-port", "70000"), 2, "must be a port 0..65535"),
        (("--producer-option", "acks=1"), 2, "acks"),
        (("--kafka-option", "foo_bar=1"), 2, "'foo_bar' is not a kafka-python client setting"),
        (("--consumer-option", "linger_ms=5"), 2, "'linger_ms' is not a kafka-python consumer setting"),
        (("--metrics-host", "no-such-host.invalid", "--metrics-port", "0"), 4, "cannot serve /metrics"),
    ],
)
def test_configuration_errors_are_one_line_and_a_distinct_code(
    bootstrap_servers, make_topics, extra, code, needle
):
    topics = make_topics()
    if "--metrics-port" not in extra:
        extra = (*extra, "--metrics-port", "-1")
    exit_code, stderr = run_to_exit(command(bootstrap_servers, topics, *extra))
    assert exit_code == code, stderr[-3000:]
    assert needle in last_line(stderr)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (
            ("--kafka-option", "retry_backoff_ms=xyz"),
            "'retry_backoff_ms' must be an integer in 0..2147483647, got 'xyz'",
        ),
        (
            ("--producer-option", "linger_ms=abc"),
            "'linger_ms' must be an integer in 0..2147483647, got 'abc'",
        ),
        (
            ("--consumer-option", "fetch_max_wait_ms=-1"),
            "'fetch_max_wait_ms' must be an integer in 0..2147483647",
        ),
        (("--session-timeout-ms", "10000000000"), "'session_timeout_ms' must be an integer in 0..2147483647"),
        (("--consumer-option", "check_crcs=1"), "'check_crcs' must be true or false, got 1"),
    ],
)
def test_client_option_values_of_the_wrong_type_or_range_exit_2_naming_the_option(
    kafka_client, bootstrap_servers, extra, needle
):
    exit_code, stderr = run_to_exit(
        command(bootstrap_servers, ServiceTopics, *extra, "--client", kafka_client, "--metrics-port", "-1"),
        timeout=60,
    )
    assert exit_code == 2, stderr[-3000:]
    assert needle in last_line(stderr)


def test_metrics_port_in_use_exits_4(bootstrap_servers, make_topics):
    topics = make_topics()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, stderr = run_to_exit(
            command(bootstrap_servers, topics, "--metrics-host", "127.0.0.1", "--metrics-port", str(port))
        )
    assert code == 4
    line = last_line(stderr)
    assert (
        line.startswith("uss-stream kafka run: error: cannot serve /metrics on 127.0.0.1:")
        and str(port) in line
    )


def test_a_checkpoint_of_another_group_exits_5(bootstrap_servers, make_topics):
    topics = make_topics()
    produce(bootstrap_servers, topics.input, [b'{"id": 1, "outputs": [1, 1, 1]}'])
    other = Checkpoint(topic=topics.input, partition=0, offset=0, state={}, group_id="someone-else")
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    producer.send(topics.state, other.to_bytes(), key=other.key).get(30)
    producer.close()
    code, stderr = run_to_exit(command(bootstrap_servers, topics, "--metrics-port", "-1"))
    assert code == 5
    assert "written by group 'someone-else'" in last_line(stderr)


def test_create_topics_checks_tls_first_and_exits_7_in_one_line(bootstrap_servers):
    """TLS against the plaintext listener: one round trip, not the admin client's retries."""
    arguments = [
        sys.executable, "-m", "uss_stream", "kafka", "create-topics",
        "--bootstrap-servers", bootstrap_servers, "--input-topic", "never-in", "--output-topic", "never-out",
        "--dlq-topic", "never-dlq", "--state-topic", "never-state", "--security-protocol", "SSL",
    ]  # fmt: skip
    code, stderr = run_to_exit(arguments, timeout=60)
    lines = [
        line for line in stderr.splitlines() if line.startswith("uss-stream kafka create-topics: error:")
    ]
    assert code == 7 and "Traceback" not in stderr, stderr[-3000:]
    assert len(lines) == 1 and "TLS handshake failed" in lines[0]
