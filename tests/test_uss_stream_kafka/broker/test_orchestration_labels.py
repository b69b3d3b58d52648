"""Orchestration with a label-asking policy (issue 13 item 3): ``--policy audited`` on a real broker.

A report that makes the policy ask for its event's label yields ``{"id": ..., "label_requested":
true}`` on the decisions topic; the sensor side answers with ``{"id": ..., "label": ...}`` on the
reports topic. The expectations come from an in-process ``PendingDecisions(AuditedUSS(costs))``
fed the same decide / report / report_label calls in the same order (the library's flow, stepped
here), never from the service under test.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import produce, read_all
from orchestrated import Serving, orchestrator

from uss_stream.datasets.bsc import generate_bsc
from uss_stream.pending import PendingDecisions, RejectedReport
from uss_stream.policies import AuditedUSS
from uss_stream_kafka.processing.deadletter import DeadLetter
from uss_stream_kafka.processing.orchestration import OrchestrationTopics, create_orchestration_topics

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(300),
]

#: Cheap deeper stages: the stages keep being queried, and disagreeing, so the policy keeps asking.
COSTS = [0.0, 0.02, 0.05]
OUTPUTS, LABELS = generate_bsc(2_000, seed=3)


@pytest.fixture
def topics(admin: Any) -> Iterator[OrchestrationTopics]:
    run = uuid.uuid4().hex[:10]
    made = OrchestrationTopics(*(f"ol-{run}-{role}" for role in ("req", "rep", "dec", "dlq", "state")))
    create_orchestration_topics(admin, made)
    yield made
    admin.delete_topics(list(made.all()))


def serve(bootstrap: str, topics: OrchestrationTopics, group: str, **settings: Any) -> Serving:
    serving = Serving(orchestrator(bootstrap, topics, group, COSTS, policy="audited", **settings))
    serving.wait_ready(60)
    return serving


def encoded(documents: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(d).encode() for d in documents]


def outputs_of(i: int, depth: int) -> list[int]:
    return OUTPUTS[i, :depth].tolist()


def label_of(i: int) -> int:
    return int(LABELS[i])


def index(decision_id: str) -> int:
    return int(decision_id[1:])


class Sensors:
    """The sensor side and the in-process reference: every call goes to both, in the same order."""

    def __init__(self, bootstrap: str, topics: OrchestrationTopics, serving: Serving) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.serving = serving
        self.reference = PendingDecisions(AuditedUSS(COSTS))
        self.depths: dict[str, int] = {}
        self.asked: list[str] = []  # the ids the reference asks labels for, in report order

    def request(self, ids: range) -> None:
        """Requests ``r<i>``; the service's decisions must be the reference's."""
        before = self.serving.orchestrator.summary.decisions  # this run's
        produce(self.bootstrap, self.topics.requests, encoded([{"id": f"r{i}"} for i in ids]))
        self.serving.wait_for(lambda s: s.decisions == before + len(ids), timeout=120)
        for i in ids:
            self.depths[f"r{i}"] = self.reference.decide(f"r{i}")
        decided = {d["id"]: d["depth"] for d in self.decisions() if "depth" in d}
        assert decided == self.depths

    def report(self, ids: list[str]) -> None:
        """The reports of ``ids`` (in that order), applied by the service as by the reference."""
        reports = [{"id": i, "outputs": outputs_of(index(i), self.depths[i])} for i in ids]
        before = self.serving.orchestrator.summary.applied
        produce(self.bootstrap, self.topics.reports, encoded(reports))
        self.serving.wait_for(lambda s: s.applied == before + len(ids), timeout=120)
        for report in reports:
            self.reference.report(report["id"], report["outputs"])
            if self.reference.label_requested(report["id"]):
                self.asked.append(report["id"])

    def label(self, ids: list[str]) -> None:
        labels = [{"id": i, "label": label_of(index(i))} for i in ids]
        before = self.serving.orchestrator.summary.labels_applied
        produce(self.bootstrap, self.topics.reports, encoded(labels))
        self.serving.wait_for(lambda s: s.labels_applied == before + len(ids), timeout=120)
        for label in labels:
            self.reference.report_label(label["id"], label["label"])

    def decisions(self, isolation_level: str = "read_uncommitted") -> list[dict[str, Any]]:
        """The decisions topic, once it holds (at least) a record per decision and label request."""
        expected = len(self.depths) + self.serving.orchestrator.summary.labels_requested
        records = read_all(self.bootstrap, self.topics.decisions, expected, isolation_level=isolation_level)
        return [json.loads(r.value) for r in records]

    def label_requests(self, isolation_level: str = "read_uncommitted") -> list[str]:
        """The ids the service asked labels for, in the order it asked."""
        requests = [d for d in self.decisions(isolation_level) if "label_requested" in d]
        assert all(d == {"id": d["id"], "label_requested": True} for d in requests)
        return [d["id"] for d in requests]

    def last_state(self) -> dict[str, Any]:
        records = read_all(self.bootstrap, self.topics.state, isolation_level="read_committed")
        return json.loads(records[-1].value)["state"]


def dead_letters(bootstrap: str, topic: str) -> list[DeadLetter]:
    return [DeadLetter.from_record(r.value) for r in read_all(bootstrap, topic)]


def test_audited_end_to_end_exactly_once_equals_pending_decisions_in_process(
    bootstrap_servers: str, topics: OrchestrationTopics
) -> None:
    """Requests, reports, the label requests that come out, their labels, more requests: under
    exactly-once, a ``read_committed`` reader sees the reference's decisions and label requests,
    and the last checkpoint holds the reference's whole state (evidence, counts, labels awaited)."""
    serving = serve(bootstrap_servers, topics, f"g-{uuid.uuid4().hex[:8]}", guarantee="exactly-once")
    sensors = Sensors(bootstrap_servers, topics, serving)
    shuffle = random.Random(4)

    sensors.request(range(400))
    reported = [f"r{i}" for i in range(400)]
    shuffle.shuffle(reported)
    sensors.report(reported[:380])  # 20 never reported
    first = list(sensors.asked)
    assert len(first) >= 20  # the stages disagree: the policy asks
    assert sensors.label_requests() == first
    answered = first[:-5]  # 5 labels never come
    shuffle.shuffle(answered)
    sensors.label(answered)
    sensors.request(range(400, 800))  # decided on the labels too
    sensors.report([f"r{i}" for i in range(400, 800)])
    second = sensors.asked[len(first) :]
    assert second  # still asking
    sensors.label(second[::2])
    summary = serving.stop()

    # What a read_committed reader sees: one decision per request, the reference's label requests.
    committed = sensors.decisions("read_committed")
    assert len(committed) == 800 + len(sensors.asked)
    assert {d["id"]: d["depth"] for d in committed if "depth" in d} == sensors.depths
    assert sensors.label_requests("read_committed") == sensors.asked
    reference = sensors.reference
    assert reference.policy.labels_received > 0 and reference.awaiting_labels > 0
    assert sensors.last_state() == json.loads(json.dumps(reference.state_dict()))
    assert (summary.labels_requested, summary.labels_applied, summary.labels_awaited) == (
        len(sensors.asked),
        reference.policy.labels_received,
        reference.awaiting_labels,
    )
    assert (
        sum(summary.dead_letters.values()) == 0 and dead_letters(bootstrap_servers, topics.dead_letter) == []
    )


