"""Exactly-once mode on a real broker: transactions survive aborts and SIGKILLs without a duplicate."""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections import Counter

import pytest
from conftest import (
    COSTS,
    Running,
    checkpoints_of,
    new_app,
    open_transaction_records,
    policy_after,
    produce,
    read_all,
    stream,
    trickle,
)
from test_cli import Service, committed_offset, output_count
from waiting import wait_until

from uss_stream.policies import USSUCB
from uss_stream_kafka import OutputsProcessor

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(300),
]


@pytest.mark.parametrize("value_format", ["json", "avro"])
def test_an_aborted_transaction_is_rewound_and_redone_without_a_trace(
    kafka_client, payloads, bootstrap_servers, make_topics, admin
):
    topics = make_topics()
    values, outputs = stream(6_000)
    values = payloads.events(topics.input, values)
    produce(bootstrap_servers, topics.input, values[:3_000])
    app = new_app(
        bootstrap_servers,
        topics,
        guarantee="exactly-once",
        group_instance_id=f"abort-{uuid.uuid4().hex[:8]}",
        max_poll_records=500,
        exit_when_idle=None,
        client_library=kafka_client,
    )
    running = Running(
        app, OutputsProcessor(COSTS, alpha=0.51, codec=payloads.codec(topics.input, topics.output))
    )
    running.wait_for(lambda a: a.summary.commits >= 1 and a.summary.events >= 3_000)
    # The next transaction fails at its commit: it is aborted and the learner rewound.
    real_commit = app._producer.commit_transaction
    failures = []

    def failing_commit(timeout: float | None = None) -> None:
        if not failures:
            from uss_stream_kafka.clients import ClientError

            failures.append(1)
            raise ClientError("injected failure", abortable=True)
        real_commit(timeout)

    app._producer.commit_transaction = failing_commit
    produce(bootstrap_servers, topics.input, values[3_000:])
    running.wait_for(lambda a: committed_offset(admin, a.group_id, topics.input) == 6_000)
    app.stop()
    summary = running.join()

    assert summary.aborts == 1 and failures == [1]
    assert app.metrics.registry.get_sample_value("uss_kafka_transaction_aborts_total") == 1
    committed = read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    everything = read_all(bootstrap_servers, topics.output, isolation_level="read_uncommitted")
    decisions = [payloads.decision(r.value) for r in committed]
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(6_000)]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
    assert len(everything) > len(committed)  # the aborted transaction's records are in the log
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].state == policy_after(outputs).state_dict()


def test_a_fenced_producer_is_replaced_twice_and_the_third_fence_is_fatal(
    kafka_client, bootstrap_servers, make_topics, admin
):
    from kafka import KafkaProducer

    from uss_stream_kafka import DeliveryError

    topics = make_topics()
    values, outputs = stream(8_000)
    produce(bootstrap_servers, topics.input, values[:2_000])
    app = new_app(
        bootstrap_servers,
        topics,
        guarantee="exactly-once",
        group_instance_id=f"fence-{uuid.uuid4().hex[:8]}",
        # Small batches, frequent commit points: the fence surfaces after some batches of the
        # transaction were sent, and the next commit point is due by the time the producer is replaced.
        max_poll_records=20,
        commit_interval=0.2,
        exit_when_idle=None,
        client_library=kafka_client,
    )
    running = Running(app, OutputsProcessor(COSTS, alpha=0.51))
    running.wait_for(lambda a: committed_offset(admin, a.group_id, topics.input) == 2_000)

    def fence() -> None:
        # Another producer takes the transactional id (as a zombie's successor would): the broker
        # fences the service's producer, whose next transaction fails.
        intruder = KafkaProducer(bootstrap_servers=bootstrap_servers, transactional_id=app.transactional_id)
        intruder.init_transactions()
        intruder.close()

    for round_ in (1, 2):
        fence()
        produce(bootstrap_servers, topics.input, values[2_000 * round_ : 2_000 * (round_ + 1)])
        # Replaced, and every event so far committed by the new producer (two fences without a
        # commit in between would be fatal).
        running.wait_for(
            lambda a, r=round_: (
                a.summary.producer_replacements == r
                and committed_offset(admin, a.group_id, topics.input) == 2_000 * (r + 1)
            )
        )
    assert app.metrics.registry.get_sample_value("uss_kafka_producer_replacements_total") == 2
    assert app.summary.aborts >= 2
    # A third fence within ten minutes: an instance fenced that often shares its transactional id.
    fence()
    produce(bootstrap_servers, topics.input, values[6_000:])
    with pytest.raises(DeliveryError, match=r"after 2 replacement.*another instance"):
        running.join()
    assert app.summary.producer_replacements == 2

    decisions = [
        json.loads(r.value)
        for r in read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    ]
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(6_000)]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs[:6_000]).tolist()
    assert (
        checkpoints_of(bootstrap_servers, topics.state)[-1].state
        == policy_after(outputs[:6_000]).state_dict()
    )


