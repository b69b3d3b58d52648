"""State a long-running service keeps stays bounded by its limits, not by the events it has seen.

An orchestration learner checkpoints its whole state in one record, which must stay within
``max_state_bytes`` (``docs/orchestration.md``: past 90% of it the oldest entries expire, down to
70%). With a label-asking policy (``audited``) the labels asked for and never answered are part of
that state, and the policy asks for up to ``label_budget·sqrt(t)`` of them by round ``t``: they
grow with the round. Before, only pending decisions expired, so once the awaited labels alone
exceeded the limit every checkpoint raised (a service crash-loops at the same point: with the
default 1 MB limit after ~10^8 requests whose labels never come, sooner once contradictions raise
the budget). Expected values come from that contract and from the book's counters.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from uss_stream_kafka.clients import TopicPartition
from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.operations.metrics import ServiceMetrics
from uss_stream_kafka.processing.events import InvalidEvent
from uss_stream_kafka.processing.orchestration import OrchestrationProcessor
from uss_stream_kafka.processing.processors import OutputsProcessor
from uss_stream_kafka.processing.state_budget import TRIM_AT
from uss_stream_kafka.runtime.context import RunContext
from uss_stream_kafka.runtime.progress import IdleGate
from uss_stream_kafka.runtime.recovery import Recovery

LIMIT = 8000


def _size(state: dict) -> int:
    return len(json.dumps({"state": state}, separators=(",", ":")).encode())


def _serve(learner, requests: range, rng: np.random.Generator, report: float = 1.0) -> list[int]:
    """Decide ``requests``, report a share of them (stage 1 wrong on 30%); returns the ids asked about."""
    asked = []
    for i in requests:
        depth = learner.process(b'{"id": %d}' % i)[1]
        truth = int(rng.integers(0, 2))
        outputs = [truth ^ int(rng.random() < 0.3), truth ^ int(rng.random() < 0.1), truth][:depth]
        if rng.random() < report and learner.learn(json.dumps({"id": i, "outputs": outputs}).encode()):
            asked.append(i)
    return asked


@pytest.mark.parametrize("max_age_decisions", [100, None])
def test_labels_that_never_come_do_not_outgrow_the_checkpoint(max_age_decisions):
    processor = OrchestrationProcessor(
        [0.0, 0.15, 0.2], policy="audited", max_age_decisions=max_age_decisions, max_state_bytes=LIMIT
    )
    learner = processor.new_learner()
    book = learner.book
    rng = np.random.default_rng(0)
    asked: list[int] = []
    for start in range(0, 40_000, 5000):
        asked += _serve(learner, range(start, start + 5000), rng, report=0.95)
        state = learner.state_dict()
        assert _size(state) <= TRIM_AT * LIMIT
        assert book.label_counters["requested"] == len(asked)
        assert book.label_counters["expired"] + book.awaiting_labels == len(asked)
        assert len(state["labels"]["awaiting"]) == book.awaiting_labels
    # By then the budget has asked for more labels than the checkpoint can hold.
    assert len(asked) * len(json.dumps([asked[-1], [0, 0, 0], 7, asked[-1]])) > LIMIT
    # The newest are kept: the last label asked for still applies, the first one expired (and its
    # id was forgotten to keep the remembered ids within the limit too: it is unknown by now).
    learner.learn(json.dumps({"id": asked[-1], "label": 1}).encode())
    assert book.label_counters["applied"] == 1
    with pytest.raises(InvalidEvent, match="report_label_unknown"):
        learner.learn(json.dumps({"id": asked[0], "label": 1}).encode())


class _Consumer:
    """What a restore asks of the consumer: partitions with records 0..99 and a commit at 100."""

    def __init__(self) -> None:
        self.assigned: set = set()

    def assignment(self) -> set:
        return set(self.assigned)

    def beginning_offsets(self, tps) -> dict:
        return dict.fromkeys(tps, 0)

    def end_offsets(self, tps) -> dict:
        return dict.fromkeys(tps, 100)

    def committed(self, tp) -> int:
        return 100

    def seek(self, tp, offset: int) -> None:
        pass

    def pause(self, tps) -> None:
        pass

    def resume(self, tps) -> None:
        pass

    def paused(self) -> set:
        return set()


class _Store:
    def refresh(self) -> None:
        pass

    def get(self, topic: str, partition: int) -> None:
        return None


class _Committer:
    exactly_once = False

    def handover(self, states, labels) -> dict:
        return {}


def _rebalanced(rebalances: int):
    """The run context after ``rebalances`` assignments (and revocations) of 4 partitions."""
    topics = Topics("in", "out", "dlq", "state")
    context = RunContext(topics, "group")
    context.processor = OutputsProcessor([0.0, 0.1])
    context.metrics = ServiceMetrics(2)
    context.consumer = _Consumer()
    store, idle = _Store(), IdleGate()
    recovery = Recovery(
        context, _Committer(), store, None, None, idle, auto_offset_reset="earliest", n_output=4, n_dlq=4
    )
    tps = [TopicPartition("in", p) for p in range(4)]
    for _ in range(rebalances):
        context.consumer.assigned = set(tps)
        recovery.on_assigned(tps)
        assert recovery.restore_pending() == set(tps)
        recovery.on_revoked(tps)
    return context


def test_the_run_summary_does_not_grow_with_the_rebalances(caplog):
    caplog.set_level(logging.ERROR)  # a restore logs a line per partition
    few, many = _rebalanced(300).summary, _rebalanced(3000).summary
    assert len(many.restored) == len(few.restored)
    assert (
        many.restored[-4:]
        == few.restored[-4:]
        == [f"in/{p}: no checkpoint, committed @100, start @0, replay to @100" for p in range(4)]
    )
