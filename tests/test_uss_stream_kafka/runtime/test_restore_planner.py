"""A forged or damaged checkpoint of this service's own configuration is ignored with a warning: its
partition restores as without one, from the committed offset (``runtime/restore.py``).
"""

from __future__ import annotations

import logging

import pytest

from uss_stream_kafka import Checkpoint, CheckpointError, OutputsProcessor
from uss_stream_kafka.clients import TopicPartition
from uss_stream_kafka.runtime.restore import RestorePlanner

TP = TopicPartition("events", 0)


def planner(processor: OutputsProcessor) -> RestorePlanner:
    return RestorePlanner(processor, group_id="uss", state_topic="uss-state", auto_offset_reset="earliest")


@pytest.mark.parametrize(
    "state",
    [
        {"policy": "USSUCB", "stats": {"decisions": -5}},
        {"policy": "USSUCB", "stats": "forged"},
        {},
    ],
)
def test_a_checkpoint_whose_state_the_learner_refuses_is_ignored_and_the_partition_rebuilt(state, caplog):
    processor = OutputsProcessor([0.0, 0.5], alpha=0.51)
    forged = Checkpoint("events", 0, 70, state, group_id="uss", processor=processor.describe())
    with caplog.at_level(logging.WARNING, logger="uss_stream_kafka"):
        learner, checkpoint, plan = planner(processor).plan(TP, forged, committed=40, start=0, end=100)
    assert checkpoint is None and not plan.use_checkpoint
    assert (plan.seek, plan.replay_until) == (0, 40)  # the learner is rebuilt from the log to the commit
    assert learner.state_dict() == processor.new_learner().state_dict()
    assert "ignoring the invalid checkpoint of events/0" in caplog.text


def test_a_checkpoint_of_another_configuration_or_group_is_still_an_error():
    processor = OutputsProcessor([0.0, 0.5], alpha=0.51)
    other = OutputsProcessor([0.0, 0.9], alpha=0.51).describe()
    with pytest.raises(CheckpointError, match="does not fit the configured processor"):
        planner(processor).plan(
            TP,
            Checkpoint("events", 0, 70, {}, group_id="uss", processor=other),
            committed=40,
            start=0,
            end=100,
        )
    with pytest.raises(CheckpointError, match="written by group 'them'"):
        planner(processor).plan(
            TP, Checkpoint("events", 0, 70, {}, group_id="them"), committed=40, start=0, end=100
        )
