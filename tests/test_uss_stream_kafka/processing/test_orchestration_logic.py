"""Orchestration without a broker: requests and reports parsed or refused with their reason, a learner's
decisions and state through a checkpoint, and the crash-free reference the broker's crash test
compares against (``broker/test_orchestration*.py`` run orchestration on the real broker).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.test_uss_stream_kafka.helpers import COSTS as SERVICE_COSTS
from tests.test_uss_stream_kafka.helpers import assert_decided_as_without_crashes
from uss_stream.policies.specs import parse_spec
from uss_stream_kafka.processing.deadletter import DeadLetter
from uss_stream_kafka.processing.events import InvalidEvent
from uss_stream_kafka.processing.orchestration import OrchestrationProcessor, parse_report, parse_request

COSTS = [0.0, 0.1, 0.2]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "invalid_json"),
        (b"not json", "invalid_json"),
        (b"\xff\xfe", "invalid_json"),
        (b"[1]", "wrong_type"),
        (b'{"context": 1}', "missing_field"),
        (b'{"id": 1.5}', "wrong_type"),
        (b'{"id": "x", "pad": "' + b"a" * 100 + b'"}', "oversize"),
    ],
)
def test_parse_request_rejects(value: bytes | None, reason: str) -> None:
    with pytest.raises(InvalidEvent) as error:
        parse_request(value, max_bytes=64)
    assert error.value.reason == reason


def test_parse_report() -> None:
    assert parse_report(b'{"id": "a", "outputs": [1, 0, 1]}') == ("a", [1, 0, 1])
    for value, reason in ((b'{"id": "a"}', "missing_field"), (b'{"id": "a", "outputs": 1}', "wrong_type")):
        with pytest.raises(InvalidEvent) as error:
            parse_report(value)
        assert error.value.reason == reason


def offline(**settings: Any) -> OrchestrationProcessor:
    return OrchestrationProcessor(COSTS, **settings)


def test_decision_and_checkpoint_round_trip() -> None:
    processor = offline()
    first = processor.new_learner()
    assert first.decision(3, 3, {"lane": 1}) == {
        "id": 3,
        "depth": 3,
        "stages": ["stage1", "stage2", "stage3"],
        "cost": pytest.approx(0.3),
        "context": {"lane": 1},
    }
    first.book.decide("a")
    first.book.decide(7)
    first.book.report(7, [1, 0, 1])
    document = json.loads(json.dumps(first.state_dict()))
    description = json.loads(json.dumps(processor.describe()))
    second = offline().new_learner()
    second.load_state_dict(document)
    assert second.book.pending == 1 and second.book.depth_of("a") == first.book.depth_of("a")
    assert second.book.policy.stats == first.book.policy.stats
    second.book.report("a", [1])
    with pytest.raises(ValueError, match="stage costs"):
        OrchestrationProcessor([0.0, 0.5]).check_checkpoint(description)
    with pytest.raises(ValueError, match="distinct names"):
        offline(stage_names=["a", "a", "b"])
    with pytest.raises(ValueError, match="unknown dead-letter reason"):
        DeadLetter("nope", "", "t", 0, 0, None, None, None)


def test_the_crash_free_reference_rejects_a_report_applied_twice():
    """The reference of ``broker/test_orchestration_crash.py`` can fail: a learner that applies the
    first report twice decides differently from any crash-free interleaving of the same reports."""
    from uss_stream.pending import PendingDecisions

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 400)
    outputs = np.stack([truth ^ (rng.random(400) < 0.2), truth ^ (rng.random(400) < 0.1), truth], axis=1)

    def served(applied_twice: str | None) -> tuple[list[dict[str, Any]], list[tuple[str, list[int]]]]:
        book = PendingDecisions(parse_spec("uss-ucb:alpha=0.51").build(SERVICE_COSTS))
        decisions, reports = [], []
        for i in range(400):
            decisions.append({"id": f"r{i}", "depth": book.decide(f"r{i}")})
            if i >= 3:  # each report comes three requests after its decision
                j = i - 3
                report = (f"r{j}", outputs[j, : decisions[j]["depth"]].tolist())
                book.report(*report)
                reports.append(report)
                if report[0] == applied_twice:
                    book.policy.stats.record(report[1])
        return decisions, reports

    assert_decided_as_without_crashes(*served(None))
    with pytest.raises(AssertionError, match="is not USS-UCB's"):
        assert_decided_as_without_crashes(*served("r0"))
