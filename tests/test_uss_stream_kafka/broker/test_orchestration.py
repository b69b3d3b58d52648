"""Orchestration mode: requests -> decisions, sensor reports joined by id, on a real broker."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from conftest import PROCESSES, checkpoints_of, produce, read_all
from orchestrated import Orchestrator, Serving, orchestrator

from uss_stream.core.stats import DisagreementStats
from uss_stream_kafka.processing.deadletter import DeadLetter
from uss_stream_kafka.processing.orchestration import (
    OrchestrationTopics,
    create_orchestration_topics,
)

COSTS = [0.0, 0.1, 0.2]


@pytest.fixture
def make_orchestration_topics(admin: Any) -> Iterator[Callable[[], OrchestrationTopics]]:
    created: list[str] = []

    def make(partitions: int = 1) -> OrchestrationTopics:
        run = uuid.uuid4().hex[:10]
        topics = OrchestrationTopics(
            requests=f"o-{run}-req",
            reports=f"o-{run}-rep",
            decisions=f"o-{run}-dec",
            dead_letter=f"o-{run}-dlq",
            state=f"o-{run}-state",
        )
        create_orchestration_topics(admin, topics, partitions=partitions)
        created.extend(topics.all())
        return topics

    yield make
    if created:
        admin.delete_topics(created)


def new_orchestrator(
    bootstrap: str, topics: OrchestrationTopics, group: str, **settings: Any
) -> Orchestrator:
    return orchestrator(bootstrap, topics, group, COSTS, **settings)


def dead_reasons(bootstrap: str, topic: str) -> Counter[str]:
    return Counter(DeadLetter.from_record(r.value).reason for r in read_all(bootstrap, topic))


def last_checkpoint(bootstrap: str, topics: OrchestrationTopics) -> dict[str, Any]:
    return json.loads(read_all(bootstrap, topics.state)[-1].value)


@pytest.mark.kafka
def test_shuffled_delayed_reports_exactly_once(
    bootstrap_servers: str, make_orchestration_topics: Callable[[], OrchestrationTopics]
) -> None:
    n = 5_000
    topics = make_orchestration_topics()
    serving = Serving(new_orchestrator(bootstrap_servers, topics, f"g-{uuid.uuid4().hex[:8]}"))
    serving.wait_ready(30)
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 2, n)
    outputs = np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1)
    produce(bootstrap_servers, topics.requests, [json.dumps({"id": f"r{i}"}).encode() for i in range(n)])
    decisions = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.decisions, expected=n)]
    assert Counter(d["id"] for d in decisions) == Counter(f"r{i}" for i in range(n))
    requests = read_all(bootstrap_servers, topics.requests)
    decided_at = {
        json.loads(r.value)["id"]: r.timestamp for r in read_all(bootstrap_servers, topics.decisions)
    }
    latency = np.array([decided_at[json.loads(r.value)["id"]] - r.timestamp for r in requests])
    span = (max(decided_at.values()) - min(r.timestamp for r in requests)) / 1000
    p99 = np.percentile(latency, 99)
    print(f"\norchestration: {n / span:.0f} decisions/s, p99 request->decision {p99:.0f} ms")

    shuffle = random.Random(2)
    reported = [d for d in decisions if shuffle.random() >= 0.01]  # 1% never reported
    shuffle.shuffle(reported)
    reports = [
        json.dumps({"id": d["id"], "outputs": outputs[int(d["id"][1:]), : d["depth"]].tolist()}).encode()
        for d in reported
    ]
    expected = DisagreementStats(3)
    expected.decisions = n
    for d in reported:
        expected.record(outputs[int(d["id"][1:]), : d["depth"]].tolist())
    produce(bootstrap_servers, topics.reports, reports)
    serving.wait_for(lambda s: s.reports == len(reports))
    summary = serving.stop()

    assert summary.decisions == n and summary.applied == len(reported)
    assert sum(summary.dead_letters.values()) == 0
    assert read_all(bootstrap_servers, topics.dead_letter) == []
    state = last_checkpoint(bootstrap_servers, topics)["state"]
    assert DisagreementStats.from_dict(state["policy"]["stats"]) == expected
    assert len(state["pending"]) == n - len(reported)
    assert state["counters"]["applied"] == len(reported)


@pytest.mark.kafka
def test_rejects_restart_and_expiry(
    bootstrap_servers: str, make_orchestration_topics: Callable[[], OrchestrationTopics]
) -> None:
    topics = make_orchestration_topics()
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap_servers, topics.requests, [json.dumps({"id": i}).encode() for i in range(100)])
    serving = Serving(new_orchestrator(bootstrap_servers, topics, group))
    serving.wait_for(lambda s: s.decisions == 100)
    first = serving.stop()
    assert first.decisions == 100 and not first.restored
    depth = {
        d["id"]: d["depth"]
        for d in map(json.loads, (r.value for r in read_all(bootstrap_servers, topics.decisions)))
    }

    # Restart: the pending decisions come back, reports of decisions made before the restart apply.
    serving = Serving(new_orchestrator(bootstrap_servers, topics, group, max_age_decisions=200))
    serving.wait_ready(30)
    assert serving.orchestrator.summary.restored
    good = [json.dumps({"id": i, "outputs": [1] * depth[i]}).encode() for i in range(50)]
    bad = [
        b"not json",
        b'{"outputs": [1]}',
        b'{"id": 1, "outputs": "1"}',
        json.dumps({"id": 0, "outputs": [1]}).encode(),  # duplicate
        json.dumps({"id": "nobody", "outputs": [1]}).encode(),  # unknown
        json.dumps({"id": 60, "outputs": [1, 1, 1, 1]}).encode(),  # more outputs than stages
        json.dumps({"id": 61, "outputs": []}).encode(),  # invalid
    ]
    produce(bootstrap_servers, topics.reports, good + bad)
    serving.wait_for(lambda s: s.reports == len(good) + len(bad))
    assert serving.orchestrator.summary.applied == 50
    assert serving.orchestrator.summary.pending == 50
    # 200 new decisions expire the 50 still pending (max_age_decisions=200); their reports come late.
    produce(bootstrap_servers, topics.requests, [json.dumps({"id": 100 + i}).encode() for i in range(200)])
    produce(bootstrap_servers, topics.requests, [json.dumps({"id": 100}).encode()])  # duplicate request
    serving.wait_for(lambda s: s.requests == 201)
    produce(bootstrap_servers, topics.reports, [json.dumps({"id": 70, "outputs": [1]}).encode()])
    serving.wait_for(lambda s: s.reports == len(good) + len(bad) + 1)
    summary = serving.stop()

    assert summary.restored and summary.decisions == 200 and summary.applied == 50
    assert len(read_all(bootstrap_servers, topics.decisions)) == 300  # nothing decided twice
    reasons = dead_reasons(bootstrap_servers, topics.dead_letter)
    assert reasons == Counter(
        {
            "invalid_json": 1,
            "missing_field": 1,
            "wrong_type": 1,
            "report_duplicate": 1,
            "report_unknown": 1,
            "report_too_many_outputs": 1,
            "report_invalid": 1,
            "duplicate_request": 1,
            "report_expired": 1,
        }
    )
    counters = last_checkpoint(bootstrap_servers, topics)["state"]["counters"]
    assert counters["applied"] == 50 and counters["decided"] == 300 and counters["expired"] == 50


@pytest.mark.kafka
def test_cli_orchestrate(
    bootstrap_servers: str, make_orchestration_topics: Callable[[], OrchestrationTopics]
) -> None:
    topics = make_orchestration_topics()
    produce(bootstrap_servers, topics.requests, [json.dumps({"id": f"b{i}"}).encode() for i in range(20)])
    command = [sys.executable, "-m", "uss_stream", "kafka"]
    service = subprocess.Popen(
        [
            *command,
            "orchestrate",
            f"--bootstrap-servers={bootstrap_servers}",
            f"--input-topic={topics.requests}",
            f"--reports-topic={topics.reports}",
            f"--output-topic={topics.decisions}",
            f"--dlq-topic={topics.dead_letter}",
            f"--state-topic={topics.state}",
            f"--group-id=g-{uuid.uuid4().hex[:8]}",
            "--stage-costs=0,0.1,0.2",
            "--stage-names=xray,ct,manual",
            "--metrics-port=0",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    PROCESSES.append(service)
    # Stopped (SIGTERM: a clean exit) once its 20 decisions are in, not after an idle window.
    records = read_all(bootstrap_servers, topics.decisions, expected=20, timeout=60)
    service.send_signal(signal.SIGTERM)
    _, log = service.communicate(timeout=60)
    assert service.returncode == 0, log[-3000:]
    assert len(read_all(bootstrap_servers, topics.decisions)) == 20 == len(records)
    decisions = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.decisions)]
    assert [d["id"] for d in decisions] == [f"b{i}" for i in range(20)]
    assert decisions[0]["stages"] == ["xray", "ct", "manual"][: decisions[0]["depth"]]


@pytest.mark.kafka
def test_reports_reach_the_learner_of_their_requests_partition(
    bootstrap_servers: str, make_orchestration_topics: Callable[..., OrchestrationTopics]
) -> None:
    """Two partitions, one learner each: a report in partition p is joined to the decisions of
    requests partition p (the topics are co-partitioned by id), and a report sent to the other
    partition finds no decision there."""
    topics = make_orchestration_topics(partitions=2)
    serving = Serving(new_orchestrator(bootstrap_servers, topics, f"g-{uuid.uuid4().hex[:8]}"))
    rng = np.random.default_rng(5)
    outputs = rng.integers(0, 2, (400, 3))
    for p in (0, 1):
        requests = [json.dumps({"id": f"p{p}-{i}"}).encode() for i in range(200)]
        produce(bootstrap_servers, topics.requests, requests, partition=p)
    serving.wait_for(lambda s: s.decisions == 400)
    decisions = {}
    for record in read_all(bootstrap_servers, topics.decisions, expected=400):
        decision = json.loads(record.value)
        assert decision["id"].startswith(f"p{record.partition}-")  # the request's partition
        decisions[decision["id"]] = decision["depth"]
    expected = {p: DisagreementStats(3) for p in (0, 1)}
    for p in (0, 1):
        reports = []
        for i in range(200):
            depth = decisions[f"p{p}-{i}"]
            row = outputs[200 * p + i, :depth].tolist()
            reports.append(json.dumps({"id": f"p{p}-{i}", "outputs": row}).encode())
            expected[p].record(row)
        expected[p].decisions = 200
        produce(bootstrap_servers, topics.reports, reports, partition=p)
    # Mis-partitioned: the report of a partition-0 decision, sent to reports partition 1.
    produce(bootstrap_servers, topics.reports, [b'{"id": "p0-0", "outputs": [1]}'], partition=1)
    serving.wait_for(lambda s: s.reports == 401)
    summary = serving.stop()

    assert (summary.applied, summary.pending) == (400, 0)
    (letter,) = [DeadLetter.from_record(r.value) for r in read_all(bootstrap_servers, topics.dead_letter)]
    assert (letter.reason, letter.topic, letter.partition) == ("report_unknown", topics.reports, 1)
    last = {c.partition: c for c in checkpoints_of(bootstrap_servers, topics.state)}
    for p in (0, 1):
        assert DisagreementStats.from_dict(last[p].state["policy"]["stats"]) == expected[p]
        assert (last[p].offset, last[p].labels_offset) == (200, 200 + p)
