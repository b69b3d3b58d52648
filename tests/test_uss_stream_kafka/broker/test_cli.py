"""The ``uss-stream kafka`` commands on a real broker, including SIGKILL and SIGTERM of the service."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import uuid
from collections import Counter
from typing import Any

import numpy as np
import pytest
from conftest import (
    COSTS,
    PROCESSES,
    checkpoints_of,
    committed_offsets,
    end_offsets,
    policy_after,
    read_all,
    stream,
    trickle,
)
from waiting import wait_until

from uss_stream.commands.cli import main
from uss_stream.policies import USSUCB
from uss_stream_kafka import Topics

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(240),
]


def topic_options(topics: Topics) -> list[str]:
    return [
        "--input-topic", topics.input, "--output-topic", topics.output,
        "--dlq-topic", topics.dead_letter, "--state-topic", topics.state,
    ]  # fmt: skip


class Service:
    """``uss-stream kafka run`` in its own process; its log (stderr) is collected as it comes."""

    def __init__(self, bootstrap: str, topics: Topics, group: str, *extra: str) -> None:
        # Outputs mode runs USS-UCB (what the tests assert); features mode takes its policy from the
        # cascade factory and refuses --alpha.
        policy = [] if "features" in extra else ["--policy", "uss-ucb:alpha=0.51"]
        command = [
            sys.executable, "-m", "uss_stream", "kafka", "run", "--bootstrap-servers", bootstrap,
            *topic_options(topics), "--group-id", group, "--stage-costs", ",".join(map(str, COSTS)),
            *policy, "--metrics-port", "-1", *extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        PROCESSES.append(self.process)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def alive(self) -> None:
        assert self.process.poll() is None, f"the service exited early:\n{self.log[-3000:]}"

    def wait_for_log(self, text: str, timeout: float = 120.0) -> None:
        wait_until(
            lambda: text in self.log,
            lambda: f"{text!r} in the log:\n{self.log[-3000:]}\n",
            timeout=timeout,
            alive=self.alive,
            every=0.02,
        )

    def stacks(self, timeout: float = 10.0) -> str:
        """Every thread's stack, which the service writes to its log at SIGUSR1 (and goes on)."""
        before = len(self.lines)
        self.process.send_signal(signal.SIGUSR1)

        def dumped() -> bool:  # up to a frame of the service's own code, on the thread that runs it
            lines = self.lines[before:]
            return any(line.startswith("  File") and "uss_stream_kafka" in line for line in lines)

        wait_until(dumped, "the service's stacks in its log", timeout=timeout, every=0.05)
        return "".join(self.lines[before:])

    def finish(self, timeout: float = 120.0) -> str:
        """Wait for a clean exit (0); returns the log."""
        self.process.wait(timeout=timeout)
        self._reader.join(10)
        assert self.process.returncode == 0, self.log[-3000:]
        return self.log


