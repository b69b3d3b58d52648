"""The checks of the topics before the service starts: they exist, fit together, and what they accept.

Examples
--------
>>> class Admin:  # a stand-in answering describe_topics as kafka-python's admin client does
...     def describe_topics(self, names):
...         return [{"name": n, "error_code": 0, "partitions": [{}] * 2} for n in names if n != "nope"]
>>> partition_counts(Admin(), ["events", "decisions"])
{'events': 2, 'decisions': 2}
>>> partition_counts(Admin(), ["events", "nope"])
Traceback (most recent call last):
...
ValueError: topic(s) nope do not exist; create them first (uss-stream kafka create-topics ...)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from uss_stream_kafka.limits import record_limit
from uss_stream_kafka.topics import Topics, check_state_topic

__all__ = ["check_topics", "partition_counts"]

log = logging.getLogger("uss_stream_kafka")


def check_topics(
    admin: Any, topics: Topics, producer_settings: Mapping[str, Any]
) -> tuple[dict[str, int], int]:
    """Check the service's topics with ``admin``; returns their partition counts and the dead-letter limit.

    Every topic must exist, the labels topic (if any) must have as many partitions as the input
    topic, and the state topic should be compacted (a warning if that cannot be checked). The
    limit is the largest dead letter the broker and the producer accept
    (:func:`~uss_stream_kafka.limits.record_limit`).
    """
    partitions = partition_counts(admin, topics.all())
    try:
        check_state_topic(admin, topics.state)
    except ValueError:
        raise
    except Exception as error:  # e.g. DescribeConfigs not authorised: not fatal, but say so
        log.warning("could not check that state topic %r is compacted: %s", topics.state, error)
    dead_letter_bytes = record_limit(admin, topics.dead_letter, producer_settings)
    if topics.labels is not None and partitions[topics.labels] != partitions[topics.input]:
        raise ValueError(
            f"labels topic {topics.labels!r} has {partitions[topics.labels]} partitions and input topic "
            f"{topics.input!r} {partitions[topics.input]}: they must be co-partitioned"
        )
    return partitions, dead_letter_bytes


def partition_counts(admin: Any, names: Iterable[str]) -> dict[str, int]:
    """The partition count of each topic in ``names``; a clear error names those that do not exist."""
    names = list(names)
    described = admin.describe_topics(names)
    counts = {}
    missing = []
    for entry in described:
        if entry.get("error_code", 0) != 0 or not entry.get("partitions"):
            missing.append(entry.get("name"))
        else:
            counts[entry["name"]] = len(entry["partitions"])
    missing += [name for name in names if name not in counts and name not in missing]
    if missing:
        raise ValueError(
            f"topic(s) {', '.join(sorted(set(missing)))} do not exist; create them first "
            "(uss-stream kafka create-topics ...)"
        )
    return counts
