"""What a newly assigned partition restores: its learner, its checkpoint and where it starts.

:class:`RestorePlanner` is the planning half of a restore
(:class:`~uss_stream_kafka.runtime.recovery.Recovery` does the positioning: re-learning, seeking,
resuming). It checks that the checkpoint read from the
state topic belongs to this service's group and processor configuration, loads it into a new
learner (an invalid one is ignored with a warning) and asks
:func:`~uss_stream_kafka.runtime.checkpoint.plan_restore` where the partition starts.
:func:`keep_membership` keeps the consumer in its group while a long restore runs.
"""

from __future__ import annotations

import logging
from typing import Any

from uss_stream_kafka.clients import ClientError
from uss_stream_kafka.exceptions import CheckpointError
from uss_stream_kafka.runtime.checkpoint import Checkpoint, RestorePlan, plan_restore

__all__ = ["RestorePlanner", "keep_membership", "restored_line"]

log = logging.getLogger("uss_stream_kafka")


class RestorePlanner:
    """Plans the restore of one input partition from its checkpoint (see the module's docstring).

    Parameters
    ----------
    processor
        The run's processor: it makes the learners and judges a checkpoint's configuration.
    group_id
        The service's consumer group; a checkpoint written by another group is refused.
    state_topic
        The state topic's name (for the error naming it).
    auto_offset_reset
        Where a partition with no commit and no checkpoint starts.
    max_ahead
        A checkpoint further ahead of the committed offset is not trusted (a batch: ``max_poll_records``).
    exactly_once
        The run is transactional: a checkpoint ahead of the committed offset is refused.

    Examples
    --------
    >>> from uss_stream_kafka.clients import TopicPartition
    >>> from uss_stream_kafka.processing.processors import OutputsProcessor
    >>> processor = OutputsProcessor([0, 0.5], alpha=0.51)
    >>> planner = RestorePlanner(processor, group_id="uss", state_topic="uss-state",
    ...                          auto_offset_reset="earliest")
    >>> tp = TopicPartition("events", 0)

    Without a checkpoint the learner starts empty at the log's start and replays to the commit:

    >>> learner, checkpoint, plan = planner.plan(tp, None, committed=40, start=0, end=100)
    >>> checkpoint, plan.use_checkpoint, plan.seek, plan.replay_until
    (None, False, 0, 40)

    With one, the learner is its state and starts at its offset:

    >>> trained = processor.new_learner()
    >>> _ = trained.process(b'{"id": "e1", "outputs": [1, 0]}')
    >>> saved = Checkpoint(topic="events", partition=0, offset=41, state=trained.state_dict(),
    ...                    group_id="uss", processor=processor.describe(), written_at=1.0)
    >>> learner, checkpoint, plan = planner.plan(tp, saved, committed=40, start=0, end=100)
    >>> plan.use_checkpoint, plan.seek, learner.state_dict() == trained.state_dict()
    (True, 41, True)
    """

    def __init__(
        self,
        processor: Any,
        *,
        group_id: str,
        state_topic: str,
        auto_offset_reset: str,
        max_ahead: int | None = None,
        exactly_once: bool = False,
    ) -> None:
        self.processor = processor
        self.group_id = group_id
        self.state_topic = state_topic
        self.auto_offset_reset = auto_offset_reset
        self.max_ahead = max_ahead
        self.exactly_once = exactly_once

    def plan(
        self, tp: Any, checkpoint: Checkpoint | None, *, committed: int | None, start: int, end: int
    ) -> tuple[Any, Checkpoint | None, RestorePlan]:
        """The learner ``tp`` restores to, its checkpoint (``None`` if refused) and its plan.

        ``committed`` is the group's committed offset of ``tp`` (``None``: none), ``start`` and
        ``end`` its log's first and end offsets. The learner is new unless ``plan.use_checkpoint``.

        Raises
        ------
        CheckpointError
            The checkpoint was written by another group or with another processor configuration,
            covers offsets the partition does not have, or (exactly-once) is ahead of the commit.
        """
        if checkpoint is not None and checkpoint.group_id and checkpoint.group_id != self.group_id:
            raise CheckpointError(
                f"state topic {self.state_topic!r} holds a checkpoint of {tp.topic}/{tp.partition} "
                f"written by group {checkpoint.group_id!r}, not {self.group_id!r}: every service "
                "(consumer group) needs its own state topic"
            )
        learner = self.processor.new_learner()
        checkpoint = self._load(learner, checkpoint)
        try:
            plan = plan_restore(
                None if checkpoint is None else checkpoint.offset,
                committed,
                start,
                end,
                self.auto_offset_reset,
                self.max_ahead,
                self.exactly_once,
            )
        except CheckpointError as error:
            raise CheckpointError(f"{tp.topic}/{tp.partition}: {error}") from None
        if not plan.use_checkpoint:
            learner = self.processor.new_learner()
        if plan.warning:
            log.warning("%s/%d: %s", tp.topic, tp.partition, plan.warning)
        return learner, checkpoint, plan

    def _load(self, learner: Any, checkpoint: Checkpoint | None) -> Checkpoint | None:
        """Load ``checkpoint`` into ``learner``; ``None`` (with a warning) if its state is refused.

        Raises :class:`CheckpointError` if it was written with another processor configuration.
        """
        if checkpoint is None:
            return None
        processor = self.processor
        try:
            processor.check_checkpoint(checkpoint.processor)
        except ValueError as error:
            raise CheckpointError(
                f"the checkpoint of {checkpoint.key.decode()} does not fit the configured processor "
                f"({processor.describe()}): {error}; use a new state topic or delete the key"
            ) from error
        try:
            learner.load_state_dict(checkpoint.state)
        except ValueError as error:  # the same configuration wrote it: its state is damaged or forged
            log.warning(
                "ignoring the invalid checkpoint of %s (its partition restores as without a checkpoint): %s",
                checkpoint.key.decode(),
                error,
            )
            return None
        return checkpoint


