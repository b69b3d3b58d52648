"""Kafka client configuration: bootstrap servers, security (SSL, SASL) and pass-through options.

Every client the service opens (consumer, producer, admin, checkpoint reader) gets the same
connection and security settings from one :class:`ClientConfig`, so an SSL or SASL setup is given
once. Anything kafka-python accepts can be passed through ``options`` (``--kafka-option KEY=VALUE``
on the command line).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SASL_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "ClientConfig",
    "check_client_options",
    "check_option_value",
    "librdkafka_property",
    "client_kind",
    "merge_options",
    "parse_option",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")

# Settings the service owns: passing them through would break its delivery guarantees.
_RESERVED = frozenset(
    {
        "enable_auto_commit",
        "group_id",
        "key_deserializer",
        "value_deserializer",
        "key_serializer",
        "value_serializer",
        "transactional_id",
        "acks",
        "enable_idempotence",
    }
)


def _client_settings() -> dict[str, frozenset[str]]:
    """The settings each kafka-python client accepts, by client kind."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    return {
        "consumer": frozenset(KafkaConsumer.DEFAULT_CONFIG),
        "producer": frozenset(KafkaProducer.DEFAULT_CONFIG),
        "admin": frozenset(KafkaAdminClient.DEFAULT_CONFIG),
    }


def client_kind(role: str) -> str:
    """The kafka-python client a role is played by: ``"producer"``, ``"admin"`` or ``"consumer"``.

    >>> client_kind("orchestrator-producer"), client_kind("admin"), client_kind("state-reader")
    ('producer', 'admin', 'consumer')

    """
    for kind in ("producer", "admin"):
        if kind in role:
            return kind
    return "consumer"


def librdkafka_property(key: str) -> bool:
    """Whether ``key`` is written as librdkafka's own property: dotted, or one word (librdkafka's
    names have no underscores; kafka-python's multi-word names do).

    >>> [librdkafka_property(key) for key in ("queued.min.messages", "debug", "linger_ms")]
    [True, True, False]
    """
    return "." in key or "_" not in key


def check_client_options(kind: str, options: Mapping[str, Any], name: str, librdkafka: bool = False) -> None:
    """Raise ``ValueError`` naming ``name`` if a key of ``options`` is not a ``kind`` client setting.

    With ``librdkafka`` (the confluent client), librdkafka's own properties
    (:func:`librdkafka_property`) are left to librdkafka, which checks them when the client is created.

    >>> check_client_options("producer", {"linger_ms": 5}, "producer_options")
    >>> check_client_options("consumer", {"linger_ms": 5}, "consumer_options")
    Traceback (most recent call last):
    ...
    ValueError: consumer_options: 'linger_ms' is not a kafka-python consumer setting
    >>> check_client_options("consumer", {"debug": "cgrp", "fetch_wt": 5}, "consumer_options",
    ...                      librdkafka=True)
    Traceback (most recent call last):
    ...
    ValueError: consumer_options: 'fetch_wt' is not a kafka-python consumer setting (librdkafka's are dotted)

    """
    known = _client_settings()[kind]
    for key, value in options.items():
        if librdkafka and librdkafka_property(key):
            continue
        if key in known:
            check_option_value(key, value, name)
            continue
        hint = " (librdkafka's are dotted)" if librdkafka else ""
        raise ValueError(f"{name}: {key!r} is not a kafka-python {kind} setting{hint}")


#: The largest value of an integer client setting: Kafka's and librdkafka's are 32-bit signed.
MAX_INT_SETTING = 2**31 - 1


