"""The best fixed depth for known error rates: the comparator of the regret."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from uss_stream.instances import Instance
from uss_stream.policies.base import Policy

__all__ = ["Oracle"]


class Oracle(Policy):
    """Always query the optimal depth ``i* = max argmin_j (C_j + γ_j)`` (needs the error rates).

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``.
    error_rates
        ``γ_1..γ_K``, the stages' error rates.

    Examples
    --------
    >>> from uss_stream.policies import Oracle
    >>> Oracle(stage_costs=[0.0, 0.15, 0.2], error_rates=[0.4, 0.1, 0.05]).select()
    2

    """

    def __init__(self, stage_costs: Sequence[float], error_rates: Sequence[float]) -> None:
        super().__init__(stage_costs)
        self.error_rates = error_rates
        self._depth = Instance(stage_costs, error_rates=error_rates).optimal_depth

    def _decide(self, t: int) -> int:
        return self._depth

    def decide_many(
        self,
        rounds: np.ndarray,
        queried: np.ndarray,
        disagreements: np.ndarray,
        errors: np.ndarray | None = None,
    ) -> np.ndarray:
        return np.full(len(rounds), self._depth, dtype=np.int64)
