"""Shared learning (outputs mode): every learner decides on the counts of all input partitions.

Each learner keeps its own counts (those are what its checkpoints hold) and is given, at every
commit point, restore and rewind, the merge of the *other* partitions' counts
(:meth:`DisagreementStats.merge <uss_stream.core.stats.DisagreementStats.merge>`: plain sums): the live
counts of the partitions this instance holds, and the last checkpoint in the state topic of each
partition held elsewhere.

Examples
--------
The arithmetic, on hand-made counts: partition 0 is told the counts of partitions 1 and 2.

>>> from uss_stream.core.stats import DisagreementStats
>>> own = {p: DisagreementStats(3) for p in range(3)}
>>> own[1].decisions, own[2].decisions = 4, 6
>>> foreign_counts(own, 0, DisagreementStats(3)).decisions
10
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from uss_stream.core.stats import DisagreementStats
from uss_stream_kafka.clients import ClientError
from uss_stream_kafka.runtime.checkpoint import Checkpoint, CheckpointStore, unreachable
from uss_stream_kafka.runtime.context import RunContext

__all__ = ["SharedLearning", "foreign_counts"]

log = logging.getLogger("uss_stream_kafka")


def foreign_counts(local: Mapping[int, DisagreementStats], partition: int, remote: DisagreementStats) -> Any:
    """The counts ``partition``'s learner is given: ``remote`` plus every other local partition's."""
    foreign = remote
    for other, stats in local.items():
        if other != partition:
            foreign = foreign.merge(stats)
    return foreign


class SharedLearning:
    """Give every learner of a run the counts of all the other input partitions.

    Parameters
    ----------
    context
        The run's shared state (its partitions, processor, summary and metrics).
    store
        The state topic's reader: the checkpoints of the partitions held elsewhere.
    n_input
        The input topic's partition count: checkpoints of other partitions (left behind when
        the topic was recreated with fewer) are not shared (``None``: all are).
    """

    def __init__(self, context: RunContext, store: CheckpointStore, n_input: int | None = None) -> None:
        self.context = context
        self.store = store
        self.n_input = n_input
        self._unshared: set[bytes] = set()  # checkpoint keys shared learning skips (warned once)

    def share(self) -> None:
        """Give every learner the counts of all the other input partitions.

        Partitions this instance holds contribute their live own counts; the others their last
        checkpoint read from the state topic (``read_committed``), if it was written by this group
        with this processor configuration.
        """
        context = self.context
        if not context.partitions:
            return
        store = self.store
        try:
            store.refresh()
        except (ClientError, TimeoutError) as error:
            if not unreachable(error):
                raise
            # A broker restart: the learners keep the others' counts they were given last (shared
            # counts are at most this much staler), and the next commit point shares again.
            log.warning("shared learning: the state topic did not answer (%r): sharing next time", error)
            return
        description = context.processor.describe()
        group_id = context.group_id
        with context.lock:
            local = {tp.partition: state.learner.own_stats() for tp, state in context.partitions.items()}
            if not local:
                return
            remote = DisagreementStats(context.processor.n_stages)
            for checkpoint in store.checkpoints():
                if checkpoint.topic != context.topics.input or checkpoint.partition in local:
                    continue
                if self.n_input is not None and checkpoint.partition >= self.n_input:
                    self._not_shared(checkpoint, f"the input topic has no partition {checkpoint.partition}")
                    continue
                if checkpoint.group_id != group_id or checkpoint.processor != description:
                    self._not_shared(
                        checkpoint,
                        f"written by group {checkpoint.group_id!r} with {checkpoint.processor}, "
                        f"not {group_id!r} with {description}",
                    )
                    continue
                try:
                    remote = remote.merge(DisagreementStats.from_dict(checkpoint.state.get("stats")))
                except (ValueError, AttributeError) as error:
                    self._not_shared(checkpoint, str(error))
            for tp, state in context.partitions.items():
                state.learner.share(foreign_counts(local, tp.partition, remote))
        context.summary.shares += 1
        context.metrics.shares.inc()

    def _not_shared(self, checkpoint: Checkpoint, reason: str) -> None:
        """Warn, once per checkpoint key, that shared learning leaves a checkpoint out."""
        if checkpoint.key not in self._unshared:
            self._unshared.add(checkpoint.key)
            log.warning("not sharing the checkpoint of %s: %s", checkpoint.key.decode(), reason)
