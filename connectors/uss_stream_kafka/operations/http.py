"""The service's HTTP endpoint: ``/metrics`` (Prometheus text format) and ``/healthz`` (JSON).

``/healthz`` answers 200 while the service is healthy (its poll loop is alive) and 503 otherwise,
with a JSON body describing the state (assigned partitions, ages of the last poll, commit and
checkpoint), so that it serves as a Kubernetes liveness and readiness probe.

Clients cannot starve the probes: a connection has :data:`READ_TIMEOUT` seconds from its
arrival to send its whole request (a deadline for the request, not for each read: a client that
sends a byte every few seconds is closed at it too), and as long again to take its reply. At most
:data:`MAX_HANDLERS` connections are served at once; past them, :data:`PROBE_SLOTS` more are kept
for the health probe, which serve ``/healthz`` only (503 for anything else) and close a connection
that has not sent its request within :data:`PROBE_DEADLINE` seconds; more are closed at once,
without a thread or a reply. A client that disconnects before its reply is not an error (no
traceback).
"""

from __future__ import annotations

import io
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from uss_stream_kafka.exceptions import MetricsEndpointError

__all__ = ["HttpEndpoint", "health_details", "serve"]

log = logging.getLogger("uss_stream_kafka")

HealthCheck = Callable[[], tuple[bool, dict[str, Any]]]

#: Seconds a connection has from its arrival to send its whole request (and again to take its reply).
READ_TIMEOUT = 5.0
#: Connections served at once (besides the :data:`PROBE_SLOTS`).
MAX_HANDLERS = 32
#: Connections kept for the health probe once :data:`MAX_HANDLERS` are busy; more are closed on arrival.
PROBE_SLOTS = 2
#: Seconds a connection in a probe slot has to send its request (a probe sends it at once).
PROBE_DEADLINE = 1.0

_HEALTH_PATHS = ("/healthz", "/health")


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each given only what is left of the request's deadline."""

    def __init__(self, connection: socket.socket, deadline: float) -> None:
        self._connection = connection
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not received within its deadline")
        self._connection.settimeout(left)
        return self._connection.recv_into(buffer)


class _BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server with bounded handler threads (:data:`MAX_HANDLERS` and the
    :data:`PROBE_SLOTS`), a deadline per request, quiet on hang-ups."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_HANDLERS)
        self._probe_slots = threading.BoundedSemaphore(PROBE_SLOTS)
        self._admitted: dict[Any, tuple[float, bool]] = {}  # request -> (deadline, probe slot)

    def process_request(self, request: Any, client_address: Any) -> None:
        now = time.monotonic()
        if self._slots.acquire(blocking=False):
            self._admitted[request] = (now + READ_TIMEOUT, False)
        elif self._probe_slots.acquire(blocking=False):
            self._admitted[request] = (now + PROBE_DEADLINE, True)
        else:
            self.shutdown_request(request)  # over the caps: closed at once, no thread
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(request)
            raise

    def admission(self, request: Any) -> tuple[float, bool]:
        """``(deadline, probe slot)`` of a connection being served."""
        return self._admitted[request]

    def shutdown_request(self, request: Any) -> None:
        """Free the connection's slot, then close it: a client that sees the close finds the slot free."""
        self._release(request)
        super().shutdown_request(request)

    def _release(self, request: Any) -> None:
        admitted = self._admitted.pop(request, None)
        if admitted is not None:  # a connection closed on arrival had no slot
            (self._probe_slots if admitted[1] else self._slots).release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):  # a client that hung up or stalled
            log.debug("http client %s: %r", client_address, error)
            return
        super().handle_error(request, client_address)


class HttpEndpoint:
    """Serve ``/metrics`` and ``/healthz`` from a daemon thread.

    Parameters
    ----------
    registry
        The Prometheus registry to expose.
    health
        Returns ``(healthy, details)``.
    host, port
        Where to listen; port ``0`` picks a free port (see :attr:`port`).

    Examples
    --------
    >>> import urllib.request
    >>> endpoint = HttpEndpoint(CollectorRegistry(), lambda: (True, {"status": "ok"}), "127.0.0.1", 0)
    >>> endpoint.start()
    >>> urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/healthz").read()
    b'{"status": "ok"}'
    >>> endpoint.close()

    """

    def __init__(
        self, registry: CollectorRegistry, health: HealthCheck, host: str = "0.0.0.0", port: int = 9108
    ):
        self._registry = registry
        self._health = health
        self._server = _BoundedServer((host, port), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, name="uss-kafka-http", daemon=True)

    @property
    def port(self) -> int:
        """The port listened on."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def setup(self) -> None:
                super().setup()
                deadline, self.probe_slot = self.server.admission(self.request)  # type: ignore[attr-defined]
                self.rfile.close()
                self.rfile = io.BufferedReader(_DeadlineReader(self.connection, deadline))

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if self.probe_slot and path not in _HEALTH_PATHS:
                    self._reply(503, "text/plain; charset=utf-8", b"busy: only /healthz is served now\n")
                elif path == "/metrics":
                    self._reply(200, CONTENT_TYPE_LATEST, generate_latest(endpoint._registry))
                elif path in _HEALTH_PATHS:
                    healthy, details = endpoint._health()
                    self._reply(200 if healthy else 503, "application/json", json.dumps(details).encode())
                else:
                    self._reply(404, "text/plain; charset=utf-8", b"not found: try /metrics or /healthz\n")

            def _reply(self, status: int, content_type: str, body: bytes) -> None:
                self.connection.settimeout(READ_TIMEOUT)  # for all of the reply (sendall's timeout)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Requests are not logged (probes would flood the log)."""

        return Handler


def serve(registry: CollectorRegistry, health: HealthCheck, host: str, port: int) -> HttpEndpoint:
    """Start an :class:`HttpEndpoint`; :class:`MetricsEndpointError` if it cannot listen there."""
    try:
        endpoint = HttpEndpoint(registry, health, host, port)
    except OSError as error:  # port in use, host not resolvable or not local
        raise MetricsEndpointError(
            f"cannot serve /metrics on {host}:{port} "
            f"({error.strerror or error}): is another instance using the port? "
            "Pick another --metrics-port (0: any free port) "
            "or -1 to disable the endpoint"
        ) from error
    endpoint.start()
    log.info("metrics and health on http://%s:%d/metrics, /healthz", host, endpoint.port)
    return endpoint


def health_details(context: Any, status: str, poll_age: float) -> dict[str, Any]:
    """The ``/healthz`` document of a run.

    ``context`` is its :class:`~uss_stream_kafka.runtime.context.RunContext`.
    """
    summary, metrics = context.summary, context.metrics
    details: dict[str, Any] = {
        "status": status,
        "group_id": context.group_id,
        "input_topic": context.topics.input,
        "assigned_partitions": sorted(tp.partition for tp in context.partitions),
        "last_poll_age_seconds": round(poll_age, 3),
        "events": summary.events,
        "decisions": summary.decisions,
    }
    if metrics is not None:
        details["last_commit_age_seconds"] = round(metrics.last_commit_age(), 3)
        details["last_checkpoint_age_seconds"] = round(metrics.last_checkpoint_age(), 3)
    return details
