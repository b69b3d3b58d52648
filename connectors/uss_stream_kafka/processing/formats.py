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
not decode with its schema is a dead letter (``invalid_payload`` or ``unknown_schema``). Only the
registry's own "not found" answer makes an unknown schema: a registry that cannot be reached, does
not answer in time, refuses the service or does not serve its API at the URL is not a reason to drop
records: a :class:`~uss_stream_kafka.exceptions.RegistryError` goes up and ends the run, and the
records are not committed (:mod:`~uss_stream_kafka.processing.registry`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from uss_stream.core.extras import require
from uss_stream_kafka.exceptions import RegistryError
from uss_stream_kafka.processing.events import InvalidEvent, OutputsCodec, oversize
from uss_stream_kafka.processing.registry import RegistryClient, check_registry, not_found, registry_conf

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
    "unbounded_array",
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
_CLIENTS: dict[tuple[str | None, str | None], RegistryClient] = {}


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

    def client(self) -> RegistryClient:
        """The registry client of :attr:`registry_url` (``mock://`` too), checked at its creation.

        One per URL and credentials in a process: every learner shares its cache of schemas. Its
        requests are bounded and its failures told apart
        (:class:`~uss_stream_kafka.processing.registry.RegistryClient`); raises
        :class:`~uss_stream_kafka.exceptions.RegistryError` if the URL does not serve a registry
        with the format's schema type, or cannot be reached (:func:`~.registry.check_registry`).
        """
        key = (self.registry_url, self.registry_auth)
        if key not in _CLIENTS:
            require("confluent_kafka", purpose=f"--value-format {self.value_format}")
            from confluent_kafka.schema_registry import SchemaRegistryClient

            url = str(self.registry_url)
            client = RegistryClient(
                SchemaRegistryClient.new_client(registry_conf(url, self.registry_auth)), url
            )
            if not url.startswith("mock://"):  # confluent-kafka's in-memory registry has no HTTP API
                check_registry(client, self.value_format)
            _CLIENTS[key] = client
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

    Avro is decoded and encoded by fastavro directly: the writer schema of each input schema id is
    asked of the registry once and parsed as confluent-kafka's deserializer parses it (a schema
    with an array of zero-byte items is refused: :func:`unbounded_array`); the first decision goes
    through the serializer (which registers the decision schema), later ones reuse its parsed schema
    and 5-byte framing (a zero byte, the schema id). That is what the serializers do per record,
    without their per-record lookups (a tenth of the cost).

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
    uss_stream_kafka.InvalidEvent: invalid_payload: no Schema Registry framing (a zero byte, a 4-byte ...

    """

    __slots__ = (
        "_avro", "_client", "_context", "_decision", "_decision_costs", "_decision_reader",
        "_deserialize", "_event", "_fastavro", "_label", "_out_context", "_proto", "_readers",
        "_serialize", "_writer",
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
        self._deserialize = payloads.deserializer(client) if payloads.value_format == "jsonschema" else None
        self._decision_reader = _decision_reader(payloads, client)
        self._context = SerializationContext(input_topic, MessageField.VALUE)
        self._out_context = SerializationContext(output_topic, MessageField.VALUE)
        self._proto = payloads.value_format == "protobuf"
        self._label, self._event, self._decision = proto_messages() if self._proto else (None, None, None)
        self._decision_costs = [math.nan] + [float(cost) for cost in cumulative_costs]
        self._avro = payloads.value_format == "avro"
        self._fastavro = require("fastavro", purpose="--value-format avro") if self._avro else None
        self._client = client
        self._readers: dict[bytes, Any] = {}  # Avro: framing (zero byte, schema id) -> parsed writer schema
        self._writer: tuple[bytes, Any] | None = None  # Avro: the decisions' framing and parsed schema

    def decode(self, value: bytes | None) -> tuple[Any, list[Any]]:
        """``(id, outputs)`` of a valid event; raises :class:`InvalidEvent` otherwise.

        Raises :class:`~uss_stream_kafka.exceptions.RegistryError` (not a dead letter) if the
        registry cannot be used.
        """
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        if value is None:
            raise InvalidEvent("invalid_payload", "record has no value (null)")
        if len(value) <= 5 or value[0] != 0:
            raise InvalidEvent(
                "invalid_payload",
                f"no Schema Registry framing (a zero byte, a 4-byte schema id) in {len(value)} bytes",
            )
        if value[1] >= 0x80:  # a registry's ids are positive signed 32-bit integers
            raise InvalidEvent(
                "unknown_schema", f"schema {_schema_id(value)} is no registry's (2**31 or more)"
            )
        try:
            if self._avro:
                reader = self._readers.get(value[:5]) or self._avro_schema(value[:5])
                stream = BytesIO(value)
                stream.seek(5)
                document = self._fastavro.schemaless_reader(stream, reader, None)
            elif self._proto:
                document = self._proto_event(value)
            else:
                document = self._deserialize(value, self._context)
        except (InvalidEvent, RegistryError):
            raise
        except SchemaRegistryError as error:  # the registry's own answer about this id (RegistryClient)
            if not not_found(error):
                raise RegistryError("configuration", f"the Schema Registry answers {error}") from error
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

    def _proto_event(self, value: bytes) -> Any:
        """A Protobuf value as a ``uss_stream.Event``, read as confluent-kafka's deserializer reads it.

        The deserializer reads the body with the ``Event`` message whatever the writer's schema
        says, but parses that schema first in its serialized form, which some registries (Apicurio)
        do not serve for a schema registered as ``.proto`` text: every record of such a schema would
        be refused. The schema is only asked for here (it must exist and be a Protobuf one).
        """
        from confluent_kafka.schema_registry.serde import SchemaId

        framing = SchemaId("PROTOBUF")
        body = framing.from_bytes(BytesIO(value))  # the schema id and the message indexes
        schema = self._client.get_schema(framing.id)
        if schema.schema_type != "PROTOBUF":
            kind = schema.schema_type
            raise InvalidEvent("invalid_payload", f"schema id {framing.id} is {kind}, not PROTOBUF")
        return self._event.FromString(body.read())

    def _avro_schema(self, framing: bytes) -> Any:
        """The parsed writer schema of a framing's schema id (asked of the registry once per id).

        Parsed as confluent-kafka's deserializer parses it (references resolved); a schema with an
        array of items encoded in zero bytes is refused (:func:`unbounded_array`).
        """
        from confluent_kafka.schema_registry.avro import (
            _resolve_named_schema,
            _schema_loads,
            parse_schema_with_repo,
        )

        schema_id = int.from_bytes(framing[1:5], "big")
        schema = self._client.get_schema(schema_id)
        named = _resolve_named_schema(schema, self._client)
        parsed = parse_schema_with_repo(_schema_loads(schema.schema_str).schema_str, named)
        array = unbounded_array(parsed)
        if array is not None:
            raise InvalidEvent(
                "invalid_payload",
                f"writer schema {schema_id} is refused: its array {array} has items encoded in zero "
                "bytes, so a few bytes could ask for billions of them",
            )
        if len(self._readers) < self.MAX_CACHED_SCHEMAS:
            self._readers[framing] = parsed
        return parsed

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
        try:
            return serialize(record, context)
        except SchemaRegistryError as error:
            if error.http_status_code != 409:
                raise
            raise RegistryError(
                "configuration",
                f"the Schema Registry refuses the decisions' schema ({error}): its subject holds an "
                "incompatible one (a new output topic, or another --subject-name-strategy)",
            ) from error

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


def unbounded_array(schema: Any) -> str | None:
    """The first array of a parsed Avro schema whose items are encoded in zero bytes (``None``: none).

    Such an array's block count alone says how many items to build: a 13-byte record could ask for
    two billion ``null`` items (gigabytes). Items of any other type take at least a byte each, so
    their count is bounded by the record's size. Zero bytes encode ``null``, a ``fixed`` of size 0
    and a record of such fields only; a union's branch index, an enum's index and an array's or
    map's count take a byte at least.

    >>> def array_of(items):
    ...     return {"type": "record", "name": "E", "fields": [{"name": "outputs",
    ...             "type": {"type": "array", "items": items}}]}
    >>> unbounded_array(array_of("null")), unbounded_array(array_of(["null", "long"]))
    ('E.outputs', None)
    >>> unbounded_array(array_of({"type": "record", "name": "Z", "fields": [{"name": "n", "type": "null"}]}))
    'E.outputs'
    """
    named = schema.get("__named_schemas", {}) if isinstance(schema, dict) else {}

    def empty(node: Any, seen: frozenset[str]) -> bool:  # can a value of ``node`` take zero bytes?
        if isinstance(node, str):
            return node == "null" or (
                node in named and node not in seen and empty(named[node], seen | {node})
            )
        if not isinstance(node, dict):
            return False  # a union: its branch index takes a byte
        kind = node.get("type")
        if kind in ("record", "error"):
            inner = seen | {node.get("name", "")}
            return all(empty(field["type"], inner) for field in node.get("fields", ()))
        if kind == "fixed":
            return node.get("size") == 0
        return kind not in ("array", "map", "enum") and empty(kind, seen)

    def walk(node: Any, path: str, seen: frozenset[str]) -> str | None:
        if isinstance(node, str):
            return walk(named[node], path, seen | {node}) if node in named and node not in seen else None
        if isinstance(node, list):
            return next(filter(None, (walk(branch, path, seen) for branch in node)), None)
        if not isinstance(node, dict):
            return None
        kind = node.get("type")
        if kind == "array":
            return (
                path if empty(node.get("items"), frozenset()) else walk(node.get("items"), path + "[]", seen)
            )
        if kind == "map":
            return walk(node.get("values"), path + "{}", seen)
        if kind in ("record", "error"):
            inner = seen | {node.get("name", "")}
            fields = (
                walk(field["type"], f"{path}.{field['name']}", inner) for field in node.get("fields", ())
            )
            return next(filter(None, fields), None)
        return walk(kind, path, seen) if isinstance(kind, (dict, list)) else None

    root = schema.get("name", "value") if isinstance(schema, dict) else "value"
    return walk(schema, str(root).rsplit(".", 1)[-1], frozenset())


def _schema_id(value: bytes) -> str:
    return f"id {int.from_bytes(value[1:5], 'big')}" if len(value) >= 5 else "id (none)"
