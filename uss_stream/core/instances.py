"""Problem instances of unsupervised sensor selection: costs, error rates, disagreements.

An instance ``θ = (P, c)`` is summarised by what the paper's definitions need: cumulative costs
``C_j``, error rates ``γ_j = P(Y^j != Y)``, disagreement probabilities ``p_ij = P(Y^i != Y^j)``
and, for strong dominance, ``P(Y^i = Y, Y^j != Y)`` for ``i < j``. They can be exact
probabilities or frequencies measured on a labelled log (:meth:`Instance.from_log`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from uss_stream.core.validation import check_stage_costs

__all__ = ["TIE_TOLERANCE", "WD_VERDICTS", "Instance"]

#: Total costs within this distance of the minimum count as tied (floating-point slack).
TIE_TOLERANCE = 1e-12

#: The names of a weak-dominance verdict, the same everywhere (an instance, the WD monitor, the
#: summaries, the replay, the service's metrics and status): ``"holds"``, ``"violated"``, and
#: ``"undecided"`` while the labels seen do not settle it (an instance's exact verdict is never
#: undecided).
WD_VERDICTS = ("holds", "violated", "undecided")


class Instance:
    """A USS problem instance.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K``; give either these or ``cumulative_costs``.
    cumulative_costs
        ``C_1..C_K`` (non-decreasing), as the paper's tables list them.
    error_rates
        ``γ_1..γ_K`` (needed for the optimal depth, ``ξ``, ``ρ`` and the dominance checks).
    disagreement
        ``K x K`` symmetric ``p_ij`` (needed for ``ξ``, ``ρ``, WD and SD).
    sd_violation
        ``K x K`` with ``P(Y^i = Y, Y^j != Y)`` for ``i < j``; without it, SD is checked through
        the binary-label identity ``p_ij = γ_i - γ_j`` (Proposition 3 of the paper).
    name
        A label for tables and plots.

    Examples
    --------
    Case 2 of the paper's BSC table, with its exact probabilities:

    >>> from uss_stream.datasets.bsc import bsc_instance
    >>> instance = bsc_instance(2)
    >>> instance.optimal_depth, instance.satisfies_wd, instance.satisfies_sd
    (2, True, False)
    >>> round(instance.xi, 3)
    0.078

    """

    def __init__(
        self,
        stage_costs: Sequence[float] | None = None,
        *,
        cumulative_costs: Sequence[float] | None = None,
        error_rates: Sequence[float] | None = None,
        disagreement: Any = None,
        sd_violation: Any = None,
        name: str = "",
    ) -> None:
        if (stage_costs is None) == (cumulative_costs is None):
            raise ValueError("give exactly one of stage_costs and cumulative_costs")
        if stage_costs is not None:
            cumulative = np.array(check_stage_costs(stage_costs))
        else:
            cumulative = np.asarray(cumulative_costs, dtype=float)
            if cumulative.ndim != 1 or cumulative.size == 0 or not np.all(np.isfinite(cumulative)):
                raise ValueError("cumulative_costs must be a non-empty sequence of finite numbers")
            if cumulative[0] < 0 or np.any(np.diff(cumulative) < 0):
                raise ValueError(
                    f"cumulative_costs must be >= 0 and non-decreasing, got {cumulative.tolist()}"
                )
        self.cumulative_costs = cumulative
        n_stages = cumulative.size
        self.error_rates = (
            None if error_rates is None else _probabilities(error_rates, (n_stages,), "error_rates")
        )
        self.disagreement = (
            None
            if disagreement is None
            else _probabilities(disagreement, (n_stages, n_stages), "disagreement")
        )
        if self.disagreement is not None and not np.allclose(self.disagreement, self.disagreement.T):
            raise ValueError("disagreement must be symmetric (p_ij = p_ji)")
        self.sd_violation = (
            None
            if sd_violation is None
            else _probabilities(sd_violation, (n_stages, n_stages), "sd_violation")
        )
        self.name = name

    @classmethod
    def from_log(
        cls,
        outputs: Any,
        labels: Any = None,
        *,
        stage_costs: Sequence[float] | None = None,
        cumulative_costs: Sequence[float] | None = None,
        name: str = "",
    ) -> Instance:
        """Measure ``γ``, ``p`` and SD violations as frequencies over a log of all stages' outputs.

        ``labels`` may be omitted; then only disagreements are known.
        """
        table = np.asarray(outputs.to_numpy() if hasattr(outputs, "to_numpy") else outputs, dtype=object)
        if table.ndim != 2 or table.shape[0] == 0:
            raise ValueError("outputs must be a non-empty N x K table")
        n_stages = table.shape[1]
        disagree = np.zeros((n_stages, n_stages))
        for i in range(n_stages):
            for j in range(i + 1, n_stages):
                disagree[i, j] = disagree[j, i] = np.mean(table[:, i] != table[:, j])
        error_rates = sd_violation = None
        if labels is not None:
            truth = np.asarray(labels.to_numpy() if hasattr(labels, "to_numpy") else labels, dtype=object)
            if truth.shape != (table.shape[0],):
                raise ValueError(f"labels must hold {table.shape[0]} entries, got shape {truth.shape}")
            wrong = table != truth[:, None]
            error_rates = wrong.mean(axis=0)
            sd_violation = np.zeros((n_stages, n_stages))
            for i in range(n_stages):
                for j in range(i + 1, n_stages):
                    sd_violation[i, j] = np.mean(~wrong[:, i] & wrong[:, j])
        return cls(
            stage_costs,
            cumulative_costs=cumulative_costs,
            error_rates=error_rates,
            disagreement=disagree,
            sd_violation=sd_violation,
            name=name,
        )

    # -- derived quantities of the paper --------------------------------------------------------
    @property
    def n_stages(self) -> int:
        return int(self.cumulative_costs.size)

    @property
    def stage_costs(self) -> np.ndarray:
        """Per-stage costs ``c_j = C_j - C_{j-1}``."""
        return np.diff(self.cumulative_costs, prepend=0.0)

    @property
    def total_costs(self) -> np.ndarray:
        """``c(j, θ) = C_j + γ_j`` for each depth ``j``."""
        return self.cumulative_costs + self._require("error_rates")

    @property
    def optimal_depth(self) -> int:
        """``i*``: the largest minimiser of ``C_j + γ_j`` (1-based; the paper's risk-averse choice)."""
        total = self.total_costs
        return int(np.flatnonzero(total <= total.min() + TIE_TOLERANCE)[-1]) + 1

    @property
    def gaps(self) -> np.ndarray:
        """``Δ_j = c(j, θ) - c(i*, θ)``, the regret of one round at depth ``j``."""
        total = self.total_costs
        return total - total[self.optimal_depth - 1]

    @property
    def xi(self) -> float:
        """``ξ = min_{j > i*} (C_j - C_{i*} - p_{i*j})``; ``+inf`` when ``i* = K``. WD iff ``ξ > 0``."""
        p = self._require("disagreement")
        star = self.optimal_depth - 1
        costs = self.cumulative_costs
        margins = [costs[j] - costs[star] - p[star, j] for j in range(star + 1, self.n_stages)]
        return float(min(margins)) if margins else float("inf")

    @property
    def rho(self) -> float:
        """``ρ = min_{j > i*} (C_j - C_{i*}) / p_{i*j}``; ``+inf`` when ``i* = K`` (or ``p = 0``)."""
        p = self._require("disagreement")
        star = self.optimal_depth - 1
        costs = self.cumulative_costs
        ratios = [
            (costs[j] - costs[star]) / p[star, j] if p[star, j] > 0 else float("inf")
            for j in range(star + 1, self.n_stages)
        ]
        return float(min(ratios)) if ratios else float("inf")

    @property
    def satisfies_wd(self) -> bool:
        """Weak dominance: ``ρ > 1``, equivalently ``ξ > 0``."""
        return self.xi > 0

    @property
    def wd_verdict(self) -> str:
        """``"holds"`` if :attr:`satisfies_wd`, else ``"violated"`` (:data:`WD_VERDICTS`)."""
        return WD_VERDICTS[0] if self.satisfies_wd else WD_VERDICTS[1]

    @property
    def satisfies_sd(self) -> bool:
        """Strong dominance: a correct stage implies every deeper stage is correct (a.s.)."""
        if self.sd_violation is not None:
            return bool(np.all(np.triu(self.sd_violation, k=1) <= TIE_TOLERANCE))
        gamma = self._require("error_rates")
        p = self._require("disagreement")
        excess = [
            p[i, j] - (gamma[i] - gamma[j]) for i in range(self.n_stages) for j in range(i + 1, self.n_stages)
        ]
        return bool(np.all(np.abs(excess) <= 1e-9))

    def swapped(self, a: int, b: int) -> Instance:
        """The same sensors with stages ``a`` and ``b`` (1-based) swapped, costs kept in place."""
        order = list(range(self.n_stages))
        order[a - 1], order[b - 1] = order[b - 1], order[a - 1]
        return Instance(
            cumulative_costs=self.cumulative_costs,
            error_rates=None if self.error_rates is None else self.error_rates[order],
            disagreement=None if self.disagreement is None else self.disagreement[np.ix_(order, order)],
            name=f"{self.name} (stages {a},{b} swapped)".strip(),
        )

    def summary(self) -> dict[str, Any]:
        """A row for tables: costs, error rates, optimal depth, ξ, ρ, WD, SD."""
        row: dict[str, Any] = {"name": self.name, "cumulative_costs": self.cumulative_costs.tolist()}
        if self.error_rates is not None:
            row.update(error_rates=self.error_rates.tolist(), optimal_depth=self.optimal_depth)
            if self.disagreement is not None:
                row.update(xi=self.xi, rho=self.rho, wd=self.satisfies_wd, sd=self.satisfies_sd)
        return row

    def _require(self, field: str) -> np.ndarray:
        value = getattr(self, field)
        if value is None:
            raise ValueError(f"this instance has no {field}; pass {field}= or use Instance.from_log")
        return value

    def __repr__(self) -> str:
        return f"Instance(name={self.name!r}, cumulative_costs={self.cumulative_costs.tolist()})"


def _probabilities(values: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    if not np.all((array >= 0) & (array <= 1)):
        raise ValueError(f"{name} must hold probabilities in [0, 1]")
    return array
