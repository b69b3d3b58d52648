"""How large a record the service may produce to a topic: the producer's and the broker's limits.

A dead letter carries a copy of the rejected record; if it were larger than the producer's
``max_request_size`` or the topic's ``max.message.bytes`` the broker would refuse it, the offsets
would never be committed, and every restart would stop on the same record. The service therefore
caps its dead letters at :func:`record_limit`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["BROKER_DEFAULT_MAX_MESSAGE_BYTES", "PRODUCER_DEFAULT_MAX_REQUEST_SIZE", "record_limit"]

log = logging.getLogger("uss_stream_kafka")

#: The broker's default ``message.max.bytes`` (used when the topic's setting cannot be read).
BROKER_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
#: kafka-python's default ``max_request_size``.
PRODUCER_DEFAULT_MAX_REQUEST_SIZE = 1_048_576
#: Bytes kept free for the record batch's header and the producer's size estimate.
MARGIN = 1024


def record_limit(admin: Any, topic: str, producer_settings: Mapping[str, Any]) -> int:
    """The largest record (key, value and headers) the service may send to ``topic``.

    ``min(producer max_request_size, topic max.message.bytes) - MARGIN``; the topic's setting is
    read with ``admin`` (the client seam's ``Admin``, or ``None``), the broker default if it cannot be.
    """
    producer = int(producer_settings.get("max_request_size", PRODUCER_DEFAULT_MAX_REQUEST_SIZE))
    return min(producer, topic_max_message_bytes(admin, topic)) - MARGIN


def topic_max_message_bytes(admin: Any, topic: str) -> int:
    """The topic's ``max.message.bytes`` (the broker default if it cannot be read)."""
    if admin is not None:
        try:
            return int(admin.topic_config(topic)["max.message.bytes"])
        except Exception as error:  # e.g. DescribeConfigs not authorised: assume the default
            log.warning(
                "could not read max.message.bytes of topic %r (%s): assuming the broker default %d",
                topic,
                error,
                BROKER_DEFAULT_MAX_MESSAGE_BYTES,
            )
    return BROKER_DEFAULT_MAX_MESSAGE_BYTES
