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
from collections.abc import Mapping
from typing import Any

from uss_stream_kafka.clients import ClientError, TopicPartition
from uss_stream_kafka.exceptions import CheckpointError
from uss_stream_kafka.runtime.checkpoint import (
    Checkpoint,
    KeyCheckpoint,
    RestorePlan,
    key_record_key,
    plan_restore,
)

__all__ = ["RestorePlanner", "keep_membership", "load_keys", "restore_models", "restored_line"]

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
        self,
        tp: Any,
        checkpoint: Checkpoint | None,
        *,
        committed: int | None,
        start: int,
        end: int,
        keys: Mapping[str, bytes] | None = None,
    ) -> tuple[Any, Checkpoint | None, RestorePlan]:
        """The learner ``tp`` restores to, its checkpoint (``None`` if refused) and its plan.

        ``committed`` is the group's committed offset of ``tp`` (``None``: none), ``start`` and
        ``end`` its log's first and end offsets. The learner is new unless ``plan.use_checkpoint``.
        ``keys``: a keyed learner's keys' checkpoints (record values by key, ``--key-from``), loaded
        with the partition's checkpoint (:func:`load_keys`).

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
        if keys is not None:
            load_keys(learner, tp, keys, checkpoint if plan.use_checkpoint else None, self.group_id)
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


def load_keys(
    learner: Any, tp: Any, records: Mapping[str, bytes], checkpoint: Checkpoint | None, group_id: str
) -> int:
    """Load the keys' checkpoints ``records`` of ``tp`` into a keyed ``learner``; returns how many.

    Without the partition's ``checkpoint`` (none, refused, or not trusted: the learner is rebuilt
    from the log) no key is loaded, and every key's record is deleted at the next checkpoint
    unless the key is live again by then. So is a key's record that is invalid, or written by
    another group (one warning says how many, and names the first). A key's checkpoint ahead of the
    partition's (at-least-once: a crash while a checkpoint was being written) is loaded with its
    offset: its key's events below it are not counted again.

    Examples
    --------
    >>> from uss_stream_kafka.clients import TopicPartition
    >>> from uss_stream_kafka.runtime.checkpoint import KeyCheckpoint
    >>> class Learner:  # what load_keys asks of a keyed learner
    ...     def __init__(self): self.keys, self.stale = {}, set()
    ...     def load_keys(self, saved): self.keys.update(saved); return {}
    ...     def forget(self, keys): self.stale.update(keys)
    >>> tp = TopicPartition("events", 0)
    >>> saved = KeyCheckpoint("events", 0, "a", 40, {"n": 1}, "uss").to_bytes()
    >>> ahead = KeyCheckpoint("events", 0, "c", 60, {"n": 2}, "uss").to_bytes()
    >>> checkpoint = Checkpoint("events", 0, 50, {}, "uss")
    >>> learner = Learner()
    >>> load_keys(learner, tp, {"a": saved, "b": b"not json", "c": ahead}, checkpoint, "uss")
    2
    >>> learner.keys, learner.stale
    ({'a': ({'n': 1}, None), 'c': ({'n': 2}, 60)}, {'b'})
    >>> load_keys(learner := Learner(), tp, {"a": saved}, None, "uss"), learner.stale   # rebuilt from the log
    (0, {'a'})
    """
    if checkpoint is None:
        learner.forget(records)
        return 0
    refused: dict[str, str] = {}
    saved: dict[str, tuple[dict[str, Any], int | None]] = {}
    where = (tp.topic, tp.partition)
    for key, value in records.items():
        try:
            record = KeyCheckpoint.from_record(key_record_key(*where, key), value, expected=where)
            if record.group_id and record.group_id != group_id:
                raise ValueError(f"written by group {record.group_id!r}, not {group_id!r}")
        except ValueError as error:
            refused[key] = str(error)
            continue
        # Ahead of the partition's checkpoint: the key's events below its offset are counted.
        saved[key] = (record.state, record.offset if record.offset > checkpoint.offset else None)
    learner.forget(refused)
    refused.update(learner.load_keys(saved))
    if refused:
        key, why = next(iter(refused.items()))
        log.warning(
            "%s/%d: ignoring %d invalid key checkpoint(s) (those keys start again from the pool; their "
            "records are deleted at the next checkpoint); the first, key %r: %s",
            tp.topic,
            tp.partition,
            len(refused),
            key,
            why,
        )
    return len(records) - len(refused)


def restore_models(
    context: Any, labels_log: Any, learner: Any, tp: Any, checkpoint: Checkpoint | None
) -> int:
    """Features mode: re-learn the labels the restored ``learner``'s stages had learned.

    Up to the ``checkpoint``'s ``labels_offset``, or without one to the group's committed offset of
    the labels partition, which the run's consumer (``context.consumer``) is then positioned at.
    ``labels_log``: the log the stage models re-learn from (``None``: the learner's state holds what
    it learned, as orchestration's does; only the position is restored). Returns that offset
    (``-1``: nothing to re-learn, the consumer keeps its own position).
    """
    labels_tp = TopicPartition(context.topics.labels, tp.partition)
    if checkpoint is not None and checkpoint.labels_offset is not None:
        until = checkpoint.labels_offset
    else:
        committed = context.consumer.committed(labels_tp)
        until = -1 if committed is None else committed
        if checkpoint is not None and until > 0:
            log.warning(
                "%s/%d: the checkpoint does not say how far its stage models learned; "
                "re-learning the labels up to the committed offset %d",
                tp.topic,
                tp.partition,
                until,
            )
    if until < 0:
        return -1
    if labels_log is not None:
        labels_log.relearn(learner, labels_tp, until, keepalive=lambda: keep_membership(context.consumer))
    if labels_tp in context.labels:
        context.consumer.seek(labels_tp, until)
        context.labels[labels_tp].next_offset = until
    return until


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
