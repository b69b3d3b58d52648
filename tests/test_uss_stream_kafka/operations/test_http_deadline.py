"""The HTTP endpoint under slow and many clients, without a broker: a deadline per request, bounded
handler threads, and slots kept for the health probe.

The limits are made small (a 0.6 s deadline, two handlers, one probe slot) so that the tests are
quick; each waits on what the server does to a connection (it closes it, or it answers), and the
deadlines only bound a failure.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from uss_stream_kafka.operations import http
from uss_stream_kafka.operations.http import HttpEndpoint


@pytest.fixture
def endpoint(monkeypatch) -> Iterator[HttpEndpoint]:
    monkeypatch.setattr(http, "READ_TIMEOUT", 0.6)
    monkeypatch.setattr(http, "PROBE_DEADLINE", 0.6)
    monkeypatch.setattr(http, "MAX_HANDLERS", 2)
    monkeypatch.setattr(http, "PROBE_SLOTS", 1)
    served = HttpEndpoint(CollectorRegistry(), lambda: (True, {"status": "ok"}), "127.0.0.1", 0)
    served.start()
    yield served
    served.close()


def connect(endpoint: HttpEndpoint) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", endpoint.port), timeout=10)
    connection.sendall(b"G")  # a request begun, never finished
    return connection


def closed_by_server(connection: socket.socket) -> bool:
    """Whether the server closed ``connection`` (waits up to its timeout for the server to act)."""
    try:
        return connection.recv(1024) == b""
    except ConnectionResetError:
        return True


def get(endpoint: HttpEndpoint, path: str) -> int | str:
    """GET ``path``: the reply's status, read to the server's close (its slot is then free again);
    the connection's fate if there is no reply."""
    try:
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as connection:
            connection.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            reply = b""
            while chunk := connection.recv(65536):
                reply += chunk
    except ConnectionError as error:
        return type(error).__name__
    return int(reply.split(b" ", 2)[1]) if reply else "closed without a reply"


def test_a_client_sending_a_byte_at_a_time_is_closed_at_the_requests_deadline(endpoint):
    """Each read gets a byte well within the deadline; the request as a whole does not."""
    request = b"GET /healthz HTTP/1.0\r\nX-Pad: " + b"p" * 40 + b"\r\n\r\n"  # 74 bytes: 3.7 s at this pace
    connection = socket.create_connection(("127.0.0.1", endpoint.port), timeout=10)
    started, sent = time.monotonic(), 0
    try:
        while sent < len(request) and time.monotonic() - started < 30:  # 30 s: far past the deadline
            connection.sendall(request[sent : sent + 1])
            sent += 1
            time.sleep(0.05)  # the scenario: one byte every 50 ms, a twelfth of the deadline
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert sent < len(request), "the slow request was served: no deadline for the whole request"
    assert closed_by_server(connection)
    connection.close()


def test_with_every_handler_busy_the_health_probe_still_answers_and_nothing_else_does(endpoint):
    held = [connect(endpoint) for _ in range(2)]  # the two handlers, each on a request never finished
    try:
        assert get(endpoint, "/healthz") == 200  # through the probe slot
        assert get(endpoint, "/metrics") == 503  # the probe slot serves /healthz only
    finally:
        for connection in held:
            connection.close()


def test_past_the_handlers_and_the_probe_slots_connections_are_closed_at_once(endpoint, monkeypatch):
    monkeypatch.setattr(http, "READ_TIMEOUT", 30.0)
    monkeypatch.setattr(http, "PROBE_DEADLINE", 30.0)
    held = [connect(endpoint) for _ in range(3)]  # two handlers and the probe slot
    try:
        extra = connect(endpoint)
        extra.settimeout(10.0)  # well before any deadline (30 s): only an at-once close passes
        assert closed_by_server(extra)
        extra.close()
    finally:
        for connection in held:
            connection.close()


def test_a_probe_slot_held_by_a_silent_client_is_freed_at_its_own_shorter_deadline(endpoint, monkeypatch):
    monkeypatch.setattr(http, "READ_TIMEOUT", 30.0)  # the handlers' clients stay; the probe slot's goes
    held = [connect(endpoint) for _ in range(3)]
    try:
        held[2].settimeout(10.0)  # PROBE_DEADLINE is 0.6 s; 10 s only bounds a failure
        assert closed_by_server(held[2])
        assert get(endpoint, "/healthz") == 200
    finally:
        for connection in held:
            connection.close()
