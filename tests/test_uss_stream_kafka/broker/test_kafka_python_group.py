"""kafka-python's group join through the seam, when a join outlasts ``poll`` (a loaded machine).

kafka-python 3.0 (``connectors/uss_stream_kafka/clients/kafka_python_group.py``) lost a member's
assignment when the ``poll`` that started a rejoin gave up before it completed: the member had told
its listener it revoked everything and was never told what it got, kept its partitions unfetchable
and sat in its group without a partition (the broker tests' "no record in 60 s", "the orchestrator
got no partition"). ``poll(0)`` makes every join outlast its ``poll``, on any machine.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from conftest import wait_for_metadata
from waiting import wait_until

from uss_stream_kafka import clients
from uss_stream_kafka.clients import TopicPartition

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(240),
]


def test_a_rejoin_that_outlasts_every_poll_still_delivers_the_new_assignment(bootstrap_servers, admin):
    """One member; the topic grows from one partition to two (a metadata change: the leader
    rejoins). Polled with ``poll(0)``, the member must still be told it has both partitions, and
    the callbacks must add up to its assignment. Before it, the first assignment is not followed
    by a second, needless rebalance (the stale-snapshot defect)."""
    from kafka.admin import NewPartitions

    topic = f"kp-{uuid.uuid4().hex[:10]}"
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}}, wait_for_metadata=True)
    wait_for_metadata(bootstrap_servers, {topic: 1})
    events: list[tuple[str, set]] = []
    consumer = clients.consumer(
        "kafka-python",
        bootstrap_servers=bootstrap_servers,
        group_id=f"g-{uuid.uuid4().hex[:10]}",
        partition_assignment_strategy="range",
        metadata_max_age_ms=500,  # the partition added below is seen within a second
    )

    def owned() -> set:
        held: set = set()
        for kind, tps in events:
            held = held | tps if kind == "assigned" else held - tps
        return held

    def polled_until(partitions: set, timeout: float = 0.5) -> Any:
        def reached() -> bool:
            consumer.poll(timeout)
            return owned() == partitions and consumer.assignment() == partitions

        return reached

    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    try:
        # As the service does (startup.wait_for_metadata): a leader without the topic's metadata
        # would assign nothing at first.
        wait_until(lambda: consumer.partitions_for_topic(topic) == {0}, "the consumer's metadata", timeout=60)
        consumer.subscribe(
            [topic],
            on_assign=lambda tps: events.append(("assigned", set(tps))),
            on_revoke=lambda tps: events.append(("revoked", set(tps))),
        )
        wait_until(polled_until({p0}), lambda: f"the assignment of {p0} (events {events})", timeout=60)
        admin.create_partitions({topic: NewPartitions(total_count=2)})
        wait_until(
            polled_until({p0, p1}, timeout=0), lambda: f"both partitions (events {events})", timeout=90
        )
        # Eager (range): everything revoked before each join. Exactly two joins: the first and the
        # one the new partition asked for.
        assert events == [("revoked", set()), ("assigned", {p0}), ("revoked", {p0}), ("assigned", {p0, p1})]
    finally:
        consumer.close()
        admin.delete_topics([topic])