def keep_membership(consumer: Any) -> None:
    """Poll the group's ``consumer`` with every partition paused, so that a long re-learn does not
    exceed ``max.poll.interval.ms`` (the group would expel the member and drop its learners).

    Records fetched before the pause are not handed to anyone: their partitions are sought back
    to them. A rebalance during this poll runs its callbacks as at any poll; a restore it
    interrupts starts again from the new assignment.
    """
    running = consumer.assignment() - consumer.paused()
    if running:
        consumer.pause(running)
    try:
        fetched = consumer.poll(0)
    except ClientError as error:
        if not error.retriable:
            raise
        fetched = {}
    finally:
        if running:
            consumer.resume(running & consumer.assignment())
    for tp, records in fetched.items():
        consumer.seek(tp, records.first_offset)


def restored_line(tp: Any, checkpoint: Checkpoint | None, plan: RestorePlan, labels_from: int) -> str:
    """The log line of a restored partition ``tp``: where its state and its reading start.

    >>> from uss_stream_kafka.clients import TopicPartition
    >>> from uss_stream_kafka.runtime.checkpoint import plan_restore
    >>> restored_line(TopicPartition("events", 2), None, plan_restore(None, 40, 0, 100), -1)
    'events/2: no checkpoint, committed @40, start @0, replay to @40'
    """
    return (
        f"{tp.topic}/{tp.partition}: "
        + (
            f"checkpoint @{checkpoint.offset}"
            if plan.use_checkpoint and checkpoint is not None
            else "no checkpoint"
        )
        + f", committed @{plan.committed}, start @{plan.seek if plan.seek is not None else 'reset'}"
        + (f", replay to @{plan.replay_until}" if plan.replay_until > (plan.seek or 0) else "")
        + (f", labels relearned to @{labels_from}" if labels_from >= 0 else "")
    )