def test_labels_that_cannot_be_applied_are_dead_lettered_with_their_reason(
    bootstrap_servers: str, topics: OrchestrationTopics
) -> None:
    """An unknown id, an id that did not ask, a second label, and malformed label records: each
    is one dead letter with its reason, counted in the summary and the metrics, and the service
    goes on deciding and learning."""
    serving = serve(bootstrap_servers, topics, f"g-{uuid.uuid4().hex[:8]}")
    sensors = Sensors(bootstrap_servers, topics, serving)
    sensors.request(range(200))
    sensors.report([f"r{i}" for i in range(190)])
    asked = sensors.asked
    not_asked = next(f"r{i}" for i in range(190) if f"r{i}" not in asked)
    assert len(asked) >= 2 and sensors.label_requests() == asked
    sensors.label([asked[0]])

    bad = [
        {"id": "nobody", "label": 1},  # report_label_unknown
        {"id": not_asked, "label": 1},  # report_label_not_requested: reported, no label asked
        {"id": "r195", "label": 1},  # report_label_not_requested: still pending
        {"id": asked[0], "label": label_of(index(asked[0]))},  # report_label_duplicate
        {"id": asked[1], "outputs": [1], "label": 1},  # both: report_invalid
        {"id": asked[1], "label": None},  # report_invalid
        {"id": asked[1], "label": [1]},  # report_invalid
        {"id": asked[1]},  # neither: missing_field
    ]
    produce(bootstrap_servers, topics.reports, encoded(bad))
    serving.wait_for(lambda s: sum(s.dead_letters.values()) == len(bad))
    # Still running: it decides, applies reports and learns the label still awaited.
    sensors.request(range(200, 260))
    sensors.report([f"r{i}" for i in range(200, 260)])
    sensors.label([asked[1]])
    app = serving.app
    summary = serving.stop()

    letters = dead_letters(bootstrap_servers, topics.dead_letter)
    expected = Counter(
        {
            "report_label_unknown": 1,
            "report_label_not_requested": 2,
            "report_label_duplicate": 1,
            "report_invalid": 3,
            "missing_field": 1,
        }
    )
    assert Counter(letter.reason for letter in letters) == expected
    assert {k: v for k, v in summary.dead_letters.items() if v} == dict(expected)
    for reason, count in expected.items():
        sample = app.metrics.registry.get_sample_value("uss_kafka_dead_letters_total", {"reason": reason})
        assert sample == count, reason
    assert [json.loads(letter.value) for letter in letters] == bad  # each with its record
    assert all(letter.topic == topics.reports for letter in letters)
    by_reason = {letter.reason: letter.error for letter in letters}
    assert "decision 'nobody' is unknown" in by_reason["report_label_unknown"]
    assert f"the label of decision {asked[0]!r} was already applied" in by_reason["report_label_duplicate"]
    # The rejected labels changed nothing: the state is the reference's (which rejects them too).
    for record in bad[:4]:
        with pytest.raises(ValueError):
            sensors.reference.report_label(record["id"], record["label"])
    assert sensors.last_state() == json.loads(json.dumps(sensors.reference.state_dict()))
    assert summary.labels_applied == 2


