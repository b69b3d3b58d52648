"""The decision service on a real broker: decisions, dead letters, checkpoints, restarts, rebalances."""

from __future__ import annotations

import json
import urllib.request
import uuid

import numpy as np
import pytest
from conftest import (
    COSTS,
    CUMULATIVE,
    Running,
    checkpoints_of,
    committed_offsets,
    decisions_of,
    new_app,
    policy_after,
    produce,
    read_all,
    run_app,
    stream,
)
from phases import Phase, comparable, phases, reference_decisions

from uss_stream.policies import USSUCB
from uss_stream_kafka import DeadLetter, FeaturesProcessor, OutputsProcessor

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(240),
]


def test_every_event_gets_one_decision_with_the_depths_of_ussucb_run(
    kafka_client, bootstrap_servers, make_topics
):
    topics = make_topics()
    values, outputs = stream(10_000)
    produce(bootstrap_servers, topics.input, values)
    app = new_app(bootstrap_servers, topics, http_port=0, http_host="127.0.0.1", client_library=kafka_client)
    running = Running(app, OutputsProcessor(COSTS, alpha=0.51))
    running.wait_for(lambda a: a.summary.events == 10_000)
    host, port = app.http_address
    health = json.loads(urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5).read())
    assert health["status"] == "running" and health["assigned_partitions"] == [0]
    metrics = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5).read().decode()
    assert "uss_kafka_events_total 10000.0" in metrics
    assert "uss_kafka_decide_latency_seconds_count 10000.0" in metrics
    app.stop()
    summary = running.join()

    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=10_000))
    assert len(read_all(bootstrap_servers, topics.output)) == 10_000
    expected = USSUCB(COSTS, alpha=0.51).run(outputs)
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(10_000)]
    assert [d["depth"] for d in decisions] == expected.tolist()
    assert [d["prediction"] for d in decisions] == [int(outputs[i, k - 1]) for i, k in enumerate(expected)]
    assert [d["cost"] for d in decisions] == [CUMULATIVE[k - 1] for k in expected]
    assert summary.depth_counts == np.bincount(expected, minlength=4)[1:].tolist()
    assert read_all(bootstrap_servers, topics.dead_letter) == []
    (last,) = checkpoints_of(bootstrap_servers, topics.state)[-1:]
    assert (last.topic, last.partition, last.offset) == (topics.input, 0, 10_000)
    assert last.state == policy_after(outputs).state_dict()


def test_malformed_records_go_to_the_dead_letter_topic_with_their_reason(
    kafka_client, bootstrap_servers, make_topics
):
    topics = make_topics()
    valid, outputs = stream(200)
    malformed = [
        (b"not json at all", "invalid_json"),
        (None, "invalid_json"),
        (b'{"outputs": [1, 0, 1]}', "missing_field"),
        (b'{"id": "x", "outputs": "1,0,1"}', "wrong_type"),
        (b'{"id": "x", "outputs": [1, 0]}', "wrong_output_count"),
        (b'{"id": "x", "outputs": [1, null, 0]}', "missing_output"),
        (b'{"id": "x", "outputs": [NaN, 0, 1]}', "missing_output"),
        (json.dumps({"id": "x", "outputs": [1, 0, 1], "pad": "z" * 600}).encode(), "oversize"),
    ]
    values: list[bytes | None] = []
    bad_offsets = {}
    for i, value in enumerate(valid):
        values.append(value)
        if i % 25 == 10 and len(bad_offsets) < len(malformed):
            bad_offsets[len(values)] = malformed[len(bad_offsets)]
            values.append(malformed[len(bad_offsets) - 1][0])
    produce(bootstrap_servers, topics.input, values)
    summary = run_app(
        new_app(bootstrap_servers, topics, max_input_bytes=512, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )

    letters = [
        DeadLetter.from_record(r.value) for r in read_all(bootstrap_servers, topics.dead_letter, expected=8)
    ]
    assert [(letter.offset, letter.reason) for letter in letters] == [
        (offset, reason) for offset, (_, reason) in bad_offsets.items()
    ]
    for letter, (offset, (value, _)) in zip(letters, bad_offsets.items()):
        assert (letter.topic, letter.partition, letter.offset) == (topics.input, 0, offset)
        assert letter.error
        assert letter.value == (None if value is None else value[:512])
        assert letter.key == (b"null" if value is None else None)
    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=200))
    # The rejected records never reached the learner: the valid ones are decided as if alone.
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
    assert summary.dead_letters["missing_output"] == 2 and sum(summary.dead_letters.values()) == 8
    assert summary.events == len(values)


