"""UEE-UCB: the early-exit rule's rounds computed by hand, and the replay against the streaming loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uss_stream.datasets.paper import paper_case
from uss_stream.policies import UEEUCB
from uss_stream.policies.kernel import speculate
from uss_stream.replay.engine import encode_log, pair_indicators, sample_rows


def test_rounds_by_hand():
    # C = (0.1, 0.4); the index of exit j is p̂_1j + C_1 - C_j + sqrt(log t / N_j).
    policy = UEEUCB(stage_costs=[0.1, 0.3])
    assert policy.select() == 2  # round 1 plays K
    policy.update([0, 1])  # N = (1, 1), D_12 = 1
    # t = 2: exit 1: sqrt(log 2) = 0.833; exit 2: 1 - 0.3 + 0.833 = 1.533
    assert policy.select() == 2
    policy.update([0, 0])  # N = (2, 2), D_12 = 1
    # t = 3: exit 1: sqrt(log 3 / 2) = 0.741; exit 2: 0.5 - 0.3 + 0.741 = 0.941
    assert policy.select() == 2
    policy.update([1, 1])  # N = (3, 3)
    # t = 4: exit 1: sqrt(log 4 / 3) = 0.680; exit 2: 0.333 - 0.3 + 0.680 = 0.713
    assert policy.select() == 2
    policy.update([0, 0])  # N = (4, 4)
    # t = 5: exit 1: sqrt(log 5 / 4) = 0.634; exit 2: 0.25 - 0.3 + 0.634 = 0.584
    assert policy.select() == 1
    policy.update([1])  # N = (5, 4)
    # t = 6: exit 1: sqrt(log 6 / 5) = 0.599; exit 2: 0.25 - 0.3 + sqrt(log 6 / 4) = 0.619
    assert policy.select() == 2


def test_indices_match_the_formula():
    policy = UEEUCB(stage_costs=[0.0, 0.2, 0.1], alpha=2.0)
    assert np.isinf(policy.indices()).all()
    assert policy.select() == 3
    policy.update([0, 1, 1])  # exits 2 and 3 disagree with exit 1: p̂_12 = p̂_13 = 1, N = 1
    bonus = math.sqrt(2.0 * math.log(2))
    expected = [bonus, 1.0 - 0.2 + bonus, 1.0 - 0.3 + bonus]
    assert policy.indices() == pytest.approx(expected, abs=1e-12)
    assert policy.select() == 1 + int(np.argmax(expected))


@pytest.mark.parametrize("name", ["bsc-2", "synthetic1-3"])
def test_replay_equals_streaming(name):
    case = paper_case(name)
    outputs, labels = case.log()
    codes, _ = encode_log(outputs, labels)
    rows = sample_rows(len(codes), horizon=3000, reps=3, seed=5)
    template = UEEUCB(case.stage_costs)
    replayed = speculate(template, rows, pair_indicators(codes))
    for r in range(3):
        assert np.array_equal(template.clone().run(codes[rows[r]]), replayed[r])


def test_bad_alpha_is_named():
    with pytest.raises(ValueError, match="alpha"):
        UEEUCB([0.0, 0.1], alpha=0.0)
