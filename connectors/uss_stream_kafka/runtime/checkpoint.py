"""Learner checkpoints on a compacted topic, and how a restored learner rejoins the stream.

**What a checkpoint is.** For input partition ``p``, a checkpoint is the pair *(learner state,
offset)* where the state is exactly the learner after processing every record of ``p`` below
``offset`` and none at or above it. The service writes checkpoints only at batch boundaries, so
the pair is always self-consistent, whichever instance wrote it and whenever.

**Invariant.** A checkpoint (and an offset commit) covering offset ``o`` is written only after the
decisions and dead letters of every record below ``o`` were flushed (acknowledged by the broker).

**Restore** (:func:`plan_restore`): the learner is loaded from the last checkpoint ``o`` and the
consumer is positioned at ``o``, whatever the committed offset ``c`` says:

* ``c <= o`` (the checkpoint is ahead, e.g. a crash between checkpoint and commit): records in
  ``[c, o)`` are skipped (a warning counts them); their decisions were flushed before the
  checkpoint was written. Ahead by more than a batch, the checkpoint is not trusted (only a forged
  or misplaced one gets there): the learner is rebuilt from the log as without a checkpoint, and
  ``[c, o)`` decided again. Exactly-once commits a checkpoint with its offsets, so there a
  checkpoint ahead by any count is refused (:class:`CheckpointError`).
* ``c > o`` (the checkpoint lags, e.g. checkpoints less frequent than commits): records in
  ``[o, c)`` are *replayed*: the learner processes them again, with its decisions suppressed,
  because they were flushed before ``c`` was committed. The learner counts each record once.
* records from ``max(o, c)`` on are decided normally; those the previous run had already decided
  but not committed yield duplicate decisions (at-least-once), with the same depths.

An invalid checkpoint (not JSON, a key given twice, fields of the wrong type, counts the learner
refuses or with no room left to count on) is ignored with a warning: its partition restores as
without a checkpoint. Without a checkpoint the learner starts empty at the partition's first offset
and replays up to the committed offset (rebuilding the state from the log); without either, it
starts at the position ``auto_offset_reset`` gives.

**Features mode** adds the position ``labels_offset`` in the co-partitioned labels partition up to
which the learner's stage models have learned: the state is then the learner after the input records
below ``offset`` *and* the labels below ``labels_offset`` (see :mod:`uss_stream_kafka.runtime.relearn`).

The checkpoint record: key ``"<input topic>/<partition>"`` (UTF-8), value a JSON :class:`Checkpoint`;
a null value (tombstone) deletes the checkpoint.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from uss_stream_kafka.clients.base import ClientError
from uss_stream_kafka.exceptions import CheckpointError, NewerFormatError

__all__ = [
    "CHECKPOINT_FORMAT",
    "Checkpoint",
    "CheckpointStore",
    "RestorePlan",
    "plan_restore",
    "unreachable",
]

CHECKPOINT_FORMAT = "uss-stream/kafka-checkpoint/v1"

#: The largest number a restored learner state may hold: ``2**52``, half of the largest exact count
#: (:data:`uss_stream.core.schema.MAX_COUNT`), so that a restored learner has as much left to count on.
MAX_LOADED_COUNT = 2**52

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checkpoint:
    """The learner state of one input partition and the offset it covers.

    Examples
    --------
    >>> checkpoint = Checkpoint(topic="events", partition=3, offset=5000, state={"policy": "USSUCB"},
    ...                         group_id="uss", processor={"mode": "outputs"}, written_at=1.0)
    >>> checkpoint.key
    b'events/3'
    >>> Checkpoint.from_record(checkpoint.key, checkpoint.to_bytes()) == checkpoint
    True

    Features mode records how far the stage models learned from the labels partition:

    >>> learned = Checkpoint(topic="events", partition=3, offset=5000, state={}, labels_offset=1200)
    >>> Checkpoint.from_record(learned.key, learned.to_bytes()).labels_offset
    1200

    """

    topic: str
    partition: int
    offset: int
    state: dict[str, Any]
    group_id: str = ""
    processor: dict[str, Any] = field(default_factory=dict)
    written_at: float = 0.0
    labels_offset: int | None = None

    @property
    def key(self) -> bytes:
        """The record key: ``"<topic>/<partition>"``."""
        return checkpoint_key(self.topic, self.partition)

    def to_bytes(self) -> bytes:
        """The record value (JSON)."""
        document = {
            "format": CHECKPOINT_FORMAT,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "group_id": self.group_id,
            "processor": self.processor,
            "written_at": self.written_at,
            "state": self.state,
        }
        if self.labels_offset is not None:
            document["labels_offset"] = self.labels_offset
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes) -> Checkpoint:
        """Parse and check a checkpoint record; raises ``ValueError`` naming the problem."""
        try:
            document = json.loads(value, object_pairs_hook=_unique_keys)
        except ValueError as error:
            raise ValueError(f"checkpoint is not JSON: {error}") from None
        except RecursionError:
            raise ValueError("checkpoint is JSON nested too deeply to decode") from None
        if not isinstance(document, dict) or document.get("format") != CHECKPOINT_FORMAT:
            found = document.get("format") if isinstance(document, dict) else None
            if is_newer_format(found, CHECKPOINT_FORMAT):
                raise NewerFormatError(
                    f"checkpoint has format {found!r}, written by a newer uss-stream than this one "
                    f"({CHECKPOINT_FORMAT!r}): upgrade, or use a new state topic"
                )
            raise ValueError(f"checkpoint does not have format {CHECKPOINT_FORMAT!r}")
        topic, partition, offset = document.get("topic"), document.get("partition"), document.get("offset")
        if not isinstance(topic, str) or not _is_count(partition) or not _is_count(offset):
            raise ValueError(
                "checkpoint needs a string 'topic' and non-negative integers 'partition', 'offset'"
            )
        if key is not None and key != checkpoint_key(topic, partition):
            raise ValueError(f"checkpoint for {topic}/{partition} stored under key {key!r}")
        state = document.get("state")
        if not isinstance(state, dict):
            raise ValueError("checkpoint 'state' must be a JSON object")
        largest = _largest_number(state)
        if largest > MAX_LOADED_COUNT:
            raise ValueError(
                f"checkpoint 'state' holds the number {largest!r}, above 2**52: no room left to count on "
                "(counts stay exact up to 2**53)"
            )
        processor = document.get("processor") or {}
        written_at = document.get("written_at", 0.0)
        if not isinstance(processor, dict):
            raise ValueError("checkpoint 'processor' must be a JSON object")
        if isinstance(written_at, bool) or not isinstance(written_at, (int, float)):
            raise ValueError("checkpoint 'written_at' must be a number")
        labels_offset = document.get("labels_offset")
        if labels_offset is not None and not _is_count(labels_offset):
            raise ValueError(f"checkpoint 'labels_offset' must be an integer >= 0, got {labels_offset!r}")
        return cls(
            topic=topic,
            partition=partition,
            offset=offset,
            state=state,
            group_id=str(document.get("group_id", "")),
            processor=dict(processor),
            written_at=float(written_at),
            labels_offset=labels_offset,
        )


def is_newer_format(found: Any, expected: str) -> bool:
    """Whether format string ``found`` is ``expected`` with a higher version number.

    >>> is_newer_format("uss-stream/kafka-checkpoint/v2", "uss-stream/kafka-checkpoint/v1")
    True
    >>> is_newer_format("uss-stream/kafka-checkpoint/v1", "uss-stream/kafka-checkpoint/v1")
    False
    >>> is_newer_format("something/else/v9", "uss-stream/kafka-checkpoint/v1")
    False

    """
    if not isinstance(found, str):
        return False
    stem, _, version = expected.rpartition("/v")
    found_stem, _, found_version = found.rpartition("/v")
    return found_stem == stem and found_version.isdigit() and int(found_version) > int(version)


def checkpoint_key(topic: str, partition: int) -> bytes:
    """``b"<topic>/<partition>"`` (topic names cannot contain ``/``)."""
    return f"{topic}/{partition}".encode()


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's ``object_pairs_hook`` refusing a key given twice (which one would count?).

    >>> json.loads('{"offset": 1, "offset": 9}', object_pairs_hook=_unique_keys)
    Traceback (most recent call last):
    ...
    ValueError: key 'offset' given twice
    """
    document = dict(pairs)
    if len(document) < len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"key {twice!r} given twice")
    return document


