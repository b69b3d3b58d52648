"""Schema Registry payloads on a real broker and a real registry: Avro, Protobuf and JSON Schema.

The service decodes each event with its writer's schema (fetched by the id it carries) and writes
its decisions with a registered schema; what it cannot decode is a dead letter with its reason.
Expected depths come from the policy's own ``run`` over the same outputs, as in the JSON tests.
"""

from __future__ import annotations

import base64
import copy
import json

import pytest
from conftest import COSTS, CUMULATIVE, new_app, produce, read_all, run_app, stream
from payloads import EVENT_AVRO, Payloads

from uss_stream.policies import USSUCB
from uss_stream_kafka import OutputsProcessor
from uss_stream_kafka.processing.formats import PayloadFormat

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]


def decide(bootstrap, topics, payloads, values, client="confluent"):
    """Produce ``values``, run the service over them in process; its decisions and dead letters."""
    produce(bootstrap, topics.input, values)
    app = new_app(bootstrap, topics, client_library=client)
    processor = OutputsProcessor(COSTS, alpha=0.51, codec=payloads.codec(topics.input, topics.output))
    run_app(app, processor)
    decisions = [payloads.decision(r.value) for r in read_all(bootstrap, topics.output)]
    letters = read_all(bootstrap, topics.dead_letter)
    return decisions, letters


@pytest.mark.parametrize("value_format", ["avro", "protobuf", "jsonschema"])
def test_events_in_each_format_are_decided_and_written_with_a_registered_schema(
    value_format, payloads, bootstrap_servers, make_topics
):
    topics = make_topics()
    values, outputs = stream(1_500)
    decisions, letters = decide(bootstrap_servers, topics, payloads, payloads.events(topics.input, values))

    depths = USSUCB(COSTS).run(outputs).tolist()
    assert letters == []
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(1_500)]
    assert [d["depth"] for d in decisions] == depths
    assert [d["prediction"] for d in decisions] == [int(outputs[i][k - 1]) for i, k in enumerate(depths)]
    assert [d["cost"] for d in decisions] == pytest.approx([CUMULATIVE[k - 1] for k in depths])
    # The decisions' schema is registered under the topic strategy's subject, in the format's type.
    registered = payloads.format.client().get_latest_version(f"{topics.output}-value").schema
    assert (
        registered.schema_type == {"avro": "AVRO", "protobuf": "PROTOBUF", "jsonschema": "JSON"}[value_format]
    )


@pytest.mark.parametrize("value_format", ["avro"])
def test_an_input_schema_that_gains_an_optional_field_is_still_decided(
    payloads, bootstrap_servers, make_topics
):
    topics = make_topics()
    values, outputs = stream(1_000)
    newer = copy.deepcopy(EVENT_AVRO)
    newer["fields"].append({"name": "region", "type": ["null", "string"], "default": None})
    with_region = [json.dumps({**json.loads(v), "region": "north"}).encode() for v in values[500:]]
    events = payloads.events(topics.input, values[:500]) + payloads.events(topics.input, with_region, newer)
    assert events[0][1:5] != events[-1][1:5]  # two schema ids

    decisions, letters = decide(bootstrap_servers, topics, payloads, events)

    assert letters == []
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(1_000)]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
    assert sorted(payloads.format.client().get_versions(f"{topics.input}-value")) == [1, 2]


@pytest.mark.parametrize("value_format", ["avro", "protobuf"])
def test_unknown_schema_ids_and_undecodable_payloads_are_dead_letters_with_their_reason(
    value_format, kafka_client, payloads, bootstrap_servers, make_topics
):
    topics = make_topics()
    values, outputs = stream(2)
    good = payloads.events(topics.input, values)
    unknown = b"\x00" + (2**31 - 7).to_bytes(4, "big") + good[0][5:]  # a valid body, an id never issued
    bad = [unknown, b"not framed at all", values[0], good[0][:5] + b"\xff" * 7]
    decisions, letters = decide(
        bootstrap_servers, topics, payloads, [good[0], *bad, good[1]], client=kafka_client
    )

    assert [d["id"] for d in decisions] == ["e0", "e1"]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
    reasons = [dict(letter.headers)["uss.reason"].decode() for letter in letters]
    assert reasons == ["unknown_schema", "invalid_payload", "invalid_payload", "invalid_payload"]
    envelopes = [json.loads(letter.value) for letter in letters]
    assert [base64.b64decode(e["value_b64"]) for e in envelopes] == bad  # the input's bytes, as they were
    assert f"schema id {2**31 - 7}" in envelopes[0]["error"]
    assert [e["source"]["offset"] for e in envelopes] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("strategy", "subject"),
    [
        ("topic", "{topic}-value"),
        ("record", "uss_stream.Decision"),
        ("topic-record", "{topic}-uss_stream.Decision"),
    ],
)
def test_the_subject_name_strategy_names_the_decisions_subject(strategy, subject, registry_url, make_topics):
    topic = make_topics().output
    codec = PayloadFormat("avro", registry_url, subject_name_strategy=strategy).outputs_codec(
        3, CUMULATIVE, "in", topic
    )
    value = codec.encode("e1", 2, 0)
    registered = PayloadFormat("avro", registry_url).client().get_latest_version(subject.format(topic=topic))
    assert int.from_bytes(value[1:5], "big") == registered.schema_id
    assert codec.decode_decision(value) == {"id": "e1", "depth": 2, "prediction": 0, "cost": 0.15}


def test_avro_bodies_are_those_of_confluent_kafkas_serializer_and_deserializer(registry_url, make_topics):
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = make_topics().output
    payloads = Payloads("avro", registry_url)
    codec = payloads.format.outputs_codec(3, CUMULATIVE, topic + "-events", topic)
    values, _ = stream(50)
    events = payloads.events(topic + "-events", values)
    _, ids, flat, errors = codec.decode_many(events, 1 << 20)  # the first by the deserializer, then fastavro
    deserialize = payloads.format.deserializer(payloads.format.client())
    context = SerializationContext(topic + "-events", MessageField.VALUE)
    assert errors == [None] * 50
    assert [[i, flat[3 * n : 3 * n + 3]] for n, i in enumerate(ids)] == [
        [d["id"], d["outputs"]] for d in (deserialize(v, context) for v in events)
    ]
    depths = [1 + n % 3 for n in range(50)]
    serialize = payloads.format.serializer(payloads.format.client())
    context = SerializationContext(topic, MessageField.VALUE)
    expected = [
        serialize(
            {"id": i, "depth": k, "prediction": flat[3 * n + k - 1], "cost": CUMULATIVE[k - 1]}, context
        )
        for n, (i, k) in enumerate(zip(ids, depths))
    ]
    assert codec.encode_many(ids, depths, flat) == expected
