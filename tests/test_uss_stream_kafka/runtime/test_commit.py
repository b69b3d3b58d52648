"""Offset commits that fail: which failures end the run and which leave the offsets for later."""

from __future__ import annotations

import pytest

from uss_stream_kafka import ClientConfig, Topics
from uss_stream_kafka.clients.base import ClientError
from uss_stream_kafka.runtime.commit import CommitSchedule, Committer
from uss_stream_kafka.runtime.context import RunContext


class RefusingConsumer:
    """A consumer whose every commit fails with ``error``."""

    def __init__(self, error: ClientError) -> None:
        self.error = error
        self.commits = 0

    def commit(self, offsets: dict) -> None:
        self.commits += 1
        raise self.error


def committer_with(consumer: RefusingConsumer) -> Committer:
    context = RunContext(Topics(input="in", output="out", dead_letter="dlq", state="state"), "group")
    context.consumer = consumer
    schedule = CommitSchedule(1.0, 0, 5.0, 0)
    return Committer(context, ClientConfig("127.0.0.1:1"), {}, exactly_once=False, transactional_id=None,
                     schedule=schedule)  # fmt: skip


@pytest.mark.parametrize("fatal", [True, False])
def test_a_static_member_fenced_leaves_its_offsets_to_the_replaced_consumer(fatal):
    # After a broker outage longer than the session, librdkafka rejoins under a new member id and a
    # commit under the old one is refused: FENCED_INSTANCE_ID (82), the commit's error not flagged
    # fatal although the consumer is dead for good (a fatal error on its next poll); kafka-python
    # refuses it the same way, not fatal. Either way the commit must not end the run: the committer
    # hands the consumer to the loop to replace, and records nothing as committed.
    error = ClientError("fenced", code=82, fatal=fatal)
    consumer = RefusingConsumer(error)
    committer = committer_with(consumer)
    committer._commit({("in", 0): 10})
    assert consumer.commits == 1
    assert committer.context.summary.commits == 0
    assert committer.consumer_fenced is error


@pytest.mark.parametrize(
    "error",
    [
        ClientError("not authorised", code=29, fatal=True),  # another fatal error still ends the run
        ClientError("unknown", code=-1),
    ],
)
def test_other_fatal_or_unknown_commit_failures_end_the_run(error):
    committer = committer_with(RefusingConsumer(error))
    with pytest.raises(ClientError):
        committer._commit({("in", 0): 10})
    assert committer.consumer_fenced is None
