"""The Dispatcher's record limits, without a broker: decisions, label requests and dead letters that fit.

A decision (key and value) larger than the output topic's record limit, or an orchestration label
request, is dead-lettered ``oversize`` instead of sent: the broker would refuse it, and every
restart with it. A dead letter, with the trace headers it copies from its input, fits the
dead-letter topic's limit. The records are kafka-python's batch built in memory; the producer
records what it is asked to send. The expected sizes are those of the documents the
processors make (computed here with a second, identical processor), and the limits are set at them
and one byte below.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest

from uss_stream_kafka import DeadLetter, OutputsProcessor
from uss_stream_kafka.clients import TopicPartition
from uss_stream_kafka.clients.kafka_python import KafkaPythonRecords
from uss_stream_kafka.clients.limits import headers_bytes
from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.operations.metrics import ServiceMetrics
from uss_stream_kafka.processing.orchestration import OrchestrationProcessor
from uss_stream_kafka.runtime.context import LabelsPartitionState, PartitionState, RunContext
from uss_stream_kafka.runtime.dispatch import Dispatcher

COSTS = [0.0, 0.15, 0.2]
TOPICS = Topics("in", "out", "dlq", "state", labels="reports")
FRAMING = 128  # the bytes a dead letter keeps free for the record's framing (processing/deadletter.py)


class Message(NamedTuple):
    """A consumed record, as kafka-python hands it over (what :class:`KafkaPythonRecords` reads)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None


class Producer:
    """Records every send as ``(topic, key, value, headers)``."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]] = []

    def send(self, topic, value, key=None, partition=None, headers=None) -> None:
        self.sent.append((topic, key, value, list(headers or ())))

    def send_many(self, topic, values, keys=None, partition=None, headers=None) -> None:
        for i, value in enumerate(values):
            self.send(topic, value, None if keys is None else keys[i], partition, headers and headers[i])

    def to(self, topic: str) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
        return [(key, value, headers) for name, key, value, headers in self.sent if name == topic]


def dispatcher(
    processor: Any,
    output_bytes: int | None = None,
    dead_letter_bytes: int | None = None,
    propagate: tuple[str, ...] = (),
) -> tuple[Dispatcher, Any, Producer]:
    """A dispatcher of one input partition (and its reports partition) on ``processor``; its learner."""
    context = RunContext(TOPICS, group_id="g")
    context.processor = processor
    context.metrics = ServiceMetrics(n_stages=processor.n_stages)
    context.summary.depth_counts = [0] * processor.n_stages
    tp = TopicPartition(TOPICS.input, 0)
    learner = processor.new_learner()
    context.partitions[tp] = PartitionState(tp, learner, 0, 0, 0, -1, -1, -1)
    context.labels[TopicPartition(TOPICS.labels, 0)] = LabelsPartitionState(
        TopicPartition(TOPICS.labels, 0), 0, next_offset=0
    )
    producer = Producer()
    schedule = SimpleNamespace(count=lambda events: None)
    committer = SimpleNamespace(producer=producer, begin=lambda: None, schedule=schedule)
    dispatch = Dispatcher(context, committer, 1 << 20, dead_letter_bytes, output_bytes, propagate)
    return dispatch, learner, producer


def batch(topic: str, messages: Sequence[tuple]) -> dict[TopicPartition, KafkaPythonRecords]:
    """Partition 0 of ``topic`` holding ``(offset, key, value[, headers])`` records."""
    tp = TopicPartition(topic, 0)
    return {tp: KafkaPythonRecords(tp, [Message(topic, 0, *message) for message in messages])}


def event(i: int, identifier: str) -> bytes:
    return json.dumps({"id": identifier, "outputs": [i % 2, 1, 1]}).encode()


def size(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]] = ()) -> int:
    """A record's bytes as the broker counts them against its limit (``clients/limits.py``)."""
    return len(key or b"") + len(value or b"") + headers_bytes(headers)


