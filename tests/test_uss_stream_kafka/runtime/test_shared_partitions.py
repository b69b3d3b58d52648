"""Shared learning shares only checkpoints of this run's input partitions (``runtime/shared.py``).

A state topic may hold checkpoints of partitions the input no longer has (the topic was recreated
with fewer), of another input topic, or of another group: none of their counts reach the learners;
the checkpoints of the input's other partitions do. The state topic is a stand-in store.
"""

from __future__ import annotations

import logging

from uss_stream.core.stats import DisagreementStats
from uss_stream_kafka import Checkpoint, OutputsProcessor
from uss_stream_kafka.clients import TopicPartition
from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.operations.metrics import ServiceMetrics
from uss_stream_kafka.runtime.context import PartitionState, RunContext
from uss_stream_kafka.runtime.shared import SharedLearning

COSTS = [0.0, 0.15, 0.2]


class Store:
    def __init__(self, checkpoints: list[Checkpoint]) -> None:
        self._checkpoints = checkpoints

    def refresh(self) -> None:
        pass

    def checkpoints(self) -> list[Checkpoint]:
        return self._checkpoints


def checkpoint(processor, partition: int, decisions: int, topic: str = "in", group: str = "g") -> Checkpoint:
    stats = DisagreementStats(3)
    stats.decisions = decisions
    state = {"policy": "USSUCB", "stats": stats.to_dict()}
    return Checkpoint(topic, partition, 10, state, group_id=group, processor=processor.describe())


def test_only_the_input_s_other_partitions_of_this_group_are_shared(caplog):
    processor = OutputsProcessor(COSTS, alpha=0.51)
    context = RunContext(Topics("in", "out", "dlq", "state"), group_id="g")
    context.processor, context.metrics = processor, ServiceMetrics(n_stages=3)
    tp = TopicPartition("in", 0)
    learner = processor.new_learner()
    context.partitions[tp] = PartitionState(tp, learner, 0, 0, 0, -1, -1, -1)
    store = Store(
        [
            checkpoint(processor, 1, 4),
            checkpoint(processor, 2, 6),
            checkpoint(processor, 3, 100),  # the input has 3 partitions: 0, 1, 2
            checkpoint(processor, 1, 1_000, topic="old-in"),
            checkpoint(processor, 2, 10_000, group="other"),
            checkpoint(processor, 0, 100_000),  # this instance's own partition: its live counts count
        ]
    )
    with caplog.at_level(logging.WARNING, logger="uss_stream_kafka"):
        SharedLearning(context, store, n_input=3).share()
    assert learner.policy.stats.decisions == 4 + 6
    assert context.summary.shares == 1
    assert "not sharing the checkpoint of in/3: the input topic has no partition 3" in caplog.text
    assert "not sharing the checkpoint of in/2: written by group 'other'" in caplog.text
    assert "old-in" not in caplog.text
