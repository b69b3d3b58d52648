"""kafka-python's keyword settings in librdkafka's property names, and back (no confluent-kafka needed).

The service's settings use kafka-python's names (``linger_ms``); the confluent-kafka seam
(:mod:`uss_stream_kafka.clients.confluent`) hands librdkafka its own (``linger.ms``) through
:func:`librdkafka_config`, and the delivery guard reads them back with :func:`kafka_python_name`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uss_stream_kafka.clients.config import librdkafka_property

__all__ = ["kafka_python_name", "librdkafka_config"]


def _size(value: Any) -> str:
    return str(int(value))


def _assignors(value: Any) -> str:
    names = [getattr(a, "name", a) for a in (value if isinstance(value, (list, tuple)) else [value])]
    return ",".join(str(name).replace("_", "-") for name in names)


#: kafka-python keyword -> (librdkafka property, conversion of the value).
_TRANSLATION: dict[str, tuple[str, Any]] = {
    "bootstrap_servers": ("bootstrap.servers", lambda v: v if isinstance(v, str) else ",".join(v)),
    "client_id": ("client.id", str),
    "group_id": ("group.id", str),
    "group_instance_id": ("group.instance.id", str),
    "enable_auto_commit": ("enable.auto.commit", bool),
    "auto_offset_reset": ("auto.offset.reset", str),
    "isolation_level": ("isolation.level", str),
    "partition_assignment_strategy": ("partition.assignment.strategy", _assignors),
    "session_timeout_ms": ("session.timeout.ms", _size),
    "heartbeat_interval_ms": ("heartbeat.interval.ms", _size),
    "max_poll_interval_ms": ("max.poll.interval.ms", _size),
    "fetch_max_bytes": ("fetch.max.bytes", _size),
    "max_partition_fetch_bytes": ("max.partition.fetch.bytes", _size),
    "fetch_min_bytes": ("fetch.min.bytes", _size),
    "fetch_max_wait_ms": ("fetch.wait.max.ms", _size),
    "allow_auto_create_topics": ("allow.auto.create.topics", bool),
    "request_timeout_ms": ("socket.timeout.ms", _size),
    "metadata_max_age_ms": ("metadata.max.age.ms", _size),
    "security_protocol": ("security.protocol", str),
    "ssl_cafile": ("ssl.ca.location", str),
    "ssl_certfile": ("ssl.certificate.location", str),
    "ssl_keyfile": ("ssl.key.location", str),
    "ssl_password": ("ssl.key.password", str),
    "ssl_crlfile": ("ssl.crl.location", str),
    "ssl_check_hostname": ("ssl.endpoint.identification.algorithm", lambda v: "https" if v else "none"),
    "sasl_mechanism": ("sasl.mechanism", str),
    "sasl_plain_username": ("sasl.username", str),
    "sasl_plain_password": ("sasl.password", str),
    "sasl_kerberos_service_name": ("sasl.kerberos.service.name", str),
    "acks": ("acks", lambda v: "all" if v in ("all", -1) else str(v)),
    "enable_idempotence": ("enable.idempotence", bool),
    "transactional_id": ("transactional.id", str),
    "transaction_timeout_ms": ("transaction.timeout.ms", _size),
    "linger_ms": ("linger.ms", _size),
    "batch_size": ("batch.size", _size),
    "max_request_size": ("message.max.bytes", _size),
    "compression_type": ("compression.type", lambda v: "none" if v is None else str(v)),
    "retries": ("retries", _size),
    "delivery_timeout_ms": ("delivery.timeout.ms", _size),
    "max_in_flight_requests_per_connection": ("max.in.flight", _size),
    "buffer_memory": ("queue.buffering.max.kbytes", lambda v: str(max(1, int(v) // 1024))),
}


def librdkafka_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka properties for kafka-python keyword ``settings``.

    librdkafka's own properties (dotted names, and words without an underscore that kafka-python
    does not use, such as ``debug``) pass unchanged: librdkafka checks them when the client is
    created. ``None`` values are left out (librdkafka's default applies).

    Examples
    --------
    >>> librdkafka_config({"bootstrap_servers": ["a:9092", "b:9092"], "linger_ms": 5,
    ...                    "group_instance_id": None, "queue.buffering.max.ms": 7, "debug": "cgrp"})
    {'bootstrap.servers': 'a:9092,b:9092', 'linger.ms': '5', 'queue.buffering.max.ms': 7, 'debug': 'cgrp'}
    >>> librdkafka_config({"api_version": (4, 0)})
    Traceback (most recent call last):
    ...
    ValueError: settings: 'api_version' has no librdkafka equivalent; give librdkafka's own ...
    """
    config: dict[str, Any] = {}
    for name, value in settings.items():
        if value is None:
            continue
        if librdkafka_property(name) and name not in _TRANSLATION:  # acks, retries: both clients' names
            config[name] = value
            continue
        if name not in _TRANSLATION:
            raise ValueError(
                f"settings: {name!r} has no librdkafka equivalent; give librdkafka's own property "
                "(with dots) instead"
            )
        key, convert = _TRANSLATION[name]
        config[key] = convert(value)
    return config


#: kafka-python's name of a librdkafka property the translation writes (and librdkafka's alias of acks).
_KAFKA_PYTHON_NAMES = {
    **{key: name for name, (key, _) in _TRANSLATION.items() if key != name},
    "request.required.acks": "acks",
}


def kafka_python_name(key: str) -> str:
    """The kafka-python name of the librdkafka property ``key`` (``key`` itself if none).

    >>> [kafka_python_name(key) for key in ("enable.idempotence", "request.required.acks", "debug")]
    ['enable_idempotence', 'acks', 'debug']
    """
    return _KAFKA_PYTHON_NAMES.get(key, key)
