"""Features mode keeps its group membership through a re-learn longer than ``max.poll.interval.ms``.

A restore re-learns the labels log (``relearn.py``); with a slow model it takes longer than the
consumer's ``max.poll.interval.ms``. Without a poll in between, the group expels the member, its
learners are dropped, and the next assignment re-learns from offset 0 again: no event is ever
decided. Here 1 200 labels take 12 s to re-learn (10 ms each) against a 6 s interval: the service
must restore once and decide every event, while ``/healthz`` says ``restoring`` and fails once
the restore is older than its ``health_timeout`` (4 s). ``relearn_max_labels`` bounds the re-learn.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from conftest import Running, checkpoints_of, new_app, produce, read_all, run_app
from waiting import wait_until

from uss_stream_kafka.cli.demo import demo_records, pima_cascade
from uss_stream_kafka.processing.processors import FeaturesProcessor

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

LABELS = 1_200
EVENTS = 50
#: Seconds each ``learn_one`` of the model takes (0 while the labels are first learned), and calls.
DELAY = {"seconds": 0.0, "calls": 0}
SLOW = 0.01
INTERVAL_MS = 6_000  # max.poll.interval.ms (and session.timeout.ms: the broker's least)
HEALTH_TIMEOUT = 4.0


def slow_cascade() -> Any:
    """The demo cascade, whose ``learn_one`` takes ``DELAY["seconds"]`` longer."""
    cascade = pima_cascade()
    learn_one = cascade.learn_one

    def slow_learn_one(*args: Any, **kwargs: Any) -> Any:
        time.sleep(DELAY["seconds"])
        DELAY["calls"] += 1
        return learn_one(*args, **kwargs)

    cascade.learn_one = slow_learn_one
    return cascade


def learned(bootstrap: str, topics: Any, group: str, client: str) -> list[bytes]:
    """``group`` learns the ``LABELS`` labels (quickly) and checkpoints them; returns events to decide."""
    records = list(demo_records("features", LABELS + EVENTS, seed=2))
    produce(bootstrap, topics.labels, [labelled for _, labelled in records[:LABELS]])
    produce(bootstrap, topics.input, [records[LABELS][0]])  # an event: the partition checkpoints
    DELAY["seconds"] = 0.0
    run_app(new_app(bootstrap, topics, group, client_library=client), FeaturesProcessor(slow_cascade))
    assert checkpoints_of(bootstrap, topics.state)[-1].labels_offset == LABELS
    return [event for event, _ in records[LABELS + 1 :]]


def prepared(bootstrap: str, make_topics: Any, client: str, name: str) -> tuple[Any, str, list[bytes]]:
    """Topics, a group that learned the labels, the events to decide; the model slow from now on."""
    topics = make_topics(labels=True)
    group = f"g-{name}-{client}"
    events = learned(bootstrap, topics, group, client)
    DELAY["seconds"], DELAY["calls"] = SLOW, 0  # a re-learn of every label takes LABELS * SLOW = 12 s
    return topics, group, events


def restarted(bootstrap: str, topics: Any, group: str, client: str, **settings: Any) -> Any:
    settings.setdefault(
        "consumer_options", {"max_poll_interval_ms": INTERVAL_MS, "session_timeout_ms": INTERVAL_MS}
    )
    return new_app(bootstrap, topics, group, client_library=client, health_timeout=HEALTH_TIMEOUT, **settings)


def test_a_relearn_longer_than_the_poll_interval_keeps_the_membership_and_shows_on_healthz(
    kafka_client: str, bootstrap_servers: str, make_topics
) -> None:
    topics, group, events = prepared(bootstrap_servers, make_topics, kafka_client, "relearn")
    produce(bootstrap_servers, topics.input, events)
    app = restarted(bootstrap_servers, topics, group, kafka_client)
    running = Running(app, FeaturesProcessor(slow_cascade))
    health: list[tuple[bool, dict[str, Any]]] = []

    def unhealthy_restore() -> bool:
        health.append(app.health())
        return health[-1][1]["status"] == "restoring" and not health[-1][0]

    wait_until(
        unhealthy_restore, "a restore older than the health timeout", timeout=60, alive=running._check_alive
    )
    assert health[-1][1]["restoring_seconds"] >= HEALTH_TIMEOUT
    assert any(ok and details["status"] == "restoring" for ok, details in health)  # healthy at first
    decisions = read_all(bootstrap_servers, topics.output, expected=EVENTS, timeout=90)  # 1 + 49
    assert [json.loads(r.value)["id"] for r in decisions[1:]] == [json.loads(e)["id"] for e in events]
    app.stop()
    summary = running.join()
    assert len(summary.restored) == 1  # one restore: the member was never expelled
    assert app.health()[1]["status"] == "stopped"


def test_relearn_max_labels_bounds_the_relearn(
    kafka_client: str, bootstrap_servers: str, make_topics
) -> None:
    topics, group, events = prepared(bootstrap_servers, make_topics, kafka_client, "relearn-max")
    produce(bootstrap_servers, topics.input, events[:5])
    app = restarted(bootstrap_servers, topics, group, kafka_client, relearn_max_labels=100)
    summary = run_app(app, FeaturesProcessor(slow_cascade))
    assert summary.decisions == 5 and "labels relearned to @1200" in summary.restored[0]
    assert DELAY["calls"] == 100  # the newest 100 labels [1100, 1200), not the 1 200 of the log
