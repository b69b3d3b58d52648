"""The WD monitor's verdict and the replay's WD report against a computation written from the definitions.

The reference below is written from the paper's weak dominance (WD: ``C_j - C_i* > P(Y^i* != Y^j)``
for every ``j > i*``, Verma et al. 2019, Definition 2) and from the confidence bounds as
:mod:`uss_stream.labels.evidence` documents them, with nothing of the code under test but
the :class:`LabelEvidence` container: the level ``L_t = (k + 1) log 2`` (``2^k`` the least power
of two ``>= t``), a pair's level ``max(L_t - log(K·count), 1)``, Hoeffding's ``p̂ ± sqrt(x / 2n)``
for the disagreement rate, Bernoulli KL bounds (found here by a 200-step bisection) for the mean of
``x = (z + 1) / 2`` with ``z = 1{j right} - 1{i right}`` on labelled disagreements, and the products
of the two for ``δ_ij = γ_i - γ_j``. The states sit at and next to every threshold of the verdict.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from uss_stream.labels.evidence import LabelEvidence
from uss_stream.labels.wd_monitor import wd_report
from uss_stream.policies import AuditedUSS
from uss_stream.replay.engine import replay


# -- the reference ------------------------------------------------------------------------------------
def _level(t):
    k = 0
    while 2**k < t:
        k += 1
    return (k + 1) * math.log(2.0)


def _pair_level(level, count, n_stages):
    return max(level - math.log(n_stages * count), 1.0)


def _kl(p, q):
    """Bernoulli KL divergence ``kl(p, q)``."""
    total = 0.0
    if p > 0.0:
        total += p * math.log(p / q)
    if p < 1.0:
        total += (1.0 - p) * math.log((1.0 - p) / (1.0 - q))
    return total


def _kl_bound(mean, m, level, upper):
    """``max{q >= mean : m·kl(mean, q) <= level}`` (or the least ``q <= mean``), by bisection."""
    if upper and mean >= 1.0:
        return 1.0
    if not upper and mean <= 0.0:
        return 0.0
    inside, outside = mean, (1.0 if upper else 0.0)
    for _ in range(200):
        middle = 0.5 * (inside + outside)
        if m * _kl(mean, middle) <= level:
            inside = middle
        else:
            outside = middle
    return inside


class Reference:
    """Every quantity the verdict compares, for one state (0-based stages)."""

    def __init__(self, costs, queried, disagreements, evidence, t):
        self.costs = [float(c) for c in costs]
        self.k = k = len(costs)
        level = _level(t)
        self.p_low, self.p_high, self.point, self.d_low, self.d_high = {}, {}, {}, {}, {}
        for j in range(1, k):
            for i in range(j):
                n = queried[j]
                if n == 0:  # never observed: nothing is known about the pair
                    self.p_low[i, j], self.p_high[i, j] = 0.0, math.inf
                    self.point[i, j], self.d_low[i, j], self.d_high[i, j] = math.inf, -math.inf, math.inf
                    continue
                p_hat = disagreements[i][j] / n
                radius = math.sqrt(_pair_level(level, n, k) / (2.0 * n))
                self.p_low[i, j], self.p_high[i, j] = p_hat - radius, p_hat + radius
                p_low, p_high = max(p_hat - radius, 0.0), min(p_hat + radius, 1.0)
                pair = j * (j - 1) // 2 + i
                m = evidence.labelled[pair]
                if m == 0:  # e anywhere in [-1, 1]
                    self.point[i, j] = p_hat
                    self.d_low[i, j], self.d_high[i, j] = -(p_hat + radius), p_hat + radius
                    continue
                plus, minus = evidence.deeper_right[pair], evidence.shallower_right[pair]
                mean = (plus - minus + m) / (2 * m)
                x = _pair_level(level, m, k)
                e_low = 2.0 * _kl_bound(mean, m, x, upper=False) - 1.0
                e_high = 2.0 * _kl_bound(mean, m, x, upper=True) - 1.0
                self.point[i, j] = p_hat * (plus - minus) / m
                self.d_high[i, j] = (p_high if e_high >= 0.0 else p_low) * e_high
                self.d_low[i, j] = (p_low if e_low >= 0.0 else p_high) * e_low

    def gap(self, i, j):
        return self.costs[j] - self.costs[i]

    def best(self):
        """The set test on point estimates: the least ``i`` that beats every deeper stage (extra cost
        above ``δ̂``) and is beaten by no shallower one; ``K`` if none."""
        k = self.k

        def beats(i, j):
            return self.gap(i, j) > self.point[i, j]

        for i in range(k):
            if not any(beats(h, i) for h in range(i)) and all(beats(i, j) for j in range(i + 1, k)):
                return i
        return k - 1

    def shown_worse(self, s):
        """Stage ``s`` is worse than some stage by a bound: a deeper one worth its cost (``δ^L`` above
        the extra cost), or a shallower one it does not beat (``δ^U`` or ``p^U`` below the extra cost)."""
        deeper = any(self.d_low[s, x] > self.gap(s, x) for x in range(s + 1, self.k))
        shallower = any(
            self.d_high[x, s] < self.gap(x, s) or self.p_high[x, s] < self.gap(x, s) for x in range(s)
        )
        return deeper or shallower

    def report(self):
        best = self.best()
        certain = not self.shown_worse(best) and all(self.shown_worse(s) for s in range(self.k) if s != best)
        deeper = range(best + 1, self.k)
        # WD at the estimated best depth: every deeper stage's disagreement rate is below its extra
        # cost with confidence (the upper bound is below) ...
        if certain and all(self.p_high[best, j] < self.gap(best, j) for j in deeper):
            return best + 1, certain, "holds"
        # ... or fails for some deeper stage with confidence (the lower bound reaches the extra cost).
        for j in deeper:
            if self.p_low[best, j] >= self.gap(best, j) and (
                certain or self.d_high[best, j] < self.gap(best, j)
            ):
                return best + 1, certain, "violated"
        return best + 1, certain, "undecided"

    def e_margin(self):
        """The least distance of a label-based bound from its cost gap (the bisections' precision
        differs, so states nearer than 1e-7 are not compared)."""
        pairs = [(i, j) for j in range(1, self.k) for i in range(j)]
        values = [abs(self.d_low[p] - self.gap(*p)) for p in pairs]
        values += [abs(self.d_high[p] - self.gap(*p)) for p in pairs]
        return min(v for v in values if not math.isnan(v))


def _evidence(n_stages, labelled, deeper_right, shallower_right):
    evidence = LabelEvidence(n_stages)
    evidence.labelled, evidence.deeper_right = labelled, deeper_right
    evidence.shallower_right = shallower_right
    return evidence


def _check(costs, queried, disagreements, evidence, t, label_free_depth=None):
    """The monitor's report equals the reference's; returns the verdict."""
    expected = Reference(costs, queried, disagreements, evidence, t).report()
    report = wd_report(costs, queried, disagreements, evidence, t, label_free_depth)
    assert (report.best_depth, report.best_depth_certain, report.verdict) == expected
    assert report.labels == evidence.labels
    return report.verdict


# -- two stages, at and next to each threshold ------------------------------------------------------
# n = 5000 rounds at t = 5001 and K = 2: L_t - log(K·n) < 1, so the level is its floor 1 and the
# Hoeffding radius is sqrt(1 / 2n) = 0.01 to the bit in both computations.
N, T = 5000, 5001
RADIUS = math.sqrt(1.0 / (2.0 * N))


def _two_stage(gap, d, labelled, deeper_right, shallower_right):
    evidence = _evidence(2, [labelled], [deeper_right], [shallower_right])
    return _check([0.0, gap], [N, N], [[0, d], [0, 0]], evidence, T)


def test_holds_needs_the_upper_bound_of_the_disagreement_rate_strictly_below_the_extra_cost():
    # p̂ = 0.05; the labels say stage 2 is right on no disagreement (δ^U < 0): stage 1 is certain.
    p_high = 250 / N + RADIUS
    assert _two_stage(p_high, 250, 100, 0, 100) == "undecided"  # p^U = C_2 - C_1: not yet
    assert _two_stage(math.nextafter(p_high, 1.0), 250, 100, 0, 100) == "holds"
    assert _two_stage(math.nextafter(p_high, 0.0), 250, 100, 0, 100) == "undecided"
    # Between the bounds (p^L < extra cost < p^U): neither holds nor violated.
    assert _two_stage(250 / N, 250, 100, 0, 100) == "undecided"
    assert _two_stage(250 / N - RADIUS / 2, 250, 100, 0, 100) == "undecided"


def test_violated_needs_the_lower_bound_of_the_disagreement_rate_at_or_above_the_extra_cost():
    # p̂ = 0.3 and the labels say stage 2 is never right where they disagree: stage 1 is best and
    # certain, yet stage 2 disagrees with it more often than its extra cost.
    p_low = 1500 / N - RADIUS
    assert _two_stage(p_low, 1500, 200, 0, 200) == "violated"  # p^L = C_2 - C_1: violated
    assert _two_stage(math.nextafter(p_low, 0.0), 1500, 200, 0, 200) == "violated"
    assert _two_stage(math.nextafter(p_low, 1.0), 1500, 200, 0, 200) == "undecided"


def test_the_best_depth_follows_the_point_estimate_at_its_threshold():
    # p̂ = 0.25 and ê = (60 - 20) / 80 = 0.5: δ̂ = 0.125, to the bit in both computations. Stage 1
    # beats stage 2 only if the extra cost exceeds δ̂.
    for gap, best in ((0.125, 2), (math.nextafter(0.125, 1.0), 1), (math.nextafter(0.125, 0.0), 2)):
        evidence = _evidence(2, [80], [60], [20])
        report = wd_report([0.0, gap], [N, N], [[0, 1250], [0, 0]], evidence, T)
        assert report.best_depth == best
        _check([0.0, gap], [N, N], [[0, 1250], [0, 0]], evidence, T)


def _bound_case(which):
    """A two-stage state and the reference's ``δ^L`` (``which = "low"``) or ``δ^U``."""
    plus, minus = (100, 90) if which == "high" else (210, 30)
    evidence = _evidence(2, [300], [plus], [minus])
    reference = Reference([0.0, 0.1], [N, N], [[0, 1500], [0, 0]], evidence, T)
    return evidence, reference.d_low[0, 1] if which == "low" else reference.d_high[0, 1]


