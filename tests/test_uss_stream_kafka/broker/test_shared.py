"""Shared learning on a real broker: two workers decide on the pooled counts of both partitions."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, Running, checkpoints_of, new_app, produce, read_all, run_app, stream

from uss_stream.policies import USSUCB
from uss_stream_kafka import OutputsProcessor

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(120),
]


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_worker_decides_on_the_counts_another_worker_published(
    kafka_client, guarantee, bootstrap_servers, make_topics
):
    from kafka import TopicPartition

    topics = make_topics(partitions=2)
    first_values, first_outputs = stream(3_000, seed=0)
    second_values, second_outputs = stream(2_000, seed=1, start=10_000)
    group = f"shared-{topics.input}"
    settings = {"shared_learning": True, "commit_interval": 0.2, "checkpoint_interval": 0.2,
                "exit_when_idle": 30.0}  # fmt: skip
    # Each instance its own instance id: in exactly-once mode its transactional id derives from it.
    workers = [
        Running(
            new_app(
                bootstrap_servers,
                topics,
                group,
                guarantee=guarantee,
                group_instance_id=f"w{k}",
                **settings,
                client_library=kafka_client,
            ),
            OutputsProcessor(COSTS, alpha=0.51),
        )
        for k in range(2)
    ]

    def owners() -> dict[int, Running]:
        return {tp.partition: worker for worker in workers for tp in list(worker.app._partitions)}

    # Both at once: each worker's own wait could pass in a different generation of the group (an
    # eager rebalance revokes everything before it assigns again).
    def split(_: Any) -> bool:
        return len(owners()) == 2 and all(len(w.app._partitions) == 1 for w in workers)

    workers[0].wait_for(split, timeout=60)
    owner = owners()
    tp0, tp1 = TopicPartition(topics.input, 0), TopicPartition(topics.input, 1)

    # Partition 0's worker learns alone (partition 1 is empty); it checkpoints its own counts and
    # the other worker merges them from the state topic.
    produce(bootstrap_servers, topics.input, first_values, partition=0)
    owner[1].wait_for(lambda app: app._partitions[tp1].learner.policy.stats.decisions == 3_000)
    # Then partition 1's events are decided on partition 0's counts plus their own: exactly as one
    # learner that saw partition 0's stream first would decide them.
    produce(bootstrap_servers, topics.input, second_values, partition=1)
    owner[0].wait_for(lambda app: app._partitions[tp0].learner.policy.stats.decisions == 5_000)
    for worker in workers:
        worker.app.stop()
    summaries = [worker.join() for worker in workers]

    records = read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    assert len(records) == 5_000
    depths = {p: [json.loads(r.value)["depth"] for r in records if r.partition == p] for p in (0, 1)}
    pooled = USSUCB(COSTS).run(np.concatenate([first_outputs, second_outputs])).tolist()
    assert depths[0] == pooled[:3_000] == USSUCB(COSTS).run(first_outputs).tolist()
    assert depths[1] == pooled[3_000:]
    assert depths[1] != USSUCB(COSTS).run(second_outputs).tolist()  # what a lone learner would do
    # Checkpoints hold each partition's own counts: nothing is counted twice.
    last = {c.partition: c.state["stats"] for c in checkpoints_of(bootstrap_servers, topics.state)}
    assert last[0]["decisions"] == 3_000 and last[1]["decisions"] == 2_000
    assert last[0]["queried"][0] == 3_000 and last[1]["queried"][0] == 2_000
    assert sum(s.decisions for s in summaries) == 5_000
    assert all(s.shares > 0 for s in summaries)


def test_shared_learning_is_refused_in_features_mode(bootstrap_servers, make_topics):
    from uss_stream_kafka import FeaturesProcessor

    app = new_app(bootstrap_servers, make_topics(), shared_learning=True)
    with pytest.raises(ValueError, match="shared_learning needs outputs mode"):
        app.run(FeaturesProcessor("uss_stream_kafka.cli.demo:pima_cascade"))


def test_checkpoints_of_partitions_the_input_lacks_or_of_another_configuration_are_not_shared(
    kafka_client, bootstrap_servers, make_topics, caplog
):
    """One instance holds both partitions; checkpoints of two more partitions are in the state topic,
    as left behind when the input topic was recreated with fewer partitions."""
    from kafka import KafkaProducer

    from uss_stream_kafka import Checkpoint

    topics = make_topics(partitions=2)
    group = f"shared-remote-{topics.input}"
    remote_values, remote_outputs = stream(500, seed=7)
    remote = USSUCB(COSTS)
    remote.run(remote_outputs)
    mismatched = USSUCB(COSTS, alpha=1.0)
    mismatched.run(remote_outputs)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    for partition, policy, processor in (
        (
            7,
            remote,
            OutputsProcessor(COSTS, alpha=0.51),
        ),  # written by this group with this configuration, of a partition the topic lacks: not shared
        (8, mismatched, OutputsProcessor(COSTS, alpha=1.0)),  # another configuration: not shared, warned
    ):
        checkpoint = Checkpoint(
            topic=topics.input, partition=partition, offset=len(remote_values), state=policy.state_dict(),
            group_id=group, processor=processor.describe(), written_at=time.time(),
        )  # fmt: skip
        producer.send(topics.state, checkpoint.to_bytes(), key=checkpoint.key)
    producer.flush()
    producer.close()
    values, outputs = stream(1_000, seed=0)
    produce(bootstrap_servers, topics.input, values, partition=0)

    app = new_app(
        bootstrap_servers,
        topics,
        group,
        shared_learning=True,
        checkpoint_interval=0.2,
        client_library=kafka_client,
    )
    with caplog.at_level("WARNING", logger="uss_stream_kafka"):
        summary = run_app(app, OutputsProcessor(COSTS, alpha=0.51))

    assert summary.decisions == 1_000
    assert app.metrics.registry.get_sample_value("uss_kafka_shares_total") == summary.shares > 0
    depths = [
        json.loads(r.value)["depth"]
        for r in read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    ]
    # Partition 0 decides alone (partition 1 is empty): partition 7's 500 events are not merged in.
    assert depths == USSUCB(COSTS).run(outputs).tolist()
    assert depths != USSUCB(COSTS).run(np.concatenate([remote_outputs, outputs])).tolist()[500:]
    assert (
        f"not sharing the checkpoint of {topics.input}/7: the input topic has no partition 7" in caplog.text
    )
    assert f"not sharing the checkpoint of {topics.input}/8" in caplog.text
    last = {
        c.partition: c.state["stats"]["decisions"] for c in checkpoints_of(bootstrap_servers, topics.state)
    }
    assert last[0] == 1_000 and last[7] == 500