def test_a_restart_keeps_the_labels_awaited_and_rejects_a_replayed_label(
    bootstrap_servers: str, topics: OrchestrationTopics
) -> None:
    """A clean stop, then a new service on the same group: the labels asked for before the stop
    are applied when they come after it, and a label applied before the stop, sent again, is
    dead-lettered ``report_label_duplicate``."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    serving = serve(bootstrap_servers, topics, group)
    sensors = Sensors(bootstrap_servers, topics, serving)
    sensors.request(range(300))
    sensors.report([f"r{i}" for i in range(300)])
    asked = list(sensors.asked)
    assert len(asked) >= 4
    sensors.label(asked[:1])
    serving.stop()
    awaited = [item[0] for item in sensors.last_state()["labels"]["awaiting"]]
    assert awaited == asked[1:]

    serving = serve(bootstrap_servers, topics, group)
    sensors.serving = serving
    restarted = serving.orchestrator.summary
    assert restarted.restored and restarted.labels_awaited == len(asked) - 1
    sensors.label(asked[1:])  # after the restart: applied
    produce(
        bootstrap_servers, topics.reports, encoded([{"id": asked[0], "label": label_of(index(asked[0]))}])
    )
    serving.wait_for(lambda s: sum(s.dead_letters.values()) == 1)
    with pytest.raises(RejectedReport) as rejected:  # as the reference, which was not restarted
        sensors.reference.report_label(asked[0], label_of(index(asked[0])))
    assert rejected.value.reason == "duplicate"
    sensors.request(range(300, 400))  # decided on the labels learned after the restart, as in process
    summary = serving.stop()

    (letter,) = dead_letters(bootstrap_servers, topics.dead_letter)
    assert letter.reason == "report_label_duplicate"
    assert (summary.labels_applied, summary.labels_awaited) == (len(asked), 0)
    assert sensors.label_requests() == asked  # nothing asked twice across the restart
    assert sensors.last_state() == json.loads(json.dumps(sensors.reference.state_dict()))