@pytest.mark.parametrize("side", [-1.0, 1.0])
def test_certainty_turns_on_the_label_bounds_next_to_the_extra_cost(side):
    # δ^L > extra cost: stage 2 is worth its cost, certainly (labels favour the deeper stage).
    evidence, d_low = _bound_case("low")
    gap = d_low * (1.0 + side * 1e-6)
    verdict = _check([0.0, gap], [N, N], [[0, 1500], [0, 0]], evidence, T)
    report = wd_report([0.0, gap], [N, N], [[0, 1500], [0, 0]], evidence, T)
    assert report.best_depth == 2 and report.best_depth_certain == (side < 0) and verdict != "violated"
    # δ^U < extra cost: stage 1 beats stage 2, certainly (the labels barely favour the deeper stage,
    # ê = 1/30); the disagreement rate (0.3) is above the extra cost, so WD is violated exactly when
    # certain.
    evidence, d_high = _bound_case("high")
    gap = d_high * (1.0 + side * 1e-6)
    verdict = _check([0.0, gap], [N, N], [[0, 1500], [0, 0]], evidence, T)
    assert verdict == ("violated" if side > 0 else "undecided")


@pytest.mark.parametrize("side", [-1.0, 1.0])
def test_advice_exactly_when_the_label_free_choice_contradicts_a_certain_best_depth(side):
    # Next to δ^L: depth 2 is best, certain just below the bound (side < 0) and not just above.
    evidence, d_low = _bound_case("low")
    state = ([0.0, d_low * (1.0 + side * 1e-6)], [N, N], [[0, 1500], [0, 0]], evidence, T)
    certain = side < 0
    assert Reference(*state).report()[1] == certain
    assert (wd_report(*state, label_free_depth=1).advice is not None) == certain
    assert wd_report(*state, label_free_depth=2).advice is None  # the policy agrees
    assert wd_report(*state).advice is None  # no label-free choice to compare
    # Next to δ^U: depth 1 is best, certain (and WD violated) just above the bound.
    evidence, d_high = _bound_case("high")
    state = ([0.0, d_high * (1.0 + side * 1e-6)], [N, N], [[0, 1500], [0, 0]], evidence, T)
    advice = wd_report(*state, label_free_depth=2).advice
    if side > 0:
        assert advice.startswith("the labels show depth 1 is best with confidence, the label-free choice")
        assert "weak dominance is violated: it will stay there" in advice
    else:
        assert advice is None


