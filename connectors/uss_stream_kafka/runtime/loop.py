"""The poll loop of a running service: poll, restore, dispatch, commit when due.

:class:`PollLoop` is what :class:`~uss_stream_kafka.runtime.app.Application` runs between its
start and its stop (the application owns the life cycle: set-up, health, the last commit,
teardown). Per batch returned by ``poll``, the loop restores newly assigned partitions
(:mod:`~uss_stream_kafka.runtime.recovery`), decides or dead-letters every record
(:mod:`~uss_stream_kafka.runtime.dispatch`) and, when one is due, runs a commit point
(:mod:`~uss_stream_kafka.runtime.commit`; an aborted transaction rewinds to the last committed
one), then refreshes the shared counts (:mod:`~uss_stream_kafka.runtime.shared`).
"""

from __future__ import annotations

import logging
import time

from uss_stream_kafka.clients import ClientError, UndecodableError
from uss_stream_kafka.runtime.commit import FENCED_INSTANCE_ID, Committer, fatal_error
from uss_stream_kafka.runtime.context import RunContext
from uss_stream_kafka.runtime.progress import IdleGate, StallWatch
from uss_stream_kafka.runtime.wiring import Layers

__all__ = ["PollLoop"]

log = logging.getLogger("uss_stream_kafka")


class PollLoop:
    """The poll loop of one run, over the layers :func:`~uss_stream_kafka.runtime.wiring.wire` built.

    Parameters
    ----------
    context
        The run's shared state (its ``stop`` event ends the loop after the current batch).
    committer
        The commit protocol: its schedule says when a commit point is due.
    exit_when_idle
        Stop once no record arrived for this many seconds and every assigned partition is read to
        its end offset (``None``: only on ``context.stop``).
    exactly_once
        Whether the run is transactional (a send refused mid-batch then rewinds, see
        :meth:`run`).
    started
        Monotonic time of the start: :attr:`last_poll` until the first poll comes back.

    Attributes
    ----------
    idle_gate, stall_watch
        Whether the assigned partitions are read to their ends (the idle exit), and whether
        records wait on them that no poll returns (the health check).
    last_poll
        Monotonic time the last ``poll`` came back.
    layers
        The run's layers (:class:`~uss_stream_kafka.runtime.wiring.Layers`), set before :meth:`run`.

    Examples
    --------
    >>> from uss_stream_kafka.clients.topics import Topics
    >>> from uss_stream_kafka.runtime.context import RunContext
    >>> context = RunContext(Topics("events", "decisions", "events-dlq", "uss-state"), "uss")
    >>> loop = PollLoop(context, None, exit_when_idle=10.0, exactly_once=False, started=12.5)
    >>> loop.last_poll, loop.stall_watch.stalled_since, loop.layers is None   # not run yet
    (12.5, None, True)
    """

    def __init__(
        self,
        context: RunContext,
        committer: Committer,
        *,
        exit_when_idle: float | None,
        exactly_once: bool,
        started: float,
    ) -> None:
        self.context = context
        self.committer = committer
        self.exit_when_idle = exit_when_idle
        self.exactly_once = exactly_once
        self.last_poll = started
        self.idle_gate = IdleGate()
        self.stall_watch = StallWatch(started=started)
        self.layers: Layers | None = None

    def run(self) -> None:
        """Poll and process batches until ``context.stop`` is set or the run is idle (see ``exit_when_idle``).

        A consumer its client declared dead for good, a static member fenced (in a poll or an
        offset commit), or a static member with no assignment long after its membership expired
        (:meth:`~uss_stream_kafka.runtime.recovery.Recovery.replace_if_rejoin_overdue`) is
        replaced; a retriable poll error is logged and the poll retried. Exactly-once: a send
        refused mid-batch aborts the transaction and rewinds every learner and position to the last
        committed one.
        """
        context = self.context
        layers = self.layers
        recovery = layers.recovery
        exit_when_idle = self.exit_when_idle
        while not context.stop.is_set():
            if self.committer.consumer_fenced is not None:  # fenced in an offset commit
                fenced, self.committer.consumer_fenced = self.committer.consumer_fenced, None
                recovery.replace_consumer(fenced)
            consumer = context.consumer  # a consumer that failed for good is replaced
            try:
                batch = consumer.poll(0.25)
            except UndecodableError as error:
                layers.dispatcher.skip_undecodable(error)
                self.maybe_commit()
                continue
            except ClientError as error:
                if (error.fatal and not error.retriable) or error.code == FENCED_INSTANCE_ID:
                    recovery.replace_consumer(error)
                    continue
                if not error.retriable:
                    raise
                log.warning("poll: %s (the client retries)", error)
                context.stop.wait(0.25)
                self.maybe_commit()
                continue
            now = time.monotonic()
            self.last_poll = now
            # An abort in a rebalance listener: the batch predates the rewind.
            if self.committer.rewind_needed:
                recovery.rewind()
                continue
            restored = recovery.restore_pending() if recovery.pending else ()
            if restored:  # a partition just restored has not been waited for yet
                self.stall_watch.fetched(now)
            if recovery.held:
                recovery.release_labels()
            if batch:
                with context.lock:
                    try:
                        layers.dispatcher.process(batch, skip=restored)
                    except ClientError as error:
                        self._abandon_batch(error)
                context.last_activity = time.monotonic()
                self.stall_watch.fetched(context.last_activity)
            elif (
                exit_when_idle is not None
                and recovery.assigned_once
                and now - context.last_activity >= exit_when_idle
            ):
                # Idle only counts once partitions were assigned, and ends at their end offsets.
                if not recovery.pending and not recovery.rebalancing and self.idle_gate.may_stop(consumer):
                    log.info("no record for %.1fs and caught up: stopping", now - context.last_activity)
                    break
                log.info("idle for %.1fs but not caught up: not stopping", now - context.last_activity)
                context.last_activity = now
            if not batch and not (recovery.pending or recovery.rebalancing):
                self.stall_watch.check(consumer, now)
            if not batch and recovery.replace_if_rejoin_overdue(now):
                continue
            if context.learning is not None and context.learning.due(now):
                with context.lock:
                    context.learning.refresh(context.learners(), now)
            self.maybe_commit()

    def _abandon_batch(self, error: BaseException) -> None:
        """Exactly-once: a send refused mid-batch (e.g. the producer was fenced) aborts the transaction.

        Every learner and position is rewound at once to the last committed transaction (before the
        next commit point could commit the progress of the aborted one's earlier batches), and the
        records are processed again.
        """
        if not self.exactly_once or fatal_error(error):
            raise error
        self.layers.dispatcher.discard_batch()
        self.committer.abort(error)
        self.layers.recovery.rewind()

    # -- commit points ---------------------------------------------------------------------------
    def maybe_commit(self) -> None:
        """Run a commit point if the schedule says one (or a checkpoint) is due."""
        now = time.monotonic()
        schedule = self.committer.schedule
        checkpoint = schedule.checkpoint_due(now)
        if checkpoint or schedule.commit_due(now):
            self.commit_point(checkpoint=checkpoint)

    def commit_point(self, checkpoint: bool) -> bool:
        """Commit (see :meth:`Committer.commit_point`); rewind if the transaction was aborted."""
        committed = self.committer.commit_point(checkpoint)
        if not committed:
            self.layers.recovery.rewind()
        elif self.layers.sharing is not None:
            self.layers.sharing.share()
        self.committer.schedule.committed()
        return committed