def check_option_value(key: str, value: Any, name: str) -> None:
    """Raise ``ValueError`` naming ``name`` and ``key`` if ``value`` does not fit setting ``key``.

    The type is that of kafka-python's default (an integer setting takes ``0..2**31-1``, Kafka's
    and librdkafka's 32-bit range); ``acks`` takes ``0``, ``1``, ``-1`` or ``"all"``; a setting
    without default (``None``) is left to the client.

    >>> check_option_value("linger_ms", 5, "producer_options")
    >>> check_option_value("retry_backoff_ms", "xyz", "kafka_option")
    Traceback (most recent call last):
    ...
    ValueError: kafka_option: 'retry_backoff_ms' must be an integer in 0..2147483647, got 'xyz'
    >>> check_option_value("session_timeout_ms", 10**10, "consumer_options")
    Traceback (most recent call last):
    ...
    ValueError: consumer_options: 'session_timeout_ms' must be an integer in 0..2147483647, got 10000000000
    >>> check_option_value("check_crcs", 1, "consumer_options")
    Traceback (most recent call last):
    ...
    ValueError: consumer_options: 'check_crcs' must be true or false, got 1
    """
    default = _client_defaults().get(key)
    if key == "acks":
        fits, kind = value in (0, 1, -1, "all") and not isinstance(value, bool), "0, 1, -1 or 'all'"
    elif isinstance(default, bool):
        fits, kind = isinstance(value, bool), "true or false"
    elif isinstance(default, (int, float)):
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(default, int):
            fits = is_number and isinstance(value, int) and 0 <= value <= MAX_INT_SETTING
            kind = f"an integer in 0..{MAX_INT_SETTING}"
        else:  # retries, consumer_timeout_ms: infinite by default
            fits, kind = is_number and value >= 0, "a number >= 0"
    elif isinstance(default, str):
        fits, kind = isinstance(value, str), "a string"
    else:
        return
    if not fits:
        raise ValueError(f"{name}: {key!r} must be {kind}, got {value!r}")


