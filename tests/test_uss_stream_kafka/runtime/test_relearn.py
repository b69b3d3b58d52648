"""A features-mode re-learn without a broker: the newest ``--relearn-max-labels`` labels, the keepalive that
keeps the group membership through a long one, and the poll that keeps it with every partition paused.

The labels log and the group's consumer are stand-ins answering the seam's calls (assign, offsets,
poll, seek, pause); the learner records what it is taught; time is a clock the learner advances.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import pytest

from uss_stream_kafka.clients import TopicPartition
from uss_stream_kafka.clients.kafka_python import KafkaPythonRecords
from uss_stream_kafka.runtime import relearn
from uss_stream_kafka.runtime.relearn import KEEPALIVE_SECONDS, LabelsLog, learn_values
from uss_stream_kafka.runtime.restore import keep_membership

LABELS = TopicPartition("labels", 0)


class Message(NamedTuple):
    """A consumed record, as kafka-python hands it over (what :class:`KafkaPythonRecords` reads)."""

    offset: int
    value: bytes | None
    topic: str = LABELS.topic
    partition: int = 0
    key: bytes | None = None
    headers: tuple = ()
    timestamp: int | None = None


class LabelsConsumer:
    """A labels partition holding ``values`` from ``start`` on; polls return up to 7 records."""

    def __init__(self, values: list[bytes | None], start: int = 0) -> None:
        self.values, self.start, self.at = values, start, start

    def assign(self, tps):
        pass

    def beginning_offsets(self, tps):
        return {tp: self.start for tp in tps}

    def end_offsets(self, tps):
        return {tp: self.start + len(self.values) for tp in tps}

    def seek(self, tp, offset):
        self.at = offset

    def position(self, tp):
        return self.at

    def poll(self, timeout, max_records=None):
        chunk = [Message(o, self.values[o - self.start]) for o in range(self.at, min(self.at + 7, self.end))]
        self.at += len(chunk)
        return {LABELS: KafkaPythonRecords(LABELS, chunk)} if chunk else {}

    @property
    def end(self) -> int:
        return self.start + len(self.values)


class Learner:
    def __init__(self, clock: list[float] | None = None, seconds_per_label: float = 0.0) -> None:
        self.learned: list[bytes | None] = []
        self.clock, self.seconds = clock, seconds_per_label

    def learn(self, value):
        if self.clock is not None:
            self.clock[0] += self.seconds
        self.learned.append(value)


def labels(count: int) -> list[bytes]:
    return [b'{"label": %d}' % k for k in range(count)]


def relearned(
    values: list[bytes | None], until: int, max_labels: int | None, max_bytes: int = 1 << 20
) -> list:
    log = LabelsLog({}, max_bytes=max_bytes, max_labels=max_labels)
    log._consumer = LabelsConsumer(values)  # the seam's consumer, stood in
    learner = Learner()
    assert log.relearn(learner, LABELS, until) == len(learner.learned)
    return learner.learned


@pytest.mark.parametrize(("max_labels", "first"), [(None, 0), (100, 0), (99, 1), (30, 70), (1, 99)])
def test_the_newest_max_labels_labels_are_relearned(max_labels, first):
    values = labels(120)
    assert relearned(values, until=100, max_labels=max_labels) == values[first:100]


def test_labels_the_service_dead_lettered_as_oversize_are_not_relearned():
    values = [b"x" * 64, b"y" * 65, b"z" * 10, None]
    assert relearned(values, until=4, max_labels=None, max_bytes=64) == [b"x" * 64, b"z" * 10, None]


def test_a_slow_relearn_calls_its_keepalive_about_every_second(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(relearn, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    calls: list[float] = []
    learner = Learner(clock, seconds_per_label=0.25)  # 40 labels: 10 s of learning
    assert learn_values(learner, labels(40), 1 << 20, keepalive=lambda: calls.append(clock[0])) == 40
    gaps = [later - earlier for earlier, later in zip([0.0, *calls], calls)]
    assert len(calls) == 9 and all(KEEPALIVE_SECONDS <= gap < KEEPALIVE_SECONDS + 0.25 for gap in gaps)


class GroupConsumer:
    """A group member holding ``assigned`` (``paused`` among them); its poll fetches ``fetched``."""

    def __init__(self, assigned, paused, fetched) -> None:
        self._assigned, self._paused, self.fetched = set(assigned), set(paused), fetched
        self.paused_at_poll: set | None = None
        self.seeks: list[tuple[TopicPartition, int]] = []

    def assignment(self):
        return set(self._assigned)

    def paused(self):
        return set(self._paused)

    def pause(self, tps):
        self._paused |= set(tps)

    def resume(self, tps):
        self._paused -= set(tps)

    def poll(self, timeout):
        self.paused_at_poll = set(self._paused)
        return self.fetched

    def seek(self, tp, offset):
        self.seeks.append((tp, offset))


def test_the_membership_poll_runs_with_every_partition_paused_and_hands_no_record_on():
    a, b = TopicPartition("in", 0), TopicPartition("in", 1)
    fetched = {a: KafkaPythonRecords(a, [Message(40, b"{}"), Message(41, b"{}")])}  # fetched before the pause
    consumer = GroupConsumer({a, b}, paused={b}, fetched=fetched)
    keep_membership(consumer)
    assert consumer.paused_at_poll == {a, b}
    assert consumer.paused() == {b}  # what was paused before stays paused, the rest resumes
    assert consumer.seeks == [(a, 40)]  # the fetched records are read again, in their turn
