"""Kafka clients behind one interface (:mod:`.base`): kafka-python and confluent-kafka.

``consumer``, ``producer`` and ``admin`` make a client of the chosen library from kafka-python
keyword settings. The confluent-kafka one needs the ``[confluent]`` extra; without it the call
raises an ImportError that names it. ``"auto"`` (:func:`resolve`) is confluent-kafka when it is
installed, kafka-python otherwise.

Examples
--------
>>> from uss_stream_kafka import clients
>>> clients.CLIENTS
('kafka-python', 'confluent')
>>> clients.producer("librdkafka", bootstrap_servers="127.0.0.1:9092")
Traceback (most recent call last):
...
ValueError: client: must be one of auto, kafka-python, confluent, got 'librdkafka'
>>> clients.resolve("kafka-python")
'kafka-python'
"""

from __future__ import annotations

import functools
import importlib
import logging
from typing import Any

from .base import (
    Admin,
    ClientError,
    Consumer,
    Producer,
    Record,
    Records,
    TopicPartition,
    TopicSpec,
    UndecodableError,
)

__all__ = [
    "CHOICES",
    "CLIENTS",
    "Admin",
    "ClientError",
    "Consumer",
    "Producer",
    "Record",
    "Records",
    "TopicPartition",
    "TopicSpec",
    "UndecodableError",
    "admin",
    "consumer",
    "producer",
    "resolve",
]

#: The client libraries: the pure-Python one first, then librdkafka's.
CLIENTS = ("kafka-python", "confluent")
#: What a client may be chosen as: a library, or ``"auto"`` (:func:`resolve`).
CHOICES = ("auto", *CLIENTS)

#: client -> (module of this package, prefix of its classes).
_IMPLEMENTATIONS = {"kafka-python": ("kafka_python", "KafkaPython"), "confluent": ("confluent", "Confluent")}


def resolve(client: str) -> str:
    """The library of ``client``: itself, or for ``"auto"`` confluent-kafka if it imports, else kafka-python.

    librdkafka's client decides about three times as fast as the pure-Python one (``docs/kafka.md``);
    kafka-python needs no compiled wheel.
    """
    if client != "auto":
        return client
    return "confluent" if _confluent_loads() else "kafka-python"


@functools.cache
def _confluent_loads() -> bool:
    """Whether confluent-kafka imports; if it is installed but fails to load (its librdkafka, say),
    a warning says so, once, and ``auto`` takes kafka-python."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    except Exception as error:  # e.g. OSError: librdkafka.so.1: cannot open shared object file
        logging.getLogger("uss_stream_kafka").warning(
            "--client auto: confluent-kafka is installed but does not load (%s: %s): using kafka-python",
            type(error).__name__,
            error,
        )
        return False
    return True


def _implementation(client: str, kind: str) -> Any:
    client = resolve(client)
    if client not in _IMPLEMENTATIONS:
        raise ValueError(f"client: must be one of {', '.join(CHOICES)}, got {client!r}")
    module, prefix = _IMPLEMENTATIONS[client]
    return getattr(importlib.import_module(f"{__name__}.{module}"), prefix + kind)


def consumer(client: str, **settings: Any) -> Consumer:
    """A :class:`Consumer` of library ``client`` (see :data:`CLIENTS`)."""
    return _implementation(client, "Consumer")(**settings)


def producer(client: str, **settings: Any) -> Producer:
    """A :class:`Producer` of library ``client`` (transactional with ``transactional_id``)."""
    return _implementation(client, "Producer")(**settings)


def admin(client: str, **settings: Any) -> Admin:
    """An :class:`Admin` client of library ``client``."""
    return _implementation(client, "Admin")(**settings)
