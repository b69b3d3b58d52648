"""The broker stops and restarts mid-stream: the service reconnects by itself and loses nothing.

This test needs a broker it may stop, so it starts its own: ``deploy/kafka/broker.sh`` on a free
port with ``KAFKA_KEEP_DATA=1`` (a restart keeps the topics, offsets and transactions), whatever
``KAFKA_BOOTSTRAP_SERVERS`` says. It needs a JDK >= 17 and Maven (or the jars in
``deploy/kafka/.lib``), like ``make test``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    COSTS,
    checkpoints_of,
    policy_after,
    private_port_range,
    read_all,
    stream,
    trickle,
    wait_for_metadata,
)
from test_cli import Service, output_count
from waiting import wait_until

from uss_stream.policies import USSUCB
from uss_stream_kafka import Topics, create_topics

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(600),  # above the sum of the waits below: a failure then shows the service's log
]

BROKER_SH = Path(__file__).resolve().parents[3] / "deploy" / "kafka" / "broker.sh"


@pytest.fixture
def kafka_client() -> str:
    """kafka-python here: ``test_broker_restart_confluent.py`` runs these tests on confluent-kafka, in
    a file of its own so that ``--dist loadfile`` runs the two halves (each test starts a private
    broker) on two workers at once instead of one after the other."""
    return "kafka-python"


def _free_port_pair() -> int:
    """A port ``p`` with ``p`` and ``p + 1`` (the controller's) free on the loopback.

    Below Linux's ephemeral range (32768+), so that no client socket takes it while the broker is down.
    """
    rng = random.Random()
    for _ in range(100):
        port = rng.choice(private_port_range())  # this xdist worker's slice of 20000-32000
        try:
            for candidate in (port, port + 1):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free pair of loopback ports in 20000-32000")


class RestartableBroker:
    """A private ``broker.sh`` broker whose data survive :meth:`stop` / :meth:`start`."""

    def __init__(self) -> None:
        self.port = _free_port_pair()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "KAFKA_PORT": str(self.port), "KAFKA_KEEP_DATA": "1"}

    def _run(self, command: str, env: dict[str, str]) -> float:
        started = time.monotonic()
        done = subprocess.run(
            ["bash", str(BROKER_SH), command], env=env, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, f"broker.sh {command} failed:\n{done.stderr[-3000:]}"
        return time.monotonic() - started

    def start(self) -> float:
        return self._run("start", self.env)

    def stop(self) -> float:
        return self._run("stop", self.env)

    def destroy(self) -> None:
        self._run("stop", {**self.env, "KAFKA_KEEP_DATA": "0"})


@pytest.fixture
def restartable_broker() -> Iterator[RestartableBroker]:
    broker = RestartableBroker()
    broker.start()
    yield broker
    broker.destroy()


def service_topics(bootstrap: str) -> Topics:
    """The service's four topics (one partition each) on a private broker, served once this returns."""
    from kafka import KafkaAdminClient

    topics = Topics(input="events", output="decisions", dead_letter="dead-letters", state="state")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    create_topics(admin, topics, partitions=1)
    admin.close()
    wait_for_metadata(bootstrap, dict.fromkeys(topics.all(), 1))
    return topics


def test_the_service_rides_out_a_broker_restart(kafka_client, restartable_broker, record_property):
    """At-least-once, events still arriving through the outage. Exactly-once is
    ``test_long_outage.py``: the same restart with a transaction open when the broker goes, a
    replaced producer that must wait out kafka-python's bootstrap timeout, and exactly one committed
    decision per event (it used to be a second case here, a shorter outage that the long one covers)."""
    bootstrap = restartable_broker.bootstrap
    topics = service_topics(bootstrap)
    n = 10_000
    values, outputs = stream(n)
    options = ["--guarantee", "at-least-once", "--group-instance-id", "restart-1", "--commit-interval", "0.5",
               "--checkpoint-interval", "1", "--client", kafka_client]  # fmt: skip
    service = Service(bootstrap, topics, "restart-group", *options)
    service.wait_for_log("restored")
    # 20 s of stream: events still flow when the broker goes down, even when a loaded machine
    # makes its stop slow.
    producing = trickle(bootstrap, topics.input, {0: values}, per_second=500)
    wait_until(lambda: output_count(bootstrap, topics.output) >= 3_000, "3000 decisions", timeout=60,
               alive=service.alive)  # fmt: skip

    stop_seconds = restartable_broker.stop()
    outage_started = time.monotonic()
    time.sleep(3)  # the outage itself (the scenario's length), not a wait for a condition
    service.alive()
    outage = time.monotonic() - outage_started
    start_seconds = restartable_broker.start()
    down_seconds = stop_seconds + outage + start_seconds
    producing.join(timeout=120)
    assert not producing.is_alive(), "the producer did not get its events in after the restart"

    def all_decided() -> bool:
        records = read_all(bootstrap, topics.output)
        return len({json.loads(r.value)["id"] for r in records}) >= n

    # An outage longer than the session (45 s; a loaded machine's slow stop and start make it one)
    # expires the group membership: the service then rejoins and restores before it decides again.
    recovered = wait_until(
        all_decided,
        lambda: f"a decision for every event after the restart (log:\n{service.log[-6000:]}\n)",
        timeout=300,
        alive=service.alive,
        every=0.5,
    )
    service.process.send_signal(signal.SIGTERM)
    service.finish()

    decisions = [json.loads(r.value) for r in read_all(bootstrap, topics.output)]
    counts = Counter(d["id"] for d in decisions)
    # Nothing lost, each decision with the depth of an uninterrupted run.
    assert set(counts) == {f"e{i}" for i in range(n)}
    expected = USSUCB(COSTS).run(outputs)
    assert all(d["depth"] == expected[int(d["id"][1:])] for d in decisions)
    duplicates = sum(c - 1 for c in counts.values())
    assert checkpoints_of(bootstrap, topics.state)[-1].state == policy_after(outputs).state_dict()
    report = (
        f"broker stopped after {3_000}+ decisions and down {down_seconds:.1f}s (stop {stop_seconds:.1f}s, "
        f"{outage:.1f}s, start {start_seconds:.1f}s); the service reconnected and decided every event "
        f"{recovered:.1f}s after the producer finished: {n} events, "
        f"{len(decisions)} decisions, {duplicates} duplicates"
    )
    record_property("broker_restart", report)
    print(report)
