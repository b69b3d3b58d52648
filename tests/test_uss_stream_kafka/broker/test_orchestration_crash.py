"""Issue 13: ``uss-stream kafka orchestrate --guarantee exactly-once`` SIGKILLed three times at random
points while requests and sensor reports flow, on a real broker.

What a ``read_committed`` reader sees afterwards must be what a crash-free run would have produced:
one decision per request, every report of a decided request applied once (a report replayed after a
restart is rejected as a duplicate, so the reported ids are part of the restored state), and the
learned statistics of the last checkpoint equal to counts computed here from the committed depths
and the reports sent. The committed decisions are those of a crash-free run: the library's USS-UCB,
stepped here in process, decides each of them on the reports applied before it (in the reports
topic's order, each once).

The service is the runtime's Application with the orchestration processor: its checkpoint of
requests partition 0 covers the requests up to ``offset`` and the reports up to ``labels_offset``.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, end_offsets, produce, read_all
from test_crash_restart import orchestrate_command, orchestration_topics, processes  # noqa: F401
from waiting import wait_until

from tests.test_uss_stream_kafka.helpers import assert_decided_as_without_crashes
from uss_stream.core.stats import DisagreementStats
from uss_stream_kafka.processing.deadletter import DeadLetter

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(420),
]

N, KILLS, REPLAYED = 1_500, 3, 15


def committed(bootstrap: str, topic: str) -> list[Any]:
    return read_all(bootstrap, topic, isolation_level="read_committed")


def decisions_of(records: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in records]


def covered(checkpoint: dict[str, Any], topics: Any) -> dict[str, int]:
    """The offsets of both topics a checkpoint covers."""
    return {
        f"{topics.requests}/0": checkpoint["offset"],
        f"{topics.reports}/0": checkpoint.get("labels_offset", 0),
    }


def test_orchestrate_exactly_once_survives_three_sigkills(
    bootstrap_servers,
    orchestration_topics,  # noqa: F811
    processes,  # noqa: F811
    chaos_random,
):
    topics = orchestration_topics
    group = f"g-{uuid.uuid4().hex[:10]}"
    command = orchestrate_command(
        bootstrap_servers, topics, group,
        "--guarantee", "exactly-once", "--policy", "uss-ucb:alpha=0.51",
        "--group-instance-id", "orchestrator-1", "--session-timeout-ms", "60000",
        # A transaction of a few seconds: a kill finds decided requests and applied reports in it.
        "--checkpoint-every", "1000000", "--checkpoint-interval", "2", "--log-level", "INFO",
        "--metrics-port", "0",
    )  # fmt: skip
    rng = np.random.default_rng(13)
    truth = rng.integers(0, 2, N)
    outputs = np.stack([truth ^ (rng.random(N) < 0.2), truth ^ (rng.random(N) < 0.1), truth], axis=1)
    chance = chaos_random
    requested = 0  # requests r0 .. r{requested - 1} sent, in this order: r{i} is at offset i
    reported: dict[str, int] = {}  # id -> the depth its report was sent for
    replayed: list[str] = []

    def report_value(decision_id: str, depth: int) -> bytes:
        return json.dumps(
            {"id": decision_id, "outputs": outputs[int(decision_id[1:]), :depth].tolist()}
        ).encode()

    def flow(most: int = 12, least: int = 1) -> list[dict[str, Any]]:
        """Send a few more requests, and the report of every committed decision not reported yet."""
        nonlocal requested
        more = min(chance.randint(least, max(least, most)), N - requested)
        produce(
            bootstrap_servers,
            topics.requests,
            [json.dumps({"id": f"r{i}"}).encode() for i in range(requested, requested + more)],
        )
        requested += more
        decisions = decisions_of(committed(bootstrap_servers, topics.decisions))
        new = [d for d in decisions if d["id"] not in reported]
        chance.shuffle(new)  # the sensors answer in any order
        produce(bootstrap_servers, topics.reports, [report_value(d["id"], d["depth"]) for d in new])
        reported.update((d["id"], d["depth"]) for d in new)
        return decisions

    def last_checkpoint() -> dict[str, Any] | None:
        records = committed(bootstrap_servers, topics.state)
        return json.loads(records[-1].value) if records else None

    def uncommitted_decisions() -> int:
        """Requests the service decided (its output, committed or not) past its last committed
        checkpoint (0 until a checkpoint holds enough reported ids to replay after the restart)."""
        checkpoint = last_checkpoint()
        if checkpoint is None or len(checkpoint["state"]["closed"]["ids"]) < REPLAYED:
            return 0
        requests_covered = checkpoint["offset"]
        decided = [int(d["id"][1:]) for d in decisions_of(read_all(bootstrap_servers, topics.decisions))]
        return max(decided, default=-1) + 1 - requests_covered

    for kill in range(KILLS + 1):
        service = processes(command)
        if kill:
            # The next kill is armed only once this incarnation restored the last checkpoint.
            service.wait_for_line(f"restored {topics.requests}/0: checkpoint @")
            # Reports applied in the restored checkpoint, sent again: each must be rejected as a duplicate.
            again = chance.sample(sorted(last_checkpoint()["state"]["closed"]["ids"]), REPLAYED)
            produce(bootstrap_servers, topics.reports, [report_value(i, reported[i]) for i in again])
            replayed.extend(again)
        if kill == KILLS:
            break
        # A kill at a random point: once this many decided requests are not yet committed.
        threshold = chance.randint(1, 30)

        def in_flight(threshold: int = threshold) -> bool:
            # Once a checkpoint can be restored with replayable reports, send the threshold's worth of
            # requests at once: they are decided within one checkpoint interval however slow this loop is.
            checkpoint = last_checkpoint()
            armed = checkpoint is not None and len(checkpoint["state"]["closed"]["ids"]) >= REPLAYED
            flow(least=threshold if armed else 1)
            return uncommitted_decisions() >= threshold

        wait_until(
            in_flight, f"{threshold} uncommitted decisions", alive=service.alive, timeout=180, every=0.2
        )
        service.kill()

    # The last incarnation: every request decided, every decision reported, then a clean stop once
    # its last committed checkpoint covers both topics to their end.
    wait_until(
        lambda: len({d["id"] for d in flow(most=200)}) == N == len(reported),
        lambda: f"{requested} requested, {len(reported)} reported of {N}",
        alive=service.alive,
        timeout=180,
        every=0.2,
    )
    ends = {
        f"{topic}/0": end_offsets(bootstrap_servers, topic)[0] for topic in (topics.requests, topics.reports)
    }
    wait_until(
        lambda: covered(last_checkpoint(), topics) == ends,
        lambda: f"a checkpoint covering {ends}",
        alive=service.alive,
        timeout=180,
        every=0.2,
    )
    service.process.terminate()
    assert service.finish(60) == 0, service.log[-3000:]

    # The kills did interrupt transactions: aborted decisions are in the topic, invisible to read_committed.
    assert len(read_all(bootstrap_servers, topics.decisions)) > N
    decisions = decisions_of(committed(bootstrap_servers, topics.decisions))
    # Exactly one committed decision per request.
    assert Counter(d["id"] for d in decisions) == Counter(f"r{i}" for i in range(N))
    depth = {d["id"]: d["depth"] for d in decisions}
    assert depth == reported  # every report was sent for the committed decision's depth

    # Every replayed report rejected as a duplicate, nothing else dead-lettered.
    letters = [DeadLetter.from_record(r.value) for r in committed(bootstrap_servers, topics.dead_letter)]
    assert Counter(letter.reason for letter in letters) == Counter({"report_duplicate": len(replayed)})
    assert sorted(json.loads(letter.value)["id"] for letter in letters) == sorted(replayed)

    # The crash-free reference: the statistics are the counts of the reports applied, each once.
    expected = DisagreementStats(len(COSTS))
    expected.decisions = N
    for i, d in depth.items():
        expected.record(outputs[int(i[1:]), :d].tolist())
    state = last_checkpoint()["state"]
    assert DisagreementStats.from_dict(state["policy"]["stats"]) == expected
    assert state["counters"]["decided"] == N and state["counters"]["applied"] == N
    assert state["pending"] == []
    assert set(state["closed"]["ids"]) == set(depth)  # the reported ids are in the checkpoint

    # A crash-free run: each committed decision is the policy's on the reports applied before it.
    seen: set[str] = set()
    applied_order = []
    for record in read_all(bootstrap_servers, topics.reports):
        report = json.loads(record.value)
        if report["id"] not in seen:  # the replayed duplicates were rejected
            seen.add(report["id"])
            applied_order.append((report["id"], report["outputs"]))
    assert_decided_as_without_crashes(decisions, applied_order)