def _largest_number(document: Any) -> float:
    """The largest number anywhere in a JSON ``document`` (``0`` if none); NaN counts as infinite.

    >>> _largest_number({"stats": {"decisions": 7, "queried": [7, 3.5]}, "name": "x", "on": True})
    7
    """
    largest: float = 0
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            largest = max(largest, item if item == item else float("inf"))
    return largest


@dataclass(frozen=True)
class RestorePlan:
    """Where a restored learner starts.

    Attributes
    ----------
    use_checkpoint
        Load the checkpoint's state (otherwise the learner starts empty).
    seek
        Offset to position the consumer at; ``None`` keeps the consumer's own position (committed
        offset or ``auto_offset_reset``).
    replay_until
        Records below this offset are replayed into the learner without producing anything.
    committed
        The committed offset (``-1`` if none); the service never commits below it.
    warning
        Why the restored learner may differ from an uninterrupted one, if it may.
    """

    use_checkpoint: bool
    seek: int | None
    replay_until: int
    committed: int
    warning: str | None = None


def plan_restore(
    checkpoint: int | None,
    committed: int | None,
    log_start: int,
    log_end: int,
    auto_offset_reset: str = "earliest",
    max_ahead: int | None = None,
    exactly_once: bool = False,
) -> RestorePlan:
    """Decide where a learner restored for one partition starts (see the module docstring).

    Parameters
    ----------
    checkpoint
        Offset covered by the last checkpoint, ``None`` if there is none.
    committed
        The group's committed offset, ``None`` if there is none.
    log_start, log_end
        The partition's first offset and its end offset (next offset to be written).
    auto_offset_reset
        Where to resume when retention deleted the records at the committed offset (and at the
        checkpoint's): ``"earliest"`` (the partition's first offset) or ``"latest"`` (its end).
        The warning says which records were skipped without a decision.
    max_ahead
        A checkpoint more than this many records ahead of the committed offset is not trusted
        (a crash between a checkpoint and its commit leaves it ahead by about a batch; more is
        what a forged or misplaced checkpoint does): the plan is then that without a checkpoint,
        and the records from the committed offset on are decided again. ``None``: no bound.
        A checkpoint ahead by at most this many is trusted, with a warning counting the records it
        skips.
    exactly_once
        The run is transactional: a checkpoint commits in the same transaction as its offsets, so
        one ahead of the committed offset (by any count) was forged, misplaced or written by an
        at-least-once run, and is refused (:class:`CheckpointError`).

    Examples
    --------
    Checkpoint behind the committed offset: replay ``[4000, 5000)`` silently.

    >>> plan_restore(checkpoint=4000, committed=5000, log_start=0, log_end=9000)
    RestorePlan(use_checkpoint=True, seek=4000, replay_until=5000, committed=5000, warning=None)

    Checkpoint ahead (crash between checkpoint and commit): skip to it, counting what is skipped.

    >>> plan = plan_restore(checkpoint=5000, committed=4000, log_start=0, log_end=9000)
    >>> plan.use_checkpoint, plan.seek, plan.replay_until, plan.committed
    (True, 5000, 5000, 4000)
    >>> plan.warning.split(": ")[1]
    'records [4000, 5000) (1000) are skipped, taken as decided before the checkpoint was written'

    Exactly-once commits a checkpoint with its offsets: one ahead of them is refused.

    >>> plan_restore(checkpoint=4001, committed=4000, log_start=0, log_end=9000, exactly_once=True)
    Traceback (most recent call last):
    ...
    uss_stream_kafka.exceptions.CheckpointError: checkpoint @4001 is 1 record(s) ahead of the ...

    No checkpoint but a committed offset: rebuild the learner from the log.

    >>> plan = plan_restore(checkpoint=None, committed=300, log_start=0, log_end=9000)
    >>> plan.seek, plan.replay_until, plan.use_checkpoint
    (0, 300, False)

    A fresh group and no checkpoint: the consumer's ``auto_offset_reset`` decides.

    >>> plan_restore(checkpoint=None, committed=None, log_start=0, log_end=10)
    RestorePlan(use_checkpoint=False, seek=None, replay_until=-1, committed=-1, warning=None)

    Retention deleted the committed offset (Quix Streams #1114): resume by the reset policy.

    >>> plan = plan_restore(checkpoint=None, committed=10, log_start=60, log_end=100)
    >>> plan.seek, plan.warning.split(": ")[1].split(";")[0]
    (60, 'records [10, 60) (50) were never decided and are skipped')
    >>> plan_restore(None, committed=10, log_start=60, log_end=100, auto_offset_reset="latest").seek
    100

    A checkpoint further ahead than ``max_ahead``: rebuilt from the log, decided from the commit on.

    >>> plan_restore(checkpoint=4050, committed=4000, log_start=0, log_end=9000, max_ahead=50).seek
    4050
    >>> plan = plan_restore(checkpoint=4051, committed=4000, log_start=0, log_end=9000, max_ahead=50)
    >>> plan.use_checkpoint, plan.seek, plan.replay_until
    (False, 0, 4000)
    >>> plan.warning.split(": ")[0]
    'checkpoint @4051 is 51 records ahead of the committed offset 4000, more than a batch (50)'

    """
    ahead = None if checkpoint is None or committed is None else checkpoint - committed
    if exactly_once and ahead is not None and ahead > 0:
        raise CheckpointError(
            f"checkpoint @{checkpoint} is {ahead} record(s) ahead of the committed offset {committed} "
            "under exactly-once, where a checkpoint commits with its offsets: it was forged, misplaced "
            "or written by an at-least-once run, and would skip those records undecided; delete it "
            "(a tombstone for its key) to rebuild the learner from the log up to the committed offset"
        )
    if max_ahead is not None and ahead is not None and ahead > max_ahead:
        plan = plan_restore(None, committed, log_start, log_end, auto_offset_reset)
        warning = (
            f"checkpoint @{checkpoint} is {ahead} records ahead of the committed offset {committed}, "
            f"more than a batch ({max_ahead}): not trusted, the records from {committed} on are decided again"
        )
        return replace(plan, warning=warning + (f"; {plan.warning}" if plan.warning else ""))
    committed_offset = -1 if committed is None else committed
    lost = max(checkpoint or 0, committed_offset)  # the first record not covered by either
    covered = checkpoint is not None or committed is not None
    if covered and lost < log_start and (checkpoint is None or checkpoint <= log_end):
        return _reset_after_retention(checkpoint, committed, lost, log_start, log_end, auto_offset_reset)
    if checkpoint is None:
        return _without_checkpoint(committed, log_start)
    if checkpoint > log_end:
        raise CheckpointError(
            f"checkpoint covers offset {checkpoint} but the partition ends at {log_end}: the input topic "
            "was recreated or truncated; delete the checkpoint (a tombstone for its key) "
            "or use a new state topic"
        )
    warning = None
    seek = checkpoint
    if ahead is not None and ahead > 0:
        warning = (
            f"checkpoint @{checkpoint} is ahead of the committed offset {committed}: records "
            f"[{committed}, {checkpoint}) ({ahead}) are skipped, taken as decided before the checkpoint "
            "was written"
        )
    if checkpoint < log_start:
        warning = (
            f"checkpoint covers offset {checkpoint} but the partition starts at {log_start}: "
            f"records [{checkpoint}, {log_start}) were deleted by retention and are not counted"
        )
        seek = log_start
    return RestorePlan(True, seek, max(committed_offset, seek), committed_offset, warning)