# -- three and four stages: the uncertain-but-violated path, and states snapped to every bound -----
def test_a_violation_on_one_pair_is_reported_before_the_best_depth_is_certain():
    # Stage 4 was seen 10 times only: the best depth (2) cannot be certain. The pair (2, 3) has
    # p^L above its extra cost 0.2 and, by its own labels, δ^U below it: violated; just above δ^U
    # the pair proves nothing and the verdict is unknown.
    counts = [[0, 4000, 4000, 4], [0, 0, 3000, 3], [0, 0, 0, 3], [0, 0, 0, 0]]
    queried = [10_000, 10_000, 10_000, 10]
    evidence = _evidence(4, [200, 200, 300, 0, 0, 0], [200, 200, 165, 0, 0, 0], [0, 0, 135, 0, 0, 0])
    d_high = Reference([0.0, 0.1, 0.3, 0.5], queried, counts, evidence, 10_001).d_high[1, 2]
    for gap, expected in ((d_high * (1 + 1e-6), "violated"), (d_high * (1 - 1e-6), "undecided")):
        costs = [0.0, 0.1, 0.1 + gap, 0.6]
        assert _check(costs, queried, counts, evidence, 10_001) == expected


def test_a_stage_never_queried_is_never_shown_worse_and_blocks_certainty():
    evidence = _evidence(3, [50, 0, 0], [50, 0, 0], [0, 0, 0])
    assert _check([0.0, 0.1, 0.2], [100, 100, 0], [[0, 40, 0], [0, 0, 0], [0, 0, 0]], evidence, 101) == (
        "undecided"
    )


