"""The value format a broker test runs with: JSON, or a Schema Registry format on the real registry.

A test that takes the ``payloads`` fixture runs with ``--value-format json`` unless it is
parametrized with ``value_format`` (``@pytest.mark.parametrize("value_format", ["json", "avro"])``).
:meth:`Payloads.events` turns the JSON events of ``conftest.stream`` into the format (registering the
tests' input schema), :meth:`Payloads.decision` reads a decision back whatever its format, and
:attr:`Payloads.options` / :meth:`Payloads.codec` give the service the same format on the command line
or in process. The registry is ``SCHEMA_REGISTRY_URL`` (``make test`` starts deploy/registry/ for it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tests import needs
from uss_stream_kafka.processing import formats
from uss_stream_kafka.processing.events import OutputsCodec
from uss_stream_kafka.processing.formats import PayloadFormat, proto_messages, to_label

__all__ = ["EVENT_AVRO", "EVENT_JSON_SCHEMA", "Payloads", "payloads", "registry_url", "value_format"]

#: The tests' input schema (Avro): the event of outputs mode, as the docs show it.
EVENT_AVRO = json.loads(formats.EVENT_AVRO)

#: The same event as a JSON Schema.
EVENT_JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "tests.SensorEvent",
    "type": "object",
    "properties": {
        "id": {"type": ["string", "integer"]},
        "outputs": {"type": "array", "items": {"type": ["integer", "number", "string", "boolean"]}},
    },
    "required": ["id", "outputs"],
}

NO_REGISTRY = (
    "the registry tests need a Schema Registry: start one and set SCHEMA_REGISTRY_URL, or run the "
    "tests through `bash deploy/registry/with-registry.sh ...` (make test does)"
)


class Payloads:
    """One value format for a test's producers, service and readers."""

    def __init__(self, value_format: str, registry_url: str | None) -> None:
        self.format = PayloadFormat(value_format, registry_url)
        self.value_format = value_format

    @property
    def options(self) -> list[str]:
        """The service's command-line flags of this format."""
        if not self.format.registry:
            return []
        return ["--value-format", self.value_format, "--schema-registry-url", str(self.format.registry_url)]

    def codec(self, input_topic: str, output_topic: str) -> Callable[[int, Sequence[float]], OutputsCodec]:
        """``OutputsProcessor(codec=...)`` of this format (in-process services)."""
        return functools.partial(
            self.format.outputs_codec, input_topic=input_topic, output_topic=output_topic
        )

    def events(
        self, topic: str, values: Sequence[bytes], schema: dict[str, Any] | None = None
    ) -> list[bytes]:
        """JSON events as this format's values for ``topic`` (with the tests' input schema, or ``schema``)."""
        if not self.format.registry:
            return list(values)
        from confluent_kafka.serialization import MessageField, SerializationContext

        context = SerializationContext(topic, MessageField.VALUE)
        client = self.format.client()
        if self.value_format == "protobuf":
            label, event, _ = proto_messages()
            serialize = self.format.serializer(client, event)

            def message(document: dict[str, Any]) -> Any:
                return event(
                    id=to_label(label, document["id"]),
                    outputs=[to_label(label, o) for o in document["outputs"]],
                )

            return [serialize(message(json.loads(value)), context) for value in values]
        default = EVENT_AVRO if self.value_format == "avro" else EVENT_JSON_SCHEMA
        serialize = self.format.serializer(client, json.dumps(schema or default))
        return [serialize(json.loads(value), context) for value in values]

    @functools.cached_property
    def _reader(self) -> Any:
        return self.format.outputs_codec(1, [0.0], "unused-input", "unused-output")

    def decision(self, value: bytes) -> dict[str, Any]:
        """A decision record's value as a dict, whatever the format."""
        if not self.format.registry:
            return json.loads(value)
        return self._reader.decode_decision(value)


@pytest.fixture(scope="session")
def registry_url() -> str:
    """The real Schema Registry's URL (without one: skipped, and failed in CI: ``tests/needs.py``)."""
    return needs.variable("SCHEMA_REGISTRY_URL", NO_REGISTRY)


@pytest.fixture
def value_format() -> str:
    """``--value-format`` of the test (JSON unless the test parametrizes ``value_format``)."""
    return "json"


@pytest.fixture
def payloads(value_format: str, request: pytest.FixtureRequest) -> Payloads:
    """The test's :class:`Payloads` (the registry is only asked for by a registry format)."""
    url = request.getfixturevalue("registry_url") if value_format != "json" else None
    return Payloads(value_format, url)