# Avro on one client: the payload format is client-independent, the guarantee is the transaction's.
@pytest.mark.parametrize(
    ("kafka_client", "value_format"), [("kafka-python", "json"), ("confluent", "json"), ("confluent", "avro")]
)
def test_four_sigkills_leave_exactly_one_decision_per_event(
    kafka_client, payloads, bootstrap_servers, make_topics, admin, record_property, chaos_random
):
    topics = make_topics()
    n = 20_000
    values, outputs = stream(n)
    values = payloads.events(topics.input, values)
    expected = USSUCB(COSTS).run(outputs).tolist()
    group = f"eos-sigkill-{uuid.uuid4().hex[:8]}"
    options = ["--guarantee", "exactly-once", "--group-instance-id", group, "--commit-interval", "0.3",
               "--max-poll-records", "300", "--session-timeout-ms", "6000",
               "--client", kafka_client, *payloads.options]  # fmt: skip
    kill_at = sorted(chaos_random.sample(range(1_500, n - 3_000), 4))
    started = time.monotonic()
    service = Service(bootstrap_servers, topics, group, *options)
    service.wait_for_log("restored")
    # The stream pauses while the service is down: a restart that outlasts the stream (a loaded
    # machine) would leave a backlog decided faster than an open transaction can be observed.
    flowing = threading.Event()
    flowing.set()
    producing = trickle(bootstrap_servers, topics.input, {0: values}, per_second=1_500, flowing=flowing)
    seen_at_kill, open_at_kill = [], []
    for threshold in kill_at:
        # Armed past the threshold and while a transaction holds records, so that the kill aborts one.
        wait_until(
            lambda threshold=threshold: (
                output_count(bootstrap_servers, topics.output) >= threshold
                and open_transaction_records(bootstrap_servers, topics.output) > 0
            ),
            f"an open transaction past {threshold} output records",
            timeout=90,
            alive=service.alive,
            every=0.01,
        )
        service.process.send_signal(signal.SIGKILL)
        flowing.clear()
        service.process.wait(timeout=10)
        assert service.process.returncode == -signal.SIGKILL
        seen_at_kill.append(output_count(bootstrap_servers, topics.output))
        open_at_kill.append(open_transaction_records(bootstrap_servers, topics.output))
        service = Service(bootstrap_servers, topics, group, *options)
        service.wait_for_log("restored")  # the next kill hits a restored service, not a starting one
        flowing.set()
    producing.join()
    wait_until(
        lambda: committed_offset(admin, group, topics.input) == n,
        "the commit of the last events",
        timeout=90,
        alive=service.alive,
    )
    service.process.send_signal(signal.SIGTERM)
    service.finish(timeout=90)
    seconds = time.monotonic() - started

    committed = [
        payloads.decision(r.value)
        for r in read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    ]
    committed_offsets = {
        r.offset for r in read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    }
    everything = read_all(bootstrap_servers, topics.output, isolation_level="read_uncommitted")
    # Exactly one committed decision per event, in order, each with the crash-free run's depth.
    assert [d["id"] for d in committed] == [f"e{i}" for i in range(n)]
    assert [d["depth"] for d in committed] == expected
    # The kills aborted transactions: their records are visible to read_uncommitted only (at least
    # those open when each kill landed; the killed process may have had more in flight), and each
    # repeats the decision committed later for its event.
    aborted = [payloads.decision(r.value) for r in everything if r.offset not in committed_offsets]
    assert len(aborted) == len(everything) - n >= sum(open_at_kill) > 0
    assert all(d["depth"] == expected[int(d["id"][1:])] for d in aborted)
    duplicates = sum(
        count - 1 for count in Counter(payloads.decision(r.value)["id"] for r in everything).values()
    )
    assert duplicates == len(aborted)
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].state == policy_after(outputs).state_dict()
    report = (
        f"exactly-once, {payloads.value_format}, {n} events, "
        f"SIGKILL at output offsets {seen_at_kill} (drawn at {kill_at}): "
        f"{len(committed)} committed decisions, 0 duplicates with read_committed, "
        f"{len(aborted)} aborted records (open at the kills: {open_at_kill}; {len(everything)} in the log), "
        f"{seconds:.1f}s"
    )
    record_property("eos_sigkill_report", report)
    print(report)