def test_a_stop_and_restart_continues_exactly_where_it_stopped(kafka_client, bootstrap_servers, make_topics):
    topics = make_topics()
    values, outputs = stream(10_000)
    # Only the first 6 000 events exist while the first run decides: a stop asked at 5 000 lands
    # inside them however late the loaded machine lets it take effect (with all 10 000 produced, a
    # slow stop once let the run decide every event and the restart had nothing to continue).
    produce(bootstrap_servers, topics.input, values[:6_000])
    group = f"restart-{uuid.uuid4().hex[:8]}"
    first = Running(
        new_app(bootstrap_servers, topics, group, max_poll_records=700, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    first.wait_for(lambda a: a.summary.events >= 5_000)
    first.app.stop()
    stopped_at = first.join().events
    assert 5_000 <= stopped_at <= 6_000
    produce(bootstrap_servers, topics.input, values[6_000:])

    second = run_app(
        new_app(bootstrap_servers, topics, group, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    assert second.restored == [
        f"{topics.input}/0: checkpoint @{stopped_at}, committed @{stopped_at}, start @{stopped_at}"
    ]
    assert second.events == 10_000 - stopped_at
    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=10_000))
    assert len(read_all(bootstrap_servers, topics.output)) == 10_000  # a clean stop duplicates nothing
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].state == policy_after(outputs).state_dict()


def test_a_checkpoint_ahead_of_the_committed_offset_is_where_the_learner_resumes(
    kafka_client, bootstrap_servers, make_topics, admin
):
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    topics = make_topics()
    values, outputs = stream(6_000)
    produce(bootstrap_servers, topics.input, values[:4_000])
    group = f"ahead-{uuid.uuid4().hex[:8]}"
    run_app(
        new_app(bootstrap_servers, topics, group, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    # As after a crash between writing the checkpoint (offset 4000) and committing: the group's
    # committed offset lags behind.
    admin.alter_group_offsets(group, {TopicPartition(topics.input, 0): OffsetAndMetadata(1_000, "", -1)})
    produce(bootstrap_servers, topics.input, values[4_000:])

    summary = run_app(
        new_app(bootstrap_servers, topics, group, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    assert summary.restored == [f"{topics.input}/0: checkpoint @4000, committed @1000, start @4000"]
    assert (summary.events, summary.replayed) == (2_000, 0)
    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=6_000))
    assert len(read_all(bootstrap_servers, topics.output)) == 6_000
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()


def test_a_checkpoint_behind_the_committed_offset_is_replayed_without_producing(
    kafka_client, bootstrap_servers, make_topics
):
    from kafka import KafkaProducer

    topics = make_topics()
    values, outputs = stream(10_000)
    group = f"behind-{uuid.uuid4().hex[:8]}"
    produce(bootstrap_servers, topics.input, values[:3_000])
    run_app(
        new_app(bootstrap_servers, topics, group, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    (old,) = checkpoints_of(bootstrap_servers, topics.state)
    assert old.offset == 3_000
    produce(bootstrap_servers, topics.input, values[3_000:6_000])
    run_app(
        new_app(bootstrap_servers, topics, group, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    # As when checkpoints are rarer than commits: the last checkpoint (3000) lags the commit (6000).
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    producer.send(topics.state, old.to_bytes(), key=old.key)
    producer.flush()
    producer.close()
    produce(bootstrap_servers, topics.input, values[6_000:])

    summary = run_app(
        new_app(bootstrap_servers, topics, group, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    assert summary.restored == [
        f"{topics.input}/0: checkpoint @3000, committed @6000, start @3000, replay to @6000"
    ]
    assert (summary.replayed, summary.decisions) == (3_000, 4_000)
    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=10_000))
    assert len(read_all(bootstrap_servers, topics.output)) == 10_000  # the replay produced nothing
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].state == policy_after(outputs).state_dict()


def test_a_state_topic_shared_by_two_groups_is_refused(kafka_client, bootstrap_servers, make_topics):
    from uss_stream_kafka import CheckpointError

    topics = make_topics()
    values, _ = stream(100)
    produce(bootstrap_servers, topics.input, values)
    run_app(
        new_app(bootstrap_servers, topics, f"owner-{uuid.uuid4().hex[:8]}", client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    with pytest.raises(CheckpointError, match="needs its own state topic"):
        run_app(
            new_app(
                bootstrap_servers, topics, f"intruder-{uuid.uuid4().hex[:8]}", client_library=kafka_client
            ),
            OutputsProcessor(COSTS, alpha=0.51),
        )


def test_partitions_move_between_instances_with_their_learners(
    kafka_client, bootstrap_servers, make_topics, admin
):
    from kafka import TopicPartition

    topics = make_topics(partitions=2)
    per_partition = {p: stream(3_000, seed=p, start=10_000 * p) for p in (0, 1)}
    for p, (values, _) in per_partition.items():
        produce(bootstrap_servers, topics.input, values[:1_500], partition=p)
    group = f"moving-{uuid.uuid4().hex[:8]}"
    first = Running(
        new_app(bootstrap_servers, topics, group, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    first.wait_for(lambda a: a.summary.events == 3_000)
    # A second instance joins: one partition moves to it, its learner travels through the checkpoint.
    second = Running(
        new_app(bootstrap_servers, topics, group, client_library=kafka_client),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    second.wait_for(lambda a: len(a.summary.restored) == 1, timeout=30)
    for p, (values, _) in per_partition.items():
        produce(bootstrap_servers, topics.input, values[1_500:], partition=p)
    partitions = [TopicPartition(topics.input, p) for p in (0, 1)]
    second.wait_for(lambda _: committed_offsets(admin, group, partitions) == dict.fromkeys(partitions, 3_000))
    first.app.stop()
    second.app.stop()
    summaries = [first.join(), second.join()]

    moved = second.summary.restored[0]
    assert "checkpoint @1500" in moved and "start @1500" in moved
    assert sum(s.decisions for s in summaries) == 6_000
    records = read_all(bootstrap_servers, topics.output, expected=6_000)
    assert len(read_all(bootstrap_servers, topics.output)) == 6_000
    for p, (_, outputs) in per_partition.items():
        depths = [json.loads(r.value)["depth"] for r in records if r.partition == p]
        assert depths == USSUCB(COSTS).run(outputs).tolist()


def test_features_mode_learns_each_phase_of_labels_before_deciding_its_events(
    kafka_client, bootstrap_servers, make_topics
):
    topics = make_topics(labels=True)
    stream_phases = phases(4, labels=40, events=120, seed=3)
    expected = reference_decisions(stream_phases)
    processor = FeaturesProcessor("uss_stream_kafka.cli.demo:pima_cascade")
    group = f"features-{uuid.uuid4().hex[:8]}"

    def feed(running: Running, phase: Phase, labels_before: int, events_before: int) -> None:
        produce(bootstrap_servers, topics.labels, phase.labels)
        running.wait_for(lambda a: a.summary.labels == labels_before + len(phase.labels))
        # The labels were consumed before any of the events they precede was produced.
        assert running.app.summary.events == events_before
        produce(bootstrap_servers, topics.input, phase.events)
        running.wait_for(lambda a: a.summary.events == events_before + len(phase.events))

    first = Running(
        new_app(bootstrap_servers, topics, group, exit_when_idle=None, client_library=kafka_client), processor
    )
    for k, phase in enumerate(stream_phases[:3]):
        feed(first, phase, 40 * k, 120 * k)
    first.app.stop()
    summary = first.join()
    assert (summary.events, summary.labels, summary.decisions) == (360, 120, 360)
    (checkpoint,) = checkpoints_of(bootstrap_servers, topics.state)[-1:]
    assert (checkpoint.offset, checkpoint.labels_offset) == (360, 120)
    assert checkpoint.processor["mode"] == "features"

    # A restart re-learns the 120 labels: the stages are those of an uninterrupted run.
    second = Running(
        new_app(bootstrap_servers, topics, group, exit_when_idle=None, client_library=kafka_client), processor
    )
    second.wait_for(lambda a: bool(a.summary.restored))
    assert second.app.summary.restored == [
        f"{topics.input}/0: checkpoint @360, committed @360, start @360, labels relearned to @120"
    ]
    feed(second, stream_phases[3], 0, 0)
    second.app.stop()
    second.join()

    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=480))
    assert len(read_all(bootstrap_servers, topics.output)) == 480
    assert read_all(bootstrap_servers, topics.dead_letter) == []
    stepped = sum(not d["warm_up"] for d in decisions)
    assert stepped > 0 and len({d["depth"] for d in decisions if not d["warm_up"]}) > 1
    assert [comparable(d) for d in decisions] == expected
    for decision in decisions:
        assert decision["cost"] == pytest.approx(sum(processor.stage_costs[: decision["depth"]]))
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].state["stats"]["decisions"] == stepped
