"""Baselines that can be told apart: states where the rules must differ, exact ties, radii by hand.

The expectations come from the paper's sets (eqs. set:eBl / set:eBh, Algorithm USS-UCB), Hanawal
et al.'s Algorithm 2 and hand computation; :func:`reference_uss_ucb` is an independent
implementation of the paper's algorithm box, written here from the pseudo-code (pairwise counts
``D_ij``, ``N_ij``), not from the library's select/update loop.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from uss_stream.core.stats import STATE_FORMAT
from uss_stream.policies import USSUCB, Hanawal2017WD, SupervisedUCB


def _state(policy_name: str, decisions: int, queried: list[int], disagreements: list[list[int]]) -> dict:
    return {
        "policy": policy_name,
        "stats": {
            "format": STATE_FORMAT,
            "n_stages": len(queried),
            "decisions": decisions,
            "queried": queried,
            "disagreements": disagreements,
        },
    }


def _loaded(policy, decisions, queried, disagreements):
    policy.load_state_dict(_state(type(policy).__name__, decisions, queried, disagreements))
    return policy


def _decide_many(policy, decisions, queried, disagreements) -> int:
    depths = policy.decide_many(
        np.array([decisions + 1]), np.array([queried]), np.array([disagreements], dtype=float)
    )
    return int(depths[0])


# -- Algorithm 2 against USS-UCB: the B^l test --------------------------------------------------------
def test_a_state_where_algorithm_2_and_uss_ucb_must_choose_differently():
    # C = (0, 0.1, 0.2); 10000 rounds, every stage queried each time (n_j = 10000), t = 10001.
    # p̂_12 = 0.05, p̂_13 = 0.30, p̂_23 = 0.05 (an arbitrary state; the sets do not need consistency).
    # USS-UCB (α = 0.51): Ψ = sqrt(0.51 ln 10001 / 10000) = 0.021673
    #   i=1: B^h? C_3 - C_1 = 0.2 > 0.30 + Ψ? no            -> 1 ∉ B^h
    #   i=2: B^l? C_2 - C_1 = 0.1 <= 0.05 + Ψ = 0.0717? no  -> 2 ∉ B^l (stage 1 beats stage 2)
    #   i=3: B^l? C_3 - C_2 = 0.1 <= 0.05 + Ψ? no           -> 3 ∉ B^l;  B̂ = ∅ -> I_t = K = 3
    # Algorithm 2: Ψ = sqrt(1.5 ln 10001 / 10000) = 0.037169, no B^l, >= in B^h:
    #   i=1: 0.2 >= 0.30 + Ψ? no;  i=2: C_3 - C_2 = 0.1 >= 0.05 + Ψ = 0.0872? yes -> 2
    assert math.sqrt(0.51 * math.log(10_001) / 10_000) == pytest.approx(0.021673, abs=1e-6)
    assert math.sqrt(1.5 * math.log(10_001) / 10_000) == pytest.approx(0.037169, abs=1e-6)
    counts = (10_000, [10_000] * 3, [[0, 500, 3_000], [0, 0, 500], [0, 0, 0]])
    costs = [0.0, 0.1, 0.1]
    assert _loaded(USSUCB(costs), *counts).select() == 3
    assert _loaded(Hanawal2017WD(costs), *counts).select() == 2
    assert _decide_many(USSUCB(costs), *counts) == 3
    assert _decide_many(Hanawal2017WD(costs), *counts) == 2


# -- exact ties: > (USS-UCB's B^h) against >= (Algorithm 2) ------------------------------------------
@pytest.mark.parametrize("t, n, d", [(101, 100, 25), (37, 36, 0), (5_001, 4_096, 1_024)])
def test_an_exact_tie_is_beaten_under_algorithm_2_and_not_under_uss_ucb(t, n, d):
    # K = 2, U_12 = D/n + sqrt(1.5 log t / n) (both rules with the same exploration, α = 1.5).
    # With c_2 = U_12 exactly, C_2 - C_1 = U_12: Algorithm 2 (>=) takes stage 1, USS-UCB (>) does not.
    u = d / n + math.sqrt(1.5 * math.log(t) / n)
    state = (t - 1, [n, n], [[0, d], [0, 0]])
    assert _loaded(Hanawal2017WD([0.0, u]), *state).select() == 1
    assert _loaded(USSUCB([0.0, u], alpha=1.5), *state).select() == 2
    assert _decide_many(Hanawal2017WD([0.0, u]), *state) == 1
    assert _decide_many(USSUCB([0.0, u], alpha=1.5), *state) == 2
    # One representable step either side agrees for both rules.
    above, below = math.nextafter(u, math.inf), math.nextafter(u, -math.inf)
    for policy in (Hanawal2017WD([0.0, above]), USSUCB([0.0, above], alpha=1.5)):
        assert _loaded(policy, *state).select() == 1
    for policy in (Hanawal2017WD([0.0, below]), USSUCB([0.0, below], alpha=1.5)):
        assert _loaded(policy, *state).select() == 2


def test_an_exact_tie_in_the_lower_set_keeps_the_stage():
    # B^l uses <=. f(t) = 1 makes Ψ = 0, so U_ij = p̂_ij: p̂_12 = 2/8 = 0.25, p̂_13 = 1, p̂_23 = 0,
    # and C = (0, 0.25, 1.25).
    #   i=1: B^h needs C_2 - C_1 = 0.25 > U_12 = 0.25: no (a tie).
    #   i=2: B^l: C_2 - C_1 = 0.25 <= 0.25: yes (a tie); B^h: C_3 - C_2 = 1 > 0: yes  -> 2.
    # A strict B^l would drop stage 2, and stage 3 (C_3 - C_1 = 1.25 > U_13 = 1) -> K = 3.
    state = (8, [8, 8, 8], [[0, 2, 8], [0, 0, 0], [0, 0, 0]])
    assert _loaded(USSUCB([0.0, 0.25, 1.0], f=lambda t: 1.0), *state).select() == 2
    assert _decide_many(USSUCB([0.0, 0.25, 1.0], f=lambda t: 1.0), *state) == 2


# -- SupervisedUCB's radius with f(t) = t -------------------------------------------------------------
@pytest.mark.parametrize(
    "c_2, depths",
    [
        # U_12(t) = (γ̂_1 - γ̂_2) + sqrt(0.51 ln t / (t - 1)) with γ̂_1 = 1, γ̂_2 = 0 after each round:
        # t = 10: 1 + sqrt(0.51 · 2.302585 / 9) = 1.361220;  t = 11: 1 + sqrt(0.51 · 2.397895 / 10) = 1.349704
        (1.355, [2] * 10 + [1]),  # between the two: stage 1 beats stage 2 from round 11 on
        (1.345, [2] * 11),  # below round 11's bound: still exploring
        # Above round 10's bound (round 9's is 1.374263): depth 1 at round 10, which leaves
        # n_2 = 9, so round 11's bound is 1 + sqrt(0.51 · 2.397895 / 9) = 1.368620 > 1.365: back to 2.
        (1.365, [2] * 9 + [1, 2]),
    ],
)
def test_supervised_ucb_radius_is_sqrt_alpha_log_t_over_n(c_2, depths):
    policy = SupervisedUCB(stage_costs=[0.0, c_2], alpha=0.51)
    chosen = []
    for _ in range(len(depths)):
        depth = policy.select()
        chosen.append(depth)
        policy.update([0, 1][:depth], label=1)  # stage 1 always wrong, stage 2 always right
    assert chosen == depths


def test_supervised_ucb_with_a_zero_radius_would_stop_exploring_at_round_2():
    # f(t) = 1: Ψ = 0, U_12 = 1 < 1.355 from round 2 on: the radius above is what keeps it at depth 2.
    policy = SupervisedUCB(stage_costs=[0.0, 1.355], alpha=0.51, f=lambda t: 1.0)
    chosen = []
    for _ in range(3):
        depth = policy.select()
        chosen.append(depth)
        policy.update([0, 1][:depth], label=1)
    assert chosen == [2, 1, 1]


# -- an independent USS-UCB from the paper's algorithm box ------------------------------------------
def reference_uss_ucb(outputs: np.ndarray, stage_costs: list[float], alpha: float) -> list[int]:
    """Algorithm USS-UCB, line by line: pairwise D_ij, N_ij; Ψ_ij = sqrt(α log f(t) / N_ij), f(t) = t."""
    n_rounds, k = outputs.shape
    cumulative = np.cumsum(stage_costs).tolist()
    d = [[0] * k for _ in range(k)]
    n = [[0] * k for _ in range(k)]
    chosen = []
    for t in range(1, n_rounds + 1):
        y = outputs[t - 1]
        if t == 1:
            depth = k  # line 1: I_1 = K
        else:

            def upper(i: int, j: int, t: int = t) -> float:  # p̂_ij + Ψ_ij(t), i < j (0-based)
                if n[i][j] == 0:
                    return math.inf
                return d[i][j] / n[i][j] + math.sqrt(alpha * math.log(t) / n[i][j])

            b_low = {0} | {
                i for i in range(1, k) if all(cumulative[i] - cumulative[j] <= upper(j, i) for j in range(i))
            }
            b_high = {k - 1} | {
                i
                for i in range(k - 1)
                if all(cumulative[j] - cumulative[i] > upper(i, j) for j in range(i + 1, k))
            }
            depth = min((b_low & b_high) | {k - 1}) + 1
        for i in range(depth):  # lines 9-10: update every observed pair
            for j in range(i + 1, depth):
                d[i][j] += int(y[i] != y[j])
                n[i][j] += 1
        chosen.append(depth)
    return chosen


def _markov_outputs(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Non-i.i.d. outputs: the stages' error rates switch between two regimes (a Markov chain)."""
    regimes = [np.linspace(0.35, 0.0, k), np.linspace(0.05, 0.0, k)]
    regime = 0
    truth = rng.integers(0, 2, n)
    rows = np.empty((n, k), dtype=np.int64)
    for t in range(n):
        if rng.random() < 0.01:
            regime = 1 - regime
        rows[t] = truth[t] ^ (rng.random(k) < regimes[regime])
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_uss_ucb_decides_as_the_reference_written_from_the_algorithm_box(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 6))
    costs = [0.0, *rng.uniform(0.1, 0.4, k - 1).round(3).tolist()]
    alpha = float(rng.choice([0.51, 0.8, 1.0]))
    if seed % 2:
        outputs = _markov_outputs(rng, 4_000, k)
    else:
        truth = rng.integers(0, 2, 4_000)
        outputs = truth[:, None] ^ (rng.random((4_000, k)) < np.linspace(0.3, 0.0, k))
    expected = reference_uss_ucb(outputs, costs, alpha)
    assert len(set(expected)) > 1  # the stream makes the rule choose, not only explore
    policy = USSUCB(costs, alpha=alpha)
    stepped = []
    for row in outputs:
        depth = policy.select()
        policy.update(row[:depth].tolist())
        stepped.append(depth)
    assert stepped == expected
    assert USSUCB(costs, alpha=alpha).run(outputs).tolist() == expected
