"""A consumer fenced for good is replaced, and the run goes on (confluent client).

librdkafka makes a static member's fencing (``--group-instance-id``) a fatal error: every later
poll of that consumer fails. A loaded CI run hit it after a broker restart (the member's own
retried JoinGroup was taken for another member's) and the service polled a dead consumer forever.
Here another consumer joins with the same instance id, which fences the service's consumer on
purpose; the service must close it, subscribe a new one and decide every event exactly once.
"""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import COSTS, produce, read_all, stream
from test_cli import Service
from waiting import wait_until

from tests import needs
from uss_stream.policies import USSUCB

pytestmark = [pytest.mark.kafka]


def test_a_fenced_static_member_is_replaced_and_every_event_decided_once(bootstrap_servers, make_topics):
    ck = needs.module("confluent_kafka")
    topics = make_topics()
    n = 4_000
    values, outputs = stream(n)
    produce(bootstrap_servers, topics.input, values[:2_000])
    group, instance = f"fenced-{uuid.uuid4().hex[:8]}", f"fenced-{uuid.uuid4().hex[:8]}"
    service = Service(
        bootstrap_servers, topics, group, "--client", "confluent", "--guarantee", "exactly-once",
        "--group-instance-id", instance, "--commit-interval", "0.5", "--checkpoint-interval", "1",
    )  # fmt: skip

    def committed() -> list[dict]:
        records = read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
        return [json.loads(r.value) for r in records]

    try:
        wait_until(lambda: len(committed()) >= 2_000, "the first 2000 decisions", timeout=120,
                   alive=service.alive, every=0.5)  # fmt: skip
        intruder = ck.Consumer({
            "bootstrap.servers": bootstrap_servers, "group.id": group, "group.instance.id": instance,
            "session.timeout.ms": 6_000, "enable.auto.commit": False,
        })  # fmt: skip
        try:
            intruder.subscribe([topics.input])
            wait_until(
                lambda: intruder.poll(0.2) is not None or bool(intruder.assignment()),
                "the intruder's assignment",
                timeout=60,
                alive=service.alive,
            )
            service.wait_for_log("replacing it", timeout=60)
        finally:
            intruder.close()
        produce(bootstrap_servers, topics.input, values[2_000:])
        wait_until(lambda: len(committed()) >= n, "a committed decision for every event", timeout=180,
                   alive=service.alive, every=0.5)  # fmt: skip
    finally:
        if service.process.poll() is None:
            service.process.kill()
            service.process.wait(10)

    assert "fenced" in service.log.lower()
    decisions = committed()
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(n)]  # once each, in order
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
