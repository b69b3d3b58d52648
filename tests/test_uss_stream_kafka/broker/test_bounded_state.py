"""The orchestrator's remembered ids are bounded by bytes: long ids cannot outgrow the state topic.

``--policy audited`` remembers the ids of the labels it applied (to dead-letter a duplicate label),
as it remembers the reported ids. With 200 000-byte ids six applied labels are 1.2 MB, more than a
checkpoint may hold on a state topic of the broker's default limit: the checkpoint must give up
the oldest label ids (as it does the reported ones) instead of failing, at every restart, to be
written. The policy asks for labels when the stages disagree, about ``3·sqrt(t)`` of them by round
``t``: 17 requests whose reports all disagree get at least six label requests.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from conftest import produce, read_all
from orchestrated import Serving, orchestrator
from test_orchestration_labels import topics  # noqa: F401 (fixture)

from uss_stream.pending import PendingDecisions
from uss_stream.policies import AuditedUSS
from uss_stream_kafka.processing.orchestration import MAX_STATE_BYTES, OrchestrationTopics

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

COSTS = [0.0, 0.02, 0.05]
ID_BYTES = 200_000
REQUESTS = 17


def encoded(documents: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(d).encode() for d in documents]


def test_applied_label_ids_are_trimmed_to_fit_the_state_topic(
    bootstrap_servers: str,
    topics: OrchestrationTopics,  # noqa: F811
) -> None:
    ids = [f"r{i:02d}-" + "x" * ID_BYTES for i in range(REQUESTS)]
    group = f"g-{uuid.uuid4().hex[:10]}"
    serving = Serving(orchestrator(bootstrap_servers, topics, group, COSTS, policy="audited"))
    serving.wait_ready(60)
    # One event at a time, as an in-process reference fed the same calls: its decision, a report
    # whose stages disagree, and its label if the policy asks (a label never waits long).
    reference = PendingDecisions(AuditedUSS(COSTS))
    asked = []
    for n, i in enumerate(ids, 1):
        produce(bootstrap_servers, topics.requests, encoded([{"id": i}]))
        serving.wait_for(lambda s, n=n: s.decisions == n, timeout=60)
        outputs = [0, 1, 0][: reference.decide(i)]
        reference.report(i, outputs)
        produce(bootstrap_servers, topics.reports, encoded([{"id": i, "outputs": outputs}]))
        serving.wait_for(lambda s, n=n: s.applied == n, timeout=60)
        if reference.label_requested(i):
            asked.append(i)
            reference.report_label(i, 0)
            produce(bootstrap_servers, topics.reports, encoded([{"id": i, "label": 0}]))
            labelled = len(asked)
            serving.wait_for(lambda s, k=labelled: s.labels_applied == k, timeout=60)
    assert len(asked) * ID_BYTES > MAX_STATE_BYTES  # more than a checkpoint may hold
    first = serving.stop()  # a clean stop writes the checkpoint

    assert first.decisions == REQUESTS and first.labels_applied == len(asked) == first.labels_requested
    (record,) = [r for r in read_all(bootstrap_servers, topics.state)][-1:]
    assert len(record.value) < 1_048_576
    labels_closed = json.loads(record.value)["state"]["labels"]["closed"]["ids"]
    assert len(labels_closed) < len(asked) and labels_closed == asked[len(asked) - len(labels_closed) :]

    # The restart restores that checkpoint; a duplicate of the newest label is never applied.
    serving = Serving(orchestrator(bootstrap_servers, topics, group, COSTS, policy="audited"))
    serving.wait_ready(60)
    produce(bootstrap_servers, topics.reports, encoded([{"id": asked[-1], "label": 0}]))
    serving.wait_for(lambda s: sum(v for k, v in s.dead_letters.items() if "label" in k) == 1, timeout=60)
    second = serving.stop()
    assert second.restored and second.labels_applied == first.labels_applied  # cumulative counts
    # Remembered: a duplicate; forgotten: not awaited (its report is remembered) or unknown.
    if asked[-1] in labels_closed:
        assert second.dead_letters["report_label_duplicate"] == 1