def _client_defaults() -> dict[str, Any]:
    """kafka-python's default of every client setting (the kinds agree where they share one)."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    return {**KafkaAdminClient.DEFAULT_CONFIG, **KafkaConsumer.DEFAULT_CONFIG, **KafkaProducer.DEFAULT_CONFIG}


@dataclass(frozen=True)
class ClientConfig:
    """Connection settings shared by every Kafka client of the service.

    Parameters
    ----------
    bootstrap_servers
        Comma-separated ``host:port`` list.
    client_id
        Prefix of the clients' ``client_id`` (each client appends its role).
    security_protocol
        One of :data:`SECURITY_PROTOCOLS`.
    ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password, ssl_crlfile
        PEM files (and key password) for ``SSL`` / ``SASL_SSL``.
    ssl_check_hostname
        Verify the broker's certificate host name.
    sasl_mechanism, sasl_username, sasl_password
        SASL settings for ``SASL_PLAINTEXT`` / ``SASL_SSL``.
    sasl_kerberos_service_name
        Kerberos service name for ``GSSAPI``.
    options
        Further kafka-python settings applied to every client (``{"request_timeout_ms": 60000}``).

    Examples
    --------
    >>> config = ClientConfig("broker:9093", security_protocol="SASL_SSL",
    ...                       sasl_mechanism="SCRAM-SHA-512", sasl_username="svc", sasl_password="s3cret",
    ...                       ssl_cafile="/etc/kafka/ca.pem")
    >>> kwargs = config.kafka_kwargs("consumer")
    >>> kwargs["security_protocol"], kwargs["sasl_plain_username"], kwargs["client_id"]
    ('SASL_SSL', 'svc', 'uss-stream-consumer')
    >>> "s3cret" in repr(config)
    False
    >>> ClientConfig("b:9092", security_protocol="SSH")
    Traceback (most recent call last):
    ...
    ValueError: security_protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, got 'SSH'

    """

    bootstrap_servers: str
    client_id: str = "uss-stream"
    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_crlfile: str | None = None
    ssl_check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_kerberos_service_name: str = "kafka"
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        servers = [s.strip() for s in str(self.bootstrap_servers).split(",") if s.strip()]
        if not servers:
            raise ValueError("bootstrap_servers must name at least one host:port")
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                f"got {self.security_protocol!r}"
            )
        uses_sasl = self.security_protocol.startswith("SASL_")
        if uses_sasl and self.sasl_mechanism is None:
            raise ValueError(f"security_protocol {self.security_protocol} needs a sasl_mechanism")
        if self.sasl_mechanism is not None:
            if not uses_sasl:
                raise ValueError(
                    f"sasl_mechanism {self.sasl_mechanism} needs security_protocol SASL_PLAINTEXT or SASL_SSL"
                )
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ValueError(
                    f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, got {self.sasl_mechanism!r}"
                )
            if self.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and (
                not self.sasl_username or self.sasl_password is None
            ):
                raise ValueError(
                    f"sasl_mechanism {self.sasl_mechanism} needs sasl_username and sasl_password"
                )
        reserved = sorted(_RESERVED.intersection(self.options))
        if reserved:
            raise ValueError(
                f"option(s) {', '.join(reserved)} are set by the service and cannot be overridden"
            )
        known = frozenset().union(*_client_settings().values())
        unknown = sorted(set(self.options) - known)
        if unknown:
            raise ValueError(f"options: {', '.join(map(repr, unknown))} is not a kafka-python client setting")
        for key, value in self.options.items():
            check_option_value(key, value, "options")

    def kafka_kwargs(self, role: str) -> dict[str, Any]:
        """Keyword arguments for a kafka-python client playing ``role`` (e.g. ``"producer"``).

        Of ``options``, only the settings this kind of client accepts (see :func:`client_kind`).
        """
        kwargs: dict[str, Any] = {
            "bootstrap_servers": [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()],
            "client_id": f"{self.client_id}-{role}",
            "security_protocol": self.security_protocol,
        }
        if self.security_protocol in ("SSL", "SASL_SSL"):
            kwargs["ssl_check_hostname"] = self.ssl_check_hostname
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_crlfile"):
                value = getattr(self, name)
                if value is not None:
                    kwargs[name] = value
        if self.sasl_mechanism is not None:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism == "GSSAPI":
                kwargs["sasl_kerberos_service_name"] = self.sasl_kerberos_service_name
            else:
                kwargs["sasl_plain_username"] = self.sasl_username
                kwargs["sasl_plain_password"] = self.sasl_password
        accepted = _client_settings()[client_kind(role)]
        kwargs.update((key, value) for key, value in self.options.items() if key in accepted)
        return kwargs


def parse_option(text: str, librdkafka: bool = False) -> tuple[str, Any]:
    """Parse ``KEY=VALUE`` into a kafka-python setting; the value is a Python literal if it is one.

    A dotted key is read as kafka-python's name (``request.timeout.ms`` is ``request_timeout_ms``).
    With ``librdkafka`` (the confluent client), librdkafka's own properties
    (:func:`librdkafka_property`: ``queued.min.messages``, ``debug``) are kept as given, and a
    name with an underscore is kafka-python's, translated by the client.

    >>> parse_option("request_timeout_ms=60000")
    ('request_timeout_ms', 60000)
    >>> parse_option("ssl_check_hostname=False")
    ('ssl_check_hostname', False)
    >>> parse_option("compression.type=gzip")
    ('compression_type', 'gzip')
    >>> parse_option("queued.min.messages=100", librdkafka=True), parse_option("debug=cgrp", True)
    (('queued.min.messages', 100), ('debug', 'cgrp'))
    >>> parse_option("linger_ms=5", librdkafka=True)
    ('linger_ms', 5)
    >>> parse_option("oops")
    Traceback (most recent call last):
    ...
    ValueError: Kafka option must look like KEY=VALUE, got 'oops'

    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    python_name = key.replace(".", "_").replace("-", "_")
    if not sep or not python_name.isidentifier():
        raise ValueError(f"Kafka option must look like KEY=VALUE, got {text!r}")
    if not (librdkafka and librdkafka_property(key)):
        key = python_name
    raw = raw.strip()
    if raw in ("true", "false"):
        return key, raw == "true"
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    if not isinstance(value, (int, float, bool, str)):
        value = raw
    return key, value


def merge_options(*groups: Iterable[str], librdkafka: bool = False) -> dict[str, Any]:
    """Parse several lists of ``KEY=VALUE`` strings into one dict; later groups win.

    ``librdkafka``: keep librdkafka's own properties as given (:func:`parse_option`).

    >>> merge_options(["linger_ms=5"], ["linger_ms=20", "acks=all"])
    {'linger_ms': 20, 'acks': 'all'}

    """
    merged: dict[str, Any] = {}
    for group in groups:
        for text in group:
            key, value = parse_option(text, librdkafka)
            merged[key] = value
    return merged
