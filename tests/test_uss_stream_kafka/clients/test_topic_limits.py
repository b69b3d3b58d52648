"""The record limits of the topics the service writes: the smaller of the producer's and the topic's, less
a margin, and a topic below the service's minimum refused at start naming it (``clients/limits.py``).

The admin client is a stand-in answering a topic's ``max.message.bytes`` (or failing to); the
figures are Kafka's: ``max.message.bytes`` of the topic, ``max_request_size`` of the producer.
"""

from __future__ import annotations

import pytest

from uss_stream_kafka.clients.limits import (
    BROKER_DEFAULT_MAX_MESSAGE_BYTES,
    MARGIN,
    MIN_RECORD_BYTES,
    PRODUCER_DEFAULT_MAX_REQUEST_SIZE,
    RecordLimits,
    check_record_limits,
    record_limit,
)


class Admin:
    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = limits

    def topic_config(self, topic: str) -> dict[str, str]:
        if topic not in self.limits:
            raise PermissionError(f"DescribeConfigs of {topic} not authorised")
        return {"max.message.bytes": str(self.limits[topic])}


@pytest.mark.parametrize(
    ("topic_bytes", "producer", "expected"),
    [
        (200_000, {}, 200_000 - MARGIN),  # the topic's is smaller
        (5_000_000, {"max_request_size": 3_000_000}, 3_000_000 - MARGIN),  # the producer's is
        (5_000_000, {}, PRODUCER_DEFAULT_MAX_REQUEST_SIZE - MARGIN),
    ],
)
def test_the_record_limit_is_the_smaller_of_the_topic_s_and_the_producer_s_less_the_margin(
    topic_bytes, producer, expected
):
    assert record_limit(Admin({"out": topic_bytes}), "out", producer) == expected


def test_a_topic_setting_that_cannot_be_read_counts_as_the_broker_default(caplog):
    expected = min(BROKER_DEFAULT_MAX_MESSAGE_BYTES, PRODUCER_DEFAULT_MAX_REQUEST_SIZE) - MARGIN
    assert record_limit(Admin({}), "out", {}) == expected
    assert record_limit(None, "out", {"max_request_size": 9_000}) == 9_000 - MARGIN
    assert "could not read max.message.bytes of topic 'out'" in caplog.text


@pytest.mark.parametrize("role", ["output", "dead_letter", "state"])
def test_a_topic_accepting_the_minimum_is_served_and_one_byte_less_is_refused_naming_it(role):
    names = {"output": "out", "dead_letter": "dlq", "state": "state"}
    roomy = dict.fromkeys(names, 1_047_552)
    check_record_limits(RecordLimits(**{**roomy, role: MIN_RECORD_BYTES}), **names)
    with pytest.raises(ValueError) as refused:
        check_record_limits(RecordLimits(**{**roomy, role: MIN_RECORD_BYTES - 1}), **names)
    message = str(refused.value)
    at_most = MIN_RECORD_BYTES - 1 + MARGIN  # the topic's own setting, not the limit less the margin
    assert message.startswith(
        f"{role.replace('_', '-')} topic {names[role]!r} accepts records of at most {at_most} "
    )
    assert f"at least {MIN_RECORD_BYTES + MARGIN}" in message


def test_a_topic_far_below_the_margin_is_named_with_its_own_setting_never_a_negative_size():
    with pytest.raises(
        ValueError, match=r"^output topic 'out' accepts records of at most 600 bytes \(the smaller"
    ):
        check_record_limits(RecordLimits(600 - MARGIN, 1_047_552, 1_047_552), "out", "dlq", "state")
