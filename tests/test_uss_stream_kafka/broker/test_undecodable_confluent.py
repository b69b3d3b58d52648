"""A record librdkafka cannot decode (confluent client): dead-lettered with its reason, nothing else lost.

librdkafka decodes gzip, snappy, lz4 and zstd itself, so a batch it cannot decode is hard to produce
on purpose; the test makes librdkafka's consumer hand over what it hands over for a batch it cannot decode: a
message carrying ``_BAD_COMPRESSION`` at input offset 300, in the middle of a fetched batch,
instead of the record there. The service runs on the real broker otherwise.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, new_app, produce, read_all, run_app, stream

from tests import needs
from uss_stream.policies import USSUCB
from uss_stream_kafka import DeadLetter, OutputsProcessor

ck = needs.module("confluent_kafka")

BAD = 300


class Corrupting:
    """librdkafka's consumer, except that input offset ``BAD`` comes once as an undecodable message."""

    def __init__(self, consumer: Any, topic: str) -> None:
        self._consumer = consumer
        self._topic = topic
        self.corrupted = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        messages = self._consumer.consume(num_messages, timeout)
        for i, message in enumerate(messages):
            if (
                not self.corrupted
                and message.error() is None
                and message.topic() == self._topic
                and message.offset() == BAD
            ):
                self.corrupted += 1
                error = ck.KafkaError(ck.KafkaError._BAD_COMPRESSION)
                bad = ck.Message(topic=self._topic, partition=message.partition(), offset=BAD, error=error)
                return [*messages[:i], bad, *messages[i + 1 :]]
        return messages


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_an_undecodable_record_is_dead_lettered_and_its_neighbours_decided(
    guarantee, bootstrap_servers, make_topics, monkeypatch
):
    from uss_stream_kafka.clients import confluent

    topics = make_topics()
    values, outputs = stream(1_000, seed=11)
    produce(bootstrap_servers, topics.input, values)
    wrapped: list[Corrupting] = []
    real_init = confluent.ConfluentConsumer.__init__

    def init(self: Any, **settings: Any) -> None:
        real_init(self, **settings)
        if settings.get("group_id") is not None:  # the service's group consumer only
            self._consumer = Corrupting(self._consumer, topics.input)
            wrapped.append(self._consumer)

    monkeypatch.setattr(confluent.ConfluentConsumer, "__init__", init)
    group = f"undecodable-ck-{uuid.uuid4().hex[:8]}"
    app = new_app(
        bootstrap_servers,
        topics,
        group,
        guarantee=guarantee,
        group_instance_id=group,
        max_poll_records=500,  # the bad record lies inside a batch, records after it too
        exit_when_idle=2.0,
        client_library="confluent",
    )
    summary = run_app(app, OutputsProcessor(COSTS, alpha=0.51))

    assert [w.corrupted for w in wrapped] == [1]
    isolation = "read_committed"
    decisions = [
        json.loads(r.value) for r in read_all(bootstrap_servers, topics.output, isolation_level=isolation)
    ]
    kept = [i for i in range(1_000) if i != BAD]
    assert [d["id"] for d in decisions] == [f"e{i}" for i in kept]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs[np.array(kept)]).tolist()
    letters = [
        DeadLetter.from_record(r.value)
        for r in read_all(bootstrap_servers, topics.dead_letter, isolation_level=isolation)
    ]
    assert [(letter.reason, letter.offset, letter.topic) for letter in letters] == [
        ("undecodable_batch", BAD, topics.input)
    ]
    assert "Invalid compressed data" in letters[0].error
    assert summary.dead_letters["undecodable_batch"] == 1 and summary.decisions == 999
