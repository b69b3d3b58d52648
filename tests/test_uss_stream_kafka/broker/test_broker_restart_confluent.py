"""``test_broker_restart.py`` on the confluent-kafka client (librdkafka).

The same tests, in a file of their own: ``--dist loadfile`` keeps a file on one worker, and each
test starts a private broker, so the two clients' halves run on two workers at once. One test is
librdkafka's own: the partitions of a topic that it forgot during the restart.
"""

from __future__ import annotations

import threading
import time

import pytest
from test_broker_restart import (  # noqa: F401  (the tests, their marks and their private broker)
    pytestmark,
    restartable_broker,
    service_topics,
    test_the_service_rides_out_a_broker_restart,
)
from waiting import wait_until

from tests import needs
from uss_stream_kafka import clients
from uss_stream_kafka.clients import ClientError, TopicPartition


@pytest.fixture
def kafka_client() -> str:
    needs.module("confluent_kafka")
    return "confluent"


def test_end_offsets_answer_after_librdkafka_lost_the_partitions_in_a_restart(
    kafka_client,
    restartable_broker,  # noqa: F811
):
    """A restore asks for the state topic's end offset until it gets one. librdkafka asked with short
    timeouts while the broker stops can keep a partition count of 0 for that topic ("Local: Unknown
    partition", answered without asking the broker) until its periodic metadata refresh, 5 minutes
    later: a service restoring after a broker restart retried for minutes in a loaded CI run. How
    often it happens depends on timing; asking librdkafka directly with a 2 s timeout all through two
    stops and starts of the broker makes it likely (without the seam's remedy, this test failed in 1
    of 2 runs with one restart). The consumer is subscribed to another topic, as the service's is.
    Then the seam's ``end_offsets`` must answer within two minutes. Two restarts can also leave
    librdkafka with every connection down for minutes although the broker is back ("All broker
    connections are down"); the seam then asks with a new client (``test_seam.py`` pins both)."""
    import confluent_kafka
    from kafka import KafkaProducer

    bootstrap = restartable_broker.bootstrap
    topics = service_topics(bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for _ in range(10):  # the state topic is compacted: records need a key
        producer.send(topics.state, b"checkpoint", key=b"0")
    producer.flush()
    producer.close()
    state = TopicPartition(topics.state, 0)
    consumer = clients.consumer(kafka_client, bootstrap_servers=bootstrap, group_id="restart-offsets")
    try:
        consumer.subscribe([topics.input])
        consumer.poll(1.0)
        assert consumer.end_offsets([state]) == {state: 10}

        native = confluent_kafka.TopicPartition(state.topic, state.partition)
        stop = threading.Event()

        failed: list[float] = []  # when each ask that failed began (monotonic)

        def ask() -> None:  # librdkafka itself, with a short timeout, through the outage
            while not stop.is_set():
                began = time.monotonic()
                try:
                    consumer._consumer.get_watermark_offsets(native, timeout=2, cached=False)
                except confluent_kafka.KafkaException:
                    failed.append(began)
                consumer._consumer.poll(0.05)

        asking = threading.Thread(target=ask)
        asking.start()
        try:
            for _ in range(2):  # once is not always enough for librdkafka to forget the partitions
                restartable_broker.stop()
                down = time.monotonic()
                # The outage lasts until librdkafka was asked, and failed, with the broker down.
                wait_until(lambda since=down: any(t >= since for t in failed), "an ask", timeout=60)
                restartable_broker.start()
        finally:
            stop.set()
            asking.join()

        errors: list[ClientError] = []

        def end_offset() -> int | None:
            try:
                return consumer.end_offsets([state])[state]
            except ClientError as error:
                errors.append(error)
                return None

        wait_until(
            lambda: end_offset() == 10,
            lambda: (
                f"the state topic's end offset after the restart ({len(errors)} errors, last {errors[-1:]})"
            ),
            timeout=240,  # librdkafka's own refresh would come after 300 s; an ask may take 30 s
            every=0.25,
        )
    finally:
        consumer.close()