def output_count(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` so far (all partitions)."""
    return sum(end_offsets(bootstrap, topic).values())


def wait_for_outputs(
    bootstrap: str, topic: str, at_least: int, service: Service, timeout: float = 60
) -> None:
    wait_until(
        lambda: output_count(bootstrap, topic) >= at_least,
        f"{at_least} decisions",
        timeout=timeout,
        alive=service.alive,
    )


def committed_offset(admin: Any, group: str, topic: str) -> int:
    """The group's committed offset of ``topic``/0 (``-1``: none)."""
    from kafka import TopicPartition

    return committed_offsets(admin, group, [TopicPartition(topic, 0)])[TopicPartition(topic, 0)]


def stop_when_committed(admin: Any, group: str, topic: str, offset: int, service: Service) -> str:
    """SIGTERM ``service`` once its group committed ``offset`` of ``topic``/0; returns its log."""
    wait_until(
        lambda: committed_offset(admin, group, topic) >= offset,
        lambda: f"the commit of offset {offset}:\n{service.log[-3000:]}\n",
        timeout=90,
        alive=service.alive,
    )
    service.process.send_signal(signal.SIGTERM)
    return service.finish()


def test_create_topics_and_demo_producer_commands(bootstrap_servers, admin, capsys):
    from kafka.admin import ConfigResource, ConfigResourceType

    run = uuid.uuid4().hex[:10]
    topics = Topics(
        input=f"c-{run}-in", output=f"c-{run}-out", dead_letter=f"c-{run}-dlq", state=f"c-{run}-st"
    )
    command = ["kafka", "create-topics", "--bootstrap-servers", bootstrap_servers, *topic_options(topics)]
    try:
        assert main([*command, "--partitions", "3"]) == 0
        assert capsys.readouterr().out.split("\n")[:4] == [f"{name}: created" for name in topics.all()]
        assert main(command) == 0  # without --partitions: 1 asked for, and existing topics are kept
        kept = (
            "exists with 3 partitions, not the 1 asked for "
            "(the partitions of an existing topic are not changed)"
        )
        assert capsys.readouterr().out.split("\n")[:4] == [
            f"{name}: {'exists' if name == topics.state else kept}" for name in topics.all()
        ]
        described = {t["name"]: len(t["partitions"]) for t in admin.describe_topics(list(topics.all()))}
        assert described == {topics.input: 3, topics.output: 3, topics.dead_letter: 3, topics.state: 1}
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topics.state)])
        assert configs["topic"][topics.state]["cleanup.policy"]["value"] == "compact"

        producer = [
            "kafka",
            "demo-producer",
            "--bootstrap-servers",
            bootstrap_servers,
            "--input-topic",
            topics.input,
        ]
        assert main([*producer, "--events", "1000"]) == 0
        events = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.input, expected=1000)]
        assert len(events) == 1000 and all(len(e["outputs"]) == 3 for e in events)
        assert {e["id"] for e in events} == {f"pima-{i}" for i in range(1, 1001)}
    finally:
        admin.delete_topics(list(topics.all()))


def test_sigterm_finishes_the_batch_commits_checkpoints_and_exits_0(bootstrap_servers, make_topics, admin):
    topics = make_topics()
    values, outputs = stream(10_000)
    group = f"sigterm-{uuid.uuid4().hex[:8]}"
    running = Service(bootstrap_servers, topics, group, "--max-poll-records", "300")
    running.wait_for_log("restored")  # the service is up: now the events come, in real time
    producing = trickle(bootstrap_servers, topics.input, {0: values}, per_second=4_000)
    wait_for_outputs(bootstrap_servers, topics.output, 4_000, running)
    running.process.send_signal(signal.SIGTERM)
    log = running.finish(timeout=30)
    assert "SIGTERM: finishing the batch, then stopping" in log
    decided = output_count(bootstrap_servers, topics.output)
    assert decided < 10_000, "the service should have been stopped mid-stream"
    assert committed_offset(admin, group, topics.input) == decided
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].offset == decided

    producing.join()
    stop_when_committed(admin, group, topics.input, 10_000, Service(bootstrap_servers, topics, group))
    decisions = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.output, expected=10_000)]
    assert len(read_all(bootstrap_servers, topics.output)) == 10_000
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()


@pytest.mark.parametrize("value_format", ["json", "avro"])
def test_sigkill_mid_stream_loses_nothing_and_duplicates_only_the_uncommitted_records(
    payloads, bootstrap_servers, make_topics, admin, record_property
):
    topics = make_topics()
    values, outputs = stream(10_000)
    values = payloads.events(topics.input, values)
    expected = USSUCB(COSTS).run(outputs)
    group = f"sigkill-{uuid.uuid4().hex[:8]}"
    # Commits every 1000 records, checkpoints every 4000, a kill after 6300: the checkpoint (~4000)
    # lags the commit (~6000), so the restart replays records silently, and decides again those
    # after the commit.
    cadence = ["--commit-interval", "600", "--commit-every", "1000", "--checkpoint-interval", "0",
               "--checkpoint-every", "4000", "--max-poll-records", "200", "--group-instance-id", group,
               "--session-timeout-ms", "6000", *payloads.options]  # fmt: skip
    running = Service(bootstrap_servers, topics, group, *cadence)
    running.wait_for_log("restored")
    producing = trickle(bootstrap_servers, topics.input, {0: values}, per_second=2_500)
    wait_for_outputs(bootstrap_servers, topics.output, 6_300, running)
    running.process.kill()
    running.process.wait(timeout=10)
    assert running.process.returncode == -signal.SIGKILL
    before_restart = output_count(bootstrap_servers, topics.output)
    committed = committed_offset(admin, group, topics.input)
    checkpoint = checkpoints_of(bootstrap_servers, topics.state)[-1].offset
    assert 0 < checkpoint < committed <= before_restart < 10_000

    producing.join()
    log = stop_when_committed(
        admin, group, topics.input, 10_000, Service(bootstrap_servers, topics, group, *cadence)
    )
    records = read_all(bootstrap_servers, topics.output, expected=10_000)
    decisions = [payloads.decision(r.value) for r in read_all(bootstrap_servers, topics.output)]
    counts = Counter(d["id"] for d in decisions)
    # Nothing lost: every event has a decision, each with the uninterrupted run's depth.
    assert set(counts) == {f"e{i}" for i in range(10_000)}
    assert all(d["depth"] == expected[int(d["id"][1:])] for d in decisions)
    # Duplicates only for records decided but not committed before the kill.
    duplicated = sorted(int(event_id[1:]) for event_id, n in counts.items() if n > 1)
    assert max(counts.values()) <= 2
    assert all(committed <= i < before_restart for i in duplicated)
    assert len(duplicated) == before_restart - committed
    # The learner counted every record once: its final state is the uninterrupted run's.
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].state == policy_after(outputs).state_dict()
    replayed = committed - checkpoint
    assert f"{replayed} replayed" in log
    report = (
        f"SIGKILL after {before_restart} decisions: committed offset {committed}, "
        f"last checkpoint {checkpoint}; "
        f"restart replayed {replayed} records silently and duplicated {len(duplicated)} decisions "
        f"(offsets {duplicated[0] if duplicated else '-'}..{duplicated[-1] if duplicated else '-'}); "
        f"{len(records)} decisions in all for 10000 events"
    )
    record_property("sigkill_report", report)
    print(report)
    assert np.bincount([d["depth"] for d in decisions], minlength=4)[1:].sum() == 10_000 + len(duplicated)
