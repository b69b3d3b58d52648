"""The Dispatcher's decision size check and trace headers, without a broker.

A decision goes out with its input's key and carried headers; the broker refuses a record larger
than the output topic's limit, and would refuse it on every restart. So an input whose decision,
key and headers together exceed the limit is dead-lettered ``oversize`` instead. Sizes below are
computed by hand: a header counts its name, its value and ``HEADER_FRAMING`` (8) bytes.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from uss_stream_kafka.clients import TopicPartition
from uss_stream_kafka.clients.base import Record
from uss_stream_kafka.clients.kafka_python import KafkaPythonRecords
from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.exceptions import RegistryError
from uss_stream_kafka.operations.metrics import ServiceMetrics
from uss_stream_kafka.processing.deadletter import DeadLetter
from uss_stream_kafka.processing.processors import BatchResult
from uss_stream_kafka.runtime.context import PartitionState, RunContext, RunSummary
from uss_stream_kafka.runtime.dispatch import Dispatcher

TOPICS = Topics("events", "decisions", "events-dlq", "state")
TP = TopicPartition("events", 0)
DECISION = b"d" * 100  # every decision of the stand-in learner: 100 bytes
TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"  # 55 bytes


class Learner:
    """Decides every event at depth 1 with a 100-byte decision (or fails as ``fail`` says)."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail = fail

    def process_batch(self, values, max_bytes):
        if self.fail is not None:
            raise self.fail
        return BatchResult([DECISION] * len(values), [1] * len(values), [None] * len(values))


class Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes | None, list]] = []

    def send(self, topic, value, key=None, partition=None, headers=None):
        self.sent.append((topic, value, key, list(headers or ())))

    def send_many(self, topic, values, keys=None, partition=None, headers=None):
        for i, value in enumerate(values):
            self.send(
                topic,
                value,
                (keys or [None] * len(values))[i],
                partition,
                (headers or [None] * len(values))[i],
            )


class Committer:
    def __init__(self) -> None:
        self.producer = Producer()
        self.schedule = self

    def begin(self) -> None:
        pass

    def count(self, events: int) -> None:
        pass


def dispatch(records, output_bytes, learner=None, propagate=(), committer=None):
    """Process one batch of ``records`` (key, value, headers); the records sent, by topic."""
    context = RunContext(TOPICS, "g", summary=RunSummary(depth_counts=[0]))
    context.metrics = ServiceMetrics(1)
    context.processor = SimpleNamespace(n_stages=1)
    context.partitions[TP] = PartitionState(TP, learner or Learner(), 0, 0, 0, -1, -1, -1)
    committer = committer or Committer()
    dispatcher = Dispatcher(context, committer, 1 << 20, 1 << 20, output_bytes, propagate)
    messages = [
        Record("events", 0, i, None, key, value, tuple(headers))
        for i, (key, value, headers) in enumerate(records)
    ]
    dispatcher.process({TP: KafkaPythonRecords(TP, messages)})
    sent = {topic: [(value, key, headers) for t, value, key, headers in committer.producer.sent if t == topic]
            for topic in (TOPICS.output, TOPICS.dead_letter)}  # fmt: skip
    return sent, context.summary


def test_a_decision_at_the_limit_with_its_key_and_headers_is_sent_and_one_byte_more_is_a_dead_letter():
    headers = [("traceparent", TRACEPARENT), ("tenant", b"t" * 37)]
    size = 100 + 3 + (11 + 55 + 8) + (6 + 37 + 8)  # decision, key "k01", both headers
    assert size == 228
    sent, summary = dispatch([(b"k01", b"{}", headers)], output_bytes=size, propagate=["tenant"])
    assert [value for value, _, _ in sent["decisions"]] == [DECISION] and sent["events-dlq"] == []
    assert sent["decisions"][0][2] == headers

    sent, summary = dispatch([(b"k01", b"{}", headers)], output_bytes=size - 1, propagate=["tenant"])
    assert sent["decisions"] == []
    letter = DeadLetter.from_record(sent["events-dlq"][0][0])
    assert letter.reason == "oversize" and summary.dead_letters["oversize"] == 1
    assert "its decision has 100 bytes and 125 of headers" in letter.error


def test_headers_not_carried_do_not_count():
    sent, _ = dispatch([(None, b"{}", [("x-other", b"o" * 5000)])], output_bytes=100)
    assert [value for value, _, _ in sent["decisions"]] == [DECISION]
    assert sent["decisions"][0][2] == []


def test_a_megabyte_traceparent_is_dropped_not_copied_so_the_decision_goes_out():
    """The crash loop of the issue: a 1 MB traceparent copied onto the decision made the broker refuse it."""
    records = [(None, b"{}", []), (None, b"{}", [("traceparent", b"0" * 1_000_000)]), (None, b"{}", [])]
    sent, summary = dispatch(records, output_bytes=1_047_552)
    assert [headers for _, _, headers in sent["decisions"]] == [[], [], []]
    assert sent["events-dlq"] == [] and summary.events == 3


def test_a_large_propagated_header_makes_the_decision_a_dead_letter_and_the_rest_of_the_batch_goes():
    records = [(None, b"{}", []), (None, b"{}", [("x-custom", b"c" * 900_000)]), (None, b"{}", [])]
    sent, summary = dispatch(records, output_bytes=500_000, propagate=["x-custom"])
    assert len(sent["decisions"]) == 2 and summary.dead_letters["oversize"] == 1
    assert DeadLetter.from_record(sent["events-dlq"][0][0]).offset == 1


def test_a_registry_outage_ends_the_batch_with_nothing_sent():
    outage = RegistryError("outage", "the Schema Registry at http://r cannot be reached")
    committer = Committer()
    with pytest.raises(RegistryError):
        dispatch([(None, b"\x00\x00\x00\x00\x01", [])], 1000, Learner(fail=outage), committer=committer)
    assert committer.producer.sent == []  # no dead letter: the run ends, nothing is committed
