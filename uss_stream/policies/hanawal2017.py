"""Algorithm 2 of Hanawal, Szepesvári, Saligrama (AISTATS 2017): the heuristic USS-UCB improves on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from uss_stream.policies.base import CountStates, Policy
from uss_stream.rules.certificates import certain_depth_many, hoeffding_ranges, window_ranges
from uss_stream.rules.confidence import LogExploration, disagreement_bound, upper_bounds_many
from uss_stream.rules.selection_rule import cost_gaps, pair_gaps, select_depth, select_depth_many

__all__ = ["Hanawal2017WD"]

#: The exploration constant of Algorithm 2, ``U_ij = p̂_ij + sqrt(1.5 log t / n_j)``.
EXPLORATION = 1.5


class Hanawal2017WD(Policy):
    """Hanawal et al.'s Algorithm 2 for weak dominance.

    Round 1 queries all ``K`` stages; at round ``t >= 2``, ``U_ij = p̂_ij + sqrt(1.5·log t / n_j)``
    for ``i < j``, ``S_t = {i in 1..K-1 : C_j - C_i >= U_ij for all j > i}`` and the depth is
    ``min(S_t ∪ {K})``. Unlike USS-UCB it has no ``B^l`` test and compares with ``>=``.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``.
    discount
        ``None`` (plain counts) or ``0 < γ < 1``: discounted counts and ``log τ_t`` in place of
        ``log t`` (:mod:`uss_stream.core.forgetting`).

    Examples
    --------
    >>> import numpy as np
    >>> from uss_stream.policies import Hanawal2017WD
    >>> rng = np.random.default_rng(42)
    >>> truth = rng.integers(0, 2, size=2000)
    >>> outputs = np.stack([truth ^ (rng.random(2000) < 0.1), truth, truth], axis=1)
    >>> depths = Hanawal2017WD(stage_costs=[0.0, 0.3, 0.2]).run(outputs)
    >>> np.bincount(depths, minlength=4)[1:].tolist()  # explores more than USS-UCB's [1922, 0, 78]
    [1727, 0, 273]

    """

    def __init__(self, stage_costs: Sequence[float], discount: float | None = None) -> None:
        super().__init__(stage_costs, discount=discount)
        self._log_f = LogExploration(discount=self.discount)
        self._gaps = cost_gaps(self._costs)
        self._pair_gaps = pair_gaps(self._costs)

    def _decide(self, t: int) -> int:
        stats = self._stats
        bound = disagreement_bound(stats.queried, stats.disagreements, EXPLORATION * self._log_f(t))
        return select_depth(self._costs, bound, strict=False, check_lower=False)

    def _decide_many(self, states: CountStates) -> np.ndarray:
        rounds, queried, disagreements = states.rounds, states.queried, states.disagreements
        scale = EXPLORATION * self._log_f.many(rounds)
        upper = upper_bounds_many(queried, disagreements, scale)
        return select_depth_many(self._gaps, upper, strict=False, check_lower=False)

    def _certify_many(self, states: CountStates, depths: np.ndarray, widths: np.ndarray) -> np.ndarray:
        """The test on the ranges of ``U_ij`` over each window
        (:func:`~uss_stream.rules.certificates.hoeffding_ranges`), with ``>=`` and no ``B^l``."""
        window = window_ranges(states.rounds, states.queried, states.disagreements, depths, widths)
        low, high = hoeffding_ranges(window, alpha=EXPLORATION)
        gaps = self._pair_gaps
        certain = certain_depth_many(gaps >= high, gaps >= low, self.n_stages, check_lower=False)
        return certain == depths[:, None]

    def _compiled_rule(self) -> tuple[str, tuple[float, bool, bool]] | None:
        return ("hoeffding", (EXPLORATION, False, False))

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {"stage_costs": [0.0, 0.1, 0.3], "discount": 0.99}
