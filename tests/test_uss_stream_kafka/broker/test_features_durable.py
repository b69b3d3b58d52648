"""Features mode remembers: exactly-once, three SIGKILLs, and the decisions of an uninterrupted run.

The stage models are rebuilt on every restart by re-learning the labels log up to the position the
last committed checkpoint records (``connectors/uss_stream_kafka/runtime/relearn.py``).
Labels and events come in
phases (see ``phases.py``): each phase's labels are committed by the service before its events are
produced, so the uninterrupted run is well defined, and :func:`phases.reference_decisions` is it.
"""

from __future__ import annotations

import json
import signal
import uuid
from typing import Any

import pytest
from conftest import (
    Running,
    checkpoints_of,
    committed_offsets,
    new_app,
    open_transaction_records,
    produce,
    read_all,
    run_app,
    trickle,
)
from phases import comparable, phases, reference_decisions
from test_cli import Service, output_count
from waiting import wait_until as wait_on

from uss_stream_kafka import Topics

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(300),
]

FACTORY = "uss_stream_kafka.cli.demo:pima_cascade"


def committed(admin: Any, group: str, topic: str) -> int:
    """The group's committed offset of ``topic``/0 (``-1``: none)."""
    from kafka import TopicPartition

    tp = TopicPartition(topic, 0)
    return committed_offsets(admin, group, [tp])[tp]


def wait_until(condition: Any, what: str, service: Service, timeout: float = 120.0) -> None:
    """:func:`waiting.wait_until`, failing at once when ``service`` exited; its log in the message."""
    wait_on(condition, lambda: f"{what} (log:\n{service.log[-3000:]}\n)", timeout=timeout,
            alive=service.alive)  # fmt: skip


def test_three_sigkills_in_exactly_once_features_mode_decide_as_an_uninterrupted_run(
    bootstrap_servers, make_topics, admin, record_property, chaos_random
):
    topics: Topics = make_topics(labels=True)
    stream = phases(4, labels=60, events=900, seed=5)
    expected = reference_decisions(stream)
    run = uuid.uuid4().hex[:8]
    group = f"features-eos-{run}"
    options = ["--mode", "features", "--cascade-factory", FACTORY, "--labels-topic", topics.labels,
               "--guarantee", "exactly-once", "--group-instance-id", f"features-eos-{run}",
               "--commit-interval", "1", "--max-poll-records", "40",
               "--session-timeout-ms", "6000"]  # fmt: skip
    rng = chaos_random
    service = Service(bootstrap_servers, topics, group, *options)
    service.wait_for_log("restored")
    kills: list[dict[str, int]] = []
    labels_end = events_end = 0
    for k, phase in enumerate(stream):
        produce(bootstrap_servers, topics.labels, phase.labels)
        labels_end += len(phase.labels)
        wait_until(
            lambda end=labels_end: committed(admin, group, topics.labels) == end, "labels committed", service
        )
        start = output_count(bootstrap_servers, topics.output)
        # Slow enough that events still flow (a transaction is open) for seconds after the kill is
        # armed: at 300/s a loaded machine's polls could miss the whole window.
        producing = trickle(bootstrap_servers, topics.input, {0: phase.events}, per_second=150)
        events_end += len(phase.events)
        if k >= 1:  # a SIGKILL in each of the last three phases, mid-transaction
            threshold = start + rng.randrange(60, 400)
            wait_until(
                lambda at=threshold: (
                    output_count(bootstrap_servers, topics.output) >= at
                    and open_transaction_records(bootstrap_servers, topics.output) > 0
                ),
                f"an open transaction after output offset {threshold}",
                service,
            )
            service.process.send_signal(signal.SIGKILL)
            service.process.wait(timeout=10)
            assert service.process.returncode == -signal.SIGKILL
            kills.append(
                {
                    "output_offset": output_count(bootstrap_servers, topics.output),
                    "open_records": open_transaction_records(bootstrap_servers, topics.output),
                }
            )
            service = Service(bootstrap_servers, topics, group, *options)
            # The next kill is armed only once this instance has restored (and re-learned).
            service.wait_for_log("restored")
            assert f"labels relearned to @{labels_end}" in service.log
            assert f"{labels_end} labels learned" in service.log
        producing.join()
        wait_until(
            lambda end=events_end: committed(admin, group, topics.input) == end, "events committed", service
        )
    service.process.send_signal(signal.SIGTERM)
    service.finish()

    committed_records = read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    everything = read_all(bootstrap_servers, topics.output, isolation_level="read_uncommitted")
    decisions = [json.loads(r.value) for r in committed_records]
    # Exactly one committed decision per event, equal to the uninterrupted run's: same depths,
    # predictions, stage outputs and probabilities, so the same stage models.
    assert [comparable(d) for d in decisions] == expected
    assert sum(not d["warm_up"] for d in decisions) > 0
    # The kills interrupted transactions: their records are in the log (read_uncommitted) but not
    # committed, and each is the decision the restored service made again for the same event.
    committed_offsets = {r.offset for r in committed_records}
    aborted = [json.loads(r.value) for r in everything if r.offset not in committed_offsets]
    assert len(aborted) == len(everything) - len(committed_records) >= sum(k["open_records"] for k in kills)
    assert sum(kill["open_records"] for kill in kills) > 0
    by_id = {d["id"]: d for d in decisions}
    assert all(d == by_id[d["id"]] for d in aborted)
    last = checkpoints_of(bootstrap_servers, topics.state)[-1]
    assert (last.offset, last.labels_offset) == (events_end, labels_end)
    report = (
        f"features mode, exactly-once, {events_end} events and {labels_end} labels in 4 phases, "
        f"SIGKILLs at {kills}: {len(decisions)} committed decisions equal to the "
        f"uninterrupted run, {len(aborted)} aborted records"
    )
    record_property("features_eos_sigkill_report", report)
    print(report)


