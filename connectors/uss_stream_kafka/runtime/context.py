"""What the layers of one service run share: the per-partition state, the summary, the lock.

The service is layered in the manner of Quix Streams: the thin
:class:`~uss_stream_kafka.runtime.app.Application` (wiring and the poll loop) drives
:class:`~uss_stream_kafka.runtime.dispatch.Dispatcher` (each polled record to its place),
:class:`~uss_stream_kafka.runtime.commit.Committer` (commit points: the commit and transaction
protocol), :class:`~uss_stream_kafka.runtime.recovery.Recovery` (assignment, restore, rewind) and
:class:`~uss_stream_kafka.runtime.shared.SharedLearning`. They all work on one :class:`RunContext`: its
``lock`` guards the per-partition state against the rebalance listener, which runs on the
consumer's IO thread.

Examples
--------
>>> from uss_stream_kafka.clients.topics import Topics
>>> context = RunContext(Topics("events", "decisions", "events-dlq", "uss-state"), group_id="uss")
>>> context.summary.decisions, context.partitions
(0, {})
>>> names([])
'nothing'
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.processing.events import REASONS

__all__ = ["RESTORED_KEPT", "LabelsPartitionState", "PartitionState", "RunContext", "RunSummary", "names"]

#: The restore lines a :class:`RunSummary` keeps (the latest).
RESTORED_KEPT = 1000


@dataclass
class RunSummary:
    """What one :meth:`Application.run <uss_stream_kafka.runtime.app.Application.run>` did.

    ``events == sum(depth_counts) + sum(dead_letters.values()) + replayed`` when the run kept its
    partitions to the end (records of a partition revoked mid-batch are not double counted) and no
    transaction was aborted (``aborts``: records of an aborted transaction are processed again).
    ``restored`` says how each partition was restored, one line per restore, the latest
    :data:`RESTORED_KEPT` of them (every rebalance restores its partitions again: a run that lives
    through rebalances keeps a window of them, as the log keeps them all).
    """

    events: int = 0
    labels: int = 0
    replayed: int = 0
    depth_counts: list[int] = field(default_factory=list)
    dead_letters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    commits: int = 0
    checkpoints: int = 0
    key_checkpoints: int = 0  # --key-from: keys' checkpoints and tombstones written
    restored: list[str] = field(default_factory=list)
    aborts: int = 0
    producer_replacements: int = 0
    consumer_replacements: int = 0
    shares: int = 0
    seconds: float = 0.0

    @property
    def decisions(self) -> int:
        return sum(self.depth_counts)

    def record_restored(self, lines: Iterable[str]) -> None:
        """Add the lines of a restore to ``restored``, keeping the latest :data:`RESTORED_KEPT`.

        >>> summary = RunSummary()
        >>> for n in range(RESTORED_KEPT + 5):
        ...     summary.record_restored([f"in/0: restore {n}"])
        >>> len(summary.restored), summary.restored[-1]
        (1000, 'in/0: restore 1004')

        """
        self.restored.extend(lines)
        del self.restored[:-RESTORED_KEPT]

    def describe(self) -> str:
        """One line: what the run did.

        >>> RunSummary(events=5, depth_counts=[3, 1], commits=2).describe()
        '5 events, 4 decisions [3, 1], 0 dead letters, 0 replayed, 2 commits, 0 checkpoints'
        """
        return (
            f"{self.events} events, {self.decisions} decisions {self.depth_counts}, "
            f"{sum(self.dead_letters.values())} dead letters, {self.replayed} replayed, "
            f"{self.commits} commits, {self.checkpoints} checkpoints"
        )


@dataclass
class PartitionState:
    """A learner and the offsets of one input partition."""

    tp: Any
    learner: Any
    out_partition: int
    dlq_partition: int
    next_offset: int  # next record to process (-1: unknown until the first record)
    committed: int  # last committed offset known (-1: none)
    checkpointed: int  # offset covered by the last checkpoint written or restored (-1: none)
    replay_until: int  # records below this are replayed without producing
    # Exactly-once: the offset and learner state (None: empty) of the last committed transaction.
    base: tuple[int, dict[str, Any] | None] = (-1, None)
    # Features mode: the labels partition's offset the stage models learned up to (-1: none), the
    # one the last checkpoint covers, and the one of the last committed transaction.
    labels_offset: int = -1
    labels_checkpointed: int = -1
    labels_base: int = -1


@dataclass
class LabelsPartitionState:
    """The offsets of one labels partition (features mode)."""

    tp: Any
    dlq_partition: int
    next_offset: int = -1
    committed: int = -1


@dataclass(eq=False)
class RunContext:
    """The state every layer of one run works on.

    ``partitions`` and ``labels`` map the assigned input (labels) partitions to their state;
    ``consumer``, ``processor``, ``metrics`` and ``learning`` are set when the run starts;
    ``last_activity`` is the monotonic time of the last record or assignment (the idle clock);
    ``aborting`` is set when the run fails, so that the revocation of its partitions commits nothing.
    """

    topics: Topics
    group_id: str
    summary: RunSummary = field(default_factory=RunSummary)
    partitions: dict[Any, PartitionState] = field(default_factory=dict)
    labels: dict[Any, LabelsPartitionState] = field(default_factory=dict)
    lock: Any = field(default_factory=threading.RLock)
    stop: threading.Event = field(default_factory=threading.Event)
    consumer: Any = None
    processor: Any = None
    metrics: Any = None
    learning: Any = None  # the learning metrics (uss_stream_kafka.operations.learning_metrics), if on
    last_activity: float = field(default_factory=time.monotonic)
    aborting: bool = False

    def learners(self) -> dict[int, Any]:
        """The assigned input partitions' learners, by partition number (read under ``lock``)."""
        return {tp.partition: state.learner for tp, state in self.partitions.items()}

    def publish_partitions(self, lags: Mapping[int, int] | None = None) -> None:
        """Make the per-partition metrics follow the assigned input partitions (call under ``lock``).

        A partition just restored gets every per-partition series at once, before its first record
        (``lags``: its lag at the restore; its counters at 0, its gauges at its learner's values);
        a partition no longer assigned loses them (``docs/metrics.md``). Nothing before the run
        set up its metrics.

        >>> from uss_stream_kafka.clients import TopicPartition
        >>> from uss_stream_kafka.clients.topics import Topics
        >>> from uss_stream_kafka.operations.metrics import ServiceMetrics
        >>> from uss_stream_kafka.processing.processors import OutputsProcessor
        >>> context = RunContext(Topics("events", "decisions", "events-dlq", "uss-state"), group_id="uss")
        >>> context.metrics = ServiceMetrics(n_stages=2)
        >>> tp = TopicPartition("events", 4)
        >>> learner = OutputsProcessor([0.0, 0.5]).new_learner()
        >>> context.partitions[tp] = PartitionState(tp, learner, 0, 0, -1, -1, -1, -1)
        >>> context.publish_partitions({4: 120})            # restored, 120 records behind
        >>> lag = {"partition": "4"}
        >>> sample = context.metrics.registry.get_sample_value
        >>> sample("uss_kafka_consumer_lag", lag), sample("uss_kafka_assigned_partitions")
        (120.0, 1.0)
        >>> del context.partitions[tp]
        >>> context.publish_partitions()                    # revoked
        >>> sample("uss_kafka_consumer_lag", lag), sample("uss_kafka_assigned_partitions")
        (None, 0.0)
        """
        if self.metrics is None:
            return
        learners = self.learners()
        self.metrics.partitions_held(learners, lags or {})
        if self.learning is not None:
            self.learning.refresh(learners)


def names(tps: Iterable[Any]) -> str:
    """``"topic/partition, ..."`` of topic partitions, for the log."""
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(tps)) or "nothing"
