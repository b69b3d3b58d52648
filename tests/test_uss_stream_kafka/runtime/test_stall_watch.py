"""StallWatch: a consumer that receives nothing while records wait is reported, and only then.

The consumer here is a stand-in for the seam's interface (assignment, paused, position, end
offsets): what a real client does when it stalls cannot be provoked on purpose, and the watch only
reads these four answers.
"""

from __future__ import annotations

import logging

import pytest

from uss_stream_kafka.clients import ClientError
from uss_stream_kafka.runtime.progress import StallWatch


class Consumer:
    def __init__(self, positions, ends, paused=(), unreachable=False):
        self.positions, self.ends, self._paused, self.unreachable = positions, ends, set(paused), unreachable
        self.asked = 0
        self.seeks = []

    def assignment(self):
        return set(self.positions)

    def paused(self):
        return self._paused

    def position(self, tp):
        return self.positions[tp]

    def fetch_state(self, tps):
        return {str(tp): "stuck" for tp in tps}

    def seek(self, tp, offset):
        self.seeks.append((tp, offset))

    def end_offsets(self, tps):
        self.asked += 1
        if self.unreachable:
            raise ClientError("no broker answers", retriable=True)
        return {tp: self.ends[tp] for tp in tps}


def test_records_waiting_without_a_fetch_are_reported_once_per_period(caplog):
    consumer = Consumer({"in-0": 5, "in-1": 9}, {"in-0": 12, "in-1": 9})
    watch = StallWatch(after=30.0, started=0.0)
    watch.fetched(10.0)
    assert watch.check(consumer, now=39.9) is None and consumer.asked == 0  # 29.9 s: too early
    with caplog.at_level(logging.WARNING, logger="uss_stream_kafka"):
        assert watch.check(consumer, now=40.0) == {"in-0": 7}  # in-1 is at its end
    assert watch.stalled_since == 10.0
    assert "no record for 30s while 7 records wait (in-0: 7 behind at 5)" in caplog.text
    assert "client: {'in-0': 'stuck'}" in caplog.text
    assert consumer.seeks == [("in-0", 5)]  # the same next record, fetched anew
    assert watch.check(consumer, now=55.0) is None and consumer.asked == 1  # asked once per period
    assert watch.stalled_since == 10.0  # still stalled until a record arrives
    assert watch.check(consumer, now=70.0) == {"in-0": 7} and consumer.asked == 2
    watch.fetched(71.0)
    assert watch.stalled_since is None


def test_caught_up_paused_or_unreachable_is_not_a_stall():
    caught_up = Consumer({"in-0": 12}, {"in-0": 12})
    held = Consumer({"in-0": 12, "labels-0": 0}, {"in-0": 12, "labels-0": 40}, paused={"labels-0"})
    outage = Consumer({"in-0": 5}, {"in-0": 12}, unreachable=True)
    for consumer in (caught_up, held, outage):
        watch = StallWatch(after=30.0, started=0.0)
        assert watch.check(consumer, now=100.0) is None
        assert watch.stalled_since is None
    assert caught_up.asked == held.asked == outage.asked == 1
    assert caught_up.seeks == held.seeks == outage.seeks == []
    unassigned = Consumer({}, {})
    assert StallWatch(after=1.0).check(unassigned, now=5.0) is None and unassigned.asked == 0


def test_a_stall_clears_once_the_partitions_are_caught_up():
    consumer = Consumer({"in-0": 5}, {"in-0": 12})
    watch = StallWatch(after=10.0, started=0.0)
    assert watch.check(consumer, now=10.0) == {"in-0": 7}
    consumer.positions["in-0"] = 12  # e.g. a rewind landed at the end
    assert watch.check(consumer, now=20.0) is None and watch.stalled_since is None


@pytest.mark.parametrize("after", [0, -1.0, float("nan")])
def test_after_must_be_positive(after):
    with pytest.raises(ValueError, match="after must be > 0 seconds"):
        StallWatch(after=after)
