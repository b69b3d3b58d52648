"""Exactly-once mode on a real broker: transactions survive aborts and SIGKILLs without a duplicate."""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter

import pytest
from conftest import COSTS, Running, checkpoints_of, new_app, policy_after, produce, read_all, stream, trickle
from test_cli import Service, output_count

from connectors.kafka import OutputsProcessor
from uss_stream.policies import USSUCB

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(180),
    # kafka-python 3.0.12 loads its protocol schemas with the deprecated importlib.resources API.
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]


def test_an_aborted_transaction_is_rewound_and_redone_without_a_trace(bootstrap_servers, make_topics):
    topics = make_topics()
    values, outputs = stream(6_000)
    produce(bootstrap_servers, topics.input, values[:3_000])
    app = new_app(
        bootstrap_servers, topics, guarantee="exactly-once", group_instance_id="abort-1", max_poll_records=500
    )
    running = Running(app, OutputsProcessor(COSTS))
    running.wait_for(lambda a: a.summary.commits >= 1 and a.summary.events >= 3_000)
    # The next transaction fails at its commit: it is aborted and the learner rewound.
    real_commit = app._producer.commit_transaction
    failures = []

    def failing_commit() -> None:
        if not failures:
            from kafka.errors import KafkaError

            failures.append(1)
            raise KafkaError("injected failure")
        real_commit()

    app._producer.commit_transaction = failing_commit
    produce(bootstrap_servers, topics.input, values[3_000:])
    summary = running.join()

    assert summary.aborts == 1 and failures == [1]
    assert app.metrics.registry.get_sample_value("uss_kafka_transaction_aborts_total") == 1
    committed = read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    everything = read_all(bootstrap_servers, topics.output, isolation_level="read_uncommitted")
    decisions = [json.loads(r.value) for r in committed]
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(6_000)]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
    assert len(everything) > len(committed)  # the aborted transaction's records are in the log
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].state == policy_after(outputs).state_dict()


def test_four_sigkills_leave_exactly_one_decision_per_event(bootstrap_servers, make_topics, record_property):
    topics = make_topics()
    n = 20_000
    values, outputs = stream(n)
    expected = USSUCB(COSTS).run(outputs).tolist()
    group = "eos-sigkill-group"
    options = ["--guarantee", "exactly-once", "--group-instance-id", "eos-1", "--commit-interval", "0.3",
               "--max-poll-records", "300", "--session-timeout-ms", "6000"]  # fmt: skip
    seed = random.randrange(1_000_000)
    kill_at = sorted(random.Random(seed).sample(range(1_500, n - 3_000), 4))
    started = time.monotonic()
    service = Service(bootstrap_servers, topics, group, *options)
    service.wait_for_log("restored")
    producing = trickle(bootstrap_servers, topics.input, {0: values}, per_second=1_500)
    seen_at_kill = []
    for kill, threshold in enumerate(kill_at):
        deadline = time.monotonic() + 60
        while output_count(bootstrap_servers, topics.output) < threshold:
            service.alive()
            assert time.monotonic() < deadline, f"fewer than {threshold} output records after 60s"
            time.sleep(0.01)
        service.process.send_signal(signal.SIGKILL)
        service.process.wait(timeout=10)
        assert service.process.returncode == -signal.SIGKILL
        seen_at_kill.append(output_count(bootstrap_servers, topics.output))
        last = kill == len(kill_at) - 1
        service = Service(
            bootstrap_servers, topics, group, *options, *(["--exit-when-idle", "3"] if last else [])
        )
    producing.join()
    service.finish(timeout=90)
    seconds = time.monotonic() - started

    committed = [
        json.loads(r.value)
        for r in read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    ]
    everything = read_all(bootstrap_servers, topics.output, isolation_level="read_uncommitted")
    # Exactly one committed decision per event, in order, each with the crash-free run's depth.
    assert [d["id"] for d in committed] == [f"e{i}" for i in range(n)]
    assert [d["depth"] for d in committed] == expected
    # A read_uncommitted consumer also sees the records of the transactions the kills interrupted.
    uncommitted_counts = Counter(json.loads(r.value)["id"] for r in everything)
    duplicates = sum(count - 1 for count in uncommitted_counts.values())
    assert duplicates == len(everything) - n
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].state == policy_after(outputs).state_dict()
    report = (
        f"exactly-once, {n} events, SIGKILL at output offsets {seen_at_kill} (seed {seed}): "
        f"{len(committed)} committed decisions, 0 duplicates with read_committed, "
        f"{duplicates} duplicates with read_uncommitted ({len(everything)} records in the log), "
        f"{seconds:.1f}s"
    )
    record_property("eos_sigkill_report", report)
    print(report)
