"""USS-UCB (Verma, Hanawal, Szepesvári, Saligrama, AISTATS 2019): the paper's algorithm."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from uss_stream.core.validation import check_positive
from uss_stream.policies.base import CountStates, Policy
from uss_stream.rules.certificates import certain_depth_many, hoeffding_ranges, window_ranges
from uss_stream.rules.confidence import LogExploration, disagreement_bound, upper_bounds_many
from uss_stream.rules.selection_rule import cost_gaps, pair_gaps, select_depth_many

__all__ = ["USSUCB"]


class USSUCB(Policy):
    """Unsupervised sensor selection with upper confidence bounds on disagreement rates.

    Round 1 queries all ``K`` stages. At round ``t >= 2``, with ``n_j`` the rounds in which stage
    ``j`` was queried and ``D_ij`` those in which stages ``i < j`` disagreed,

    * ``p̂_ij = D_ij / n_j`` and ``Ψ_ij = sqrt(α·log f(t) / n_j)``,
    * ``B^l = {i : C_i - C_j <= p̂_ji + Ψ_ji for all j < i} ∪ {1}``,
    * ``B^h = {i : C_j - C_i > p̂_ij + Ψ_ij for all j > i} ∪ {K}``,

    and the depth is ``min(B^l ∩ B^h ∪ {K})``. Labels are never used. The depth sequence is a
    deterministic function of the stream of outputs.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0`` (cheapest stage first); ``C_j = c_1 + ... + c_j``.
    alpha
        Exploration parameter ``α > 0``; the regret guarantee needs ``α > 0.5``.
    f
        Exploration function of the round, ``f(t) >= 1``; ``None`` means ``f(t) = t``.
        Not part of the saved state: pass the same ``f`` when restoring.
    discount
        ``None`` (the paper's counts) or ``0 < γ < 1``: discounted counts and ``log f(τ_t)`` with
        the effective horizon ``τ_t`` (discounted UCB; :mod:`uss_stream.core.forgetting`).

    Examples
    --------
    A stream where stage 1 agrees with the others 90% of the time and extra stages cost more than
    that buys: the policy settles on depth 1.

    >>> import numpy as np
    >>> from uss_stream.policies import USSUCB
    >>> rng = np.random.default_rng(42)
    >>> truth = rng.integers(0, 2, size=2000)
    >>> outputs = np.stack([truth ^ (rng.random(2000) < 0.1), truth, truth], axis=1)
    >>> policy = USSUCB(stage_costs=[0.0, 0.3, 0.2], alpha=0.51)
    >>> depths = policy.run(outputs)
    >>> np.bincount(depths, minlength=4)[1:].tolist()
    [1922, 0, 78]

    """

    def __init__(
        self,
        stage_costs: Sequence[float],
        alpha: float = 0.51,
        f: Callable[[int], float] | None = None,
        discount: float | None = None,
    ) -> None:
        super().__init__(stage_costs, discount=discount)
        alpha = check_positive(alpha, "alpha")
        if f is not None and not callable(f):
            raise ValueError(f"f must be a callable t -> f(t) or None, got {f!r}")
        self.alpha = alpha
        self.f = f
        self._log_f = LogExploration(f, self.discount)
        self._log_t = f is None and self.discount is None  # log f(t) = log t, taken inline by _decide
        self._gaps = cost_gaps(self._costs)
        self._pair_gaps = pair_gaps(self._costs)

    def _bound(self, t: int) -> Callable[[int, int], float]:
        """``U(i, j) = p̂_ij + Ψ_ij`` at round ``t``."""
        stats = self._stats
        return disagreement_bound(stats.queried, stats.disagreements, self.alpha * self._log_f(t))

    def _decide(self, t: int) -> int:
        stats = self._stats
        log_f = math.log(t) if self._log_t else self._log_f(t)  # math.log(float(t)) is the same float
        return _select_depth(self._costs, stats.queried, stats.disagreements, self.alpha * log_f)

    def _decide_many(self, states: CountStates) -> np.ndarray:
        rounds, queried, disagreements = states.rounds, states.queried, states.disagreements
        scale = self.alpha * self._log_f.many(rounds)
        upper = upper_bounds_many(queried, disagreements, scale)
        return select_depth_many(self._gaps, upper)

    def _certify_many(self, states: CountStates, depths: np.ndarray, widths: np.ndarray) -> np.ndarray:
        """The set test on the ranges of ``U_ij`` over each window
        (:func:`~uss_stream.rules.certificates.hoeffding_ranges`); ``log t`` only (no ``f``)."""
        if self.f is not None:  # log f(t) of a user's f: no range known
            return np.zeros(widths.shape, dtype=bool)
        window = window_ranges(states.rounds, states.queried, states.disagreements, depths, widths)
        low, high = hoeffding_ranges(window, alpha=self.alpha)
        gaps = self._pair_gaps
        return certain_depth_many(gaps > high, gaps > low, self.n_stages) == depths[:, None]

    def _compiled_rule(self) -> tuple[str, tuple[float, bool, bool]] | None:
        return None if self.f is not None else ("hoeffding", (float(self.alpha), True, True))

    def upper_bounds(self) -> np.ndarray:
        """The ``K x K`` matrix of ``p̂_ij + Ψ_ij`` the next :meth:`select` will use."""
        bound = self._bound(self._stats.decisions + 1)
        k = self.n_stages
        return np.array([[bound(i, j) if i < j else 0.0 for j in range(k)] for i in range(k)])

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {"stage_costs": [0.0, 0.5], "alpha": 1.5}
        yield {"stage_costs": [0.0, 0.1, 0.3], "discount": 0.99}


def _select_depth(
    costs: Sequence[float], queried: Sequence[float], disagreements: Sequence[Sequence[float]], scale: float
) -> int:
    """``select_depth(costs, disagreement_bound(queried, disagreements, scale))``, inlined.

    The same comparisons on the same IEEE values (``D_ij / n_j + sqrt(scale / n_j)``, with the
    square root taken once per stage), without a function call per bound: the streaming loop's
    decision at deep depths, where the set test reads up to ``K(K-1)`` bounds. A stage is tested
    for ``B^h`` before ``B^l``: the depth is the first stage in both sets whatever the order, and
    a stage below the converged depth usually leaves ``B^h`` at the next stage, so the ``B^l``
    test (``i`` bounds for stage ``i``) runs only for the stages that pass ``B^h``.

    Examples
    --------
    >>> from uss_stream.rules.confidence import disagreement_bound
    >>> from uss_stream.rules.selection_rule import select_depth
    >>> costs, queried, counts = [0.0, 0.01, 0.5], [50, 50, 50], [[0, 12, 14], [0, 0, 3], [0, 0, 0]]
    >>> _select_depth(costs, queried, counts, 2.0)
    2
    >>> select_depth(costs, disagreement_bound(queried, counts, 2.0))
    2
    """
    sqrt = math.sqrt
    n_stages = len(costs)
    for i in range(n_stages):
        cost_i = costs[i]
        row = disagreements[i]
        for j in range(i + 1, n_stages):  # B^h: i beats every deeper stage (U_ij = inf while n_j = 0)
            n = queried[j]
            if not n or costs[j] - cost_i <= row[j] / n + sqrt(scale / n):
                break
        else:
            n = queried[i]
            if not i or not n:  # B^l: no cheaper stage j beats i (bounds U_ji, all over n_i)
                return i + 1
            psi = sqrt(scale / n)
            for j in range(i):
                if cost_i - costs[j] > disagreements[j][i] / n + psi:
                    break
            else:
                return i + 1
    return n_stages
