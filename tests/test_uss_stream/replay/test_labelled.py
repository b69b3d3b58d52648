"""Units of the labelled replay's fast paths: the strict bounds made on demand."""

from __future__ import annotations

import numpy as np

from uss_stream.labels.evidence import e_upper, label_level
from uss_stream.labels.relations import label_relations_many
from uss_stream.replay.labelled import _strict_bounds


def test_strict_bounds_read_each_states_counts_and_level():
    # Two columns (repetitions) at different levels; rows 0, 1 are their counts, row 2 a later
    # label's counts of column 0. States are (offset, column), column innermost.
    known = np.array(
        [
            [[4, 3, 1], [4, 1, 0], [0, 0, 0]],
            [[9, 2, 6], [5, 1, 1], [1, 1, 0]],
            [[5, 4, 1], [5, 2, 0], [0, 0, 0]],
        ]
    )
    version = np.array([0, 1, 2, 1, 2, 1])
    level = np.array([label_level(100), label_level(3000)])
    memo: dict = {}
    states = np.array([0, 1, 2, 4, 5, 4])
    pairs = np.array([0, 2, 0, 1, 0, 1])
    got = _strict_bounds(known, version, level, memo, states, pairs)
    expected = [
        e_upper(4, 4, 0, label_level(100)),  # state 0: row 0, pair 0, column 0
        e_upper(6, 1, 0, label_level(3000)),  # state 1: row 1, pair 2, column 1
        e_upper(5, 5, 0, label_level(100)),  # state 2: row 2, pair 0, column 0
        e_upper(4, 2, 0, label_level(100)),  # state 4: row 2, pair 1, column 0
        e_upper(9, 5, 1, label_level(3000)),  # state 5: row 1, pair 0, column 1
        e_upper(4, 2, 0, label_level(100)),
    ]
    assert got.tolist() == expected
    assert len(memo) == 5  # one bound per distinct entry


def test_relations_read_a_strict_function_as_the_array():
    rng = np.random.default_rng(3)
    pairs = [(0, 1), (0, 2), (1, 2)]
    m = 400
    n_pairs = rng.integers(1, 500, size=(m, 3)).astype(float)
    pair_counts = np.floor(n_pairs * rng.uniform(0, 0.4, size=(m, 3)))
    kl = rng.random((m, 3)) < 0.2
    has = rng.random((m, 3)) < 0.7
    e_lower = np.where(has, rng.uniform(-1, 0.3, size=(m, 3)), -1.0)
    e_up = np.where(has, rng.uniform(-0.2, 0.5, size=(m, 3)), 1.0)
    strict = np.minimum(e_up + 0.05, 1.0)
    level = np.full(m, label_level(1000))
    log_kn = np.log(3 * n_pairs)
    gap = np.array([0.05, 0.1, 0.05])
    calls = []

    def on_demand(state, pair):
        calls.append((state, pair))
        return strict[state, pair]

    common = (kl, pair_counts, n_pairs, log_kn, level)
    array = label_relations_many(*common, (has, e_lower, e_up, strict), gap, pairs, 3)
    function = label_relations_many(*common, (has, e_lower, e_up, on_demand), gap, pairs, 3)
    assert array.audit.any() and not array.audit.all()
    for a, b in zip(array, function):
        assert np.array_equal(a, b)
    ((state, pair),) = calls
    assert array.decisive[state, pair].all() and array.decisive.sum() == state.size
