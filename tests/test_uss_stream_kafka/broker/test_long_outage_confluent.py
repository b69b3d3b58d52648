"""``test_long_outage.py`` on the confluent-kafka client (librdkafka).

The same test, in a file of its own: ``--dist loadfile`` keeps a file on one worker, and the test
starts a private broker and stops it for 40 s, so the two clients' runs overlap on two workers.
"""

from __future__ import annotations

import pytest
from test_long_outage import (  # noqa: F401  (the test, its marks and its private broker)
    pytestmark,
    restartable_broker,
    test_a_producer_replaced_during_a_long_outage_waits_for_the_broker,
)

from tests import needs


@pytest.fixture
def kafka_client() -> str:
    needs.module("confluent_kafka")
    return "confluent"