def test_a_checkpoint_beyond_the_labels_partition_is_refused(bootstrap_servers, make_topics):
    from kafka import KafkaProducer

    from uss_stream_kafka import Checkpoint, CheckpointError, FeaturesProcessor

    topics = make_topics(labels=True)
    stream = phases(1, labels=5, events=5, seed=2)[0]
    produce(bootstrap_servers, topics.labels, stream.labels)
    group = f"beyond-{uuid.uuid4().hex[:8]}"
    processor = FeaturesProcessor(FACTORY)
    # As if the labels topic had been recreated since: the checkpoint says 50 labels were learned.
    checkpoint = Checkpoint(
        topic=topics.input, partition=0, offset=0, state=processor.new_learner().state_dict(),
        group_id=group, processor=processor.describe(), labels_offset=50,
    )  # fmt: skip
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    producer.send(topics.state, checkpoint.to_bytes(), key=checkpoint.key)
    producer.flush()
    producer.close()
    with pytest.raises(CheckpointError, match=r"up to offset 50, but the partition ends at 5"):
        run_app(new_app(bootstrap_servers, topics, group), processor)


def test_aborted_transactions_rewind_the_stage_models_to_the_last_commit(
    bootstrap_servers, make_topics, admin
):
    from kafka import TopicPartition

    from uss_stream_kafka import FeaturesProcessor
    from uss_stream_kafka.clients import ClientError

    topics = make_topics(labels=True)
    stream = phases(3, labels=40, events=200, seed=8)
    expected = reference_decisions(stream)
    group = f"features-abort-{uuid.uuid4().hex[:8]}"
    app = new_app(
        bootstrap_servers, topics, group, guarantee="exactly-once", group_instance_id=group,
        max_poll_records=30, commit_interval=0.2,
    )  # fmt: skip
    running = Running(app, FeaturesProcessor(FACTORY))
    running.wait_for(lambda a: bool(a.summary.restored))
    labels_tp, input_tp = TopicPartition(topics.labels, 0), TopicPartition(topics.input, 0)
    failures: list[int] = []

    def fail_next_commit() -> None:
        real_commit = app._producer.commit_transaction

        def failing_commit(timeout: float | None = None) -> None:
            app._producer.commit_transaction = real_commit
            failures.append(1)
            raise ClientError("injected failure", abortable=True)

        app._producer.commit_transaction = failing_commit

    labels_end = events_end = 0
    for k, phase in enumerate(stream):
        if k >= 1:  # the transaction that learns this phase's labels is aborted
            fail_next_commit()
        produce(bootstrap_servers, topics.labels, phase.labels)
        labels_end += len(phase.labels)
        running.wait_for(
            lambda a, end=labels_end: committed_offsets(admin, group, [labels_tp])[labels_tp] == end
        )
        if k == 2:  # and, in the last phase, one that decides events too
            fail_next_commit()
        produce(bootstrap_servers, topics.input, phase.events)
        events_end += len(phase.events)
        running.wait_for(
            lambda a, end=events_end: committed_offsets(admin, group, [input_tp])[input_tp] == end
        )
    app.stop()
    summary = running.join()

    assert failures == [1, 1, 1] and summary.aborts == 3
    # The aborted transactions' labels were learned twice by the process, once by the models.
    assert summary.labels > labels_end
    decisions = [
        json.loads(r.value)
        for r in read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    ]
    assert [comparable(d) for d in decisions] == expected
    last = checkpoints_of(bootstrap_servers, topics.state)[-1]
    assert (last.offset, last.labels_offset) == (events_end, labels_end)


def test_a_partition_moves_to_another_instance_with_its_stage_models(bootstrap_servers, make_topics, admin):
    from kafka import TopicPartition

    from uss_stream_kafka import FeaturesProcessor

    topics = make_topics(partitions=2, labels=True)
    streams = {p: phases(2, labels=40, events=150, seed=20 + p) for p in (0, 1)}
    group = f"features-move-{uuid.uuid4().hex[:8]}"
    labels_tps = [TopicPartition(topics.labels, p) for p in (0, 1)]
    input_tps = [TopicPartition(topics.input, p) for p in (0, 1)]

    def feed(k: int, running: Running) -> None:
        for p in (0, 1):
            produce(bootstrap_servers, topics.labels, streams[p][k].labels, partition=p)
        running.wait_for(
            lambda _: committed_offsets(admin, group, labels_tps) == dict.fromkeys(labels_tps, 40 * (k + 1))
        )
        for p in (0, 1):
            produce(bootstrap_servers, topics.input, streams[p][k].events, partition=p)
        running.wait_for(
            lambda _: committed_offsets(admin, group, input_tps) == dict.fromkeys(input_tps, 150 * (k + 1))
        )

    first = Running(new_app(bootstrap_servers, topics, group), FeaturesProcessor(FACTORY))
    feed(0, first)
    # A second instance joins: one partition moves to it, with its stage models (re-learned).
    second = Running(new_app(bootstrap_servers, topics, group), FeaturesProcessor(FACTORY))
    second.wait_for(lambda a: len(a.summary.restored) == 1)
    assert "labels relearned to @40" in second.app.summary.restored[0]
    feed(1, second)
    first.app.stop()
    second.app.stop()
    first.join()
    second.join()

    records = read_all(bootstrap_servers, topics.output)
    for p in (0, 1):
        decisions = [comparable(json.loads(r.value)) for r in records if r.partition == p]
        assert decisions == reference_decisions(streams[p])
