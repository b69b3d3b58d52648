"""The simulation kernel decides exactly as the streaming select/update loop, from any starting counts.

The reference is :meth:`Policy.run` (one ``select``/``update`` per event on
:class:`~uss_stream.core.stats.DisagreementStats`), code the kernel does not share.
"""

from __future__ import annotations

import numpy as np
import pytest

from uss_stream.core.stats import DisagreementStats
from uss_stream.policies import USSKLUCB, USSTS, USSUCB, Hanawal2017WD
from uss_stream.policies.batch import decide_batch
from uss_stream.policies.kernel import Counts, pair_order, speculate

COSTS = [0.0, 0.15, 0.2]


def _log(n: int, seed: int) -> np.ndarray:
    """Outputs of a 3-stage cascade whose stages err less the deeper they are."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    return np.stack([truth ^ (rng.random(n) < p) for p in (0.25, 0.08, 0.02)], axis=1)


def _indicators(outputs: np.ndarray) -> np.ndarray:
    upper_i, upper_j = pair_order(outputs.shape[1])
    return (outputs[:, upper_i] != outputs[:, upper_j]).astype(np.int8)


POLICIES = [
    USSUCB(COSTS),
    USSUCB(COSTS, discount=0.99),
    USSKLUCB(COSTS),
    USSKLUCB(COSTS, discount=0.995),
    USSTS(COSTS, seed=4),
    USSTS(COSTS, seed=4, discount=0.99),
    Hanawal2017WD(COSTS, discount=0.99),
]


@pytest.mark.parametrize("template", POLICIES, ids=repr)
def test_speculate_from_live_counts_continues_the_streaming_loop(template) -> None:
    """Half the log through the loop, the other half through the kernel: the loop's depths and counts."""
    outputs = _log(4000, seed=1)
    reference = template.clone()
    expected = reference.run(outputs)
    policy = template.clone()
    policy.run(outputs[:1500])
    counts = Counts.of_stats(policy.stats)
    rest = outputs[1500:]
    depths = speculate(policy, np.arange(len(rest))[None, :], _indicators(rest), counts_of=counts, guess=2)
    assert depths[0].tolist() == expected[1500:].tolist()
    after = counts.to_stats(0, discount=template.discount)
    assert after == reference.stats
    assert after.to_dict() == reference.stats.to_dict()


@pytest.mark.parametrize("template", POLICIES, ids=repr)
def test_the_service_batch_decider_matches_the_loop_with_and_without_discount(template) -> None:
    """decide_batch used to speculate on plain counts whatever the policy's discount."""
    outputs = _log(3000, seed=2)
    looped, batched = template.clone(), template.clone()
    expected = looped.run(outputs).tolist()
    got = decide_batch(batched, outputs[:1200].ravel().tolist())
    got += decide_batch(batched, outputs[1200:].ravel().tolist(), guess=got[-1])
    assert got == expected
    assert batched.state_dict() == looped.state_dict()


def test_counts_layout_and_checks() -> None:
    stats = DisagreementStats(3, discount=0.5)
    stats.record([0, 1, 0])
    stats.decisions = 1
    counts = Counts.of_stats(stats)
    assert counts.queried.dtype == np.float64 and counts.queried.shape == (3, 1)
    # one record from zero: γ·0 + 1 where a pair disagrees; pairs (0,1), (0,2), (1,2)
    assert counts.disagreements[:, 0].tolist() == [1.0, 0.0, 1.0]
    assert counts.to_stats(0, discount=0.5) == stats
    with pytest.raises(ValueError, match=r"float64 for discount=0\.5"):
        Counts.zeros(3, 1, discount=None).check(3, 1, discount=0.5, errors=False)
    with pytest.raises(ValueError, match=r"counts must be 6 x 2 \(K = 3, error counts: False\), got 6 x 1"):
        counts.check(3, 2, discount=0.5, errors=False)
    with pytest.raises(ValueError, match=r"counts must be 9 x 1 \(K = 3, error counts: True\)"):
        counts.check(3, 1, discount=0.5, errors=True)
    assert counts.values.shape == (6, 1)  # n_1..n_3, then the 3 pairs: one array, blocks are views
    counts.queried[1, 0] = 7.0
    assert counts.values[1, 0] == 7.0


def test_load_stats_hands_counts_without_a_document() -> None:
    stats = DisagreementStats(3)
    for row in _log(50, seed=3):
        stats.record(row.tolist())
    stats.decisions = 50
    policy = USSUCB(COSTS)
    policy.load_stats(stats)
    assert policy.stats == stats and policy.stats is not stats  # a copy: the caller's stays its own
    twin = USSUCB(COSTS)
    twin.load_state_dict({"policy": "USSUCB", "stats": stats.to_dict()})
    assert policy.select() == twin.select()
    with pytest.raises(ValueError, match="discount"):
        USSUCB(COSTS, discount=0.9).load_stats(stats)
    with pytest.raises(ValueError, match="stages"):
        USSUCB([0.0, 1.0]).load_stats(stats)
    with pytest.raises(TypeError, match="DisagreementStats"):
        policy.load_stats(stats.to_dict())


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("decisions", 2**53 + 1, r"stats\.decisions must be in 0\.\.2\*\*53"),
        ("queried", [2**53 + 1, 0, 0], r"stats\.queried must hold counts in 0\.\.2\*\*53 .*got 9007199"),
        ("queried", [-1, 0, 0], r"stats\.queried .*got -1"),
        ("disagreements", [[0, 2**54, 0], [0, 0, 0], [0, 0, 0]], r"stats\.disagreements .*got 180143985"),
    ],
)
def test_load_stats_refuses_counts_beyond_the_state_bound(field, value, message) -> None:
    """load_state_dict refuses counts above MAX_COUNT (floats stop being exact); so does load_stats."""
    policy = USSUCB(COSTS)
    policy.run(_log(20, seed=5))
    before = policy.state_dict()
    stats = DisagreementStats(3)
    setattr(stats, field, value)
    with pytest.raises(ValueError, match=message):
        policy.load_stats(stats)
    assert policy.state_dict() == before


def test_load_stats_refuses_nan_discounted_counts() -> None:
    stats = DisagreementStats(3, discount=0.9)
    stats.queried = [1.0, float("nan"), 0.5]
    with pytest.raises(ValueError, match=r"stats\.queried .*got nan"):
        USSUCB(COSTS, discount=0.9).load_stats(stats)
