"""The HTTP endpoint's caps, without a service: a connection cap and a read timeout that idle clients
cannot get around, and slots given back when their connections end (``operations/http.py``).

Real sockets against a real :class:`HttpEndpoint` on a free port; each wait is on a socket (a reply,
or the server closing it) with a deadline.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from uss_stream_kafka.operations import http
from uss_stream_kafka.operations.http import MAX_HANDLERS, HttpEndpoint

DEADLINE = 20.0


@pytest.fixture
def endpoint() -> Iterator[HttpEndpoint]:
    served = HttpEndpoint(CollectorRegistry(), lambda: (True, {"status": "ok"}), "127.0.0.1", 0)
    served.start()
    yield served
    served.close()


def connect(endpoint: HttpEndpoint) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", endpoint.port), timeout=DEADLINE)
    return client


def get(client: socket.socket, path: str) -> bytes:
    """Send ``GET path`` and read the reply to its end (``b""``: closed without one)."""
    with contextlib.suppress(ConnectionError):
        client.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    reply = b""
    with contextlib.suppress(ConnectionError):
        while chunk := client.recv(65536):
            reply += chunk
    return reply


def fetch(endpoint: HttpEndpoint, path: str) -> bytes:
    """``GET path`` on a new connection (closed afterwards)."""
    with connect(endpoint) as client:
        return get(client, path)


def test_connections_over_the_cap_are_closed_and_a_closed_one_gives_its_slot_back(endpoint):
    idle = [connect(endpoint) for _ in range(MAX_HANDLERS)]  # each holds a handler, sending nothing
    assert fetch(endpoint, "/metrics") == b""  # over the cap: closed at once, no reply
    for client in idle:
        client.close()
    deadline = time.monotonic() + DEADLINE
    while not fetch(endpoint, "/healthz"):  # the handlers see the hang-ups and free their slots
        assert time.monotonic() < deadline, "no slot came free after the idle clients hung up"
    replies = []
    for _ in range(MAX_HANDLERS + 2):  # every slot is free again, one after the other
        replies.append(fetch(endpoint, "/healthz"))
    assert all(reply.startswith(b"HTTP/1.0 200") for reply in replies), replies[-1][:80]


def test_a_client_that_sends_nothing_is_closed_after_the_read_timeout(monkeypatch):
    monkeypatch.setattr(http, "READ_TIMEOUT", 0.3)
    served = HttpEndpoint(CollectorRegistry(), lambda: (True, {}), "127.0.0.1", 0)
    served.start()
    try:
        with connect(served) as silent:
            silent.sendall(b"GET /metr")  # an incomplete request, then nothing
            assert silent.recv(1) == b""  # closed by the server, well before the deadline
    finally:
        served.close()
