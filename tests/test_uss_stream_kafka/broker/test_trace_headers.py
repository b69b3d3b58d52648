"""Trace context on the real broker, both clients: a decision and a dead letter carry their input's
``traceparent``/``tracestate`` and the headers named by ``propagate_headers``, and nothing else of it;
a CloudEvents binary-mode input (``ce_*`` headers, the data as the value) is decided."""

from __future__ import annotations

import json

import pytest
from conftest import COSTS, new_app, read_all, run_app

from uss_stream_kafka import OutputsProcessor
from uss_stream_kafka.processing.deadletter import DeadLetter

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACESTATE = b"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
#: A CloudEvents binary-mode record's attributes (Kafka protocol binding: ``ce_`` + attribute name).
CLOUDEVENT = [
    ("ce_specversion", b"1.0"),
    ("ce_id", b"ce-7"),
    ("ce_source", b"/sensors/lane-2"),
    ("ce_type", b"com.example.sensor.outputs"),
    ("content-type", b"application/json"),
    ("ce_traceparent", TRACEPARENT),
]


def _send(bootstrap: str, topic: str, records: list[tuple[bytes, list]]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for value, headers in records:
        producer.send(topic, value, partition=0, headers=headers)
    producer.flush()
    producer.close()


def test_decisions_and_dead_letters_carry_the_trace_context(kafka_client, bootstrap_servers, make_topics):
    topics = make_topics()
    traced = [("traceparent", TRACEPARENT), ("tracestate", TRACESTATE), ("tenant", b"acme"), ("x", b"1")]
    _send(
        bootstrap_servers,
        topics.input,
        [
            (b'{"id": "plain", "outputs": [1, 1, 1]}', []),
            (b'{"id": "traced", "outputs": [1, 1, 1]}', traced),
            (b'{"id": "bad", "outputs": [1, 1]}', traced),  # wrong output count: a dead letter
            (b'{"id": "ce", "outputs": [0, 0, 0]}', CLOUDEVENT),
            (b'{"id": "tenant-only", "outputs": [1, 1, 1]}', [("Tenant", b"globex")]),
        ],
    )
    app = new_app(bootstrap_servers, topics, client_library=kafka_client, propagate_headers=["tenant"])
    summary = run_app(app, OutputsProcessor(COSTS, alpha=0.51))
    assert summary.events == 5 and sum(summary.dead_letters.values()) == 1

    decisions = read_all(bootstrap_servers, topics.output, expected=4)
    by_id = {json.loads(record.value)["id"]: list(record.headers) for record in decisions}
    assert by_id == {
        "plain": [],
        "traced": [("traceparent", TRACEPARENT), ("tracestate", TRACESTATE), ("tenant", b"acme")],
        "ce": [("ce_traceparent", TRACEPARENT)],
        "tenant-only": [("Tenant", b"globex")],  # header names match in any case
    }

    (letter,) = read_all(bootstrap_servers, topics.dead_letter, expected=1)
    headers = list(letter.headers)
    assert headers[:4] == [
        ("uss.reason", b"wrong_output_count"),
        ("uss.source.topic", topics.input.encode()),
        ("uss.source.partition", b"0"),
        ("uss.source.offset", b"2"),
    ]
    assert headers[4:] == [("traceparent", TRACEPARENT), ("tracestate", TRACESTATE), ("tenant", b"acme")]
    assert DeadLetter.from_record(letter.value).headers == tuple(traced)  # the envelope keeps them all