def _random_state(rng, n_stages):
    t = rng.choice([64, 1000, 5001, 20_000])
    queried = sorted((rng.randint(0, t - 1) for _ in range(n_stages - 1)), reverse=True)
    queried = [t - 1, *queried]
    disagreements = [[0] * n_stages for _ in range(n_stages)]
    labelled, deeper, shallower = [], [], []
    for j in range(1, n_stages):
        for i in range(j):
            d = rng.randint(0, queried[j])
            disagreements[i][j] = d
            m = rng.choice([0, 0, rng.randint(1, min(d, 400))]) if d else 0
            plus = rng.randint(0, m)
            labelled.append(m)
            deeper.append(plus)
            shallower.append(rng.randint(0, m - plus))
    costs = [0.0]
    for _ in range(n_stages - 1):
        costs.append(costs[-1] + rng.uniform(0.005, 0.3))
    return costs, queried, disagreements, _evidence(n_stages, labelled, deeper, shallower), t


def test_random_states_snapped_to_each_bound_agree_with_the_reference():
    rng = random.Random(28)
    compared, verdicts = 0, set()
    for _ in range(400):
        n_stages = rng.choice([2, 3, 4])
        costs, queried, disagreements, evidence, t = _random_state(rng, n_stages)
        # Move one stage's cost so that one pair's gap sits on (or just beside) one of its bounds.
        reference = Reference(costs, queried, disagreements, evidence, t)
        i = rng.randrange(n_stages - 1)
        j = rng.randrange(i + 1, n_stages)
        bounds = (reference.p_low, reference.p_high, reference.point, reference.d_low, reference.d_high)
        table = rng.choice(bounds)
        target = table[i, j]
        if math.isfinite(target) and target > 0.0:
            gap = rng.choice([target, target * (1 + 1e-6), target * (1 - 1e-6)])
            shift = gap - reference.gap(i, j)
            costs = costs[:j] + [c + shift for c in costs[j:]]
            if any(b <= a for a, b in itertools.pairwise(costs)):
                continue
        if Reference(costs, queried, disagreements, evidence, t).e_margin() < 1e-7:
            continue
        verdicts.add(_check(costs, queried, disagreements, evidence, t))
        compared += 1
    assert compared > 300 and verdicts == {"holds", "violated", "undecided"}


# -- the replay's WD report ---------------------------------------------------------------------------
@pytest.mark.parametrize("label_delay", [0, 7])
def test_the_replays_report_is_the_monitors_view_of_each_repetitions_final_state(label_delay):
    # Stage 1 is always right and stage 2 wrong on 30% of the events, at an extra cost of 0.1: WD
    # fails (stage 1 is best, yet the stages disagree more often than the extra cost), and every
    # label on a disagreement shows the shallower stage right. The state of each repetition follows
    # from its depths, its rows and its requests (with two stages, a request is a labelled
    # disagreement of the one pair; those of the last D rounds are still in flight at the horizon).
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 2, 3000)
    second = np.where(rng.random(3000) < 0.3, 1 - labels, labels)
    outputs = np.column_stack([labels, second])
    horizon, costs = 4000, [0.0, 0.1]
    result = replay(
        outputs,
        labels,
        policies={"audited": AuditedUSS(costs)},
        horizon=horizon,
        reps=4,
        seed=3,
        label_delay=label_delay,
    )
    reports = result.wd_reports["audited"]
    depths, rows, asked = result.depths["audited"], result.rows, result.cumulative_labels("audited")
    disagree = outputs[:, 0] != outputs[:, 1]
    verdicts = []
    for r in range(result.reps):
        deep = depths[r] == 2
        queried = [horizon, int(deep.sum())]
        counts = [[0, int((deep & disagree[rows[r]]).sum())], [0, 0]]
        m = int(asked[r, horizon - label_delay - 1])
        assert m > 0
        evidence = _evidence(2, [m], [0], [m])
        evidence.labels = m
        expected = Reference(costs, queried, counts, evidence, horizon + 1).report()
        report = reports[r]
        assert (report.best_depth, report.best_depth_certain, report.verdict) == expected
        assert report.labels == m
        verdicts.append(report.verdict)
    assert "violated" in verdicts
