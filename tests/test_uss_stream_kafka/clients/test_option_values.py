"""Client option values checked at start against the type of kafka-python's default, at their bounds.

An integer setting takes Kafka's and librdkafka's 32-bit range ``0..2**31-1``; a boolean one only
true or false; ``retries`` and ``consumer_timeout_ms`` (infinite by default) a number ``>= 0``. A
value that does not fit is refused with one line naming where it was given and the setting.
"""

from __future__ import annotations

import pytest

from uss_stream_kafka.clients.config import check_option_value

INT32 = 2**31 - 1


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("linger_ms", 0),
        ("linger_ms", INT32),
        ("check_crcs", True),
        ("check_crcs", False),
        ("retries", 0),
        ("retries", 2.5),
        ("consumer_timeout_ms", float("inf")),
        ("acks", "all"),
        ("acks", -1),
        ("client_rack", "eu-west-1a"),
    ],
)
def test_values_of_the_setting_s_kind_within_its_range_pass(key, value):
    check_option_value(key, value, "kafka_option")


@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [
        ("linger_ms", -1, "an integer in 0..2147483647"),
        ("linger_ms", INT32 + 1, "an integer in 0..2147483647"),
        ("linger_ms", 5.0, "an integer in 0..2147483647"),
        ("linger_ms", True, "an integer in 0..2147483647"),
        ("check_crcs", 1, "true or false"),
        ("check_crcs", "yes", "true or false"),
        ("retries", -1, "a number >= 0"),
        ("retries", -0.5, "a number >= 0"),
        ("acks", 2, "0, 1, -1 or 'all'"),
        ("acks", True, "0, 1, -1 or 'all'"),
        ("client_rack", 7, "a string"),
    ],
)
def test_values_out_of_kind_or_range_are_refused_naming_the_option(key, value, kind):
    with pytest.raises(ValueError) as refused:
        check_option_value(key, value, "producer_options")
    assert str(refused.value) == f"producer_options: {key!r} must be {kind}, got {value!r}"