def _without_checkpoint(committed: int | None, log_start: int) -> RestorePlan:
    """:func:`plan_restore` without a checkpoint (and the committed offset still in the log): the
    learner is rebuilt from the log up to the committed offset, if there is one."""
    if committed is None:
        return RestorePlan(False, None, -1, -1)
    warning = None
    if committed > log_start:
        warning = (
            f"no checkpoint: rebuilding the learner from the log, replaying offsets "
            f"[{log_start}, {committed}) without producing"
        )
        if log_start > 0:
            warning += f"; offsets below {log_start} were deleted by retention and are not counted"
    return RestorePlan(False, log_start, committed, committed, warning)


def _reset_after_retention(
    checkpoint: int | None, committed: int | None, lost: int, log_start: int, log_end: int, reset: str
) -> RestorePlan:
    """The plan when retention deleted records that neither the checkpoint nor a commit covers."""
    what = "committed offset" if committed is not None and committed >= (checkpoint or 0) else "checkpoint"
    seek = log_end if reset == "latest" else log_start
    warning = (
        f"{what} {lost} was deleted by retention: records [{lost}, {log_start}) ({log_start - lost}) were "
        "never decided and are skipped"
    )
    if seek > log_start:
        warning += f", and [{log_start}, {log_end}) ({log_end - log_start}) too"
    warning += f"; resuming at {seek} (auto_offset_reset={reset})"
    if checkpoint is None:
        warning += "; no checkpoint: the learner starts empty"
    committed_offset = -1 if committed is None else committed
    return RestorePlan(checkpoint is not None, seek, seek, committed_offset, warning)


