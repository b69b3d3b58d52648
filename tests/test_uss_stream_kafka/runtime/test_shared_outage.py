"""Shared learning during a broker outage: an unanswered state-topic read is not fatal.

A soak run (exactly-once, shared learning, broker restarts) saw a worker exit 3 when a rewind right
after a revocation shared counts while the broker was down: the state topic's end offsets timed
out. The read is retried at the next commit point; any other error still ends the run.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from uss_stream_kafka.clients import ClientError, TopicPartition
from uss_stream_kafka.runtime.shared import SharedLearning


class Store:
    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.reads = 0

    def refresh(self) -> None:
        self.reads += 1
        raise self.error

    def checkpoints(self):  # never reached: the read failed
        raise AssertionError("checkpoints read after a failed refresh")


def context() -> SimpleNamespace:
    return SimpleNamespace(partitions={TopicPartition("in", 0): object()}, summary=SimpleNamespace(shares=0))


@pytest.mark.parametrize(
    "error",
    [
        ClientError("end_offsets: KafkaTimeoutError", name="_TIMED_OUT", retriable=True, timeout=True),
        ClientError("no broker", name="_TRANSPORT", retriable=True),
        TimeoutError("could not read state topic 'state' to its end within 30s"),
    ],
)
def test_a_state_topic_that_does_not_answer_is_shared_next_time(error, caplog):
    run, store = context(), Store(error)
    sharing = SharedLearning(run, store)
    with caplog.at_level(logging.WARNING, logger="uss_stream_kafka"):
        sharing.share()
    assert store.reads == 1 and run.summary.shares == 0
    assert "shared learning: the state topic did not answer" in caplog.text


def test_any_other_error_of_the_read_still_ends_the_run():
    denied = ClientError("TOPIC_AUTHORIZATION_FAILED", code=29)
    with pytest.raises(ClientError, match="TOPIC_AUTHORIZATION_FAILED"):
        SharedLearning(context(), Store(denied)).share()
