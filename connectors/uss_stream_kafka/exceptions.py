"""The exceptions of the Kafka service, in one module.

Each one maps to an exit code of ``uss-stream kafka run`` (see :mod:`uss_stream_kafka.cli.exit_codes`):

- :class:`CheckpointError`: a checkpoint that does not fit the partition or the processor;
- :class:`NewerFormatError`: a state record written in a newer format than this code reads;
- :class:`DeliveryError`: the broker did not acknowledge some records, so nothing at or after them
  is committed;
- :class:`MetricsEndpointError`: the ``/metrics`` endpoint cannot be served;
- :class:`RegistryError`: the Schema Registry cannot be used (down, not answering in time, refusing
  the service's credentials, or no registry at the URL), so no record is dead-lettered or committed;
- :class:`SecurityCheckError`: TLS or SASL with the brokers failed;
- :class:`StartupInterrupted`: a stop signal arrived while the service was starting.

Each is imported from here (or from the package, ``uss_stream_kafka.CheckpointError``). One more
exception is defined above this module: :class:`~uss_stream_kafka.processing.events.InvalidEvent`,
an input record that cannot be decided, dead-lettered with one of
:data:`~uss_stream_kafka.processing.events.REASONS` while the service keeps running. It lives with
the wire formats and the reasons it carries, so that this module imports nothing of the service.
"""

from __future__ import annotations

import signal

__all__ = [
    "CheckpointError",
    "DeliveryError",
    "MetricsEndpointError",
    "NewerFormatError",
    "RegistryError",
    "SecurityCheckError",
    "StartupInterrupted",
]


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used (it does not fit the partition or the processor)."""


class NewerFormatError(ValueError):
    """A state record written in a newer format version than this code reads."""


class DeliveryError(RuntimeError):
    """The broker did not acknowledge some records: nothing at or after them is committed."""


class MetricsEndpointError(RuntimeError):
    """The ``/metrics`` and ``/healthz`` endpoint cannot be served (port in use, bad host)."""


class RegistryError(RuntimeError):
    """The Schema Registry cannot be used; the batch is neither dead-lettered nor committed.

    ``kind`` says why: ``"outage"`` (unreachable, no answer within the timeout, HTTP 5xx, 408 or
    429: a restart later resumes where the run stopped), ``"configuration"`` (the URL answers,
    but not with the registry's API: a wrong path or host) or ``"security"`` (HTTP 401 or 403:
    the credentials are refused).

    >>> RegistryError("outage", "cannot reach the Schema Registry").kind
    'outage'
    """

    KINDS = ("outage", "configuration", "security")

    def __init__(self, kind: str, message: str) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"registry error kind must be one of {', '.join(self.KINDS)}, got {kind!r}")
        super().__init__(message)
        self.kind = kind


class SecurityCheckError(Exception):
    """TLS or SASL with the brokers failed (exit code 7 of ``uss-stream kafka run``)."""


class StartupInterrupted(BaseException):
    """A stop signal arrived while the service was starting (connecting, reading checkpoints).

    A ``BaseException``, like ``KeyboardInterrupt``: the client libraries' ``except Exception``
    retry loops must not swallow it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"{signal.Signals(signum).name} while starting: stopped before running")
        self.signum = signum
