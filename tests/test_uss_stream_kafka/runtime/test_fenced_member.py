"""A static member fenced after a broker outage: its consumer is replaced, the run goes on.

librdkafka, after an outage longer than ``session.timeout.ms``, revokes the assignment and rejoins
under a new member id; an offset commit still under the old id is refused with FENCED_INSTANCE_ID
(82). Its commit result is not flagged fatal, but the consumer is (every later poll fails with
``_FATAL``); kafka-python refuses the commit the same way, not fatal. The service used to exit with
a traceback (the commit's error re-raised), or leave events undecided. The rule: a fence seen in a
poll or a commit replaces the consumer before the next poll; the replaced one's partitions restore
from their checkpoints (at least once).
"""

from __future__ import annotations

import pytest

from uss_stream_kafka import Topics
from uss_stream_kafka.clients.base import ClientError
from uss_stream_kafka.runtime.commit import CommitSchedule
from uss_stream_kafka.runtime.context import RunContext
from uss_stream_kafka.runtime.loop import PollLoop


class _Consumer:
    """Polls return nothing; ``failures`` are raised by the first polls, in order."""

    def __init__(self, context: RunContext, failures: list[ClientError], polls: int) -> None:
        self.context, self.failures, self.polls = context, list(failures), polls

    def poll(self, timeout: float) -> dict:
        self.polls -= 1
        if self.polls <= 0:
            self.context.stop.set()
        if self.failures:
            raise self.failures.pop(0)
        return {}

    def assignment(self) -> set:
        return set()

    def paused(self) -> set:
        return set()


class _Recovery:
    pending: set = frozenset()
    held: dict = {}
    assigned_once = False
    rebalancing = False

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self.replaced: list[ClientError] = []

    def replace_consumer(self, error: ClientError) -> None:
        self.replaced.append(error)
        self.context.consumer = _Consumer(self.context, [], polls=1)

    def replace_if_rejoin_overdue(self, now: float) -> bool:
        return False  # no lost membership here (``test_rejoin_watch.py``)


class _Committer:
    rewind_needed = False

    def __init__(self) -> None:
        self.consumer_fenced: ClientError | None = None
        self.schedule = CommitSchedule(3600.0, 0, 3600.0, 0)  # no commit point due


class _Layers:
    def __init__(self, recovery: _Recovery) -> None:
        self.recovery = recovery
        self.dispatcher = None
        self.sharing = None


def _loop(failures: list[ClientError], fenced_in_commit: ClientError | None = None):
    context = RunContext(Topics("in", "out", "dlq", "state"), "group")
    context.consumer = _Consumer(context, failures, polls=len(failures) + 1)
    committer = _Committer()
    committer.consumer_fenced = fenced_in_commit
    loop = PollLoop(context, committer, exit_when_idle=None, exactly_once=False, started=0.0)
    recovery = _Recovery(context)
    loop.layers = _Layers(recovery)
    return loop, recovery, committer


@pytest.mark.parametrize("fatal", [True, False])
def test_a_poll_that_says_the_member_was_fenced_replaces_the_consumer(fatal):
    fenced = ClientError("fenced", code=82, fatal=fatal)
    loop, recovery, _ = _loop([fenced])
    loop.run()
    assert recovery.replaced == [fenced]


def test_a_fence_seen_by_an_offset_commit_replaces_the_consumer_before_the_next_poll():
    fenced = ClientError("fenced", code=82)
    loop, recovery, committer = _loop([], fenced_in_commit=fenced)
    first = loop.context.consumer
    loop.run()
    assert recovery.replaced == [fenced]
    assert committer.consumer_fenced is None
    assert first.polls == 1  # the fenced consumer was never polled again


@pytest.mark.parametrize(
    "error",
    [
        ClientError("broker down", name="_TRANSPORT", retriable=True),  # retried, same consumer
        ClientError("rebalancing", code=27, retriable=True),
    ],
)
def test_other_retriable_poll_errors_keep_the_consumer(error):
    loop, recovery, _ = _loop([error])
    loop.context.stop.wait = lambda seconds: False  # no pause between the retries
    loop.run()
    assert recovery.replaced == []


def test_a_poll_error_neither_retriable_nor_a_fence_ends_the_run():
    error = ClientError("not authorised", code=29)
    loop, recovery, _ = _loop([error])
    with pytest.raises(ClientError, match="not authorised"):
        loop.run()
    assert recovery.replaced == []
