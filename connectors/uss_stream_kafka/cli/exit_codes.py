"""Exit codes of ``uss-stream kafka run`` and ``orchestrate``: one line on stderr, one code per cause.

======  =====================================================================================
code    cause
======  =====================================================================================
0       clean stop (SIGTERM/SIGINT, or idle)
1       an unexpected error (a traceback: please report it)
2       invalid configuration: options, topics, cascade factory (and argparse's usage errors)
3       the Kafka brokers cannot be reached (bootstrap address, network, broker down)
4       the ``/metrics`` endpoint cannot be served (port in use or out of range, bad host)
5       a checkpoint cannot be used (another group's, another configuration, newer format)
6       records were not delivered (the broker refused them); offsets were not committed
7       authentication or authorisation failed (SASL credentials, TLS certificates, ACLs; the
        Schema Registry's credentials)
8       the Schema Registry cannot be reached or does not answer in time (an outage); nothing of
        the batch was dead-lettered or committed
9       the Schema Registry URL does not serve the registry's API (a wrong path or host), or the
        registry lacks the ``--value-format``'s schema type
143     SIGTERM (130: SIGINT) during the start, before the service was running
======  =====================================================================================
"""

from __future__ import annotations

import functools
import ssl
import sys
from collections.abc import Callable
from typing import Any

from uss_stream_kafka.exceptions import StartupInterrupted

__all__ = ["EXIT_CODES", "exit_code", "one_line_errors"]

EXIT_CODES = {
    "ok": 0,
    "unexpected": 1,
    "configuration": 2,
    "unreachable": 3,
    "metrics": 4,
    "checkpoint": 5,
    "delivery": 6,
    "security": 7,
    "registry": 8,
    "registry_configuration": 9,
}


#: kafka-python errors by cause (looked up by name: they differ between kafka-python versions).
_SECURITY = (
    "AuthorizationError",
    "SaslAuthenticationFailedError",
    "UnsupportedSaslMechanismError",
    "IllegalSaslStateError",
    "AuthenticationFailedError",
)
_UNREACHABLE = ("NoBrokersAvailable", "KafkaConnectionError", "KafkaTimeoutError")
#: The exit code of each kind of :class:`~uss_stream_kafka.exceptions.RegistryError`.
_REGISTRY_CODES = {"outage": "registry", "configuration": "registry_configuration", "security": "security"}


def _kafka_errors(names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    from kafka import errors

    return tuple(getattr(errors, name) for name in names if hasattr(errors, name))


def exit_code(error: BaseException) -> int | None:
    """The exit code of a startup or configuration error (``None``: unexpected, keep the traceback).

    >>> from uss_stream_kafka.exceptions import RegistryError
    >>> exit_code(ValueError("bad option")), exit_code(RuntimeError("?"))
    (2, None)
    >>> [exit_code(RegistryError(kind, "...")) for kind in ("outage", "configuration", "security")]
    [8, 9, 7]

    """
    from kafka import errors

    from uss_stream_kafka.clients import ClientError
    from uss_stream_kafka.exceptions import (
        CheckpointError,
        DeliveryError,
        MetricsEndpointError,
        RegistryError,
        SecurityCheckError,
    )

    if isinstance(error, ClientError):  # the client seam's: judge the library's own error
        if isinstance(error.__cause__, Exception) and not isinstance(error.__cause__, ClientError):
            return exit_code(error.__cause__)
        if error.code in (29, 30, 31, 53, 58) or "AUTH" in error.name or "SSL" in error.name:
            return EXIT_CODES["security"]
        return EXIT_CODES["unreachable"] if error.retriable or error.timeout else None
    if isinstance(error, StartupInterrupted):
        return 128 + error.signum
    if isinstance(error, CheckpointError):
        return EXIT_CODES["checkpoint"]
    if isinstance(error, MetricsEndpointError):
        return EXIT_CODES["metrics"]
    if isinstance(error, DeliveryError):
        return EXIT_CODES["delivery"]
    if isinstance(error, RegistryError):
        return EXIT_CODES[_REGISTRY_CODES[error.kind]]
    if isinstance(error, (ssl.SSLError, SecurityCheckError, *_kafka_errors(_SECURITY))):
        return EXIT_CODES["security"]
    if isinstance(error, _kafka_errors(_UNREACHABLE)):
        return EXIT_CODES["unreachable"]
    if isinstance(error, (ValueError, ImportError, errors.KafkaConfigurationError)):
        return EXIT_CODES["configuration"]
    return None


def one_line_errors(command: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Decorate a command handler: a known error becomes one line on stderr and its exit code."""

    def decorate(handler: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(handler)
        def run(args: Any) -> int:
            try:
                return handler(args)
            except (Exception, StartupInterrupted) as error:
                code = exit_code(error)
                if code is None:
                    raise
                print(f"uss-stream kafka {command}: error: {_message(error, args)}", file=sys.stderr)
                return code

        return run

    return decorate


def _message(error: BaseException, args: Any) -> str:
    from uss_stream_kafka.clients import ClientError

    if isinstance(error, ClientError) and isinstance(error.__cause__, Exception):
        error = error.__cause__  # the library's own error says more
    text = " ".join(str(error).split()) or type(error).__name__
    unreachable = isinstance(error, ClientError) and exit_code(error) == EXIT_CODES["unreachable"]
    if unreachable or isinstance(error, _kafka_errors(_UNREACHABLE)):
        return f"cannot reach the Kafka brokers at {getattr(args, 'bootstrap_servers', '?')}: {text}"
    return text
