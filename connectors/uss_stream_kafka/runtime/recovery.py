"""Assignment and recovery: the rebalance listener, restores from the state topic, rewinds.

:class:`Recovery` owns the per-partition state's life cycle (Quix Streams: its state and recovery
managers):

- on assignment the new partitions are paused; the poll loop then calls
  :meth:`~Recovery.restore_pending`, which restores each learner from its checkpoint
  (:class:`~uss_stream_kafka.runtime.restore.RestorePlanner`), positions the consumer as
  :func:`~uss_stream_kafka.runtime.checkpoint.plan_restore` says, and resumes the partitions.
  A rebalance that lands in the middle of a restore stops it (Quix Streams #1146): the rest is
  restored again from the new assignment, never into revoked partitions;
- on revocation the revoked partitions' progress is made durable first
  (:meth:`Committer.handover <uss_stream_kafka.runtime.commit.Committer.handover>`);
- on a lost membership their learners are dropped (exactly-once: the open transaction aborted);
- :meth:`~Recovery.rewind`, after an aborted transaction, restores every learner to the state of
  the last committed transaction and seeks the consumer back to its offsets.

Features mode: a restored or rewound learner re-learns the retained labels log up to where its
stage models had learned (:mod:`uss_stream_kafka.runtime.relearn`). A processor whose learner state holds
what it learned from the labels (``labels_in_state``, orchestration) needs no re-learning: the
labels partition is positioned where the checkpoint says. With ``labels_after_inputs`` a restored
partition's labels wait until its input is read to the end offset it had at the restore (a
report must find its request decided), see :meth:`~Recovery.release_labels`.

The rebalance callbacks (:meth:`~Recovery.on_revoked`, :meth:`~Recovery.on_assigned`,
:meth:`~Recovery.on_lost`, given to the client seam's ``subscribe``) run inside the consumer's
``poll()`` or ``close()`` (kafka-python: on its IO thread): they must not call blocking consumer
methods, so they only flush the producer, write checkpoints, commit asynchronously and pause;
restores happen in the loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from uss_stream_kafka.clients import ClientError, TopicPartition
from uss_stream_kafka.runtime.checkpoint import Checkpoint, CheckpointStore, RestorePlan, unreachable
from uss_stream_kafka.runtime.commit import Committer
from uss_stream_kafka.runtime.context import LabelsPartitionState, PartitionState, RunContext, names
from uss_stream_kafka.runtime.progress import IdleGate, RejoinWatch
from uss_stream_kafka.runtime.relearn import LabelsLog
from uss_stream_kafka.runtime.restore import RestorePlanner, restore_models, restored_line
from uss_stream_kafka.runtime.shared import SharedLearning

__all__ = ["Recovery", "restored_lag"]

log = logging.getLogger("uss_stream_kafka")

#: A consumer replaced this many times within :data:`REPLACEMENT_WINDOW` seconds ends the run.
MAX_CONSUMER_REPLACEMENTS = 3
REPLACEMENT_WINDOW = 600.0


class Recovery:
    """Assignment, restore and rewind of one run's partitions (see the module's docstring).

    Parameters
    ----------
    context
        The run's shared state.
    committer
        The commit protocol: a revocation commits through it, a lost membership aborts with it.
    store
        The state topic's reader (``read_committed``).
    labels_log
        Features mode with ``rebuild_models``: the labels log the stage models re-learn from.
    sharing
        Shared learning, refreshed after every restore and rewind (``None``: off).
    idle_gate
        Told of every assignment (the idle exit waits for the assigned partitions' ends).
    auto_offset_reset
        Where a partition with no commit and no checkpoint starts.
    n_output, n_dlq
        Partition counts of the output and dead-letter topics (input partition ``p`` writes to
        ``p % n``).
    max_ahead
        A checkpoint further ahead of the committed offset is not trusted (a batch: ``max_poll_records``).
    rejoin
        A static member's watch for a rejoin that never comes after a lost membership (``None``: a
        dynamic member, whose replacement would rebalance the group): see
        :meth:`replace_if_rejoin_overdue`.
    """

    def __init__(
        self,
        context: RunContext,
        committer: Committer,
        store: CheckpointStore,
        labels_log: LabelsLog | None,
        sharing: SharedLearning | None,
        idle_gate: IdleGate,
        *,
        auto_offset_reset: str,
        n_output: int,
        n_dlq: int,
        max_ahead: int | None = None,
        rejoin: RejoinWatch | None = None,
    ) -> None:
        self.context = context
        self.committer = committer
        self.store = store
        self.labels_log = labels_log
        self.sharing = sharing
        self.idle_gate = idle_gate
        self.auto_offset_reset = auto_offset_reset
        self.n_output = n_output
        self.n_dlq = n_dlq
        self.max_ahead = max_ahead
        self.rejoin = rejoin
        self.pending: set[Any] = set()  # assigned, not restored yet
        self.assigned_once = False  # exit_when_idle counts only from the first assignment
        self.rebalancing = False  # between a revocation and the next assignment
        self._revocations = 0  # revocations so far: a restore interrupted by one stops
        processor = context.processor
        self.labels_in_state = bool(getattr(processor, "labels_in_state", False))
        self.labels_after_inputs = bool(getattr(processor, "labels_after_inputs", False))
        self.held: dict[Any, tuple[Any, int]] = {}  # paused labels partition -> (its input, end)
        self.new_consumer: Callable[[], Any] | None = None  # makes and subscribes a consumer (wiring)
        self._consumer_replacements: list[float] = []
        self.restoring_since: float | None = None  # monotonic start of the restore under way
        self.planner = RestorePlanner(
            processor,
            group_id=context.group_id,
            state_topic=context.topics.state,
            auto_offset_reset=auto_offset_reset,
            max_ahead=max_ahead,
            exactly_once=committer.exactly_once,
        )

    def callbacks(self) -> dict[str, Any]:
        """The rebalance callbacks, as keyword arguments of the seam's ``Consumer.subscribe``."""
        return dict(on_assign=self.on_assigned, on_revoke=self.on_revoked, on_lost=self.on_membership_lost)

    # -- rebalances ------------------------------------------------------------------------------
    def on_revoked(self, revoked: Iterable[Any]) -> None:
        context = self.context
        revoked = set(revoked)
        self.rebalancing = True  # no idle exit until the new assignment
        with context.lock:
            self._revocations += 1
            self.pending -= revoked
            states = [context.partitions[tp] for tp in revoked if tp in context.partitions]
            labels = [context.labels[tp] for tp in revoked if tp in context.labels]
            offsets: dict[Any, Any] = {}
            if not context.aborting:
                offsets = self.committer.handover(states, labels)
            for tp in revoked:
                context.partitions.pop(tp, None)
                context.labels.pop(tp, None)
                self.held.pop(tp, None)
            context.publish_partitions()
        if offsets:
            context.consumer.commit(offsets, asynchronous=True)
        if states:
            log.info("revoked %s", names(state.tp for state in states))

    def on_lost(self, lost: Iterable[Any]) -> None:
        context = self.context
        lost = set(lost)
        with context.lock:
            self._revocations += 1
            if self.committer.exactly_once and self.committer.in_transaction:
                # Its offsets can no longer be committed: the kept partitions restart from their last commit.
                self.committer.abort(RuntimeError(f"partitions lost: {names(lost)}"))
            self.pending -= lost
            for tp in lost:
                context.partitions.pop(tp, None)
                context.labels.pop(tp, None)
                self.held.pop(tp, None)
            context.publish_partitions()
        log.warning("lost %s (group membership expired): their learners are dropped", names(lost))

    def on_membership_lost(self, lost: Iterable[Any]) -> None:
        """The client's lost callback: :meth:`on_lost`, and the rejoin watch starts."""
        self.on_lost(lost)
        if self.rejoin is not None:
            self.rejoin.lost(time.monotonic())

    def replace_if_rejoin_overdue(self, now: float) -> bool:
        """Replace a static member's consumer that got no assignment back after a lost membership.

        See :class:`~uss_stream_kafka.runtime.progress.RejoinWatch`: true (the consumer replaced)
        once the grace after the loss has passed with no assignment while the broker answers.
        """
        rejoin = self.rejoin
        if rejoin is None or rejoin.lost_since is None:
            return False
        probe = [TopicPartition(self.context.topics.input, 0)]
        if not rejoin.overdue(self.context.consumer, probe, now):
            return False
        lost = f"no assignment {rejoin.grace:.0f}s after the membership expired; the broker answers"
        self.replace_consumer(ClientError(lost))
        return True

    def replace_consumer(self, error: ClientError) -> None:
        """Close a consumer its client library declared dead, or that was fenced, and subscribe a new one.

        A static member (``--group-instance-id``) is fenced (``FENCED_INSTANCE_ID``) after a broker
        outage longer than its session: librdkafka then rejoins under a new member id, and a request
        still under the old one (an offset commit) fences the member; librdkafka makes that fatal
        for good (every later poll fails), kafka-python refuses the request. Another instance with
        the same ``group.instance.id`` fences it too. The old consumer's partitions are lost (an
        open transaction aborts); the new one restores them from their checkpoints when the group
        assigns them. More than :data:`MAX_CONSUMER_REPLACEMENTS` within :data:`REPLACEMENT_WINDOW`
        seconds re-raise ``error`` (two instances with one ``group.instance.id`` fence each other).
        """
        context = self.context
        now = time.monotonic()
        recent = [t for t in self._consumer_replacements if now - t < REPLACEMENT_WINDOW]
        if self.new_consumer is None or len(recent) >= MAX_CONSUMER_REPLACEMENTS:
            raise error
        self._consumer_replacements = [*recent, now]
        log.warning("the consumer failed for good (%s): replacing it", error)
        held = set(context.partitions) | set(context.labels) | self.pending
        if held:
            self.on_lost(held)
        self.rebalancing = True  # no idle exit until the new consumer's assignment
        try:
            context.consumer.close()
        except Exception as closing:
            log.warning("closing the failed consumer: %s", closing)
        context.consumer = self.new_consumer()
        context.summary.consumer_replacements += 1

    def on_assigned(self, assigned: Iterable[Any]) -> None:
        context = self.context
        assigned = list(assigned)
        with context.lock:
            self.pending.update(tp for tp in assigned if tp.topic == context.topics.input)
            for tp in assigned:
                if tp.topic == context.topics.labels:
                    context.labels[tp] = LabelsPartitionState(tp, dlq_partition=tp.partition % self.n_dlq)
        if assigned:
            # Nothing is fetched until the loop has restored the learners (and positioned the consumer).
            context.consumer.pause(assigned)
        context.last_activity = time.monotonic()
        self.assigned_once = True
        self.rebalancing = False
        self.idle_gate.assigned()
        if self.rejoin is not None:
            self.rejoin.assigned()

    # -- restore ---------------------------------------------------------------------------------
    def restore_pending(self) -> set[Any]:
        """Restore the learners of newly assigned partitions; returns the partitions restored.

        :attr:`restoring_since` holds the monotonic time the restore began, while it runs.
        """
        context = self.context
        consumer = context.consumer
        with context.lock:
            pending = sorted(self.pending & consumer.assignment())
            self.pending.clear()
            revocations = self._revocations
        if not pending:
            return set()
        self.restoring_since = time.monotonic()
        try:
            return self._restore(pending, revocations)
        finally:
            self.restoring_since = None

    def _restore(self, pending: list[Any], revocations: int) -> set[Any]:
        context = self.context
        consumer = context.consumer
        topics = context.topics
        store = self.store
        keyed = getattr(context.processor, "keyed", False)
        if keyed:  # --key-from: the keys' checkpoints of these partitions are read too
            store.want(topics.input, [tp.partition for tp in pending])
        try:
            store.refresh()
            starts = consumer.beginning_offsets(pending)
            ends = consumer.end_offsets(pending)
            committed = {tp: consumer.committed(tp) for tp in pending}
        except (ClientError, TimeoutError) as error:
            if not unreachable(error):
                raise
            # A broker restart right after the assignment: the partitions stay paused and pending,
            # and the restore is tried again after the next poll.
            with context.lock:
                self.pending.update(pending)
            log.warning("the brokers did not answer the restore of %s (%r): retrying", names(pending), error)
            return set()
        restored = []
        lags: dict[int, int] = {}
        for tp in pending:
            learner, checkpoint, plan = self.planner.plan(
                tp,
                store.get(tp.topic, tp.partition),
                committed=committed[tp],
                start=starts[tp],
                end=ends[tp],
                keys=store.key_records(tp.topic, tp.partition) if keyed else None,
            )
            if keyed:
                learner.transactional = self.committer.exactly_once  # keeps what a rewind undoes
            labels_from = self._restore_models(learner, tp, checkpoint if plan.use_checkpoint else None)
            seek = plan.seek
            if seek is None and self.committer.exactly_once:
                # An explicit start, so that an abort before the first commit rewinds there.
                seek = starts[tp] if self.auto_offset_reset == "earliest" else ends[tp]
            try:
                if seek is not None:
                    consumer.seek(tp, seek)
            except (ValueError, ClientError):  # the partition was revoked meanwhile
                revocations = -1
            state = PartitionState(
                tp=tp,
                learner=learner,
                out_partition=tp.partition % self.n_output,
                dlq_partition=tp.partition % self.n_dlq,
                next_offset=-1 if seek is None else seek,
                committed=plan.committed,
                checkpointed=checkpoint.offset if plan.use_checkpoint else -1,
                replay_until=plan.replay_until,
                base=(-1 if seek is None else seek, checkpoint.state if plan.use_checkpoint else None),
                labels_offset=labels_from,
                labels_checkpointed=labels_from if plan.use_checkpoint else -1,
                labels_base=labels_from,
            )
            with context.lock:
                if self._revocations != revocations:
                    # A rebalance landed in the middle of the restore (Quix Streams #1146): the rest
                    # is restored again from the new assignment, never into revoked partitions.
                    log.warning(
                        "a rebalance revoked partitions during the restore of %s: restoring again "
                        "what the new assignment holds",
                        names(pending),
                    )
                    break
                context.partitions[tp] = state
            lags[tp.partition] = restored_lag(plan, seek, starts[tp], ends[tp], self.auto_offset_reset)
            to_resume = [tp]
            if topics.labels is not None:
                labels_tp = TopicPartition(topics.labels, tp.partition)
                if labels_tp in context.labels and self.labels_after_inputs:
                    self.held[labels_tp] = (tp, ends[tp])
                elif labels_tp in context.labels:
                    to_resume.append(labels_tp)
            consumer.resume(to_resume)
            restored.append(restored_line(tp, checkpoint, plan, labels_from))
        if keyed:
            store.release(topics.input, [tp.partition for tp in pending])
        self._resume_orphans()
        context.summary.record_restored(restored)
        with context.lock:
            context.publish_partitions(lags)
        context.last_activity = time.monotonic()
        for line in restored:
            log.info("restored %s", line)
        if self.sharing is not None:
            self.sharing.share()
        return set(pending)

    def _resume_orphans(self) -> None:
        """Resume the labels partitions whose input partition is not ours (mis-partitioned
        topics), so that they still flow."""
        context = self.context
        with context.lock:
            orphans = [
                tp
                for tp in context.labels
                if TopicPartition(context.topics.input, tp.partition) not in context.partitions
                and tp in context.consumer.paused()
                and tp not in self.held
            ]
        if orphans:
            context.consumer.resume(orphans)

    def _restore_models(self, learner: Any, tp: Any, checkpoint: Checkpoint | None) -> int:
        """Features mode: :func:`~uss_stream_kafka.runtime.restore.restore_models` (else ``-1``)."""
        if self.labels_log is None and not self.labels_in_state:
            return -1
        return restore_models(self.context, self.labels_log, learner, tp, checkpoint)

    # -- rewind ----------------------------------------------------------------------------------
    def rewind(self) -> None:
        """Restore every learner to its last committed state and seek to the committed offsets.

        From memory: right after a commit, the broker may not serve its offsets and checkpoints yet.
        Features mode: the stage models are rebuilt from the labels log up to the committed position.
        """
        context = self.context
        consumer = context.consumer
        with context.lock:
            self.committer.rewind_needed = False
            for state in context.partitions.values():
                offset, learner_state = state.base
                if getattr(state.learner, "keyed", False):
                    state.learner.rewind()  # its keys and pool as the last committed transaction left them
                else:
                    state.learner = context.processor.new_learner()
                    if learner_state is not None:
                        state.learner.load_state_dict(learner_state)
                if self.labels_log is not None or self.labels_in_state:
                    self._rebuild_models(state, state.labels_base)
                consumer.seek(state.tp, offset)
                state.next_offset = offset
                state.checkpointed = min(state.checkpointed, offset)
                state.replay_until = max(state.committed, offset)
            for labels in context.labels.values():
                learned = context.partitions.get(TopicPartition(context.topics.input, labels.tp.partition))
                relearned = self.labels_log is not None or self.labels_in_state
                if relearned and learned is not None and learned.labels_base >= 0:
                    consumer.seek(labels.tp, learned.labels_base)
                    labels.next_offset = learned.labels_base
                    continue
                if labels.committed >= 0:
                    consumer.seek(labels.tp, labels.committed)
                elif self.auto_offset_reset == "earliest":
                    consumer.seek_to_beginning([labels.tp])
                else:
                    consumer.seek_to_end([labels.tp])
                labels.next_offset = -1
        context.last_activity = time.monotonic()
        log.info("rewound %s to the last committed transaction", names(context.partitions))
        if self.sharing is not None:
            self.sharing.share()

    def release_labels(self) -> None:
        """Resume the held labels partitions whose input is read to its end offset of the restore.

        After a restart with both topics backlogged, a report read before its request would be
        judged unknown; holding the reports back until the requests have caught up (a bounded
        wait: the end offsets are those of the restore) makes every report find its decision.
        """
        context = self.context
        consumer = context.consumer
        released = {}
        with context.lock:
            for labels_tp, (tp, end) in list(self.held.items()):
                state = context.partitions.get(tp)
                if state is not None and state.next_offset < end and consumer.position(tp) < end:
                    continue
                del self.held[labels_tp]
                if state is not None and labels_tp in context.labels:
                    released[labels_tp] = end
        if released:
            consumer.resume(released)
            log.info(
                "requests read to their end offsets %s: reading the reports %s",
                {f"{context.topics.input}/{tp.partition}": end for tp, end in released.items()},
                names(released),
            )

    def _rebuild_models(self, state: PartitionState, until: int) -> None:
        """Re-learn the labels below ``until`` into ``state``'s (new) learner; ``-1``: none."""
        if until > 0 and self.labels_log is not None:
            labels_tp = TopicPartition(self.context.topics.labels, state.tp.partition)
            self.labels_log.relearn(state.learner, labels_tp, until)
        state.labels_offset = until
        state.labels_checkpointed = min(state.labels_checkpointed, until)


def restored_lag(plan: RestorePlan, seek: int | None, start: int, end: int, auto_offset_reset: str) -> int:
    """The lag of a partition at its restore, as a commit would report it: its end minus its
    committed offset or, without one, minus where the consumer starts (records deleted by retention
    not counted).

    Examples
    --------
    >>> from uss_stream_kafka.runtime.checkpoint import plan_restore
    >>> plan = plan_restore(checkpoint=4000, committed=5000, log_start=0, log_end=9000)
    >>> restored_lag(plan, plan.seek, 0, 9000, "earliest")      # from the commit, not the replay
    4000
    >>> plan = plan_restore(checkpoint=None, committed=None, log_start=20, log_end=100)
    >>> restored_lag(plan, plan.seek, 20, 100, "earliest"), restored_lag(plan, plan.seek, 20, 100, "latest")
    (80, 0)
    >>> plan = plan_restore(checkpoint=None, committed=10, log_start=60, log_end=100)
    >>> restored_lag(plan, plan.seek, 60, 100, "earliest")      # [10, 60) deleted
    40

    """
    if plan.committed >= 0:
        first = plan.committed
    elif seek is not None:
        first = seek
    else:
        first = start if auto_offset_reset == "earliest" else end
    return max(0, end - max(first, start))
