"""Kafka clients behind one interface (:mod:`.base`): kafka-python (default) and confluent-kafka.

``consumer``, ``producer`` and ``admin`` make a client of the chosen library from kafka-python
keyword settings. The confluent-kafka one needs the ``[confluent]`` extra; without it the call
raises an ImportError that names it.

Examples
--------
>>> from uss_stream_kafka import clients
>>> clients.CLIENTS
('kafka-python', 'confluent')
>>> clients.producer("librdkafka", bootstrap_servers="127.0.0.1:9092")
Traceback (most recent call last):
...
ValueError: client: must be one of kafka-python, confluent, got 'librdkafka'
"""

from __future__ import annotations

import importlib
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
]

#: The client libraries, the default first.
CLIENTS = ("kafka-python", "confluent")

#: client -> (module of this package, prefix of its classes).
_IMPLEMENTATIONS = {"kafka-python": ("kafka_python", "KafkaPython"), "confluent": ("confluent", "Confluent")}


def _implementation(client: str, kind: str) -> Any:
    if client not in _IMPLEMENTATIONS:
        raise ValueError(f"client: must be one of {', '.join(CLIENTS)}, got {client!r}")
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
