"""Issue 13: ``uss-stream kafka orchestrate --guarantee exactly-once`` SIGKILLed three times at random
points while requests and sensor reports flow, on a real broker.

What a ``read_committed`` reader sees afterwards must be what a crash-free run would have produced:
one decision per request, every report of a decided request applied once (a report replayed after a
restart is rejected as a duplicate, so the reported ids are part of the restored state), and the
learned statistics of the last checkpoint equal to counts computed here from the committed depths
and the reports sent.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, end_offsets, produce, read_all
from test_crash_restart import orchestrate_command, orchestration_topics, processes  # noqa: F401
from waiting import wait_until

from uss_stream.stats import DisagreementStats
from uss_stream_kafka.deadletter import DeadLetter

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(420),
    # kafka-python 3.0.12 loads its protocol schemas with the deprecated importlib.resources API.
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

ROUNDS, PER_ROUND, KILLS, REPLAYED = 4, 300, 3, 15
RESTORED = "restored the learner of group"


def committed(bootstrap: str, topic: str) -> list[Any]:
    return read_all(bootstrap, topic, isolation_level="read_committed")


def committed_decisions(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in committed(bootstrap, topic)]


def test_orchestrate_exactly_once_survives_three_sigkills(bootstrap_servers, orchestration_topics, processes):  # noqa: F811
    topics, n = orchestration_topics, ROUNDS * PER_ROUND
    group = f"g-{uuid.uuid4().hex[:10]}"
    command = orchestrate_command(
        bootstrap_servers, topics, group,
        "--guarantee", "exactly-once", "--alpha", "0.51",
        "--group-instance-id", "orchestrator-1", "--session-timeout-ms", "60000",
        "--checkpoint-every", "40", "--checkpoint-interval", "0.3", "--log-level", "INFO",
    )  # fmt: skip
    rng = np.random.default_rng(13)
    truth = rng.integers(0, 2, n)
    outputs = np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1)
    chance = random.Random(13)
    reported: dict[str, int] = {}  # id -> the depth its report was sent for
    replayed: list[str] = []

    def report(decisions: list[dict[str, Any]]) -> None:
        """Send the report of every committed decision not reported yet (the sensors' answers)."""
        new = [d for d in decisions if d["id"] not in reported]
        chance.shuffle(new)
        produce(
            bootstrap_servers,
            topics.reports,
            [
                json.dumps(
                    {"id": d["id"], "outputs": outputs[int(d["id"][1:]), : d["depth"]].tolist()}
                ).encode()
                for d in new
            ],
        )
        reported.update((d["id"], d["depth"]) for d in new)

    service = None
    for round_ in range(ROUNDS):
        service = processes(command)
        if round_:
            # The next kill is armed only once this incarnation restored the last checkpoint.
            service.wait_for_line(RESTORED)
            # Reports applied before the kill, sent again: each must be rejected as a duplicate.
            again = chance.sample(sorted(reported), REPLAYED)
            produce(
                bootstrap_servers,
                topics.reports,
                [
                    json.dumps({"id": i, "outputs": outputs[int(i[1:]), : reported[i]].tolist()}).encode()
                    for i in again
                ],
            )
            replayed.extend(again)
        first = round_ * PER_ROUND
        produce(
            bootstrap_servers,
            topics.requests,
            [json.dumps({"id": f"r{i}"}).encode() for i in range(first, first + PER_ROUND)],
        )
        if round_ == ROUNDS - 1:
            break
        # A kill at a random point of this round's requests, with their reports flowing meanwhile.
        kill_at = first + chance.randrange(PER_ROUND // 3, PER_ROUND)

        def decided_enough(kill_at: int = kill_at) -> bool:
            decisions = committed_decisions(bootstrap_servers, topics.decisions)
            report(decisions)
            return len(decisions) >= kill_at

        wait_until(
            decided_enough,
            f"{kill_at} committed decisions",
            alive=service.alive,
            timeout=180,
            every=0.2,
        )
        service.kill()

    # The last incarnation: every request decided, every decision reported, then a clean stop once
    # its last committed checkpoint covers both topics to their end.
    def all_reported() -> bool:
        decisions = committed_decisions(bootstrap_servers, topics.decisions)
        report(decisions)
        return len(reported) == n

    wait_until(
        all_reported, "every request decided and reported", alive=service.alive, timeout=180, every=0.2
    )
    ends = {
        f"{topic}/0": end_offsets(bootstrap_servers, topic)[0] for topic in (topics.requests, topics.reports)
    }

    def last_checkpoint() -> dict[str, Any]:
        return json.loads(committed(bootstrap_servers, topics.state)[-1].value)

    wait_until(
        lambda: last_checkpoint()["offsets"] == ends,
        lambda: f"a checkpoint covering {ends}",
        alive=service.alive,
        timeout=180,
        every=0.2,
    )
    service.process.terminate()
    assert service.finish(60) == 0, service.log[-3000:]

    decisions = committed_decisions(bootstrap_servers, topics.decisions)
    # Exactly one committed decision per request (the aborted transactions' ones are invisible).
    assert Counter(d["id"] for d in decisions) == Counter(f"r{i}" for i in range(n))
    depth = {d["id"]: d["depth"] for d in decisions}
    assert depth == reported  # every report was sent for the committed decision's depth

    # Every replayed report rejected as a duplicate, nothing else dead-lettered.
    letters = [DeadLetter.from_record(r.value) for r in committed(bootstrap_servers, topics.dead_letter)]
    assert Counter(letter.reason for letter in letters) == Counter({"report_duplicate": len(replayed)})
    assert sorted(json.loads(letter.value)["id"] for letter in letters) == sorted(replayed)

    # The crash-free reference: the statistics are the counts of the reports applied, each once.
    expected = DisagreementStats(len(COSTS))
    expected.decisions = n
    for i, d in depth.items():
        expected.record(outputs[int(i[1:]), :d].tolist())
    state = last_checkpoint()["state"]
    assert DisagreementStats.from_dict(state["policy"]["stats"]) == expected
    assert state["counters"]["decided"] == n and state["counters"]["applied"] == n
    assert state["pending"] == []
    assert set(state["closed"]["ids"]) == set(depth)  # the reported ids are in the checkpoint
    assert service.log.count(RESTORED) == 1
