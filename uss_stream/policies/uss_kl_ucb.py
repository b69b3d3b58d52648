"""USS-KL-UCB: the paper's set test with Kullback-Leibler confidence bounds at an anytime level."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from uss_stream.core.forgetting import EffectiveHorizon
from uss_stream.core.validation import check_positive
from uss_stream.policies.base import CountStates, Policy
from uss_stream.rules.certificates import certain_depth_many, kl_beats_ranges, window_ranges
from uss_stream.rules.confidence import (
    kl_beats,
    kl_beats_many,
    kl_count,
    kl_upper_bound,
    portable_log,
    portable_log_many,
)
from uss_stream.rules.selection_rule import select_depth_by, select_depth_many_by

__all__ = ["USSKLUCB"]


class USSKLUCB(Policy):
    """USS-UCB's sets ``B^l``, ``B^h`` with KL upper confidence bounds at level ``α·log₊(t / (K·n_j))``.

    Round ``t``, stages ``i < j``, ``p̂_ij = D_ij / n_j``:

    * ``U_ij = max{q in [p̂_ij, 1] : n_j·kl(p̂_ij, q) <= x_j}`` (``+inf`` while ``n_j = 0``) with
      ``kl`` the Bernoulli Kullback-Leibler divergence and ``x_j = α·max(0, log t - log(K·n_j))``,
    * ``B^l``, ``B^h`` and the depth ``min(B^l ∩ B^h ∪ {K})`` exactly as USS-UCB, with ``U_ij`` in
      place of ``p̂_ij + Ψ_ij``.

    Two changes to USS-UCB, both from the bandit literature: the KL bound (Garivier & Cappé, COLT
    2011) is never wider than Hoeffding's, and much narrower for disagreement rates far from 1/2
    (``n·kl(p, p + ε) ≈ n·ε² / (2p(1-p))`` against ``2n·ε²``); the level ``log₊(t / (K·n))`` (as in
    KL-UCB++ and MOSS) stops exploring a pair that was observed in a ``1/K`` share of the rounds
    until its count falls behind again. ``t`` is the effective horizon ``τ_t`` with a discount.

    **Guarantee** (weak dominance, ``α = 1``; see "Beyond the paper" in ``docs/evidence/results.md``): the
    regret is ``O(log T)``. Selecting ``j > i*`` needs ``C_j - C_i* <= U_i*j``; as ``x_j <= log T``
    and Pinsker's inequality gives ``U <= p̂ + sqrt(x / 2n)``, Proposition 2's bound for ``j > i*``
    holds with ``α = 1/2``. Selecting ``j < i*`` needs ``U_ji* < C_i* - C_j = p_ji* - ξ_j``, which
    by Chernoff's bound and ``kl(a, p) >= kl(a, g) + kl(g, p)`` (``a <= g <= p``) has probability
    at most ``Σ_s (K·s / t) e^{-2ξ_j² s} <= K / (4 ξ_j⁴ t)``, so ``E[N_j(T)] <= K (1 + log T) / (4ξ_j⁴)``:
    logarithmic where USS-UCB's is finite, the price of exploring less.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``.
    alpha
        Scale ``α > 0`` of the exploration level; the guarantee above is for ``α = 1`` (larger:
        the same with a larger constant; smaller: ``O(T^{1-α})``).
    discount
        ``None`` or ``0 < γ < 1``: discounted counts, and ``τ_t`` in place of ``t``
        (:mod:`uss_stream.core.forgetting`).

    Examples
    --------
    The stream of :class:`~uss_stream.policies.USSUCB`'s example (USS-UCB: ``[1922, 0, 78]``):

    >>> import numpy as np
    >>> from uss_stream.policies import USSKLUCB
    >>> rng = np.random.default_rng(42)
    >>> truth = rng.integers(0, 2, size=2000)
    >>> outputs = np.stack([truth ^ (rng.random(2000) < 0.1), truth, truth], axis=1)
    >>> policy = USSKLUCB(stage_costs=[0.0, 0.3, 0.2])
    >>> np.bincount(policy.run(outputs), minlength=4)[1:].tolist()
    [1971, 13, 16]

    """

    def __init__(
        self, stage_costs: Sequence[float], alpha: float = 1.0, discount: float | None = None
    ) -> None:
        super().__init__(stage_costs, discount=discount)
        self.alpha = check_positive(alpha, "alpha")
        self._horizon = EffectiveHorizon(self.discount)
        costs = self._costs
        k = self.n_stages
        self._pairs = [(i, j) for j in range(k) for i in range(j)]
        gaps = [costs[j] - costs[i] for i, j in self._pairs]
        inside = [0.0 < g < 1.0 for g in gaps]
        self._gap = gaps
        self._log_gap = [portable_log(g) if ok else 0.0 for g, ok in zip(gaps, inside)]
        self._log_rest = [portable_log(1.0 - g) if ok else 0.0 for g, ok in zip(gaps, inside)]
        self._gap_arrays = tuple(np.array(v) for v in (self._gap, self._log_gap, self._log_rest))
        self._columns = (
            np.array([i for i, _ in self._pairs], dtype=np.int64),
            np.array([j for _, j in self._pairs], dtype=np.int64),
        )
        self._log_counts: list[tuple[float, float]] = [(0.0, 0.0)] * k
        self._divergences: list[tuple[float, float, float]] = [(-1.0, -1.0, 0.0)] * len(self._pairs)

    def _log_count(self, j: int, n: float) -> float:
        """``log(K·n_j)``, recomputed only when ``n_j`` changed (deep stages rarely do)."""
        cached = self._log_counts[j]
        if cached[0] != n:
            cached = self._log_counts[j] = (n, portable_log(self.n_stages * n))
        return cached[1]

    def _decide(self, t: int) -> int:
        return select_depth_by(self.n_stages, self._beats(t))

    def _beats(self, t: int) -> Callable[[int, int], bool]:
        """The test ``beats(i, j)`` of round ``t``: ``δ_ij > C_j - C_i`` holds even at the KL upper bound.

        The levels and divergences it needs are computed once per stage and pair, when first asked.
        """
        queried = self._stats.queried
        disagreements = self._stats.disagreements
        gap = self._gap
        alpha = self.alpha
        log_horizon = None
        levels: dict[int, float] = {}

        def beats(i: int, j: int) -> bool:
            nonlocal log_horizon
            n = queried[j]
            if not n > 0:
                return False
            x = levels.get(j)
            if x is None:
                if log_horizon is None:
                    log_horizon = portable_log(self._horizon(t))
                x = levels[j] = alpha * max(log_horizon - self._log_count(j, n), 0.0)
            pair = j * (j - 1) // 2 + i
            d = disagreements[i][j]
            return kl_beats(d, n, gap[pair], x, lambda: self._divergence(pair, d, n))

        return beats

    def _divergence(self, pair: int, d: float, n: float) -> float:
        """``n·kl(d/n, g)`` of a pair, recomputed only when its counts changed."""
        cached = self._divergences[pair]
        if cached[0] != d or cached[1] != n:
            value = kl_count(d, n, self._log_gap[pair], self._log_rest[pair])
            cached = self._divergences[pair] = (d, n, value)
        return cached[2]

    def _decide_many(self, states: CountStates) -> np.ndarray:
        rounds, queried, disagreements = states.rounds, states.queried, states.disagreements
        log_horizon = portable_log_many(self._horizon.many(np.asarray(rounds)))
        upper_i, upper_j = self._columns
        n = np.asarray(queried, dtype=np.float64)
        log_count = portable_log_many(self.n_stages * np.where(n > 0.0, n, 1.0))
        levels = self.alpha * np.maximum(log_horizon[:, None] - log_count, 0.0)
        d = np.asarray(disagreements, dtype=np.float64)[:, upper_i, upper_j]
        gap, log_gap, log_rest = self._gap_arrays
        beats = kl_beats_many(d, n[:, upper_j], gap, log_gap, log_rest, levels[:, upper_j])
        return select_depth_many_by(beats, self.n_stages)

    def _certify_many(self, states: CountStates, depths: np.ndarray, widths: np.ndarray) -> np.ndarray:
        """The set test on the sure and possible outcomes of ``beats(i, j)`` over each window
        (:func:`~uss_stream.rules.certificates.kl_beats_ranges`)."""
        window = window_ranges(states.rounds, states.queried, states.disagreements, depths, widths)
        sure, possible = kl_beats_ranges(window, self.n_stages, alpha=self.alpha, gaps=self._gap_arrays)
        return certain_depth_many(sure, possible, self.n_stages) == depths[:, None]

    def _compiled_rule(self) -> tuple[str, tuple[float, bool, bool]] | None:
        return ("kl", (float(self.alpha), False, False))

    def upper_bounds(self) -> np.ndarray:
        """The ``K x K`` matrix of ``U_ij`` (``i < j``; by bisection) the next :meth:`select` compares."""
        log_horizon = portable_log(self._horizon(self._stats.decisions + 1))
        queried = self._stats.queried
        disagreements = self._stats.disagreements
        bounds = np.zeros((self.n_stages, self.n_stages))
        for i, j in self._pairs:
            n = queried[j]
            x = self.alpha * max(log_horizon - self._log_count(j, n), 0.0) if n > 0 else 0.0
            bounds[i, j] = kl_upper_bound(disagreements[i][j], n, x)
        return bounds

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {"stage_costs": [0.0, 0.5], "alpha": 1.5, "discount": 0.99}
