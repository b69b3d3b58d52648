"""Broker tests run once per Kafka client library: the ``kafka_client`` fixture.

A test that takes ``kafka_client`` runs for kafka-python and for confluent-kafka (librdkafka);
it passes the library to the service under test (``Application(client_library=...)`` or
``uss-stream kafka run --client ...``). ``conftest.py`` imports the fixture for every broker test.
"""

from __future__ import annotations

import pytest

from tests import needs
from uss_stream_kafka.clients import CLIENTS

__all__ = ["kafka_client"]


@pytest.fixture(params=CLIENTS)
def kafka_client(request: pytest.FixtureRequest) -> str:
    """The client library the service under test runs on (skipped if it is not installed)."""
    if request.param == "confluent":
        needs.module("confluent_kafka")
    return request.param
