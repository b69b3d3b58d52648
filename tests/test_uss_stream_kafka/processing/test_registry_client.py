"""The Schema Registry as the service uses it, against stand-in HTTP servers (no broker, no registry).

What must hold: the registry's own "not found" answer is the only unknown schema (a dead letter);
a registry that is down, silent, refusing the service or not at the URL at all ends the run with a
:class:`RegistryError` (its exit code names it) and dead-letters nothing; every request is bounded.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO
from typing import Any

import fastavro
import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from uss_stream.commands.cli import main
from uss_stream_kafka.cli.exit_codes import exit_code
from uss_stream_kafka.exceptions import RegistryError
from uss_stream_kafka.processing import formats, registry
from uss_stream_kafka.processing.events import InvalidEvent
from uss_stream_kafka.processing.formats import PayloadFormat

EVENT = json.loads(formats.EVENT_AVRO)
JSON = "application/vnd.schemaregistry.v1+json"


class FakeRegistry:
    """A stand-in registry on 127.0.0.1: ``routes`` maps a request path to ``(status, body)``.

    Paths it has no route for answer 404 with the registry's "schema not found" code when they
    ask for a schema id, like a registry; ``requests`` lists every path asked.
    """

    def __init__(
        self, routes: dict[str, tuple[int, Any]] | None = None, default: tuple[int, Any] | None = None
    ):
        self.routes = {"/schemas/types": (200, ["AVRO", "JSON", "PROTOBUF"]), **(routes or {})}
        self.default = default
        self.requests: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                path = self.path.split("?", 1)[0]
                fake.requests.append(path)
                status, body = fake.routes.get(path) or fake.default or (404, {"error_code": 40403})
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", JSON if not isinstance(body, bytes) else "text/html")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def fresh_clients(monkeypatch):
    """Each test builds its own registry clients (they are cached per URL in a process)."""
    monkeypatch.setattr(formats, "_CLIENTS", {})


@pytest.fixture
def fake() -> Iterator[FakeRegistry]:
    server = FakeRegistry({"/schemas/ids/1": (200, {"schema": formats.EVENT_AVRO})})
    yield server
    server.stop()


def framed(schema_id: int, record: dict[str, Any], schema: Any = EVENT) -> bytes:
    """An Avro value in the Confluent wire format, written here with fastavro (not the codec)."""
    stream = BytesIO()
    stream.write(b"\x00" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(stream, fastavro.parse_schema(schema), record)
    return stream.getvalue()


def codec(url: str):
    return PayloadFormat("avro", url).outputs_codec(3, [0.0, 0.15, 0.35], "events", "decisions")


def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (404, 40403, None),  # for the caller to judge: an unknown schema (the registry's code) ...
        (404, 404, None),  # ... or a wrong path, or an optional endpoint the registry lacks
        (409, 409, None),  # a registration conflict
        (400, 42201, "configuration"),
        (422, 42201, "configuration"),
        (401, 40101, "security"),
        (403, 40301, "security"),
        (408, -1, "outage"),
        (429, -1, "outage"),
        (499, -1, "configuration"),
        (500, 50001, "outage"),
        (503, -1, "outage"),
    ],
)
def test_failed_registry_calls_are_told_apart(status, code, kind):
    failure = registry.registry_error(SchemaRegistryError(status, code, "message"), "http://r:8081")
    assert (None if failure is None else failure.kind) == kind


@pytest.mark.parametrize(
    ("code", "unknown"),
    [(40403, True), (40401, True), (40400, True), (40499, True), (40399, False), (40500, False),
     (404, False), (-1, False), (0, False)],
)  # fmt: skip
def test_only_the_registrys_not_found_codes_are_unknown_schemas(code, unknown):
    """HTTP 404 with the registry's own code (404xx: 40403 schema, 40401 subject, 40402 version,
    40400 confluent-kafka's mock) means it has no such thing; a wrong path's 404 carries another."""
    assert registry.not_found(SchemaRegistryError(404, code, "message")) is unknown
    assert not registry.not_found(SchemaRegistryError(500, 40403, "message"))


def test_transport_errors_timeouts_and_pages_that_are_not_json_are_told_apart():
    from confluent_kafka.schema_registry.common._httpx_compat import httpx

    for error, kind in [
        (httpx.ConnectError("refused"), "outage"),
        (httpx.ReadTimeout("slow"), "outage"),
        (httpx.ConnectTimeout("slow"), "outage"),
        (ConnectionResetError(104, "reset"), "outage"),
        (json.JSONDecodeError("Expecting value", "<html>", 0), "configuration"),
        (KeyError("schema"), "configuration"),
    ]:
        assert registry.registry_error(error, "http://r").kind == kind, error
    assert "does not answer in time" in str(registry.registry_error(httpx.ReadTimeout("slow"), "http://r"))
    assert registry.registry_error(RuntimeError("a bug"), "http://r") is None  # not the registry's


def test_credentials_are_not_shown_in_messages():
    failure = registry.registry_error(SchemaRegistryError(503, -1, "down"), "https://u:secret@r:8081/api")
    assert "secret" not in str(failure) and "https://r:8081/api" in str(failure)


def test_a_registry_at_a_closed_port_is_an_outage_at_start_and_exits_8(capsys):
    url = f"http://127.0.0.1:{closed_port()}/apis/ccompat/v7"
    with pytest.raises(RegistryError) as caught:
        PayloadFormat("avro", url).client()
    assert caught.value.kind == "outage" and exit_code(caught.value) == 8
    # The command line: one line and the code, before any broker is asked.
    code = main(["kafka", "run", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "i", "--output-topic",
                 "o", "--dlq-topic", "d", "--state-topic", "s", "--group-id", "g", "--stage-costs", "0,0.1",
                 "--value-format", "avro", "--schema-registry-url", url])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 8
    assert len(err) == 1 and err[0].startswith(
        "uss-stream kafka run: error: the Schema Registry at http://127.0.0.1"
    )
    assert "cannot be reached" in err[0]


@pytest.mark.parametrize(
    ("routes", "default", "says"),
    [
        (
            {"/schemas/types": (404, {"error_code": 404, "message": "RESTEASY003210"})},
            None,
            "HTTP 404, code 404",
        ),
        ({"/schemas/types": (200, b"<!DOCTYPE html><html></html>")}, None, "JSONDecodeError"),
        ({"/schemas/types": (200, {"types": "AVRO"})}, None, "GET schemas/types gave"),
        ({"/schemas/types": (200, ["JSON", "PROTOBUF"])}, None, "has no AVRO schemas"),
        ({"/schemas/types": (404, {"error_code": 40403})}, None, "GET schemas/types: HTTP 404"),
    ],
)
def test_a_url_that_is_not_the_registrys_api_is_refused_at_start_and_exits_9(routes, default, says):
    server = FakeRegistry(routes, default)
    try:
        with pytest.raises(RegistryError, match=says) as caught:
            PayloadFormat("avro", server.url).client()
    finally:
        server.stop()
    assert caught.value.kind == "configuration" and exit_code(caught.value) == 9


def test_refused_credentials_are_a_security_error_exit_7():
    server = FakeRegistry({"/schemas/types": (401, {"error_code": 40101, "message": "Unauthorized"})})
    try:
        with pytest.raises(RegistryError, match="check --schema-registry-auth") as caught:
            PayloadFormat("avro", server.url, registry_auth="u:wrong").client()
    finally:
        server.stop()
    assert exit_code(caught.value) == 7


def test_a_registry_that_never_answers_ends_the_request_at_its_timeout(monkeypatch):
    """A server that accepts connections and never answers: bounded, an outage (not a hang)."""
    monkeypatch.setattr(registry, "TIMEOUT", 0.2)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    outcome: list[BaseException] = []

    def start() -> None:
        try:
            PayloadFormat("avro", f"http://127.0.0.1:{silent.getsockname()[1]}").client()
        except BaseException as error:
            outcome.append(error)

    caller = threading.Thread(target=start, daemon=True)
    caller.start()
    caller.join(registry.longest_request() * 20)  # far beyond the bound: a hang fails here
    silent.close()
    assert not caller.is_alive(), "the registry request did not end at its timeout"
    assert isinstance(outcome[0], RegistryError) and outcome[0].kind == "outage"
    assert "does not answer in time" in str(outcome[0])


def test_the_bound_of_a_request_is_every_attempts_timeout_and_the_backoff():
    conf = registry.registry_conf("http://r")
    attempts = conf["max.retries"] + 1
    assert conf["timeout"] == registry.TIMEOUT
    assert registry.longest_request() == attempts * registry.TIMEOUT + conf["retries.wait.ms"] / 1000
    assert conf["retries.max.wait.ms"] >= conf["retries.wait.ms"]


def test_a_known_id_is_decoded_and_only_the_not_found_code_makes_an_unknown_schema(fake):
    events = codec(fake.url)
    assert events.decode(framed(1, {"id": "e1", "outputs": [1, 0, 1]})) == ("e1", [1, 0, 1])
    with pytest.raises(InvalidEvent, match="unknown_schema: the registry has no schema id 7"):
        events.decode(framed(7, {"id": "e2", "outputs": [1, 0, 1]}))  # 404, code 40403
    fake.routes["/schemas/ids/8"] = (404, {"error_code": 404, "message": "Could not find resource"})
    with pytest.raises(RegistryError) as caught:
        events.decode(framed(8, {"id": "e3", "outputs": [1, 0, 1]}))
    assert caught.value.kind == "configuration"


def test_ids_no_registry_issues_are_unknown_schemas_without_asking(fake):
    events = codec(fake.url)
    asked = len(fake.requests)
    for schema_id in (2**31, 2**32 - 1):
        with pytest.raises(InvalidEvent, match="unknown_schema"):
            events.decode(framed(schema_id, {"id": "e", "outputs": [1]}))
    assert len(fake.requests) == asked
    with pytest.raises(InvalidEvent, match="unknown_schema"):  # the largest id a registry may issue: asked
        events.decode(framed(2**31 - 1, {"id": "e", "outputs": [1]}))
    assert fake.requests[asked:] == [f"/schemas/ids/{2**31 - 1}"]


def test_a_registry_that_goes_down_mid_run_ends_the_batch_with_no_dead_letter(fake):
    events = codec(fake.url)
    batch = [framed(1, {"id": "e1", "outputs": [1, 0, 1]}), framed(2, {"id": "e2", "outputs": [1, 0, 1]})]
    fake.stop()  # id 1 is cached; id 2 must be asked of a registry that is gone
    with pytest.raises(RegistryError) as caught:
        events.decode_many(batch, 1 << 20)
    assert caught.value.kind == "outage" and exit_code(caught.value) == 8


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_failing_registry_is_an_outage_not_a_dead_letter(fake, status):
    fake.routes["/schemas/ids/3"] = (status, {"error_code": 50001, "message": "store unavailable"})
    with pytest.raises(RegistryError, match=f"HTTP {status}") as caught:
        codec(fake.url).decode(framed(3, {"id": "e", "outputs": [1, 0, 1]}))
    assert caught.value.kind == "outage"


def test_values_without_the_framing_are_dead_letters_without_asking(fake):
    events = codec(fake.url)
    asked = len(fake.requests)
    good = framed(1, {"id": "e", "outputs": [1, 0, 1]})
    for value in (b"", b"\x00\x00\x00\x00\x01", b"\x01" + good[1:], b'{"id": "e", "outputs": [1]}'):
        with pytest.raises(InvalidEvent, match="invalid_payload: no Schema Registry framing"):
            events.decode(value)
    assert len(fake.requests) == asked


def test_protobuf_events_of_a_schema_served_as_proto_text_are_decided():
    """Apicurio serves a schema registered as .proto text as text, even when asked for the serialized
    form: confluent-kafka's deserializer refused every such record. The body is an ``Event``."""
    label, event, _ = formats.proto_messages()
    server = FakeRegistry({
        "/schemas/ids/1": (200, {"schema": formats.PROTO_SCHEMA, "schemaType": "PROTOBUF"}),
        "/schemas/ids/2": (200, {"schema": formats.EVENT_AVRO}),
    })  # fmt: skip
    try:
        events = PayloadFormat("protobuf", server.url).outputs_codec(
            3, [0.0, 0.15, 0.35], "events", "decisions"
        )
        body = event(id=label(text="e1"), outputs=[label(integer=1), label(integer=0), label(flag=True)])
        # The framing: a zero byte, the id, the message indexes ([1]: zigzag count 1, index 1), the body.
        value = b"\x00" + (1).to_bytes(4, "big") + b"\x02\x02" + body.SerializeToString()
        assert events.decode(value) == ("e1", [1, 0, True])
        with pytest.raises(InvalidEvent, match="invalid_payload: schema id 2 is AVRO, not PROTOBUF"):
            events.decode(b"\x00" + (2).to_bytes(4, "big") + b"\x02\x02" + body.SerializeToString())
        with pytest.raises(InvalidEvent, match="unknown_schema"):
            events.decode(b"\x00" + (3).to_bytes(4, "big") + b"\x02\x02" + body.SerializeToString())
        huge = b"\x00" + (1).to_bytes(4, "big") + b"\xfe\xff\xff\xff\x0f" + body.SerializeToString()
        with pytest.raises(InvalidEvent, match="invalid_payload"):
            events.decode(huge)  # an index list of 2**31 entries: refused, not read
    finally:
        server.stop()


def test_a_404_the_library_takes_for_none_is_not_an_error():
    """confluent-kafka's JSON deserializer asks for the subject's associations, an endpoint Apicurio
    lacks (404, code 0), and takes the 404 for none: the service must let it."""
    schema = {"type": "object", "properties": {"id": {"type": "string"}, "outputs": {"type": "array"}}}
    server = FakeRegistry(
        {"/schemas/ids/1": (200, {"schema": json.dumps(schema), "schemaType": "JSON"})},
        default=(404, {"error_code": 0, "message": "RESTEASY003210: Could not find resource"}),
    )
    try:
        events = PayloadFormat("jsonschema", server.url).outputs_codec(3, [0.0, 0.15, 0.35], "events", "out")
        value = b"\x00" + (1).to_bytes(4, "big") + json.dumps({"id": "e1", "outputs": [1, 0, 1]}).encode()
        assert events.decode(value) == ("e1", [1, 0, 1])
        assert any(path.startswith("/associations") for path in server.requests)  # the 404 was asked
    finally:
        server.stop()
