"""The service's client defaults are those documented in docs/kafka.md ("Defaults that do not stall"),
and they reach the client the service makes: per library, under the user's options.

A unit test of the settings' plumbing, where it lives: the client constructors are replaced by
recorders of their keyword arguments, and no broker is involved. Every broker test of the service
runs both real clients with these defaults, and ``benchmarks/bench_kafka.py`` measures the service
with them end to end against the bare clients."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from uss_stream_kafka import ClientConfig
from uss_stream_kafka.runtime import startup
from uss_stream_kafka.runtime.commit import PRODUCER_DEFAULTS
from uss_stream_kafka.runtime.startup import CONSUMER_DEFAULTS

DOCS = Path(__file__).resolve().parents[3] / "docs" / "kafka.md"
#: librdkafka's own default of fetch.queue.backoff.ms (its CONFIGURATION.md): the 1 s stall.
LIBRDKAFKA_BACKOFF_MS = 1000


def documented() -> dict[str, tuple[str, str]]:
    """``{setting: (client, default)}`` from the table of the docs' section."""
    text = DOCS.read_text()
    section = text[text.index("### Defaults that do not stall") :]
    section = section[: section.index("**Why")]
    rows = re.findall(r"^\| `([\w.]+)`(?: \(producer\))? \| (\w[\w-]*) \| `([^`]+)` \|", section, re.M)
    return {name: (client, value) for name, client, value in rows}


def test_the_documented_defaults_are_the_code_s():
    table = documented()
    both = {name: str(value) for name, (client, value) in table.items() if client == "both"}
    assert both == {name: str(value) for name, value in {**CONSUMER_DEFAULTS, **PRODUCER_DEFAULTS}.items()}
    for library in ("confluent", "kafka-python"):
        own = {name: value for name, (client, value) in table.items() if client == library}
        assert own == {name: str(value) for name, value in startup.library_defaults(library).items()}


def test_librdkafka_rechecks_a_full_queue_well_within_its_default_second():
    backoff = startup.library_defaults("confluent")["fetch.queue.backoff.ms"]
    assert 0 < backoff <= LIBRDKAFKA_BACKOFF_MS / 50


class _Recorded:
    """A stand-in for the seam's consumer: records its settings, knows every topic's partitions."""

    settings: dict[str, Any] = {}

    def __init__(self, **settings: Any) -> None:
        _Recorded.settings = settings

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.topics = topics


@pytest.mark.parametrize("library", ["confluent", "kafka-python"])
def test_the_service_s_consumer_gets_them_and_the_user_s_options_win(monkeypatch, library):
    monkeypatch.setattr(startup.clients, "consumer", lambda library, **settings: _Recorded(**settings))
    startup.new_consumer(library, ClientConfig("b:9092"), ["events"], {}, {"group_id": "g"})
    expected = {**CONSUMER_DEFAULTS, **startup.library_defaults(library)}
    assert {name: _Recorded.settings[name] for name in expected} == expected
    if library == "kafka-python":
        assert "fetch.queue.backoff.ms" not in _Recorded.settings  # kafka-python would refuse it
        return
    user = {"group_id": "g", "fetch.queue.backoff.ms": 250, "fetch_max_wait_ms": 10}
    startup.new_consumer(library, ClientConfig("b:9092"), ["events"], {}, user)
    assert _Recorded.settings["fetch.queue.backoff.ms"] == 250
    assert _Recorded.settings["fetch_max_wait_ms"] == 10


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_every_kafka_python_client_probes_a_lost_broker_at_least_every_second(monkeypatch, kind):
    """kafka-python's own ceiling is 30 s between attempts; the service's is Java's 1 s, and a
    user's value wins."""
    import kafka

    from uss_stream_kafka import clients

    made: list[dict[str, Any]] = []
    for name in ("KafkaProducer", "KafkaConsumer", "KafkaAdminClient"):
        monkeypatch.setattr(kafka, name, lambda **settings: made.append(settings))
    factory = getattr(clients, kind)
    factory("kafka-python", bootstrap_servers="b:9092")
    factory("kafka-python", bootstrap_servers="b:9092", reconnect_backoff_max_ms=5000)
    assert [settings["reconnect_backoff_max_ms"] for settings in made] == [1000, 5000]
