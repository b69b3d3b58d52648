"""The service's ``/metrics`` and ``/healthz`` under hostile clients: held connections, early hang-ups."""

from __future__ import annotations

import json
import socket
import struct
import time
import urllib.request

import pytest
from conftest import COSTS, Running, new_app, produce, stream
from waiting import wait_until

from uss_stream_kafka import OutputsProcessor
from uss_stream_kafka.operations.http import MAX_HANDLERS, READ_TIMEOUT

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(120),
]


def _running_service(kafka_client, bootstrap_servers, make_topics) -> tuple[str, int]:
    topics = make_topics()
    values, _ = stream(50)
    produce(bootstrap_servers, topics.input, values)
    app = new_app(bootstrap_servers, topics, http_port=0, http_host="127.0.0.1", client_library=kafka_client)
    running = Running(app, OutputsProcessor(COSTS, alpha=0.51))
    running.wait_for(lambda a: a.summary.events == 50)
    return app.http_address


def _healthy(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=2) as reply:
            return json.loads(reply.read())["status"] == "running"
    except OSError:
        return False


def test_held_connections_are_closed_and_the_probe_answers_again(
    kafka_client, bootstrap_servers, make_topics
):
    host, port = _running_service(kafka_client, bootstrap_servers, make_topics)
    held = [socket.create_connection((host, port), timeout=READ_TIMEOUT * 4) for _ in range(MAX_HANDLERS + 8)]
    try:
        for connection in held:
            connection.sendall(b"GET /healthz HTTP/1.1\r\n")  # never the blank line that ends the request
        started = time.monotonic()
        # Each is closed by the server (EOF) after the read timeout, or at once past the cap.
        for connection in held:
            assert connection.recv(1024) == b""
        assert time.monotonic() - started < READ_TIMEOUT * 3
        wait_until(lambda: _healthy(host, port), "/healthz answering again", timeout=READ_TIMEOUT * 2)
    finally:
        for connection in held:
            connection.close()


def test_clients_that_hang_up_early_leave_no_traceback(kafka_client, bootstrap_servers, make_topics, capfd):
    host, port = _running_service(kafka_client, bootstrap_servers, make_topics)
    capfd.readouterr()
    for _ in range(30):
        connection = socket.create_connection((host, port))
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
        connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        connection.close()
    assert _healthy(host, port)
    assert "Traceback" not in capfd.readouterr().err