@pytest.mark.parametrize("key", [None, b"k" * 40], ids=["no key", "40-byte key"])
@pytest.mark.parametrize("below", [0, 1], ids=["at the limit", "one byte over"])
def test_a_decision_at_the_output_limit_is_sent_and_one_byte_over_is_dead_lettered(key, below):
    long_id = "x" * 500
    values = [event(0, "a"), event(1, long_id), event(2, "b")]
    keys = [b"ka", key, b"kb"]
    expected, depths, _ = OutputsProcessor(COSTS).new_learner().process_batch(values, 1 << 20)
    limit = size(key, expected[1]) - below
    assert size(b"ka", expected[0]) < limit and size(b"kb", expected[2]) < limit
    dispatch, _, producer = dispatcher(OutputsProcessor(COSTS), output_bytes=limit)
    dispatch.process(batch(TOPICS.input, [(i, keys[i], v) for i, v in enumerate(values)]))
    sent = [(k, v) for k, v, _ in producer.to(TOPICS.output)]
    letters = [DeadLetter.from_record(v) for _, v, _ in producer.to(TOPICS.dead_letter)]
    if below == 0:
        assert sent == list(zip(keys, expected)) and letters == []
    else:
        assert sent == [(keys[0], expected[0]), (keys[2], expected[2])]
        assert [(letter.reason, letter.offset) for letter in letters] == [("oversize", 1)]
        assert f"its decision has {len(expected[1])} bytes" in letters[0].error
        assert f"accepts {limit} (key, value and headers)" in letters[0].error
    decided = sum(d > 0 for d in depths) - below
    assert sum(dispatch.context.summary.dead_letters.values()) == below
    assert dispatch.context.summary.events == 3 and dispatch.context.summary.decisions == decided


def test_orchestration_withdraws_a_decision_too_large_to_deliver():
    """The request's id may come again, and a report of it is not applied to a decision never sent."""
    processor = OrchestrationProcessor(COSTS)
    big = json.dumps({"id": "big", "context": {"note": "n" * 400}}).encode()
    small = json.dumps({"id": "small"}).encode()
    reference = OrchestrationProcessor(COSTS).new_learner()
    expected, _, _ = reference.process_batch([small, big], 1 << 20)
    dispatch, learner, producer = dispatcher(processor, output_bytes=size(None, expected[1]) - 1)
    dispatch.process(batch(TOPICS.input, [(0, None, small), (1, None, big)]))
    assert [v for _, v, _ in producer.to(TOPICS.output)] == [expected[0]]
    assert learner.book.pending == 1 and learner.book.depth_of("small") > 0
    with pytest.raises(KeyError):
        learner.book.depth_of("big")
    assert learner.book.decide("big") > 0  # not a duplicate: the first decision was never delivered


def test_an_orchestration_label_request_too_large_for_the_output_topic_is_dead_lettered():
    """The request and its decision fit; the report's label request, under the report's long key, does not."""
    depth = OrchestrationProcessor(COSTS, policy="audited").new_learner().book.decide("r0")
    report = json.dumps({"id": "r0", "outputs": [0, 1, 1][:depth]}).encode()  # disagreeing: label asked
    request = json.dumps({"id": "r0", "label_requested": True}, separators=(",", ":")).encode()
    for key, sent in ((b"r" * (4096 - len(request)), True), (b"r" * (4097 - len(request)), False)):
        dispatch, learner, producer = dispatcher(OrchestrationProcessor(COSTS, policy="audited"), 4096)
        dispatch.process(batch(TOPICS.input, [(0, b"k", b'{"id": "r0"}')]))
        dispatch.process(batch(TOPICS.labels, [(0, key, report)]))
        requests = [v for k, v, _ in producer.to(TOPICS.output) if k == key]
        letters = [DeadLetter.from_record(v) for _, v, _ in producer.to(TOPICS.dead_letter)]
        assert requests == ([request] if sent else [])
        assert [letter.reason for letter in letters] == ([] if sent else ["oversize"])
        assert learner.book.label_requested("r0")  # the report itself was applied either way


@pytest.mark.parametrize("over", [0, 1], ids=["a quarter of the limit", "more than a quarter"])
def test_a_dead_letter_with_its_copied_headers_fits_the_dead_letter_topic(over):
    """An invalid value of 3x the limit with a large header it copies (``--propagate-header baggage``):
    the dead letter and the copied header fit; a header over a quarter of the limit stays in the
    envelope only."""
    limit = 4_000
    trace = ("baggage", b"t" * (limit // 4 + over - headers_bytes([("baggage", b"")])))
    dispatch, _, producer = dispatcher(
        OutputsProcessor(COSTS), dead_letter_bytes=limit, propagate=("baggage",)
    )
    value = b"not json " + b"v" * 3 * limit
    dispatch.process(batch(TOPICS.input, [(0, b"key", value, (trace,))]))
    ((key, letter, headers),) = producer.to(TOPICS.dead_letter)
    assert size(key, letter, headers) + FRAMING <= limit
    copied = [header for header in headers if header[0] == "baggage"]
    assert copied == ([trace] if not over else [])
    restored = DeadLetter.from_record(letter)
    assert restored.reason == "invalid_json" and restored.value_size == len(value)
    assert restored.value and value.startswith(restored.value) and len(restored.value) > limit // 4
