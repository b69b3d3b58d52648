"""Policies restored far into a stream decide in batches with the memory of a window, not of the round.

A service that ran for 10^9 events restores counts whose round is 10^9. The vectorised paths
(``decide_many``: the connector's batches, the replay) evaluate a function of the round
(``log f(t)``, the effective horizon ``τ_t``) for windows of rounds; tabulating it from round 1
cost memory and time in proportion to the round (10^8 rounds: 15 s and 5.6 GB), so a service
restored late in its life could not decide its first batch. Expected values come from the scalar
functions (``math.log``, :func:`effective_horizon`) and from the ``select``/``update`` loop.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from uss_stream.core.forgetting import EffectiveHorizon, effective_horizon
from uss_stream.core.stats import DisagreementStats
from uss_stream.rules.confidence import LogExploration
from uss_stream_kafka.processing.processors import OutputsProcessor

FAR = 10**7
#: Far below what tabulating 10^7 rounds takes (80 MB of floats, and a list of them on the way).
PEAK_BYTES = 8 * 2**20


def _peak(call, *args):
    tracemalloc.start()
    try:
        result = call(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_log_exploration_far_rounds_are_the_scalar_values_in_little_memory():
    rounds = np.array([FAR + 5, FAR, FAR + 4095, FAR + 1])
    values, peak = _peak(LogExploration().many, rounds)
    assert values.tolist() == [math.log(float(t)) for t in rounds.tolist()]
    assert peak < PEAK_BYTES


def test_discounted_tables_far_rounds_are_the_scalar_values_in_little_memory():
    rounds = np.arange(FAR, FAR + 3000, 7)
    horizon, peak = _peak(EffectiveHorizon(0.999).many, rounds)
    assert horizon.tolist() == [effective_horizon(t, 0.999) for t in rounds.tolist()]
    assert peak < PEAK_BYTES
    logs, peak = _peak(LogExploration(discount=0.999).many, rounds)
    assert logs.tolist() == [math.log(effective_horizon(t, 0.999)) for t in rounds.tolist()]
    assert peak < PEAK_BYTES


def test_a_moving_window_keeps_its_values_exact_and_its_table_small():
    # As the connector's speculation asks: overlapping windows that move forward, at times back.
    table = LogExploration()
    rng = np.random.default_rng(0)
    start = 1
    for _ in range(300):
        width = int(rng.integers(1, 4097))
        rounds = start + np.arange(width)
        assert table.many(rounds).tolist() == [math.log(float(t)) for t in rounds.tolist()]
        start += int(rng.integers(-50, width + 1))
        start = max(start, 1)
        _, peak = _peak(table.many, rounds + 10 * FAR)
        assert peak < PEAK_BYTES


def _restored(policy, seed: int):
    """``policy`` with counts of a stream ``FAR`` rounds long (stage 1 wrong on ~20%, 3 pairs)."""
    rng = np.random.default_rng(seed)
    queried = [FAR, FAR // 3, FAR // 4]
    disagreements = [
        [0, int(0.2 * queried[1]), int(0.2 * queried[2])],
        [0, 0, int(0.01 * queried[2])],
        [0, 0, 0],
    ]
    stats = DisagreementStats.from_dict(
        {
            "format": "uss-stream/disagreement-stats/v1",
            "n_stages": 3,
            "decisions": FAR + int(rng.integers(0, 1000)),
            "queried": queried,
            "disagreements": disagreements,
        }
    )
    policy.load_stats(stats)
    return policy


@pytest.mark.parametrize(
    "spec",
    ["uss-ucb:alpha=0.51", "uss-kl-ucb", "alg2"],
)
def test_a_learner_restored_far_into_its_stream_decides_as_the_loop(spec):
    processor = OutputsProcessor([0.0, 0.15, 0.2], policy=spec)
    learner = processor.new_learner()
    twin = processor.new_learner().policy
    _restored(twin, 1)
    learner.load_state_dict(twin.state_dict())
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 2, 3000)
    rows = np.stack([truth ^ (rng.random(3000) < 0.2), truth ^ (rng.random(3000) < 0.01), truth], axis=1)
    values = [b'{"id": %d, "outputs": [%d, %d, %d]}' % (i, *row) for i, row in enumerate(rows.tolist())]
    result, peak = _peak(learner.process_batch, values, 1024)
    expected = []
    for row in rows.tolist():
        depth = twin.select()
        twin.update(row[:depth])
        expected.append(depth)
    assert result.depths == expected
    assert learner.policy.state_dict() == twin.state_dict()
    assert peak < 4 * PEAK_BYTES
