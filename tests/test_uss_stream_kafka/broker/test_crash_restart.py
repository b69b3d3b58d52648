"""Issue 16, restarts after a crash on a real broker: a backlog on both orchestration topics, and
``exit_when_idle`` while the group still waits for a dead member's session.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, end_offsets, new_app, produce, read_all, run_app, stream, wait_for_metadata
from orchestrated import orchestrator
from test_cli import output_count
from waiting import wait_until

from uss_stream.policies import USSUCB
from uss_stream_kafka import DeadLetter, OutputsProcessor
from uss_stream_kafka.processing.orchestration import OrchestrationTopics, create_orchestration_topics

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(240),
]


@pytest.fixture
def orchestration_topics(admin: Any) -> Iterator[OrchestrationTopics]:
    run = uuid.uuid4().hex[:10]
    topics = OrchestrationTopics(
        requests=f"c-{run}-req",
        reports=f"c-{run}-rep",
        decisions=f"c-{run}-dec",
        dead_letter=f"c-{run}-dlq",
        state=f"c-{run}-state",
    )
    create_orchestration_topics(admin, topics)
    # A group that joins before the broker serves the topics' metadata is assigned nothing.
    wait_for_metadata(admin.config["bootstrap_servers"], dict.fromkeys(topics.all(), 1))
    yield topics
    admin.delete_topics(list(topics.all()))


class Process:
    """A subprocess that is killed (SIGKILL) at the end of the test whatever happens.

    Its output is read as it comes (a full pipe would stall it) and kept in :attr:`log`.
    """

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True)
        self._reader.start()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, text: str, timeout: float = 120.0) -> None:
        wait_until(lambda: text in self.log, f"{text!r} in the output", timeout=timeout, alive=self.alive)

    def alive(self) -> None:
        assert self.process.poll() is None, f"the process exited early:\n{self.log[-3000:]}"

    def finish(self, timeout: float) -> int:
        """Wait for the exit; returns its code, with the whole output read."""
        code = self.process.wait(timeout)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)


@pytest.fixture
def processes() -> Iterator[Callable[[list[str]], Process]]:
    started: list[Process] = []

    def start(command: list[str]) -> Process:
        started.append(Process(command))
        return started[-1]

    yield start
    for process in started:
        process.kill()


def test_orchestrator_restarted_on_a_backlog_of_requests_and_reports_applies_every_report(
    bootstrap_servers, orchestration_topics, processes
):
    topics, n = orchestration_topics, 5_000
    group = f"g-{uuid.uuid4().hex[:10]}"
    produce(bootstrap_servers, topics.requests, [json.dumps({"id": f"r{i}"}).encode() for i in range(n)])
    service = processes(
        [
            sys.executable, "-m", "uss_stream", "kafka", "orchestrate",
            "--bootstrap-servers", bootstrap_servers, "--input-topic", topics.requests,
            "--reports-topic", topics.reports, "--output-topic", topics.decisions,
            "--dlq-topic", topics.dead_letter, "--state-topic", topics.state, "--group-id", group,
            "--stage-costs", ",".join(map(str, COSTS)),
            "--checkpoint-every", "1000000000", "--checkpoint-interval", "3600", "--metrics-port", "0",
            # Killed: the restart waits for its session to expire (kafka-python's default, not 45 s).
            "--session-timeout-ms", "10000",
        ]
    )  # fmt: skip
    wait_until(
        lambda: output_count(bootstrap_servers, topics.decisions) >= n,
        lambda: (
            f"{output_count(bootstrap_servers, topics.decisions)} of {n} decisions:\n{service.log[-3000:]}"
        ),
        alive=service.alive,
        every=0.2,
    )
    service.kill()  # before its first checkpoint: nothing is committed
    assert end_offsets(bootstrap_servers, topics.state) == {0: 0}

    first = {
        d["id"]: d["depth"]
        for d in (json.loads(r.value) for r in read_all(bootstrap_servers, topics.decisions))
    }
    rng = np.random.default_rng(4)
    truth = rng.integers(0, 2, n)
    outputs = np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1)
    reports = [
        json.dumps({"id": f"r{i}", "outputs": outputs[i, : first[f"r{i}"]].tolist()}).encode()
        for i in range(n)
    ]
    produce(bootstrap_servers, topics.reports, reports)

    restarted = orchestrator(bootstrap_servers, topics, group, COSTS, exit_when_idle=2.0)
    summary = restarted.run()

    reasons = Counter(
        DeadLetter.from_record(r.value).reason for r in read_all(bootstrap_servers, topics.dead_letter)
    )
    assert reasons == Counter() and sum(summary.dead_letters.values()) == 0
    assert (summary.requests, summary.decisions, summary.reports, summary.applied) == (n, n, n, n)
    assert summary.pending == 0
    # The requests were decided again before any report: the same depths as the first run's.
    again = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.decisions)][n:]
    assert {d["id"]: d["depth"] for d in again} == first


DEAD_MEMBER = textwrap.dedent(
    """
    import sys
    from kafka import KafkaConsumer
    from uss_stream_kafka.clients.kafka_python_group import repair_group_join
    repair_group_join()  # as the service's consumers: kafka-python 3.0.12 alone can lose its assignment
    consumer = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], enable_auto_commit=False,
                             session_timeout_ms=10000, heartbeat_interval_ms=1000)
    consumer.subscribe(sys.argv[3:])
    while not consumer.assignment():
        consumer.poll(timeout_ms=200)
    print("assigned", flush=True)
    while True:
        consumer.poll(timeout_ms=200)
    """
)


def join_and_die(processes: Callable[[list[str]], Process], bootstrap: str, group: str, *topics: str) -> None:
    """A group member that takes the partitions, then is SIGKILLed (its session lasts 10 s)."""
    member = processes([sys.executable, "-c", DEAD_MEMBER, bootstrap, group, *topics])
    member.wait_for_line("assigned")
    member.kill()


def test_run_exit_when_idle_waits_for_the_assignment_and_the_end_offsets(
    bootstrap_servers, make_topics, processes
):
    topics = make_topics()
    values, outputs = stream(3_000)
    produce(bootstrap_servers, topics.input, values)
    group = f"g-{uuid.uuid4().hex[:10]}"
    join_and_die(processes, bootstrap_servers, group, topics.input)

    summary = run_app(
        new_app(bootstrap_servers, topics, group, exit_when_idle=1.0), OutputsProcessor(COSTS, alpha=0.51)
    )

    assert summary.events == 3_000
    depths = [json.loads(r.value)["depth"] for r in read_all(bootstrap_servers, topics.output)]
    assert depths == USSUCB(COSTS).run(outputs).tolist()


def test_orchestrate_exit_when_idle_waits_for_the_assignment_and_the_end_offsets(
    bootstrap_servers, orchestration_topics, processes
):
    topics = orchestration_topics
    produce(bootstrap_servers, topics.requests, [json.dumps({"id": i}).encode() for i in range(2_000)])
    group = f"g-{uuid.uuid4().hex[:10]}"
    join_and_die(processes, bootstrap_servers, group, topics.requests, topics.reports)

    summary = orchestrator(bootstrap_servers, topics, group, COSTS, exit_when_idle=1.0).run()

    assert summary.decisions == 2_000


def orchestrate_command(bootstrap: str, topics: OrchestrationTopics, group: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "uss_stream", "kafka", "orchestrate", "--bootstrap-servers", bootstrap,
        "--input-topic", topics.requests, "--reports-topic", topics.reports,
        "--output-topic", topics.decisions, "--dlq-topic", topics.dead_letter,
        "--state-topic", topics.state, "--group-id", group, "--stage-costs", ",".join(map(str, COSTS)),
        "--metrics-port", "0", *extra,
    ]  # fmt: skip


@pytest.mark.timeout(100)
def test_orchestrate_takes_static_membership_and_session_options_like_run(
    bootstrap_servers, orchestration_topics, processes
):
    """A SIGKILLed static member's restart gets its partitions at once, not after its 120 s session."""
    topics = orchestration_topics
    group = f"g-{uuid.uuid4().hex[:10]}"
    static = ("--group-instance-id", "orchestrator-1", "--session-timeout-ms", "120000")
    produce(bootstrap_servers, topics.requests, [json.dumps({"id": i}).encode() for i in range(100)])
    first = processes(orchestrate_command(bootstrap_servers, topics, group, *static, "--log-level", "INFO"))
    first.wait_for_line("reading the reports")
    wait_until(
        lambda: output_count(bootstrap_servers, topics.decisions) >= 100,
        lambda: f"{output_count(bootstrap_servers, topics.decisions)} of 100 decisions:\n{first.log[-3000:]}",
        timeout=60,
        alive=first.alive,
        every=0.2,
    )
    first.kill()

    produce(bootstrap_servers, topics.requests, [json.dumps({"id": 100 + i}).encode() for i in range(100)])
    second = processes(
        orchestrate_command(bootstrap_servers, topics, group, *static, "--exit-when-idle", "1")
    )
    assert second.finish(60) == 0, second.log[-3000:]
    ids = [json.loads(r.value)["id"] for r in read_all(bootstrap_servers, topics.decisions)]
    assert set(range(200)) <= set(ids)
