"""The Schema Registry as the service uses it: bounded requests, failures told apart, a check at start.

confluent-kafka's ``SchemaRegistryClient`` waits on a registry that never answers (it sets no
HTTP timeout by default), and its failures are of many types: a transport error of httpx, a
``SchemaRegistryError`` with an HTTP status and the registry's own error code, or a ``ValueError``
when the URL answers with a page that is not JSON. :class:`RegistryClient` wraps it so that a
failure means one of two things:

- an answer the caller judges: HTTP 404 and 409 go up unchanged as ``SchemaRegistryError``.
  confluent-kafka itself takes a 404 of an optional endpoint for "none" (the associations of a
  subject); the codec takes one with the registry's own code (:func:`not_found`, one of
  :data:`NOT_FOUND_CODES`, which a wrong path never carries) for an unknown schema, and the
  record for a dead letter (``unknown_schema``), and any other 404 for a wrong URL;
- the registry cannot be used: a :class:`~uss_stream_kafka.exceptions.RegistryError` that ends the
  run with nothing dead-lettered or committed (:func:`registry_error` says which kind).

Every request is bounded: at most :data:`TIMEOUT` seconds to connect and for each read, and
:data:`RETRIES` retry (after confluent-kafka's jittered backoff of at most a second), so a registry
that accepts connections and never answers ends the run within :func:`longest_request` seconds.

:func:`check_registry` asks the registry for its schema types at start: a URL that does not serve
the registry's API (a wrong path answers HTTP 404 to everything) is refused there, before any
record is read.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from uss_stream_kafka.exceptions import RegistryError

__all__ = [
    "NOT_FOUND_CODES",
    "RETRIES",
    "TIMEOUT",
    "RegistryClient",
    "check_registry",
    "longest_request",
    "not_found",
    "registry_conf",
    "registry_error",
    "shown_url",
]

#: Seconds a registry request may take to connect, and for each read of its answer.
TIMEOUT = 10.0
#: Retries of a request that failed in transport or with HTTP 408, 429 or 5xx.
RETRIES = 1
#: The registry's own error codes of what it does not have (Confluent: 40401 subject, 40402
#: version, 40403 schema; confluent-kafka's mock registry says 40400). A 404 without one of them
#: (a wrong path: Apicurio answers 404 with code 404, others -1) is not an unknown schema.
NOT_FOUND_CODES = range(40400, 40500)
#: The schema type each ``--value-format`` needs the registry to support.
SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "jsonschema": "JSON"}

_BACKOFF_MS = 500  # the first retry's most jitter (confluent-kafka: full jitter, doubling)


def registry_conf(url: str, auth: str | None = None) -> dict[str, Any]:
    """The ``SchemaRegistryClient`` settings of a registry: its URL, credentials and the bounds.

    >>> conf = registry_conf("http://127.0.0.1:8081", "user:secret")
    >>> conf["timeout"], conf["max.retries"], conf["basic.auth.user.info"]
    (10.0, 1, 'user:secret')
    """
    conf: dict[str, Any] = {
        "url": url,
        "timeout": TIMEOUT,
        "max.retries": RETRIES,
        "retries.wait.ms": _BACKOFF_MS,
        "retries.max.wait.ms": _BACKOFF_MS * 2**RETRIES,
    }
    if auth is not None:
        conf["basic.auth.user.info"] = auth
    return conf


def longest_request() -> float:
    """Seconds one registry call may take at most: every attempt's timeout and the backoffs.

    A read is bounded by :data:`TIMEOUT` between two bytes; the registry sends a small answer
    at once or not at all, so this bounds a request to a registry that never answers.

    >>> longest_request()
    20.5
    """
    return TIMEOUT * (RETRIES + 1) + sum(_BACKOFF_MS * 2**i for i in range(RETRIES)) / 1000


def shown_url(url: str) -> str:
    """``url`` without the credentials it may carry (for messages).

    >>> shown_url("https://user:secret@registry:8081/apis/ccompat/v7")
    'https://registry:8081/apis/ccompat/v7'
    """
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def not_found(error: Any) -> bool:
    """Whether a ``SchemaRegistryError`` is the registry saying it has no such schema, subject or version.

    >>> from confluent_kafka.schema_registry.error import SchemaRegistryError
    >>> not_found(SchemaRegistryError(404, 40403, "Schema not found"))
    True
    >>> not_found(SchemaRegistryError(404, 404, "RESTEASY003210: Could not find resource"))
    False
    """
    return error.http_status_code == 404 and error.error_code in NOT_FOUND_CODES


def registry_error(error: BaseException, url: str) -> RegistryError | None:
    """The :class:`RegistryError` a failed registry call means, or ``None`` if it is for the caller to judge.

    ``None`` for HTTP 404 (no such schema, subject, version, or no such endpoint: see the module)
    and 409 (a registration conflicts). Any other failure means the registry cannot be used: HTTP
    401 or 403 are ``security``; a transport error, a timeout, HTTP 408, 429 and 5xx an ``outage``;
    any other answer (400, 422, a page that is not the API's JSON) a ``configuration`` error.

    >>> from confluent_kafka.schema_registry.error import SchemaRegistryError
    >>> registry_error(SchemaRegistryError(404, 40403, "Schema not found"), "http://r") is None
    True
    >>> registry_error(SchemaRegistryError(400, 42201, "Invalid schema"), "http://r").kind
    'configuration'
    >>> registry_error(SchemaRegistryError(503, -1, "Unavailable"), "http://r").kind
    'outage'
    >>> registry_error(ConnectionRefusedError(111, "Connection refused"), "http://r").kind
    'outage'
    """
    from confluent_kafka.schema_registry.error import OAuthTokenError, SchemaRegistryError

    where = shown_url(url)
    if isinstance(error, RegistryError):
        return error
    if isinstance(error, SchemaRegistryError):
        status, code = error.http_status_code, error.error_code
        answer = f"HTTP {status}, code {code}: {' '.join(str(error.error_message).split())[:300]}"
        if status in (404, 409):
            return None
        if status in (401, 403):
            return RegistryError(
                "security",
                f"the Schema Registry at {where} refuses the service ({answer}): "
                "check --schema-registry-auth",
            )
        if status in (408, 429) or status >= 500:
            return RegistryError("outage", f"the Schema Registry at {where} fails ({answer})")
        return RegistryError(
            "configuration",
            f"{where} does not answer as a Schema Registry ({answer}): is --schema-registry-url "
            "the registry's API? (Apicurio Registry serves it under /apis/ccompat/v7)",
        )
    if isinstance(error, OAuthTokenError):
        return RegistryError("security", f"the Schema Registry at {where}: {error}")
    if _transport(error):
        what = "does not answer in time" if "Timeout" in type(error).__name__ else "cannot be reached"
        return RegistryError(
            "outage", f"the Schema Registry at {where} {what} ({type(error).__name__}: {error})"
        )
    if isinstance(error, (ValueError, TypeError, KeyError, AttributeError)):
        return RegistryError(
            "configuration",
            f"{where} does not answer as a Schema Registry ({type(error).__name__}: {error}): "
            "is --schema-registry-url the registry's API?",
        )
    return None


def _transport(error: BaseException) -> bool:
    """Whether ``error`` is the network's: httpx's transport errors (timeouts too), or the OS's."""
    try:
        from confluent_kafka.schema_registry.common._httpx_compat import httpx
    except ImportError:  # confluent-kafka before its httpx2 switch
        import httpx
    return isinstance(error, (httpx.TransportError, OSError))


class RegistryClient:
    """A ``SchemaRegistryClient`` whose failures are told apart (:func:`registry_error`).

    Every method of the wrapped client is called as is; a failure that means the registry
    cannot be used is raised as a :class:`RegistryError` (its cause the client's error), the
    registry's own answers (no such schema, a conflict) unchanged. The serializers take it in
    place of the client.

    >>> from confluent_kafka.schema_registry import SchemaRegistryClient
    >>> client = RegistryClient(SchemaRegistryClient.new_client({"url": "mock://doc"}), "mock://doc")
    >>> try:
    ...     client.get_schema(7)
    ... except Exception as error:
    ...     print(type(error).__name__, error.error_code)
    SchemaRegistryError 40400
    """

    def __init__(self, client: Any, url: str) -> None:
        self._client = client
        self.url = url

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute
        url = self.url

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attribute(*args, **kwargs)
            except Exception as error:
                failure = registry_error(error, url)
                if failure is None or failure is error:
                    raise
                raise failure from error

        self.__dict__[name] = call  # looked up once per name
        return call


def check_registry(client: RegistryClient, value_format: str) -> None:
    """Raise :class:`RegistryError` unless the registry serves its API and the format's schema type.

    Asks ``GET schemas/types`` (the Confluent API's list of schema types, which needs no subject):
    a wrong path answers 404 or a page that is not a list (``configuration``), a registry that is
    down or does not answer in time is an ``outage``.
    """
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    where = shown_url(client.url)
    try:
        types = client.get_schema_types()
    except SchemaRegistryError as error:  # a 404 with a registry's code, or a 409: still not its API
        raise RegistryError(
            "configuration",
            f"{where} does not answer as a Schema Registry (GET schemas/types: HTTP "
            f"{error.http_status_code}, code {error.error_code}): "
            "is --schema-registry-url the registry's API?",
        ) from error
    if not isinstance(types, list) or not all(isinstance(kind, str) for kind in types):
        raise RegistryError(
            "configuration",
            f"{where} does not answer as a Schema Registry (GET schemas/types gave {str(types)[:80]!r})",
        )
    wanted = SCHEMA_TYPES[value_format]
    if wanted not in types:
        raise RegistryError(
            "configuration",
            f"the Schema Registry at {where} has no {wanted} schemas (it has {', '.join(types) or 'none'}): "
            f"--value-format {value_format} needs them",
        )
