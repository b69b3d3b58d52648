"""The service's latency histograms keep their recent samples in fixed memory, and their quantiles exact.

The service observes one sample per partition batch, so its recent-sample window (100 000 samples)
filled one small entry per poll; held as NumPy arrays per poll, the two histograms of a service
took about 58 MiB once full. Expected quantiles come from the definition (the weighted
``q``-quantile of the last ``window`` samples: each value repeated by its weight, sorted, the
``ceil(q·total)``-th), computed here on a plain list.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from uss_stream_kafka.operations.metrics import LatencyHistogram


def _expected(samples: list[tuple[int, int]], window: int, q: float) -> float:
    recent = samples[-window:]
    expanded = sorted(value for value, weight in recent for _ in range(weight))
    rank = min(max(math.ceil(q * len(expanded)), 1), len(expanded))
    return expanded[rank - 1] / 1e9


@pytest.mark.parametrize("window", [1, 7, 50])
def test_quantiles_are_those_of_the_last_window_samples(window):
    rng = np.random.default_rng(window)
    histogram = LatencyHistogram("h_seconds", "h", window=window)
    samples: list[tuple[int, int]] = []
    for _ in range(200):
        size = int(rng.integers(1, 2 * window + 3))
        values = rng.integers(1, 10_000, size).tolist()
        weights = rng.integers(1, 5, size).tolist()
        histogram.observe_ns(values, weights=weights)
        samples += zip(values, weights)
        for q in (0.0, 0.5, 0.9, 0.99, 1.0):
            assert histogram.quantile(q) == _expected(samples, window, q), (len(samples), q)
    assert histogram.count == sum(weight for _, weight in samples)


def test_a_full_window_of_single_samples_takes_fixed_memory():
    histogram = LatencyHistogram("h_seconds", "h", window=20_000)
    tracemalloc.start()
    try:
        for n in range(30_000):  # one sample per poll, as a service with one partition
            histogram.observe_ns([1000 + n % 7], weights=[5000])
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 2**20  # two int64 columns of 20 000: 320 kB (a deque of arrays held about 6 MB)
    assert histogram.quantile(1.0) == 1006e-9
