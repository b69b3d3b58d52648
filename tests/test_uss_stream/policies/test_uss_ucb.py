"""USS-UCB against rounds computed by hand from the paper's algorithm box."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests import needs
from uss_stream.policies import USSUCB


def test_rounds_one_to_six_by_hand():
    # Stage costs c = (0, 0.9, 0.05) -> cumulative C = (0, 0.9, 0.95); alpha = 0.51, f(t) = t.
    policy = USSUCB(stage_costs=[0.0, 0.9, 0.05], alpha=0.51)
    rows = [(1, 1, 1), (0, 0, 0), (1, 1, 1), (0, 0, 0), (0, 1, 1), (1, 1, 1)]
    depths = []
    for row in rows:
        depth = policy.select()
        policy.update(row[:depth])
        depths.append(depth)
    # t=1: all K stages.                                              -> 3; n = (1,1,1), D = 0
    # t=2: Psi = sqrt(0.51 ln 2 / 1) = 0.5946; U_12 = U_13 = 0.5946.
    #      i=1: C_2-C_1 = 0.9 > 0.5946 and C_3-C_1 = 0.95 > 0.5946   -> 1; n = (2,1,1)
    # t=3: Psi(n=1) = sqrt(0.51 ln 3) = 0.7485 < 0.9                 -> 1; n = (3,1,1)
    # t=4: Psi(n=1) = sqrt(0.51 ln 4) = 0.8408 < 0.9                 -> 1; n = (4,1,1)
    # t=5: Psi(n=1) = sqrt(0.51 ln 5) = 0.9060 >= 0.9: i=1 not in B^h.
    #      i=2: B^l: 0.9 <= 0.9060; B^h: C_3-C_2 = 0.05 > 0.9060? no.
    #      i=3: B^l: C_3-C_1 = 0.95 <= 0.9060? no.  B is empty      -> K = 3
    #      row (0,1,1): D_12 = D_13 = 1, D_23 = 0; n = (5,2,2)
    # t=6: Psi(n=2) = sqrt(0.51 ln 6 / 2) = 0.6759; U_12 = U_13 = 0.5 + 0.6759 = 1.1759, U_23 = 0.6759.
    #      i=1: 0.9 > 1.1759? no.  i=2: B^h: 0.05 > 0.6759? no.
    #      i=3: B^l: 0.95 <= 1.1759 and 0.05 <= 0.6759              -> 3
    assert depths == [3, 1, 1, 1, 3, 3]
    assert policy.stats.queried == [6, 3, 3]
    assert policy.stats.disagreements[0][1] == 1
    assert policy.stats.disagreements[0][2] == 1
    assert policy.stats.disagreements[1][2] == 0
    assert math.sqrt(0.51 * math.log(5)) > 0.9 > math.sqrt(0.51 * math.log(4))


def test_middle_stage_selected_when_it_beats_the_last_and_the_first_does_not_beat_it():
    # C = (0, 0.2, 1.0). t=2 after one agreeing round: U = sqrt(0.51 ln 2) = 0.5946 for all pairs.
    # i=1: C_2-C_1 = 0.2 > 0.5946? no.  i=2: B^l: 0.2 <= 0.5946; B^h: C_3-C_2 = 0.8 > 0.5946 -> 2.
    policy = USSUCB(stage_costs=[0.0, 0.2, 0.8])
    assert policy.select() == 3
    policy.update([1, 1, 1])
    assert policy.select() == 2
    policy.update(["x", "x"])  # any hashable labels
    # t=3: n = (2,2,1): U_12 = 0 + sqrt(0.51 ln 3 / 2) = 0.5293, U_23 = sqrt(0.51 ln 3) = 0.7485.
    # i=1: 0.2 > 0.5293? no.  i=2: 0.2 <= 0.5293 and 0.8 > 0.7485 -> 2.
    assert policy.select() == 2


def test_exploration_function_is_used():
    # With f(t) = 1 there is no exploration bonus after round 1: stage 1 beats both once they agree.
    policy = USSUCB(stage_costs=[0.0, 0.2, 0.8], f=lambda t: 1.0)
    assert policy.select() == 3
    policy.update([0, 0, 0])
    assert policy.select() == 1


def test_run_equals_select_update_loop_and_depths_in_range():
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 3, size=3000)
    noisy = rng.random((3000, 4)) < [0.3, 0.2, 0.1, 0.05]
    outputs = np.where(noisy, (truth[:, None] + 1) % 3, truth[:, None])
    looped = USSUCB(stage_costs=[0.0, 0.3, 0.1, 0.2], alpha=0.6)
    loop_depths = []
    for row in outputs.tolist():
        depth = looped.select()
        looped.update(row[:depth])
        loop_depths.append(depth)
    run_depths = USSUCB(stage_costs=[0.0, 0.3, 0.1, 0.2], alpha=0.6).run(outputs)
    assert run_depths.tolist() == loop_depths
    assert set(loop_depths) <= {1, 2, 3, 4}
    assert len(set(loop_depths)) > 1


def test_string_outputs_and_dataframe_input():
    pd = needs.module("pandas")
    frame = pd.DataFrame({"s1": ["a", "b", "a"], "s2": ["a", "a", "a"]})
    assert USSUCB(stage_costs=[0.0, 1.0]).run(frame).tolist()[0] == 2


def test_state_round_trip_continues_identically():
    rng = np.random.default_rng(3)
    outputs = rng.integers(0, 2, size=(400, 3))
    full = USSUCB(stage_costs=[0.0, 0.1, 0.3]).run(outputs)
    first = USSUCB(stage_costs=[0.0, 0.1, 0.3])
    head = first.run(outputs[:150])
    second = USSUCB(stage_costs=[0.0, 0.1, 0.3])
    import json

    second.load_state_dict(json.loads(json.dumps(first.state_dict())))
    tail = second.run(outputs[150:])
    assert np.concatenate([head, tail]).tolist() == full.tolist()


def test_clone_is_fresh_with_same_params():
    policy = USSUCB(stage_costs=[0.0, 0.1], alpha=0.7)
    policy.run([[0, 1]] * 5)
    clone = policy.clone()
    assert clone.alpha == 0.7 and clone.stage_costs == [0.0, 0.1]
    assert clone.stats.decisions == 0 and policy.stats.decisions == 5


def test_upper_bounds_matrix():
    policy = USSUCB(stage_costs=[0.0, 0.2, 0.8])
    policy.run([[1, 0, 0]])
    bounds = policy.upper_bounds()
    radius = math.sqrt(0.51 * math.log(2))
    assert bounds[0, 1] == pytest.approx(1 + radius)
    assert bounds[1, 2] == pytest.approx(radius)
    assert bounds[1, 0] == 0


def test_cancel_withdraws_the_pending_decision():
    policy = USSUCB(stage_costs=[0.0, 0.9, 0.05])
    policy.run([[1, 1, 1]])
    assert policy.select() == 1
    policy.cancel()
    assert policy.stats.decisions == 1
    with pytest.raises(RuntimeError):
        policy.cancel()
    assert policy.select() == 1  # the same round t = 2 is decided again
    policy.update([1])


def test_clone_with_new_parameters():
    clone = USSUCB(stage_costs=[0.0, 0.1], alpha=0.7).clone({"stage_costs": [0.0, 0.2, 0.3]})
    assert (clone.n_stages, clone.alpha) == (3, 0.7)
    with pytest.raises(ValueError, match="no parameter"):
        USSUCB(stage_costs=[0.0]).clone({"beta": 1})


def test_inlined_set_test_equals_the_generic_lazy_one() -> None:
    """USSUCB._decide's inlined test returns what select_depth returns on the closure's bounds."""
    from uss_stream.policies.uss_ucb import _select_depth
    from uss_stream.rules.confidence import disagreement_bound
    from uss_stream.rules.selection_rule import select_depth

    rng = np.random.default_rng(11)
    checked = set()
    for _ in range(20_000):
        k = int(rng.integers(1, 7))
        costs = np.cumsum(rng.choice([0.0, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5], size=k)).tolist()
        queried = sorted(rng.integers(0, 60, size=k).tolist(), reverse=True)
        if rng.random() < 0.3:  # discounted counts are floats
            queried = [q * 0.37 for q in queried]
        counts = [[0.0] * k for _ in range(k)]
        for j in range(k):
            for i in range(j):
                counts[i][j] = float(rng.integers(0, int(queried[j]) + 1)) if queried[j] else 0.0
        scale = float(rng.choice([0.0, 0.5, 2.0, 5.0]))
        expected = select_depth(costs, disagreement_bound(queried, counts, scale))
        assert _select_depth(costs, queried, counts, scale) == expected
        checked.add((k, expected))
    assert len(checked) > 15  # every depth of several K was reached
