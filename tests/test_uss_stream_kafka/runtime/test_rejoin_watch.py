"""A static member whose membership expired and that never got an assignment back is replaced.

After a broker outage longer than ``session.timeout.ms`` the client declares the assignment lost
and rejoins by itself. In loaded CI runs a librdkafka static member sometimes never did: the
service logged the loss, then waited minutes with no partition and no error. The rule: 60 s after
the loss with no assignment, while the broker answers a listing of end offsets, the consumer is
replaced (once per loss); a dynamic member is never replaced for it (its replacement would
rebalance the group), and neither is a member whose assignment (even an empty one) came back.
"""

from __future__ import annotations

import types

import pytest

from uss_stream_kafka.clients import ClientError, TopicPartition
from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.runtime import loop as loop_module
from uss_stream_kafka.runtime import recovery as recovery_module
from uss_stream_kafka.runtime.commit import CommitSchedule
from uss_stream_kafka.runtime.context import RunContext
from uss_stream_kafka.runtime.loop import PollLoop
from uss_stream_kafka.runtime.progress import IdleGate, RejoinWatch
from uss_stream_kafka.runtime.recovery import Recovery

TP = TopicPartition("in", 0)


class _Clock:
    """The loop's and the recovery's ``time`` module: each poll is one second."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class _Consumer:
    """A consumer whose client calls the lost callback in its first poll, then returns nothing.

    ``assign_at``: the poll time at which the client calls the assign callback with no partition
    (``None``: never). ``broker_from``: the first time the broker answers a listing of end offsets.
    """

    def __init__(self, run: _Run, *, lose: bool, assign_at: float | None, broker_from: float) -> None:
        self.run, self.lose, self.assign_at, self.broker_from = run, lose, assign_at, broker_from
        self.asked: list[float] = []
        self.closed = False

    def poll(self, timeout: float) -> dict:
        run = self.run
        run.clock.now += 1.0
        if run.clock.now >= run.until:
            run.context.stop.set()
        callbacks = run.recovery.callbacks()
        if self.lose:
            self.lose = False
            callbacks["on_lost"]([TP])
        if self.assign_at is not None and run.clock.now >= self.assign_at:
            self.assign_at = None
            callbacks["on_assign"]([])
        return {}

    def end_offsets(self, partitions: list) -> dict:
        self.asked.append(self.run.clock.now)
        assert partitions == [TP]
        if self.run.clock.now < self.broker_from:
            raise ClientError("broker down", name="_TRANSPORT", retriable=True)
        return {TP: 0}

    def assignment(self) -> set:
        return set()

    def paused(self) -> set:
        return set()

    def close(self) -> None:
        self.closed = True


class _Committer:
    exactly_once = False
    in_transaction = False
    rewind_needed = False
    consumer_fenced = None

    def __init__(self) -> None:
        self.schedule = CommitSchedule(3600.0, 0, 3600.0, 0)  # no commit point due


class _Layers:
    def __init__(self, recovery: Recovery) -> None:
        self.recovery = recovery
        self.dispatcher = None
        self.sharing = None


class _Run:
    """A poll loop with a real :class:`Recovery` over :class:`_Consumer`, for ``until`` seconds."""

    def __init__(self, monkeypatch, *, static: bool, assign_at=None, broker_from=0.0, until=300.0) -> None:
        self.clock, self.until = _Clock(), until
        clock_module = types.SimpleNamespace(monotonic=self.clock.monotonic)
        monkeypatch.setattr(loop_module, "time", clock_module)
        monkeypatch.setattr(recovery_module, "time", clock_module)
        self.context = context = RunContext(Topics("in", "out", "dlq", "state"), "group")
        committer = _Committer()
        self.recovery = Recovery(
            context,
            committer,
            None,
            None,
            None,
            IdleGate(),
            auto_offset_reset="earliest",
            n_output=1,
            n_dlq=1,
            rejoin=RejoinWatch() if static else None,
        )
        self.first = _Consumer(self, lose=True, assign_at=assign_at, broker_from=broker_from)
        self.replacements: list[float] = []

        def new_consumer() -> _Consumer:
            self.replacements.append(self.clock.now)
            return _Consumer(self, lose=False, assign_at=None, broker_from=0.0)

        self.recovery.new_consumer = new_consumer
        context.consumer = self.first
        self.loop = PollLoop(context, committer, exit_when_idle=None, exactly_once=False, started=0.0)
        self.loop.layers = _Layers(self.recovery)

    def __call__(self) -> _Run:
        self.loop.run()
        return self


def test_a_static_member_with_no_assignment_60_s_after_the_loss_is_replaced_once(monkeypatch):
    run = _Run(monkeypatch, static=True)()
    # Lost in the poll at t=1; the first ask at t=61 (the grace) finds the broker answering.
    assert run.first.asked == [61.0]
    assert run.replacements == [61.0]
    assert run.first.closed
    assert run.context.summary.consumer_replacements == 1
    # The new consumer was never asked: the watch is off until the next loss.
    assert run.context.consumer.asked == []


def test_one_second_short_of_the_grace_the_broker_is_not_asked(monkeypatch):
    run = _Run(monkeypatch, static=True, until=60.0)()  # the last poll at t=60, 59 s after the loss
    assert (run.first.asked, run.replacements) == ([], [])


def test_while_the_broker_is_down_the_client_keeps_rejoining_and_the_watch_asks_every_5_s(monkeypatch):
    run = _Run(monkeypatch, static=True, broker_from=100.0)()
    assert run.first.asked == [61.0, 66.0, 71.0, 76.0, 81.0, 86.0, 91.0, 96.0, 101.0]
    assert run.replacements == [101.0]


@pytest.mark.parametrize("assign_at", [2.0, 61.0])
def test_an_assignment_back_before_the_grace_ends_keeps_the_consumer(monkeypatch, assign_at):
    # An empty assignment counts (a member may get no partition); at t=61 it comes in the same
    # poll as the first ask would have.
    run = _Run(monkeypatch, static=True, assign_at=assign_at)()
    assert (run.first.asked, run.replacements) == ([], [])


def test_a_dynamic_member_is_never_replaced_for_a_slow_rejoin(monkeypatch):
    run = _Run(monkeypatch, static=False)()
    assert (run.first.asked, run.replacements) == ([], [])
    assert run.context.consumer is run.first


def test_the_grace_and_the_interval_must_be_positive():
    with pytest.raises(ValueError, match="must be > 0"):
        RejoinWatch(grace=0.0)
    with pytest.raises(ValueError, match="must be > 0"):
        RejoinWatch(every=-1.0)
