"""Features mode: a label with an absurd feature value is dead-lettered, live and on re-learn.

One label with a feature of 1e300 makes a River model's statistics infinite for good (every later
prediction NaN); the service refuses numeric features beyond ±1e100 (``MAX_FEATURE``), so the
models decide as if the poison had never been sent, before and after a restart's re-learn.
"""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import Running, decisions_of, new_app, produce, read_all
from phases import comparable, phases, reference_decisions

from uss_stream_kafka import DeadLetter, FeaturesProcessor

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(180),
]


def _poisoned(label: bytes, value: float) -> bytes:
    document = json.loads(label)
    document["features"]["glucose"] = value
    return json.dumps(document).encode()


def test_a_label_with_an_absurd_feature_is_dead_lettered_and_skipped_on_relearn(
    kafka_client, bootstrap_servers, make_topics
):
    topics = make_topics(labels=True)
    stream = phases(2, labels=40, events=60, seed=3)
    expected = reference_decisions(stream)  # the cascade that never saw the poison
    processor = FeaturesProcessor("uss_stream_kafka.cli.demo:pima_cascade")
    group = f"poison-{uuid.uuid4().hex[:8]}"
    first = stream[0].labels
    # 1e100 is the largest magnitude taken; 1e300 (and the largest integer JSON can hold past it) are not.
    labels = [*first[:20], _poisoned(first[0], 1e300), _poisoned(first[1], 10**101), *first[20:]]

    def feed(running: Running, phase_labels: list[bytes], events: list[bytes]) -> None:
        produce(bootstrap_servers, topics.labels, phase_labels)
        running.wait_for(lambda a: a.summary.labels == len(phase_labels))
        produce(bootstrap_servers, topics.input, events)
        running.wait_for(lambda a: a.summary.events == len(events))
        running.app.stop()
        running.join()

    feed(Running(new_app(bootstrap_servers, topics, group, client_library=kafka_client), processor), labels,
         stream[0].events)  # fmt: skip
    # The restart re-learns the labels log, poison included: it is skipped again.
    feed(Running(new_app(bootstrap_servers, topics, group, client_library=kafka_client), processor),
         stream[1].labels, stream[1].events)  # fmt: skip

    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=120))
    assert [comparable(d) for d in decisions] == expected
    letters = [DeadLetter.from_record(r.value) for r in read_all(bootstrap_servers, topics.dead_letter)]
    assert [(letter.reason, letter.offset) for letter in letters] == [("wrong_type", 20), ("wrong_type", 21)]
    assert "feature 'glucose' must be within ±1e100, got 1e+300" in letters[0].error
    assert "feature 'glucose' must be within ±1e100, got an integer of 102 digits" in letters[1].error
