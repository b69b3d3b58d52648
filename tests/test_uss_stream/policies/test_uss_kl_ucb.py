"""USS-KL-UCB: the KL bound against a bisection written here, the level by hand, vectorised = scalar."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_counts import loaded, random_counts

from uss_stream.datasets.bsc import generate_bsc
from uss_stream.policies import USSKLUCB, USSUCB
from uss_stream.replay.engine import replay
from uss_stream.rules.confidence import (
    kl_beats,
    kl_beats_many,
    kl_count,
    kl_upper_bound,
    portable_log,
    portable_log_many,
)
from uss_stream.rules.selection_rule import select_depth


def bernoulli_kl(p: float, q: float) -> float:
    first = p * math.log(p / q) if p > 0 else 0.0
    second = (1 - p) * math.log((1 - p) / (1 - q)) if p < 1 else 0.0
    return first + second


def bisection_bound(d: float, n: float, x: float) -> float:
    """max{q in [p, 1): n·kl(p, q) <= x}, by 200 halvings."""
    p = d / n
    low, high = p, 1.0
    for _ in range(200):
        middle = (low + high) / 2
        if n * bernoulli_kl(p, middle) <= x:
            low = middle
        else:
            high = middle
    return low


@pytest.mark.parametrize(
    ("d", "n", "x"), [(1, 10, 1.0), (0, 5, 2.0), (30, 100, 4.6), (2.5, 7.25, 0.3), (9, 10, 3.0)]
)
def test_kl_upper_bound_equals_a_bisection(d, n, x):
    assert kl_upper_bound(d, n, x) == pytest.approx(bisection_bound(d, n, x), abs=1e-10)


def test_kl_bound_is_never_wider_than_hoeffding():
    for d, n, x in [(1, 10, 1.0), (50, 100, 3.0), (3, 40, 5.0)]:
        assert kl_upper_bound(d, n, x) <= d / n + math.sqrt(x / (2 * n)) + 1e-12


def test_kl_count_by_hand():
    # 10·kl(0.1, 0.3) = 1·log(0.1/0.3) + 9·log(0.9/0.7)
    expected = math.log(1 / 3) + 9 * math.log(0.9 / 0.7)
    assert kl_count(1, 10, portable_log(0.3), portable_log(0.7)) == pytest.approx(expected, rel=1e-14)


def test_portable_log_is_accurate_and_vectorises_to_the_bit():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.random(2000) * 100, np.exp(rng.normal(0, 30, 2000)), [1.0, 2.0, 0.5]])
    many = portable_log_many(values)
    for value, vectorised in zip(values.tolist(), many.tolist()):
        assert portable_log(value) == vectorised
        assert portable_log(value) == pytest.approx(math.log(value), rel=4e-16, abs=4e-16)


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 400),
    share=st.floats(0, 1),
    gap=st.sampled_from([-0.1, 0.0, 0.01, 0.05, 0.2, 0.5, 0.99, 1.0, 1.5]),
    x=st.sampled_from([0.0, 0.1, 1.0, 4.0, 9.2]),
)
def test_beats_is_gap_above_the_bound_and_vectorises(n, share, gap, x):
    d = math.floor(share * n)
    inside = 0.0 < gap < 1.0
    log_gap = portable_log(gap) if inside else 0.0
    log_rest = portable_log(1.0 - gap) if inside else 0.0
    scalar = kl_beats(d, n, gap, x, lambda: kl_count(d, n, log_gap, log_rest))
    vector = kl_beats_many(*(np.array([v], dtype=float) for v in (d, n, gap, log_gap, log_rest, x)))
    assert vector.tolist() == [scalar]
    bound = bisection_bound(d, n, x)
    if abs(gap - bound) > 1e-9:
        assert scalar == (gap > bound)


@pytest.mark.parametrize("layout", ["C", "F"])
def test_beats_many_on_a_batch_equals_the_scalar_test_entry_by_entry(layout):
    """A batch where the shortcuts decide some entries and the divergence the others (its logarithms
    are taken only for those), with the gaps per column and the levels per row broadcast; and
    (``F``) with column-major counts and levels of the batch's full shape, as the kernel's
    transposed views give ``decide_many``."""
    rng = np.random.default_rng(3)
    rows, pairs = 400, 6
    n = rng.integers(0, 60, (rows, pairs)).astype(float)
    d = np.floor(n * rng.random((rows, pairs)) * 0.6)
    gap = np.array([0.02, 0.1, 0.2, 0.35, 0.6, 1.0])
    x = rng.choice([0.0, 0.5, 2.0, 6.0], (rows, 1))
    inside = (gap > 0) & (gap < 1)
    log_gap = np.array([portable_log(g) if ok else 0.0 for g, ok in zip(gap.tolist(), inside)])
    log_rest = np.array([portable_log(1.0 - g) if ok else 0.0 for g, ok in zip(gap.tolist(), inside)])
    if layout == "F":
        d, n = np.asfortranarray(d), np.asfortranarray(n)
        x = np.asfortranarray(np.repeat(x, pairs, axis=1))
        assert not d.flags.c_contiguous and not x.flags.c_contiguous
    vector = kl_beats_many(d, n, gap, log_gap, log_rest, x)
    settled_by_divergence = 0
    for r in range(rows):
        for p in range(pairs):
            args = (float(d[r, p]), float(n[r, p]), float(gap[p]), float(x[r, -1 if layout == "C" else p]))
            scalar = kl_beats(*args, lambda a=args, p=p: kl_count(a[0], a[1], log_gap[p], log_rest[p]))
            assert bool(vector[r, p]) == scalar, (r, p, args)
            dn, nn, g, level = args
            if nn > 0 and g > dn / nn and level > 0 and g < 1 and 2 * nn * (g - dn / nn) ** 2 <= level:
                settled_by_divergence += 1
    assert 0 < settled_by_divergence < rows * pairs / 2  # both kinds of entries are in the batch


def test_level_and_bounds_by_hand():
    # K = 3, round t = 101, n = (100, 30, 5): levels x_j = max(0, log 101 - log(3·n_j)).
    queried, disagreements = [100, 30, 5], [[0, 3, 1], [0, 0, 2], [0, 0, 0]]
    policy = loaded(USSKLUCB([0.0, 0.1, 0.2]), 100, queried, disagreements)
    bounds = policy.upper_bounds()
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        x = max(0.0, math.log(101) - math.log(3 * queried[j]))
        assert bounds[i, j] == pytest.approx(bisection_bound(disagreements[i][j], queried[j], x), abs=1e-9)
    # A pair observed in more than a 1/K share of the rounds gets no exploration bonus at all.
    assert math.log(101) - math.log(3 * 100) < 0 and bounds[0, 0] == 0.0


def test_decisions_are_the_set_test_on_the_kl_bounds():
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(300):
        k = int(rng.integers(2, 6))
        costs = rng.choice([0.0, 0.01, 0.05, 0.1, 0.3], size=k).tolist()
        queried, disagreements = random_counts(
            rng, k, 300, lambda n: int(rng.integers(0, n + 1) * rng.random() * 0.5)
        )
        policy = loaded(USSKLUCB(costs), queried[0] + int(rng.integers(0, 2000)), queried, disagreements)
        bounds = policy.upper_bounds()
        cumulative = np.cumsum(costs)
        gaps = cumulative[None, :] - cumulative[:, None]
        if np.any(np.abs(gaps - bounds)[np.triu_indices(k, 1)] < 1e-9):
            continue  # too close to call for a bisected bound
        assert policy.select() == select_depth(cumulative.tolist(), lambda i, j, u=bounds: u[i, j])
        checked += 1
    assert checked > 250


@settings(max_examples=200, deadline=None)
@given(
    k=st.integers(1, 5),
    steps=st.integers(0, 300),
    seed=st.integers(0, 10**6),
    discount=st.sampled_from([None, 0.5, 0.99]),
    alpha=st.sampled_from([1.0, 0.5, 2.0]),
)
def test_decide_many_equals_select(k, steps, seed, discount, alpha):
    rng = np.random.default_rng(seed)
    costs = rng.choice([0.0, 0.01, 0.05, 0.1, 0.3], size=k).tolist()
    policy = USSKLUCB(costs, alpha=alpha, discount=discount)
    policy.run(rng.random((steps, k)) < rng.random(k))
    stats = policy.stats
    many = policy.decide_many(
        np.array([stats.decisions + 1]), np.array([stats.queried]), np.array([stats.disagreements])
    )
    assert many.tolist() == [policy.select()]


def test_cascade_default_decides_as_uss_kl_ucb():
    from river import linear_model

    from uss_stream import CascadeClassifier, Stage

    class Echo(linear_model.LogisticRegression):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

        def predict_proba_one(self, x):
            return {x[self.key]: 1.0}

    costs = [0.0, 0.3, 0.2]
    stages = [Stage(Echo(f"s{j}"), features=(f"s{j}",), cost=c) for j, c in enumerate(costs)]
    cascade = CascadeClassifier(stages=stages, warm_up=0)
    outputs = generate_bsc(1500, seed=3)[0]
    depths = [cascade.decide_one({f"s{j}": int(v) for j, v in enumerate(row)}).depth for row in outputs]
    assert depths == USSKLUCB(costs).run(outputs).tolist()
    assert cascade.summary().stages["in_B_h"].notna().all()


def test_lower_regret_than_uss_ucb_on_bsc_case_1():
    outputs, labels = generate_bsc(20_000, seed=0)
    costs = [0.0, 0.6, 0.2]
    result = replay(
        outputs, labels, policies={"kl": USSKLUCB(costs), "ucb": USSUCB(costs)}, horizon=3000, reps=20, seed=0
    )
    assert result.final_regret("kl")[0] < 0.6 * result.final_regret("ucb")[0]


@pytest.mark.parametrize("alpha", [0, -1.0, math.inf, math.nan, "1", True])
def test_bad_alpha_is_rejected(alpha):
    with pytest.raises(ValueError, match="alpha must be a finite number > 0"):
        USSKLUCB([0.0, 0.1], alpha=alpha)


def test_bad_discount_and_costs_are_rejected():
    with pytest.raises(ValueError, match="discount must be a number"):
        USSKLUCB([0.0, 0.1], discount=0.0)
    with pytest.raises(ValueError, match=r"stage_costs\[1\] must be >= 0"):
        USSKLUCB([0.0, -0.1])
