"""``test_broker_restart.py`` on the confluent-kafka client (librdkafka).

The same tests, in a file of their own: ``--dist loadfile`` keeps a file on one worker, and each
test starts a private broker, so the two clients' halves run on two workers at once.
"""

from __future__ import annotations

import pytest
from test_broker_restart import (  # noqa: F401  (the tests, their marks and their private broker)
    pytestmark,
    restartable_broker,
    test_the_service_rides_out_a_broker_restart,
)


@pytest.fixture
def kafka_client() -> str:
    pytest.importorskip("confluent_kafka", reason="the confluent client needs uss-stream[confluent]")
    return "confluent"
