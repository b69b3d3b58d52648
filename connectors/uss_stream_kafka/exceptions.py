"""Every exception of the Kafka service, in one module.

Each one maps to an exit code of ``uss-stream kafka run`` (see :mod:`uss_stream_kafka.cli.exit_codes`):

- :class:`InvalidEvent`: an input record that cannot be decided; it is dead-lettered with one of
  :data:`~uss_stream_kafka.processing.events.REASONS` and the service keeps running (defined with the wire
  formats in :mod:`uss_stream_kafka.processing.events`, whose reasons it carries, and re-exported here);
- :class:`CheckpointError`: a checkpoint that does not fit the partition or the processor;
- :class:`NewerFormatError`: a state record written in a newer format than this code reads;
- :class:`DeliveryError`: the broker did not acknowledge some records, so nothing at or after them
  is committed;
- :class:`MetricsEndpointError`: the ``/metrics`` endpoint cannot be served;
- :class:`SecurityCheckError`: TLS or SASL with the brokers failed;
- :class:`StartupInterrupted`: a stop signal arrived while the service was starting.

The modules that raise them re-export them under their former homes (``uss_stream_kafka.runtime.app``,
``.checkpoint``, ``.security``, ``.exit_codes``).
"""

from __future__ import annotations

import signal

from uss_stream_kafka.processing.events import InvalidEvent

__all__ = [
    "CheckpointError",
    "DeliveryError",
    "InvalidEvent",
    "MetricsEndpointError",
    "NewerFormatError",
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
