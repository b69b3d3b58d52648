"""Repairs of kafka-python 3.0's group join, applied once when the seam makes its first consumer.

kafka-python 3.0 (checked on 3.0.12, the latest release) runs the JoinGroup/SyncGroup round trip
as a task on its IO thread and lets ``poll(timeout)`` give up waiting for it. Three defects follow,
all seen on a loaded machine (a join that outlasts one ``poll``) and all leaving a consumer in its
group with no usable partition:

1. **The orphaned join.** A rejoin asked for by a metadata change (the leader's
   ``assignment_snapshot != metadata_snapshot``) is not latched in ``rejoin_needed``. When the
   ``poll`` that started it times out, the task's own assignment makes the snapshots equal again,
   ``need_rejoin()`` turns false, and nothing ever takes the task's result: the member told its
   listener that it revoked everything, never calls ``on_partitions_assigned``, keeps its
   partitions flagged "pending revocation" (never fetched) and its heartbeats disabled, until the
   broker expires it. Repair: a true ``need_rejoin()`` sets ``rejoin_needed`` (cleared, as before,
   once a join completes).
2. **The discarded join.** A join task that completed while no ``poll`` was waiting for it is
   thrown away and a new JoinGroup sent: in a group of two, whose rebalances take a heartbeat
   interval, the leader rejoins after every generation, forever. Repair: the result of a completed
   attempt is kept until a ``poll`` applies it, and the next attempt returns it instead of joining
   again.
3. **The stale snapshot.** The leader records the metadata snapshot it assigned from, but the
   snapshot is only rebuilt on a metadata update, so the first assignment after ``subscribe`` is
   recorded against ``{}`` and the next metadata refresh forces a second, needless eager
   rebalance (revoking the partitions the member had just started restoring). Repair: the leader
   records the metadata it really assigned from.

Each repair wraps kafka-python's own method and changes nothing else; a kafka-python other than
3.0.x, or without these methods, is left alone.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["repair_group_join"]

_REPAIRED = False


def repair_group_join() -> None:
    """Install the three repairs on kafka-python's coordinator classes (once; idempotent)."""
    global _REPAIRED
    if _REPAIRED:
        return
    import kafka
    from kafka.coordinator.base import BaseCoordinator
    from kafka.coordinator.consumer import ConsumerCoordinator

    if not kafka.__version__.startswith("3.0."):  # checked on 3.0.12: a later line is used as it is
        _REPAIRED = True
        return

    needed = ("need_rejoin", "_perform_assignment", "_on_join_complete_async", "_build_metadata_snapshot")
    if not all(hasattr(ConsumerCoordinator, name) for name in needed) or not all(
        hasattr(BaseCoordinator, name) for name in ("_do_join_and_sync_async", "reset_generation")
    ):
        _REPAIRED = True
        return

    need_rejoin = ConsumerCoordinator.need_rejoin

    @functools.wraps(need_rejoin)
    def latched_need_rejoin(self: Any) -> bool:
        rejoin = need_rejoin(self)
        if rejoin:
            self.rejoin_needed = True  # 1: kept until a join completes
        return rejoin

    join = BaseCoordinator._do_join_and_sync_async

    @functools.wraps(join)
    async def kept_join(self: Any) -> Any:
        unapplied = getattr(self, "_uss_unapplied_assignment", None)
        if unapplied is not None:  # 2: the last attempt succeeded, no poll applied it yet
            return unapplied
        assignment = await join(self)
        self._uss_unapplied_assignment = assignment
        return assignment

    reset = BaseCoordinator.reset_generation

    @functools.wraps(reset)
    def reset_generation(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._uss_unapplied_assignment = None  # 2: out of the group, what it was assigned is void
        return reset(self, *args, **kwargs)

    complete = ConsumerCoordinator._on_join_complete_async

    @functools.wraps(complete)
    async def applied(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._uss_unapplied_assignment = None
        return await complete(self, *args, **kwargs)

    assign = ConsumerCoordinator._perform_assignment

    @functools.wraps(assign)
    def assign_from_current_metadata(self: Any, *args: Any, **kwargs: Any) -> Any:
        assignment = assign(self, *args, **kwargs)
        # 3: the metadata the assignor read (the group's topics are subscribed by now)
        self._metadata_snapshot = self._build_metadata_snapshot(self._subscription, self._cluster)
        self._assignment_snapshot = self._metadata_snapshot
        return assignment

    ConsumerCoordinator.need_rejoin = latched_need_rejoin
    BaseCoordinator._do_join_and_sync_async = kept_join
    BaseCoordinator.reset_generation = reset_generation
    ConsumerCoordinator._on_join_complete_async = applied
    ConsumerCoordinator._perform_assignment = assign_from_current_metadata
    _REPAIRED = True
