"""A secured broker: SASL_SSL with SCRAM-SHA-512 and a test CA, from ``deploy/kafka/broker.sh``.

The module starts a private broker with ``KAFKA_SASL_SSL_PORT`` (its TLS material made by keytool
at start, its SCRAM user created at format time) and always destroys it. The service decides with
credentials; a wrong password, an unknown user, a certificate it does not trust or a mechanism
the listener does not offer end ``uss-stream kafka run`` at once with one line on stderr and exit
code 7; clients without credentials are refused.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import COSTS, committed_offsets, stream
from test_broker_restart import BROKER_SH, _free_port_pair
from test_cli import topic_options
from waiting import wait_until

from tests import needs
from uss_stream.policies import USSUCB
from uss_stream_kafka import ClientConfig, Topics, create_topics

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(300),
]

USER, PASSWORD = "uss-svc", "s3cret-for-tests"


@dataclass(frozen=True)
class SecuredBroker:
    plaintext: str  # host:port of the (unchanged) plaintext listener
    secured: str  # host:port of the SASL_SSL listener
    ca: str  # the test CA's certificate (PEM)

    def client(self, **overrides: Any) -> ClientConfig:
        settings = {
            "bootstrap_servers": self.secured,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": USER,
            "sasl_password": PASSWORD,
            "ssl_cafile": self.ca,
            **overrides,
        }
        return ClientConfig(**settings)


def _free_port(avoid: set[int]) -> int:
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in avoid:
            return port


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory) -> Iterator[SecuredBroker]:
    port = _free_port_pair()
    sasl_port = _free_port({port, port + 1})
    data = tmp_path_factory.mktemp("secured") / "data"
    env = {**os.environ, "KAFKA_PORT": str(port), "KAFKA_SASL_SSL_PORT": str(sasl_port),
           "KAFKA_SCRAM_USERS": f"{USER}:{PASSWORD}", "KAFKA_DATA_DIR": str(data)}  # fmt: skip
    try:
        started = subprocess.run(
            ["bash", str(BROKER_SH), "start"], env=env, capture_output=True, text=True, timeout=240
        )
        assert started.returncode == 0, f"broker.sh start failed:\n{started.stderr[-3000:]}"
        assert f"SASL_SSL (SCRAM-SHA-512) on 127.0.0.1:{sasl_port}" in started.stderr
        yield SecuredBroker(f"127.0.0.1:{port}", f"127.0.0.1:{sasl_port}", str(data / "tls" / "ca.pem"))
    finally:
        subprocess.run(["bash", str(BROKER_SH), "stop"], env=env, capture_output=True, timeout=120)


def service(broker: SecuredBroker, topics: Topics, group: str, *extra: str, password: str = PASSWORD):
    """``uss-stream kafka run`` on the SASL_SSL listener; the password by environment, as advised."""
    command = [
        sys.executable, "-m", "uss_stream", "kafka", "run", "--bootstrap-servers", broker.secured,
        *topic_options(topics), "--group-id", group, "--stage-costs", ",".join(map(str, COSTS)),
        "--policy", "uss-ucb:alpha=0.51", "--metrics-port", "-1", "--security-protocol", "SASL_SSL",
        "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", USER, *extra,
    ]  # fmt: skip
    env = {**os.environ, "USS_KAFKA_SASL_PASSWORD": password}
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def failed_start(process: subprocess.Popen) -> tuple[int, list[str], float]:
    """Exit code, stderr lines and seconds of a service that must stop by itself."""
    started = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, stderr.strip().splitlines(), time.monotonic() - started


def new_topics(broker: SecuredBroker) -> Topics:
    from kafka import KafkaAdminClient

    run = os.urandom(5).hex()
    topics = Topics(
        input=f"s-{run}-in", output=f"s-{run}-out", dead_letter=f"s-{run}-dlq", state=f"s-{run}-st"
    )
    admin = KafkaAdminClient(**broker.client().kafka_kwargs("admin"))
    create_topics(admin, topics)
    admin.close()
    return topics


def test_the_service_decides_with_credentials(secured_broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

    topics = new_topics(secured_broker)
    values, outputs = stream(2_000, seed=11)
    producer = KafkaProducer(**secured_broker.client().kafka_kwargs("test-producer"))
    for value in values:
        producer.send(topics.input, value, partition=0)
    producer.flush()
    producer.close()

    group = f"secured-{topics.input}"
    process = service(secured_broker, topics, group, "--ssl-cafile", secured_broker.ca)
    admin = KafkaAdminClient(**secured_broker.client().kafka_kwargs("admin"))
    tp = TopicPartition(topics.input, 0)
    try:

        def running() -> None:
            assert process.poll() is None, process.stderr.read()[-3000:]

        wait_until(
            lambda: committed_offsets(admin, group, [tp])[tp] >= len(values),
            "the commit of every event",
            timeout=120,
            alive=running,
            every=0.2,
        )
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        admin.close()
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr[-3000:]

    consumer = KafkaConsumer(**secured_broker.client().kafka_kwargs("test-reader"), enable_auto_commit=False)
    out = TopicPartition(topics.output, 0)
    consumer.assign([out])
    consumer.seek_to_beginning(out)
    decisions: list[Any] = []
    deadline = time.monotonic() + 60
    while len(decisions) < len(values) and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            decisions.extend(json.loads(r.value) for r in batch)
    consumer.close()
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()


@pytest.mark.parametrize(
    ("case", "extra", "password", "message"),
    [
        ("wrong password", ["--ssl-cafile", "CA"], "not-the-password",
         f"SASL authentication of user '{USER}' failed: Authentication failed during authentication due to "
         "invalid credentials with SASL mechanism SCRAM-SHA-512"),
        ("unknown user", ["--ssl-cafile", "CA", "--sasl-username", "nobody"], PASSWORD,
         "SASL authentication of user 'nobody' failed"),
        ("untrusted certificate", [], PASSWORD,
         "TLS: the broker's certificate is not trusted by the system's CAs"),
        ("mechanism not offered", ["--ssl-cafile", "CA", "--sasl-mechanism", "SCRAM-SHA-256"], PASSWORD,
         "SASL mechanism SCRAM-SHA-256 is not enabled on this listener (it offers SCRAM-SHA-512)"),
    ],
)  # fmt: skip
def test_a_security_failure_stops_the_service_at_once_with_one_line(
    case, extra, password, message, secured_broker, record_property
):
    topics = new_topics(secured_broker)
    extra = [secured_broker.ca if arg == "CA" else arg for arg in extra]
    code, lines, seconds = failed_start(
        service(secured_broker, topics, "g-refused", *extra, password=password)
    )
    # One line, exit code 7 (security), the cause named: not kafka-python's 30 s "Unable to bootstrap".
    assert code == 7, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"uss-stream kafka run: error: {secured_broker.secured}: "), lines
    assert message in lines[0]
    record_property(f"secured_{case}", f"{case}: exit {code} after {seconds:.1f}s (process start included)")
    print(f"{case}: exit {code} after {seconds:.1f}s: {lines[0]}")


@pytest.mark.parametrize(
    ("case", "overrides", "message"),
    [
        ("wrong password", {"sasl_password": "not-the-password"}, "SASL authentication of user"),
        ("untrusted certificate", {"ssl_cafile": None}, "TLS: the broker's certificate is not trusted"),
    ],
)
def test_the_check_itself_takes_one_round_trip(case, overrides, message, secured_broker, record_property):
    """The check without the process start: one connection, answered at once (figures recorded)."""
    from uss_stream_kafka.clients.security import check_security
    from uss_stream_kafka.exceptions import SecurityCheckError

    started = time.monotonic()
    with pytest.raises(SecurityCheckError, match=message):
        check_security(secured_broker.client(**overrides))
    seconds = time.monotonic() - started
    started = time.monotonic()
    check_security(secured_broker.client())  # the right settings pass: a full SCRAM exchange
    ok_seconds = time.monotonic() - started
    record_property(
        f"check_{case}", f"{case}: refused in {seconds:.2f}s (a passing check: {ok_seconds:.2f}s)"
    )
    print(f"{case}: refused in {seconds:.2f}s (a passing check: {ok_seconds:.2f}s)")


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_a_client_without_credentials_is_refused(protocol, secured_broker):
    """No SASL on the SASL_SSL listener: no metadata, whether the client speaks TLS or not."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    settings: dict[str, Any] = {"security_protocol": protocol, "bootstrap_timeout_ms": 5_000}
    if protocol == "SSL":
        settings["ssl_cafile"] = secured_broker.ca
    with pytest.raises(KafkaError, match="Unable to bootstrap"):
        KafkaAdminClient(bootstrap_servers=secured_broker.secured, **settings)
    # The same client with credentials is served (the refusal is not a broken listener) ...
    admin = KafkaAdminClient(**secured_broker.client().kafka_kwargs("admin"))
    assert isinstance(admin.list_topics(), list)
    admin.close()
    # ... and the plaintext listener beside it is unchanged.
    admin = KafkaAdminClient(bootstrap_servers=secured_broker.plaintext)
    assert isinstance(admin.list_topics(), list)
    admin.close()


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_plaintext_against_the_tls_listener_stops_at_once_with_one_line(client, secured_broker):
    """``--security-protocol PLAINTEXT`` pointed at the SASL_SSL port: exit 7 and one line naming
    the listener, on either client (confluent-kafka gave a 30 s retry loop and a traceback)."""
    needs.module("confluent_kafka" if client == "confluent" else "kafka")
    topics = new_topics(secured_broker)
    command = [
        sys.executable, "-m", "uss_stream", "kafka", "run", "--bootstrap-servers", secured_broker.secured,
        *topic_options(topics), "--group-id", "g-plaintext", "--stage-costs", ",".join(map(str, COSTS)),
        "--metrics-port", "-1", "--security-protocol", "PLAINTEXT", "--client", client,
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    code, lines, _ = failed_start(process)
    assert code == 7, lines
    assert lines == [
        f"uss-stream kafka run: error: {secured_broker.secured}: this is a TLS listener and "
        "--security-protocol is PLAINTEXT: use SSL or SASL_SSL (with --ssl-cafile), or the broker's "
        "plaintext listener"
    ]


def test_the_plaintext_check_passes_the_plaintext_listener(secured_broker):
    """The same check lets a plaintext client through on the plaintext listener of the same broker."""
    from uss_stream_kafka.clients.security import check_security

    check_security(ClientConfig(bootstrap_servers=secured_broker.plaintext))
