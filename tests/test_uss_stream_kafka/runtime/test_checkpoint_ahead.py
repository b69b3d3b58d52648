"""A checkpoint ahead of the committed offset: trusted with a count (at-least-once), refused (exactly-once).

At-least-once writes a checkpoint, then commits: a crash between the two leaves the checkpoint ahead
by at most a batch, and the records between were decided before it was written. Exactly-once
commits a checkpoint in the same transaction as its offsets, so a checkpoint ahead by even one
record was forged, misplaced or written by an at-least-once run: trusting it would skip records
that were never decided. Expectations follow from those two definitions (``docs/kafka.md``,
"Checkpoints and restore"), at the boundary: equal, one behind, one ahead, a batch ahead, one more.
"""

from __future__ import annotations

import logging

import pytest

from uss_stream_kafka import CheckpointError
from uss_stream_kafka.clients import TopicPartition
from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.operations.metrics import ServiceMetrics
from uss_stream_kafka.processing.processors import OutputsProcessor
from uss_stream_kafka.runtime.checkpoint import Checkpoint, plan_restore
from uss_stream_kafka.runtime.context import RunContext
from uss_stream_kafka.runtime.progress import IdleGate
from uss_stream_kafka.runtime.recovery import Recovery

COMMITTED, BATCH, END = 4000, 50, 9000


@pytest.mark.parametrize(
    ("checkpoint", "seek", "replay_until", "skipped"),
    [
        (COMMITTED, COMMITTED, COMMITTED, 0),  # equal: continue
        (COMMITTED - 1, COMMITTED - 1, COMMITTED, 0),  # one behind: replay the one record
        (COMMITTED + 1, COMMITTED + 1, COMMITTED + 1, 1),  # one ahead: skip one, and say so
        (COMMITTED + BATCH, COMMITTED + BATCH, COMMITTED + BATCH, BATCH),  # a batch ahead: the crash window
    ],
)
def test_at_least_once_trusts_a_checkpoint_up_to_a_batch_ahead_and_counts_what_it_skips(
    checkpoint, seek, replay_until, skipped
):
    plan = plan_restore(checkpoint, COMMITTED, 0, END, max_ahead=BATCH)
    assert (plan.use_checkpoint, plan.seek, plan.replay_until, plan.committed) == (
        True,
        seek,
        replay_until,
        COMMITTED,
    )
    if skipped:
        assert f"records [{COMMITTED}, {checkpoint}) ({skipped}) are skipped" in plan.warning
    else:
        assert plan.warning is None


def test_at_least_once_does_not_trust_a_checkpoint_one_past_a_batch_ahead():
    plan = plan_restore(COMMITTED + BATCH + 1, COMMITTED, 0, END, max_ahead=BATCH)
    # As without a checkpoint: rebuilt from the log up to the commit, every record from it decided.
    expected = (False, 0, COMMITTED, COMMITTED)
    assert (plan.use_checkpoint, plan.seek, plan.replay_until, plan.committed) == expected
    assert "not trusted" in plan.warning and f"{BATCH + 1} records ahead" in plan.warning


@pytest.mark.parametrize("checkpoint", [COMMITTED, COMMITTED - 1])
def test_exactly_once_restores_a_checkpoint_at_or_behind_the_commit(checkpoint):
    plan = plan_restore(checkpoint, COMMITTED, 0, END, max_ahead=BATCH, exactly_once=True)
    assert (plan.use_checkpoint, plan.seek, plan.replay_until, plan.warning) == (
        True,
        checkpoint,
        COMMITTED,
        None,
    )


@pytest.mark.parametrize("ahead", [1, BATCH, BATCH + 1])
def test_exactly_once_refuses_a_checkpoint_ahead_of_the_commit(ahead):
    message = rf"@{COMMITTED + ahead} is {ahead} record\(s\) ahead of the committed offset {COMMITTED} "
    with pytest.raises(CheckpointError, match=message):
        plan_restore(COMMITTED + ahead, COMMITTED, 0, END, max_ahead=BATCH, exactly_once=True)


def test_exactly_once_restores_a_checkpoint_without_a_commit():
    # The group's offsets expired (or were deleted): nothing to compare the checkpoint with.
    plan = plan_restore(COMMITTED, None, 0, END, max_ahead=BATCH, exactly_once=True)
    assert (plan.use_checkpoint, plan.seek) == (True, COMMITTED)


class _Consumer:
    """One input partition with records [0, END) and the group's commit at ``COMMITTED``."""

    def __init__(self, tp) -> None:
        self.tp = tp
        self.seeks: list = []
        self.resumed: list = []

    def assignment(self) -> set:
        return {self.tp}

    def beginning_offsets(self, tps) -> dict:
        return dict.fromkeys(tps, 0)

    def end_offsets(self, tps) -> dict:
        return dict.fromkeys(tps, END)

    def committed(self, tp) -> int:
        return COMMITTED

    def seek(self, tp, offset: int) -> None:
        self.seeks.append((tp, offset))

    def pause(self, tps) -> None:
        pass

    def resume(self, tps) -> None:
        self.resumed.extend(tps)

    def paused(self) -> set:
        return set()


class _Store:
    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint

    def refresh(self) -> None:
        pass

    def get(self, topic: str, partition: int) -> Checkpoint:
        return self.checkpoint


class _Committer:
    def __init__(self, exactly_once: bool) -> None:
        self.exactly_once = exactly_once


def _restore(exactly_once: bool, offset: int):
    """Assign partition 0 to a run whose state topic holds a checkpoint @offset, and restore it."""
    processor = OutputsProcessor([0.0, 0.1])
    context = RunContext(Topics("in", "out", "dlq", "state"), "group")
    context.processor = processor
    context.metrics = ServiceMetrics(2)
    tp = TopicPartition("in", 0)
    context.consumer = _Consumer(tp)
    state = processor.new_learner().state_dict()
    checkpoint = Checkpoint("in", 0, offset, state, group_id="group", processor=processor.describe())
    recovery = Recovery(
        context,
        _Committer(exactly_once),
        _Store(checkpoint),
        None,
        None,
        IdleGate(),
        auto_offset_reset="earliest",
        n_output=1,
        n_dlq=1,
        max_ahead=BATCH,
    )
    recovery.on_assigned([tp])
    return context, recovery


def test_an_exactly_once_run_refuses_the_partition_naming_it_and_reads_nothing():
    context, recovery = _restore(True, COMMITTED + 1)
    with pytest.raises(CheckpointError, match=r"^in/0: checkpoint @4001 is 1 record\(s\) ahead"):
        recovery.restore_pending()
    # Nothing positioned or resumed: no record is read, so nothing is decided or committed.
    assert (context.consumer.seeks, context.consumer.resumed, context.partitions) == ([], [], {})


def test_an_at_least_once_run_resumes_at_the_checkpoint_and_logs_the_records_it_skips(caplog):
    context, recovery = _restore(False, COMMITTED + 1)
    with caplog.at_level(logging.WARNING, logger="uss_stream_kafka"):
        assert recovery.restore_pending() == {TopicPartition("in", 0)}
    assert context.consumer.seeks == [(TopicPartition("in", 0), COMMITTED + 1)]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"in/0: checkpoint @{COMMITTED + 1} is ahead of the committed offset {COMMITTED}: records "
        f"[{COMMITTED}, {COMMITTED + 1}) (1) are skipped, taken as decided before the checkpoint was written"
    ]
