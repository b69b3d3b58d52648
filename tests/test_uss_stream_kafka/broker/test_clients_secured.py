"""The client seam on a SASL_SSL listener (SCRAM-SHA-512, a test CA), for both clients.

The settings are those the service gives its clients (``ClientConfig.kafka_kwargs``, kafka-python
names); the librdkafka side translates them. A private broker from ``deploy/kafka/broker.sh``
(test_secured's fixture), destroyed at the end of the module.
"""

from __future__ import annotations

import uuid

import pytest
from test_secured import secured_broker  # noqa: F401 (the module-scoped private broker)

from uss_stream_kafka import clients
from uss_stream_kafka.clients import ClientError, TopicPartition, TopicSpec

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(300),
]


@pytest.mark.parametrize("client", clients.CLIENTS)
def test_round_trip_with_credentials(client, secured_broker):  # noqa: F811
    config = secured_broker.client()
    admin = clients.admin(client, **config.kafka_kwargs("admin"))
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    try:
        assert admin.create_topics({topic: TopicSpec(1)}) == {topic: None}
        assert admin.partitions([topic]) == {topic: 1}
        producer = clients.producer(client, **config.kafka_kwargs("producer"))
        producer.send_many(topic, [b"secret-%d" % i for i in range(20)], partition=0)
        producer.flush(30)
        assert producer.take_errors() == []
        producer.close(10)
        consumer = clients.consumer(client, **config.kafka_kwargs("consumer"))
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning([tp])
        values: list[bytes | None] = []
        for _ in range(300):
            if len(values) >= 20:
                break
            for records in consumer.poll(0.2).values():
                values.extend(records.values)
        consumer.close()
        assert values == [b"secret-%d" % i for i in range(20)]
    finally:
        admin.delete_topics([topic])
        admin.close()


@pytest.mark.parametrize("client", clients.CLIENTS)
def test_a_wrong_password_is_a_client_error(client, secured_broker):  # noqa: F811
    config = secured_broker.client(sasl_password="not-the-password")
    settings = {**config.kafka_kwargs("admin"), "request_timeout_ms": 5000}
    if client == "kafka-python":
        # kafka-python 3.0.12 never sees the broker's SASL_AUTHENTICATION_FAILED: the broker closes
        # the connection after its answer and the client reports a lost connection, which it
        # retries until its bootstrap timeout (30 s by default): 5 s are as conclusive.
        settings["bootstrap_timeout_ms"] = 5000
    with pytest.raises(ClientError) as raised:
        admin = clients.admin(client, **settings)
        admin.partitions(["anything"])
    if client == "confluent":  # librdkafka reports the broker's answer: the wait ends on it
        assert raised.value.name == "_AUTHENTICATION", raised.value
