"""Schema Registry payloads: outputs-mode events and decisions as Avro, Protobuf or JSON Schema.

``--value-format json`` (the default) is :class:`~uss_stream_kafka.processing.events.OutputsCodec` alone. The
other formats use the Confluent wire format (a zero byte, the 4-byte schema id, then the body) through
confluent-kafka's ``schema_registry`` serializers, which do not depend on the Kafka client: both
``--client`` choices use them. An input record is decoded with its *writer's* schema, fetched from the
registry by the id it carries, so an input schema that gains a field is still decided; the decoded
record is then checked exactly as a JSON event is. Decisions are written with :data:`DECISION_AVRO`,
:data:`DECISION_JSON_SCHEMA` or the ``Decision`` message of :data:`PROTO_SCHEMA`, registered under the
subject that ``--subject-name-strategy`` names.

A record that has no registry framing, whose schema id the registry does not know, or whose body does
not decode with its schema is a dead letter (``invalid_payload`` or ``unknown_schema``); a registry
that cannot be reached is an outage, not a reason to drop records: the error goes up, and the records
are not committed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from uss_stream.core.extras import require
from uss_stream_kafka.processing.events import InvalidEvent, OutputsCodec, oversize

__all__ = [
    "DECISION_AVRO",
    "DECISION_JSON_SCHEMA",
    "EVENT_AVRO",
    "FORMATS",
    "PROTO_SCHEMA",
    "STRATEGIES",
    "from_label",
    "to_label",
    "PayloadFormat",
    "RegistryOutputsCodec",
    "proto_messages",
]

#: ``--value-format`` choices; every one but ``json`` goes through a Schema Registry.
FORMATS = ("json", "avro", "protobuf", "jsonschema")
#: ``--subject-name-strategy`` choices: the subject is ``<topic>-value``, ``<record name>`` or
#: ``<topic>-<record name>``.
STRATEGIES = ("topic", "record", "topic-record")

#: An Avro schema of outputs-mode events (any record with these two fields will do).
EVENT_AVRO = """{
  "type": "record", "name": "SensorEvent", "namespace": "example",
  "fields": [
    {"name": "id", "type": ["string", "long"]},
    {"name": "outputs", "type": {"type": "array", "items": ["long", "double", "string", "boolean"]}}
  ]
}"""

#: The decision record (Avro): an id as the event had it, the depth, the prediction, the cost.
DECISION_AVRO = """{
  "type": "record", "name": "Decision", "namespace": "uss_stream",
  "fields": [
    {"name": "id", "type": ["string", "long"]},
    {"name": "depth", "type": "int"},
    {"name": "prediction", "type": ["boolean", "long", "double", "string"]},
    {"name": "cost", "type": "double"}
  ]
}"""

#: The decision record (JSON Schema).
DECISION_JSON_SCHEMA = """{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "uss_stream.Decision", "type": "object",
  "properties": {
    "id": {"type": ["string", "integer"]},
    "depth": {"type": "integer", "minimum": 1},
    "prediction": {"type": ["boolean", "integer", "number", "string"]},
    "cost": {"type": "number"}
  },
  "required": ["id", "depth", "prediction", "cost"]
}"""

#: The Protobuf contract: an input ``Event`` (other fields, of a newer schema, are skipped) and the
#: ``Decision`` written for it. A ``Label`` is one stage output, an id or a prediction.
PROTO_SCHEMA = """syntax = "proto3";
package uss_stream;
message Label { oneof kind { string text = 1; int64 integer = 2; double number = 3; bool flag = 4; } }
message Event { Label id = 1; repeated Label outputs = 2; }
message Decision { Label id = 1; int32 depth = 2; Label prediction = 3; double cost = 4; }
"""


def proto_messages() -> tuple[type, type, type]:
    """The ``Label``, ``Event`` and ``Decision`` message classes of :data:`PROTO_SCHEMA`.

    Built from a descriptor at run time (no generated code to keep in step with the text).

    >>> Label, Event, Decision = proto_messages()
    >>> event = Event(id=Label(text="e1"), outputs=[Label(integer=1), Label(flag=False)])
    >>> Event.FromString(event.SerializeToString()).outputs[1].WhichOneof("kind")
    'flag'

    """
    global _PROTO
    if _PROTO is None:
        require("google.protobuf", purpose="--value-format protobuf")
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        field = descriptor_pb2.FieldDescriptorProto
        file = descriptor_pb2.FileDescriptorProto(
            name="uss_stream.proto", package="uss_stream", syntax="proto3"
        )
        label = file.message_type.add(name="Label")
        label.oneof_decl.add(name="kind")
        for number, (name, kind) in enumerate(
            [("text", field.TYPE_STRING), ("integer", field.TYPE_INT64), ("number", field.TYPE_DOUBLE),
             ("flag", field.TYPE_BOOL)], start=1,
        ):  # fmt: skip
            label.field.add(name=name, number=number, type=kind, label=field.LABEL_OPTIONAL, oneof_index=0)
        message = ".uss_stream.Label"
        event = file.message_type.add(name="Event")
        event.field.add(
            name="id", number=1, type=field.TYPE_MESSAGE, type_name=message, label=field.LABEL_OPTIONAL
        )
        event.field.add(
            name="outputs", number=2, type=field.TYPE_MESSAGE, type_name=message, label=field.LABEL_REPEATED
        )
        decision = file.message_type.add(name="Decision")
        for number, name, kind in [
            (1, "id", field.TYPE_MESSAGE), (2, "depth", field.TYPE_INT32),
            (3, "prediction", field.TYPE_MESSAGE),
            (4, "cost", field.TYPE_DOUBLE),
        ]:  # fmt: skip
            decision.field.add(
                name=name, number=number, type=kind, label=field.LABEL_OPTIONAL,
                type_name=message if kind == field.TYPE_MESSAGE else None,
            )  # fmt: skip
        pool = descriptor_pool.DescriptorPool()
        pool.Add(file)
        _PROTO = tuple(
            message_factory.GetMessageClass(pool.FindMessageTypeByName(f"uss_stream.{name}"))
            for name in ("Label", "Event", "Decision")
        )
    return _PROTO


_PROTO: tuple[type, type, type] | None = None
_CLIENTS: dict[tuple[str | None, str | None], Any] = {}


def from_label(label: Any) -> Any:
    """A protobuf ``Label`` as the Python value JSON would give (``None`` if no kind is set).

    >>> Label = proto_messages()[0]
    >>> from_label(Label(integer=3)), from_label(Label(flag=True)), from_label(Label())
    (3, True, None)

    """
    kind = label.WhichOneof("kind")
    return None if kind is None else getattr(label, kind)


def to_label(label_class: type, value: Any) -> Any:
    """A label, id or prediction as a protobuf ``Label`` (other types as their text).

    >>> to_label(proto_messages()[0], 2.5).WhichOneof("kind")
    'number'

    """
    kind = type(value)
    if kind is bool:
        return label_class(flag=value)
    if kind is int:
        return label_class(integer=value)
    if kind is float:
        return label_class(number=value)
    return label_class(text=str(value))


@dataclass(frozen=True)
class PayloadFormat:
    """How records' values are written: ``--value-format`` and its Schema Registry settings.

    Parameters
    ----------
    value_format
        One of :data:`FORMATS`.
    registry_url
        The Schema Registry's base URL (for a Confluent-compatible API under a path, that path).
    registry_auth
        ``USER:PASSWORD`` for HTTP basic authentication, or ``None``.
    subject_name_strategy
        One of :data:`STRATEGIES`: the subject decisions' schema is registered under.

    Examples
    --------
    >>> PayloadFormat("json").registry
    False
    >>> PayloadFormat("avro", "http://127.0.0.1:8081", subject_name_strategy="record").registry
    True
    >>> PayloadFormat("avro")
    Traceback (most recent call last):
    ...
    ValueError: --value-format avro needs a Schema Registry URL

    """

    value_format: str = "json"
    registry_url: str | None = None
    registry_auth: str | None = None
    subject_name_strategy: str = "topic"

    def __post_init__(self) -> None:
        if self.value_format not in FORMATS:
            raise ValueError(f"value format must be one of {', '.join(FORMATS)}, got {self.value_format!r}")
        if self.subject_name_strategy not in STRATEGIES:
            raise ValueError(
                f"subject name strategy must be one of {', '.join(STRATEGIES)}, "
                f"got {self.subject_name_strategy!r}"
            )
        if self.registry and not self.registry_url:
            raise ValueError(f"--value-format {self.value_format} needs a Schema Registry URL")
        if self.registry_auth is not None and ":" not in self.registry_auth:
            raise ValueError("the Schema Registry credentials must be USER:PASSWORD")

    @property
    def registry(self) -> bool:
        """Whether the values go through a Schema Registry."""
        return self.value_format != "json"

    def client(self) -> Any:
        """The confluent-kafka ``SchemaRegistryClient`` of :attr:`registry_url` (``mock://`` too).

        One per URL and credentials in a process: every learner shares its cache of schemas.
        """
        key = (self.registry_url, self.registry_auth)
        if key not in _CLIENTS:
            require("confluent_kafka", purpose=f"--value-format {self.value_format}")
            from confluent_kafka.schema_registry import SchemaRegistryClient

            conf: dict[str, Any] = {"url": self.registry_url}
            if self.registry_auth is not None:
                conf["basic.auth.user.info"] = self.registry_auth
            _CLIENTS[key] = SchemaRegistryClient.new_client(conf)
        return _CLIENTS[key]

    def outputs_codec(
        self, n_stages: int, cumulative_costs: Sequence[float], input_topic: str, output_topic: str
    ) -> OutputsCodec:
        """The codec of outputs mode: JSON's, or one through the registry."""
        if not self.registry:
            return OutputsCodec(n_stages, cumulative_costs)
        return RegistryOutputsCodec(n_stages, cumulative_costs, self, input_topic, output_topic)

    def serializer(self, client: Any, schema: str | None = None) -> Callable[[Any, Any], bytes]:
        """The value serializer of decisions (or of ``schema``'s records: Avro and JSON Schema)."""
        from confluent_kafka.schema_registry import (
            record_subject_name_strategy,
            topic_record_subject_name_strategy,
            topic_subject_name_strategy,
        )

        strategy = {
            "topic": topic_subject_name_strategy,
            "record": record_subject_name_strategy,
            "topic-record": topic_record_subject_name_strategy,
        }[self.subject_name_strategy]
        conf = {"auto.register.schemas": True, "subject.name.strategy": strategy}
        if self.value_format == "avro":
            from confluent_kafka.schema_registry.avro import AvroSerializer

            return AvroSerializer(client, schema or DECISION_AVRO, conf=conf)
        if self.value_format == "jsonschema":
            from confluent_kafka.schema_registry.json_schema import JSONSerializer

            return JSONSerializer(schema or DECISION_JSON_SCHEMA, client, conf=conf)
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        message = proto_messages()[2] if schema is None else schema
        return ProtobufSerializer(message, client, conf={**conf, "use.deprecated.format": False})

    def deserializer(self, client: Any) -> Callable[[bytes, Any], Any]:
        """The value deserializer of input events: each with its writer's schema."""
        if self.value_format == "avro":
            from confluent_kafka.schema_registry.avro import AvroDeserializer

            return AvroDeserializer(client)
        if self.value_format == "jsonschema":
            from confluent_kafka.schema_registry.json_schema import JSONDeserializer

            return JSONDeserializer(None, schema_registry_client=client)
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        return ProtobufDeserializer(proto_messages()[1], {"use.deprecated.format": False}, client)


class RegistryOutputsCodec(OutputsCodec):
    """:class:`~uss_stream_kafka.processing.events.OutputsCodec` for values framed by a Schema Registry.

    Decoded events are checked as JSON events are, so a decoded record is decided or dead-lettered
    for the same reasons as the same event in JSON. Two more reasons belong to the framing:
    ``invalid_payload`` (no registry framing, or a body that does not decode with its schema) and
    ``unknown_schema`` (a schema id the registry does not know).

    Avro is decoded and encoded by fastavro directly once a schema is known: the first record of
    each input schema id goes through confluent-kafka's deserializer (which asks the registry), and
    the first decision through its serializer (which registers the decision schema); later ones
    reuse the parsed schema and the 5-byte framing (a zero byte, the schema id), which is what the
    serializers do per record, without their per-record lookups (a tenth of the cost).

    Examples
    --------
    >>> payloads = PayloadFormat("avro", "mock://formats-doctest")
    >>> codec = payloads.outputs_codec(3, [0.0, 0.15, 0.35], "events", "decisions")
    >>> decision = codec.encode("e1", 2, 0)
    >>> decision[0], codec.decode_decision(decision)
    (0, {'id': 'e1', 'depth': 2, 'prediction': 0, 'cost': 0.15})
    >>> codec.decode(b'{"id": "e1", "outputs": [1, 0, 1]}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: invalid_payload: SerializationError: Invalid magic byte

    """

    __slots__ = (
        "_avro", "_client", "_context", "_decision", "_decision_costs", "_decision_reader",
        "_deserialize", "_fastavro", "_label", "_out_context", "_proto", "_readers", "_serialize",
        "_writer",
    )  # fmt: skip

    #: Distinct input schemas whose parsed form is kept (Avro); more are decoded the slow way.
    MAX_CACHED_SCHEMAS = 1024

    def __init__(
        self,
        n_stages: int,
        cumulative_costs: Sequence[float],
        payloads: PayloadFormat,
        input_topic: str,
        output_topic: str,
    ) -> None:
        super().__init__(n_stages, cumulative_costs)
        from confluent_kafka.serialization import MessageField, SerializationContext

        client = payloads.client()
        self._serialize = payloads.serializer(client)
        self._deserialize = payloads.deserializer(client)
        self._decision_reader = _decision_reader(payloads, client)
        self._context = SerializationContext(input_topic, MessageField.VALUE)
        self._out_context = SerializationContext(output_topic, MessageField.VALUE)
        self._proto = payloads.value_format == "protobuf"
        self._label, _, self._decision = proto_messages() if self._proto else (None, None, None)
        self._decision_costs = [math.nan] + [float(cost) for cost in cumulative_costs]
        self._avro = payloads.value_format == "avro"
        self._fastavro = require("fastavro", purpose="--value-format avro") if self._avro else None
        self._client = client
        self._readers: dict[bytes, Any] = {}  # Avro: framing (magic byte + schema id) -> parsed writer schema
        self._writer: tuple[bytes, Any] | None = None  # Avro: the decisions' framing and parsed schema

    def decode(self, value: bytes | None) -> tuple[Any, list[Any]]:
        """``(id, outputs)`` of a valid event; raises :class:`InvalidEvent` otherwise."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        if value is None:
            raise InvalidEvent("invalid_payload", "record has no value (null)")
        reader = self._readers.get(value[:5]) if self._avro else None
        try:
            if reader is not None:
                stream = BytesIO(value)
                stream.seek(5)
                document = self._fastavro.schemaless_reader(stream, reader, None)
            else:
                document = self._deserialize(value, self._context)
                if self._avro:
                    self._remember_schema(value)
        except SchemaRegistryError as error:
            if error.http_status_code != 404:
                raise  # the registry is down or refuses us: an outage, not a bad record
            raise InvalidEvent(
                "unknown_schema", f"the registry has no schema {_schema_id(value)}: {error}"
            ) from None
        except Exception as error:
            raise InvalidEvent("invalid_payload", f"{type(error).__name__}: {error}") from None
        if self._proto:
            document = {
                "id": from_label(document.id) if document.HasField("id") else None,
                "outputs": [from_label(output) for output in document.outputs] or None,
            }
        return self._check(document)

    def _remember_schema(self, value: bytes) -> None:
        """Keep the parsed writer schema of a record the deserializer decoded (Avro, no references)."""
        schema = self._client.get_schema(int.from_bytes(value[1:5], "big"))
        if not schema.references and len(self._readers) < self.MAX_CACHED_SCHEMAS:
            self._readers[value[:5]] = self._fastavro.parse_schema(json.loads(schema.schema_str))

    def decode_many(
        self, values: Sequence[bytes | None], max_bytes: int
    ) -> tuple[list[int], list[Any], list[Any], list[InvalidEvent | None]]:
        """Decode a batch: ``(positions, ids, outputs, errors)``, as :meth:`decode` per value."""
        errors: list[InvalidEvent | None] = [None] * len(values)
        positions: list[int] = []
        ids: list[Any] = []
        outputs: list[Any] = []
        for position, value in enumerate(values):
            try:
                if value is not None and len(value) > max_bytes:
                    raise oversize(value, max_bytes)
                event_id, row = self.decode(value)
            except InvalidEvent as error:
                errors[position] = error
                continue
            positions.append(position)
            ids.append(event_id)
            outputs.extend(row)
        return positions, ids, outputs, errors

    def encode(self, event_id: Any, depth: int, prediction: Any) -> bytes:
        """The decision record's value, framed with its registered schema's id."""
        row: list[Any] = [None] * self._n_stages
        row[depth - 1] = prediction
        return self.encode_many([event_id], [depth], row)[0]

    def encode_many(self, ids: Sequence[Any], depths: Sequence[int], outputs: Sequence[Any]) -> list[bytes]:
        """The decision values of a batch, as :meth:`OutputsCodec.encode_many` lays them out."""
        serialize, context, costs = self._serialize, self._out_context, self._decision_costs
        label, decision, writer = self._label, self._decision, self._writer
        payloads = []
        base = -1
        for event_id, depth in zip(ids, depths):
            prediction = outputs[base + depth]
            base += self._n_stages
            if label is not None:
                record: Any = decision(
                    id=to_label(label, event_id), depth=depth, prediction=to_label(label, prediction),
                    cost=costs[depth],
                )  # fmt: skip
            else:
                record = {"id": event_id, "depth": depth, "prediction": prediction, "cost": costs[depth]}
                if writer is not None:
                    stream = BytesIO()
                    stream.write(writer[0])
                    self._fastavro.schemaless_writer(stream, writer[1], record)
                    payloads.append(stream.getvalue())
                    continue
            payload = self._registered(serialize, record, context)
            if self._avro:  # registered now: the next records are framed with its id
                writer = self._writer = (payload[:5], self._fastavro.parse_schema(json.loads(DECISION_AVRO)))
            payloads.append(payload)
        return payloads

    @staticmethod
    def _registered(serialize: Any, record: Any, context: Any) -> bytes:
        """``serialize(record, context)``, once more if another worker registered the schema first.

        Two workers starting together both register the decision schema; the registry may refuse
        the second (HTTP 409) while the first is being stored. Registering again finds it.
        """
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return serialize(record, context)
        except SchemaRegistryError as error:
            if error.http_status_code != 409:
                raise
            return serialize(record, context)

    def decode_decision(self, value: bytes) -> dict[str, Any]:
        """A decision record as a dict (the reader's view, for tests and tools)."""
        document = self._decision_reader(value, self._out_context)
        if self._proto:
            return {
                "id": from_label(document.id),
                "depth": document.depth,
                "prediction": from_label(document.prediction),
                "cost": document.cost,
            }
        return document


def _decision_reader(payloads: PayloadFormat, client: Any) -> Callable[[bytes, Any], Any]:
    if payloads.value_format == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        return ProtobufDeserializer(proto_messages()[2], {"use.deprecated.format": False}, client)
    return payloads.deserializer(client)


def _schema_id(value: bytes) -> str:
    return f"id {int.from_bytes(value[1:5], 'big')}" if len(value) >= 5 else "id (none)"
