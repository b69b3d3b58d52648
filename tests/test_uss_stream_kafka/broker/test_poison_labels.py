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


def test_relearn_max_labels_skips_a_bad_label_below_the_offset_it_sets(
    kafka_client, bootstrap_servers, make_topics
):
    """A label that passes every check but is wrong (offset 12) is left out of the next restores by
    ``--relearn-max-labels`` = the re-learn's end (``labels relearned to @30``) minus 12, minus 1:
    that re-learn starts at offset 13, and a later one (end 35) further on."""
    from uss_stream_kafka import ClientConfig
    from uss_stream_kafka.clients.base import TopicPartition
    from uss_stream_kafka.runtime.relearn import LabelsLog

    topics = make_topics(labels=True)
    produce(bootstrap_servers, topics.labels, [json.dumps({"n": n}).encode() for n in range(35)])

    class Recording:
        def __init__(self) -> None:
            self.learned: list[int] = []

        def learn(self, value: bytes) -> None:
            self.learned.append(json.loads(value)["n"])

    config = ClientConfig(bootstrap_servers=bootstrap_servers)
    tp = TopicPartition(topics.labels, 0)
    for until, expected in ((30, list(range(13, 30))), (35, list(range(18, 35)))):
        log = LabelsLog(
            config.kafka_kwargs("labels-reader"), 1 << 20, library=kafka_client, max_labels=30 - 12 - 1
        )
        learner = Recording()
        try:
            assert log.relearn(learner, tp, until) == len(expected)
        finally:
            log.close()
        assert learner.learned == expected  # offset 12 is never learned again
