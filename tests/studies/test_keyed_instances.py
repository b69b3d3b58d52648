"""The keyed instances: each mixture is of the family it claims, checked from the definitions."""

from __future__ import annotations

import numpy as np
import pytest

from studies.heldout_instances import MIN_GAP
from studies.keyed_instances import DEVELOPMENT_SEEDS, HELDOUT_SEEDS, REAL_KEYED, generate, real_keyed


def _best_depth(outputs, labels, costs):
    """The largest minimiser of C_j + γ_j and its margin over the second best (loops, from the paper)."""
    cumulative = np.cumsum(costs)
    total = [cumulative[j] + float(np.mean(outputs[:, j] != labels)) for j in range(outputs.shape[1])]
    best = min(total)
    star = max(j for j in range(len(total)) if total[j] <= best + 1e-12)
    return star + 1, sorted(total)[1] - best


def test_the_split_is_fixed_and_disjoint():
    assert tuple(range(60)) == DEVELOPMENT_SEEDS
    assert tuple(range(20_000, 20_200)) == HELDOUT_SEEDS
    assert len(REAL_KEYED) == 14


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 20_000, 20_001])
def test_a_mixture_is_of_its_family(seed):
    instance = generate(seed)
    types = sorted({tuple(rows[:1]) for rows in instance.key_rows})
    depths = []
    for (first,) in types:
        rows = next(rows for rows in instance.key_rows if rows[0] == first)
        star, gap = _best_depth(instance.outputs[rows], instance.labels[rows], instance.stage_costs)
        assert gap >= MIN_GAP
        depths.append(star)
    assert instance.family == ("shared" if seed % 2 else "different")
    assert (len(set(depths)) > 1) == (instance.family == "different")
    assert sorted(set(depths)) == sorted(set(instance.details["best_depths"]))
    assert len(instance.key_names) in (30, 100, 300)
    assert (
        np.isclose(instance.weights.sum(), 1.0)
        and ((instance.arrivals >= 0) & (instance.arrivals < 0.9)).all()
    )


def test_streams_are_long_tailed_with_keys_arriving_late():
    instance = generate(4)
    keys, rows = instance.stream(20_000, seed=0)
    counts = np.bincount(keys, minlength=len(instance.key_names))
    assert counts.max() > 20 * np.median(counts[counts > 0])
    late = np.flatnonzero(instance.arrivals > 0.5)
    first_seen = [np.argmax(keys == key) for key in late if (keys == key).any()]
    assert min(first_seen) >= 0.1 * 20_000  # the keys there from the start fill the stream before
    assert all(np.isin(rows[keys == key], instance.key_rows[key]).all() for key in range(0, 30, 7))
    again = instance.stream(20_000, seed=0)
    assert np.array_equal(again[0], keys) and np.array_equal(again[1], rows)


def test_a_real_keyed_cascade_keys_the_log_by_its_attribute():
    instance = real_keyed("vowel-speaker-0.02")
    assert len(instance.key_names) == 15
    assert sum(len(rows) for rows in instance.key_rows) == len(instance.labels) == 495
    assert instance.stage_costs == [0.005] * 4
