"""What a replay measured: :class:`ReplayResult` (of :func:`~uss_stream.replay.engine.replay`) and
:class:`PiecewiseReplayResult` (of :func:`~uss_stream.replay.engine.replay_piecewise`).

The depth sequences of every policy and repetition, and what follows from them: cumulative
pseudo-regret with 95% confidence intervals, a summary table, a regret plot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uss_stream.core.extras import require
from uss_stream.core.instances import Instance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PLOT_POINTS", "Z_95", "PiecewiseReplayResult", "ReplayResult"]

#: At most this many rounds (plus the last) are drawn by :meth:`ReplayResult.plot`.
PLOT_POINTS = 2000

#: Normal quantile of the two-sided 95% confidence intervals (mean ± Z_95·sd/√reps).
Z_95 = 1.959963984540054


class ReplayResult:
    """What :func:`replay` measured: depth sequences, regret, and the log's instance.

    Attributes
    ----------
    names
        Policy names, in the order given.
    depths
        ``name -> (reps, horizon)`` small-integer array of the depths (``1..K``) chosen in each round.
    rows
        ``(reps, horizon)`` indices of the log rows fed to the policies (shared by all policies).
    instance
        The log as an :class:`~uss_stream.core.instances.Instance`: cumulative costs, the error rates
        used for the regret (``None`` if unknown) and the disagreement probabilities of the log.
    horizon, reps, seed, sampling
        The replay parameters.
    labels_used
        ``name -> (reps,)`` labels each repetition consumed: the requests of a label-asking policy
        (:class:`~uss_stream.policies.AuditedUSS`; a request counts when made, also if its label
        would arrive after the horizon), one per round for
        :class:`~uss_stream.policies.SupervisedUCB`, 0 for label-free policies.
    label_delay, label_cost
        Rounds between a request and its label; the cost ``λ`` added to the regret per label.
    wd_reports
        ``name -> [WDReport per repetition]`` (:mod:`uss_stream.labels.wd_monitor`) at the horizon, for
        the label-asking policies.

    """

    def __init__(
        self,
        *,
        depths: dict[str, np.ndarray],
        rows: np.ndarray,
        instance: Instance,
        wrong: np.ndarray | None,
        horizon: int,
        reps: int,
        seed: int | None,
        sampling: str,
        labels_used: dict[str, np.ndarray] | None = None,
        label_curves: dict[str, np.ndarray] | None = None,
        label_delay: int = 0,
        label_cost: float = 0.0,
        wd_reports: dict[str, list[Any]] | None = None,
    ) -> None:
        self.names = list(depths)
        self.depths = depths
        self.rows = rows
        self.instance = instance
        self._wrong = wrong
        self.horizon = horizon
        self.reps = reps
        self.seed = seed
        self.sampling = sampling
        self.labels_used = labels_used or {name: np.zeros(reps, dtype=np.int64) for name in depths}
        self._label_curves = label_curves or {}
        self.label_delay = label_delay
        self.label_cost = label_cost
        self.wd_reports = wd_reports or {}
        self._regret: dict[str, np.ndarray] | None = None

    @property
    def has_regret(self) -> bool:
        """Whether error rates were known (from labels or given), so that regret is defined."""
        return self.instance.error_rates is not None

    @property
    def cumulative_regret(self) -> dict[str, np.ndarray]:
        """``name -> (reps, horizon)`` cumulative pseudo-regret ``Σ_{s<=t} Δ_{I_s}``, plus
        ``λ`` times the labels requested up to ``t`` when ``label_cost=λ``."""
        if not self.has_regret:
            raise ValueError("regret needs error rates: pass labels= or error_rates= to replay()")
        if self._regret is None:
            gaps = self.instance.gaps
            self._regret = {name: np.cumsum(gaps[d - 1], axis=1) for name, d in self.depths.items()}
            if self.label_cost:
                for name, curve in self._label_curves.items():
                    self._regret[name] = self._regret[name] + self.label_cost * curve
        return self._regret

    def cumulative_labels(self, name: str) -> np.ndarray:
        """``(reps, horizon)`` labels used up to each round (zeros for a label-free policy)."""
        curve = self._label_curves.get(name)
        if curve is None:
            return np.zeros((self.reps, self.horizon), dtype=np.int64)
        return np.asarray(curve)

    def final_regret(self, name: str) -> tuple[float, float]:
        """Mean over repetitions of the regret at the horizon, and the half-width of its 95% CI.

        The half-width is ``Z_95 · s / √reps`` with ``s`` the sample standard deviation
        (``ddof=1``); it is NaN for a single repetition.
        """
        final = self.cumulative_regret[name][:, -1]
        return float(final.mean()), _ci_half_width(final)

    def summary(self) -> pd.DataFrame:
        """One row per policy.

        Columns: ``policy``; ``regret_mean``, ``regret_ci_low``, ``regret_ci_high`` (the final
        cumulative regret and its 95% CI, NaN without error rates); ``depth_1..depth_K`` (the
        fraction of rounds at each depth); ``mean_cost`` (mean ``C_{I_t}``); ``cost_total`` and
        ``full_cascade_cost_total`` (per repetition, the sum of ``C_{I_t}`` over the horizon and
        ``horizon · C_K``: the quantities of the service's ``uss_kafka_cost_total`` and
        ``uss_kafka_full_cascade_cost_total``, ``docs/metrics.md``); ``error_rate`` (fraction of
        rounds whose chosen stage was wrong, NaN without labels); ``labels_mean`` (labels used per
        repetition); ``wd_verdict`` and ``wd_best_depth`` (the most common WD monitor verdict,
        ``holds``, ``violated`` or ``undecided``, and best depth over the repetitions, for the
        label-asking policies); ``cost_saved`` (``1 - mean_cost / C_K``: the share of always querying
        the deepest stage's cost saved, NaN if ``C_K = 0``); ``accuracy`` (``1 - error_rate``; without
        labels, the expected ``1 - Σ_d f_d·γ_d`` from the depth fractions ``f_d`` and the given error
        rates; NaN without either); ``accuracy_vs_deepest`` and ``accuracy_vs_best_fixed`` (accuracy
        minus that of always answering from the deepest stage, or from the best fixed depth
        ``i*`` of :attr:`instance`, on the same rounds; negative: less accurate);
        ``best_fixed_depth`` and ``instance_wd_verdict``, the same in every row: ``i*`` and whether
        weak dominance holds on the log (:attr:`~uss_stream.core.instances.Instance.optimal_depth`,
        :attr:`~uss_stream.core.instances.Instance.wd_verdict` of :attr:`instance`; empty without
        error rates).
        """
        costs = self.instance.cumulative_costs
        n_stages = costs.size
        deepest, best_fixed = self._fixed_accuracy(n_stages), self._fixed_accuracy(None)
        known = self.has_regret and self.instance.disagreement is not None
        instance = {
            "best_fixed_depth": self.instance.optimal_depth if known else "",
            "instance_wd_verdict": self.instance.wd_verdict if known else "",
        }
        records = []
        for name, depths in self.depths.items():
            row: dict[str, Any] = {"policy": name}
            if self.has_regret:
                mean, half = self.final_regret(name)
                row.update(regret_mean=mean, regret_ci_low=mean - half, regret_ci_high=mean + half)
            else:
                row.update(regret_mean=math.nan, regret_ci_low=math.nan, regret_ci_high=math.nan)
            counts = np.bincount(depths.ravel(), minlength=n_stages + 1)[1:]
            for j, count in enumerate(counts, start=1):
                row[f"depth_{j}"] = count / depths.size
            row["mean_cost"] = float(counts @ costs / depths.size)
            row["cost_total"] = float(counts @ costs / self.reps)
            row["full_cascade_cost_total"] = float(self.horizon * costs[-1])
            if self._wrong is None:
                row["error_rate"] = math.nan
            else:
                row["error_rate"] = float(self._wrong[self.rows, depths - 1].mean())
            row["labels_mean"] = float(self.labels_used[name].mean())
            reports = self.wd_reports.get(name)
            row["wd_verdict"] = _most_common([r.verdict for r in reports]) if reports else ""
            row["wd_best_depth"] = _most_common([r.best_depth for r in reports]) if reports else ""
            row["cost_saved"] = 1.0 - row["mean_cost"] / costs[-1] if costs[-1] > 0 else math.nan
            if self._wrong is None and self.instance.error_rates is not None:
                row["accuracy"] = float(1.0 - counts @ self.instance.error_rates / depths.size)
            else:
                row["accuracy"] = 1.0 - row["error_rate"]
            row["accuracy_vs_deepest"] = row["accuracy"] - deepest
            row["accuracy_vs_best_fixed"] = row["accuracy"] - best_fixed
            row.update(instance)
            records.append(row)
        return pd.DataFrame.from_records(records)

    def _fixed_accuracy(self, depth: int | None) -> float:
        """The accuracy of always answering from ``depth`` (``None``: the best fixed depth) on the
        replayed rounds (the expected one without labels; NaN without error rates)."""
        if not self.has_regret:
            return math.nan
        if depth is None:
            depth = self.instance.optimal_depth
        if self._wrong is None:
            return float(1.0 - self.instance.error_rates[depth - 1])
        return float(1.0 - self._wrong[self.rows, depth - 1].mean())

    def plot(self, ax: Any = None, *, names: Sequence[str] | None = None, title: str | None = None) -> Figure:
        """Mean cumulative regret against ``t`` with 95% confidence bands.

        Draws on ``ax`` if given (and returns its figure), else on a new
        :class:`matplotlib.figure.Figure` (no pyplot, hence no GUI backend needed). Long horizons
        are drawn at :data:`PLOT_POINTS` evenly spaced rounds (and the last), far more than a
        figure has pixels, so that the plot needs little memory whatever the horizon.
        """
        regret = self.cumulative_regret
        if ax is None:
            # imported on use: the CLI and services start faster, and a River install has no matplotlib
            figure_class = require("matplotlib.figure", purpose="regret plots").Figure
            figure = figure_class(figsize=(6.0, 4.0), layout="constrained")
            ax = figure.subplots()
        else:
            figure = ax.figure
        step = -(-self.horizon // PLOT_POINTS)
        columns = np.unique(np.append(np.arange(step - 1, self.horizon, step), self.horizon - 1))
        t = columns + 1
        for name in self.names if names is None else names:
            values = regret[name][:, columns]
            mean = values.mean(axis=0)
            (line,) = ax.plot(t, mean, label=name)
            if self.reps > 1:
                half = Z_95 * values.std(axis=0, ddof=1) / math.sqrt(self.reps)
                ax.fill_between(t, mean - half, mean + half, color=line.get_color(), alpha=0.2, lw=0)
        ax.set_xlabel("round t")
        ax.set_ylabel("cumulative pseudo-regret")
        if title is not None:
            ax.set_title(title)
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
        return figure


class PiecewiseReplayResult(ReplayResult):
    """What :func:`replay_piecewise` measured; a :class:`ReplayResult` whose regret is per segment.

    Attributes
    ----------
    instances
        One :class:`~uss_stream.core.instances.Instance` per segment (same costs, the segment's error
        rates and disagreements); :attr:`instance` is the first.
    boundaries
        ``[0, h_1, h_1 + h_2, ..., horizon]``: segment ``k`` is rounds ``boundaries[k] + 1 ..
        boundaries[k + 1]``.
    rows
        Indices into the segments' logs stacked in order (segment ``k``'s rows are offset by the
        row counts of the logs before it).

    """

    def __init__(self, *, instances: list[Instance], boundaries: list[int], **kwargs: Any) -> None:
        super().__init__(instance=instances[0], **kwargs)
        self.instances = instances
        self.boundaries = boundaries

    @property
    def has_regret(self) -> bool:
        return all(instance.error_rates is not None for instance in self.instances)

    @property
    def cumulative_regret(self) -> dict[str, np.ndarray]:
        """``name -> (reps, horizon)`` cumulative regret, each round against its segment's optimum."""
        if not self.has_regret:
            raise ValueError("regret needs error rates: pass labels for every segment")
        if self._regret is None:
            gaps = np.concatenate(
                [
                    np.broadcast_to(instance.gaps, (end - start, instance.n_stages))
                    for instance, start, end in zip(self.instances, self.boundaries, self.boundaries[1:])
                ]
            )
            rounds = np.arange(self.horizon)
            self._regret = {
                name: np.cumsum(gaps[rounds, d.astype(np.int64) - 1], axis=1)
                for name, d in self.depths.items()
            }
        return self._regret

    def segment_regret(self, name: str, segment: int) -> tuple[float, float]:
        """Mean over repetitions of the regret accumulated in segment ``segment``, and its 95% half-width."""
        if isinstance(segment, bool) or not isinstance(segment, (int, np.integer)):
            raise ValueError(f"segment must be an integer, got {segment!r}")
        if not 0 <= segment < len(self.instances):
            raise ValueError(f"segment must be in 0..{len(self.instances) - 1}, got {segment}")
        regret = self.cumulative_regret[name]
        start, end = self.boundaries[segment], self.boundaries[segment + 1]
        before = regret[:, start - 1] if start else 0.0
        values = regret[:, end - 1] - before
        return float(values.mean()), _ci_half_width(values)


def _most_common(values: list[Any]) -> str:
    """``"value (count/total)"`` of the most frequent value (the first one on ties)."""
    counts: dict[Any, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    best = max(counts, key=counts.get)
    return f"{best} ({counts[best]}/{len(values)})"


def _ci_half_width(values: np.ndarray) -> float:
    if values.size < 2:
        return math.nan
    return float(Z_95 * values.std(ddof=1) / math.sqrt(values.size))
