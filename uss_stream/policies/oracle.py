"""The best fixed depth for known error rates: the comparator of the regret."""

from __future__ import annotations

from collections.abc import Sequence

from uss_stream.core.instances import Instance
from uss_stream.policies.fixed_depth import FixedDepth

__all__ = ["Oracle"]


class Oracle(FixedDepth):
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
        super().__init__(Instance(stage_costs, error_rates=error_rates).optimal_depth, stage_costs)
        self.error_rates = error_rates

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.2], "error_rates": [0.3, 0.1]}
