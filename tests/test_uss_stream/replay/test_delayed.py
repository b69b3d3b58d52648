"""Replay with delayed feedback equals the streaming PendingDecisions loop fed in the same order."""

from __future__ import annotations

import numpy as np
import pytest

from uss_stream.datasets.bsc import bsc_instance, generate_bsc
from uss_stream.pending import PendingDecisions
from uss_stream.policies import USSKLUCB, USSTS, USSUCB, Hanawal2017WD
from uss_stream.policies.kernel import speculate
from uss_stream.replay.delayed import feedback_delays, simulate_delayed
from uss_stream.replay.engine import encode_log, pair_order, sample_rows


def _log(n=400, seed=3):
    outputs, labels = generate_bsc(n, seed=seed)
    codes, _ = encode_log(outputs, labels)
    upper_i, upper_j = pair_order(3)
    return outputs, codes[:, upper_i] != codes[:, upper_j]


def _streaming(policy, outputs, rows, delays):
    """Decide at every round; the report of round s is applied before round s + d_s + 1."""
    book = PendingDecisions(policy)
    due: dict[int, list[int]] = {}
    depths = []
    for t in range(1, len(rows) + 1):
        for s in due.pop(t, []):
            book.report(s, outputs[rows[s - 1]][: book.depth_of(s)].tolist())
        depths.append(book.decide(t))
        due.setdefault(t + int(delays[t - 1]) + 1, []).append(t)
    return depths


@pytest.mark.parametrize("delay", [0, 1, 7, (0, 30)])
@pytest.mark.parametrize(
    "template",
    [
        USSUCB(stage_costs=[0.0, 0.15, 0.2]),
        Hanawal2017WD([0.0, 0.15, 0.2]),
        USSKLUCB([0.0, 0.15, 0.2]),
        USSTS([0.0, 0.15, 0.2], seed=4),
        USSUCB(stage_costs=[0.0, 0.15, 0.2], discount=0.98),
        Hanawal2017WD([0.0, 0.15, 0.2], discount=0.97),
        USSKLUCB([0.0, 0.15, 0.2], discount=0.99),
        USSTS([0.0, 0.15, 0.2], seed=4, discount=0.98),
    ],
    ids=repr,
)
def test_delayed_replay_equals_streaming_loop(delay, template):
    outputs, pairs = _log()
    rows = sample_rows(len(outputs), horizon=600, reps=3, seed=11)
    delays = feedback_delays(delay, reps=3, horizon=600, seed=5)
    got = simulate_delayed(template.clone(), rows, pairs, delays)
    for r in range(3):
        assert got[r].tolist() == _streaming(template.for_repetition(r), outputs, rows[r], delays[r])


def test_discounted_counts_forget_once_per_report_by_hand():
    # One repetition, delays (1, 0, 0, 0): the reports of rounds 1 and 2 both arrive before
    # round 3, in decision order. γ = 0.5, depth 3 at rounds 1-2 (a stubbed decision rule that
    # records what it is shown), pair (0, 1) disagrees in row 0 only. Before round 3:
    # n = 0.5·1 + 1 = 1.5 for every stage, D_01 = 0.5·1 + 0 = 0.5 (row 0 first; the other order
    # gives D_01 = 1). Round 3 queries depth 1 and reports at once: before round 4,
    # n = (0.5·1.5 + 1, 0.5·1.5, 0.5·1.5) and D_01 = 0.25.
    pairs = np.array([[True, False, False], [False, False, False]])
    rows = np.array([[0, 1, 1, 1]])
    policy = USSUCB(stage_costs=[0.0, 0.01, 0.02], discount=0.5)
    seen = []

    def decide_many(rounds, queried, disagreements, errors=None, **other_states):
        seen.append((queried[0].tolist(), float(disagreements[0, 0, 1])))
        return np.full(len(rounds), 3 if len(seen) < 3 else 1)

    policy.decide_many = decide_many
    depths = simulate_delayed(policy, rows, pairs, np.array([[1, 0, 0, 0]]))
    assert depths.tolist() == [[3, 3, 1, 1]]
    assert seen == [
        ([0.0, 0.0, 0.0], 0.0),
        ([0.0, 0.0, 0.0], 0.0),
        ([1.5, 1.5, 1.5], 0.5),
        ([1.75, 0.75, 0.75], 0.25),
    ]


def test_zero_delay_is_the_synchronous_replay():
    outputs, pairs = _log()
    rows = sample_rows(len(outputs), horizon=2000, reps=4, seed=1)
    policy = USSUCB(stage_costs=bsc_instance(2).stage_costs.tolist())
    delayed = simulate_delayed(policy, rows, pairs, feedback_delays(0, reps=4, horizon=2000))
    assert delayed.tolist() == speculate(policy, rows, pairs).tolist()


def test_delay_postpones_learning_by_hand():
    # C = (0, 0.9, 0.95); all stages always agree. Synchronously: 3, 1, 1, 1, then t=5 explores
    # (sqrt(0.51 ln 5) = 0.906 > 0.9) and t=6 is back at 1 (n = 2: sqrt(0.51 ln 6 / 2) = 0.68 < 0.9).
    # With D = 2 the report of round 1 is applied only before round 4: rounds 1-3 see no counts -> K.
    pairs = np.zeros((1, 3), dtype=bool)
    rows = np.zeros((1, 6), dtype=np.int64)
    policy = USSUCB(stage_costs=[0.0, 0.9, 0.05])
    assert simulate_delayed(policy, rows, pairs, np.zeros((1, 6), int)).tolist() == [[3, 1, 1, 1, 3, 1]]
    # D = 2: t=4 sees round 1 only (n=(1,1,1)): sqrt(0.51 ln 4) = 0.84 < 0.9 -> 1;
    # t=5 sees rounds 1-2: n = (2,2,2): sqrt(0.51 ln 5 / 2) = 0.64 < 0.9 -> 1;
    # t=6 sees rounds 1-3: n = 3: 0.61 -> 1.
    assert simulate_delayed(policy, rows, pairs, np.full((1, 6), 2)).tolist() == [[3, 3, 3, 1, 1, 1]]


@pytest.mark.parametrize("delay", [-1, (3, 1), 1.5, "2"])
def test_bad_delay(delay):
    with pytest.raises(ValueError, match="delay"):
        feedback_delays(delay, reps=1, horizon=3)