class CheckpointStore:
    """Reads the state topic (a consumer without group) and writes to it (the service's producer).

    The reader keeps its position: each :meth:`refresh` reads only what was appended since, up to
    the end offsets at the time of the call, and keeps the last checkpoint per key.

    Parameters
    ----------
    topic
        The state topic.
    consumer_kwargs
        Consumer settings (connection, security), kafka-python names.
    timeout
        Seconds a refresh may take before it raises ``TimeoutError``.
    library
        The client library (see :data:`uss_stream_kafka.clients.CLIENTS`).
    """

    def __init__(
        self,
        topic: str,
        consumer_kwargs: dict[str, Any],
        timeout: float = 60.0,
        library: str = "kafka-python",
    ) -> None:
        from uss_stream_kafka import clients

        self.topic = topic
        self.timeout = timeout
        self._consumer = clients.consumer(
            library,
            **{
                **consumer_kwargs,
                "group_id": None,
                "enable_auto_commit": False,
                "auto_offset_reset": "earliest",
                "allow_auto_create_topics": False,
            },
        )
        partitions = self._consumer.partitions_for_topic(topic)
        if not partitions:
            self._consumer.close()
            raise ValueError(
                f"state topic {topic!r} does not exist (create it: uss-stream kafka create-topics)"
            )
        self._partitions = [clients.TopicPartition(topic, p) for p in sorted(partitions)]
        self._consumer.assign(self._partitions)
        self._consumer.seek_to_beginning(self._partitions)
        self._latest: dict[bytes, Checkpoint] = {}
        self._newer: dict[bytes, str] = {}  # keys whose last record has a newer format: why

    def refresh(self) -> None:
        """Read the state topic up to its current end."""
        consumer = self._consumer
        end = consumer.end_offsets(self._partitions)
        deadline = time.monotonic() + self.timeout
        while any(consumer.position(tp) < end[tp] for tp in self._partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"could not read state topic {self.topic!r} to its end within {self.timeout}s"
                )
            for records in consumer.poll(0.2, max_records=10_000).values():
                self._apply(records)

    def _apply(self, records: Any) -> None:
        """Keep the last checkpoint per key of ``records`` (the seam's ``Records`` of one partition)."""
        partition = records.tp.partition
        for key, value, offset in zip(records.keys, records.values, records.offsets):
            if key is None:
                log.warning("ignoring a record without key at %s/%d@%d", self.topic, partition, offset)
                continue
            self._newer.pop(key, None)
            # The last record of a key is its checkpoint (compaction keeps no other): an invalid
            # one leaves the key without a checkpoint.
            self._latest.pop(key, None)
            if value is None:
                continue
            try:
                self._latest[key] = Checkpoint.from_record(key, value)
            except NewerFormatError as error:
                self._newer[key] = str(error)
            except ValueError as error:
                log.warning(
                    "ignoring an invalid checkpoint at %s/%d@%d (its partition restores as without "
                    "a checkpoint): %s",
                    self.topic,
                    partition,
                    offset,
                    error,
                )

    def checkpoints(self) -> list[Checkpoint]:
        """The last checkpoint read for every key."""
        return list(self._latest.values())

    def get(self, topic: str, partition: int) -> Checkpoint | None:
        """The last checkpoint read for input partition ``topic/partition``.

        Raises :class:`CheckpointError` if the last record of the partition has a newer format:
        restoring an older checkpoint instead would silently roll the learner back.
        """
        key = checkpoint_key(topic, partition)
        if key in self._newer:
            raise CheckpointError(f"{topic}/{partition}: {self._newer[key]}")
        return self._latest.get(key)

    def close(self) -> None:
        self._consumer.close()


def unreachable(error: BaseException) -> bool:
    """Whether ``error`` is that of a broker that does not answer (for now): worth retrying, never fatal.

    >>> unreachable(ClientError("offsets", name="_TIMED_OUT", retriable=True, timeout=True))
    True
    >>> unreachable(TimeoutError("state topic")), unreachable(ClientError("denied", code=29))
    (True, False)
    """
    return isinstance(error, TimeoutError) or (
        isinstance(error, ClientError) and (error.retriable or error.timeout)
    )
