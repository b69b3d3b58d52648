"""The weak-dominance monitor: what the labels seen so far say about the best depth and about WD.

Every label-free policy is consistent only under weak dominance (WD: ``C_j - C_i* > p_i*j`` for
every ``j > i*``), and WD cannot be checked without labels. From the labels a policy (or a
cascade) has seen, counted per pair on disagreement rounds
(:class:`~uss_stream.labels.evidence.LabelEvidence`), and the label-free disagreement
counts, :func:`wd_report` gives

* the estimated best depth ``î`` (the set test on point estimates ``δ̂_ij = p̂_ij·ê_ij``; ``p̂_ij``
  where a pair has no labels) and whether it is *certain*: every other depth is shown worse than
  some depth by a confidence bound (``δ^L_ij > C_j - C_i``: ``j`` is worth its cost over ``i``;
  ``δ^U_ij < C_j - C_i``, or the disagreement bound ``p^U_ij < C_j - C_i``: ``i`` beats ``j``) and
  ``î`` is not;
* whether the label-free choice agrees with ``î``;
* the verdict: ``"holds"`` when ``î`` is certain and ``p^U_îj < C_j - C_î`` for every deeper ``j``;
  ``"violated"`` when some deeper ``j`` has ``p^L_îj >= C_j - C_î`` (the disagreement rate says
  ``j`` is worth its cost over ``î``) and either ``î`` is certain or the labels show the opposite
  for that very pair (``δ^U_îj < C_j - C_î``): the failure WD rules out, at the estimated best
  depth; else ``"undecided"``. The names are :data:`~uss_stream.core.instances.WD_VERDICTS`, as
  everywhere. Confidence bounds are AuditedUSS's (:mod:`~uss_stream.labels.evidence`).

:class:`WDMonitor` wraps it and logs a warning once, the first time WD is judged violated.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from uss_stream.core.instances import WD_VERDICTS
from uss_stream.labels.evidence import (
    LabelEvidence,
    delta_bounds,
    e_bounds,
    label_level,
    pair_level,
)
from uss_stream.rules.selection_rule import select_depth_by

__all__ = ["VERDICTS", "WDMonitor", "WDReport", "wd_report"]

logger = logging.getLogger(__name__)

#: The verdicts (the one vocabulary, :data:`~uss_stream.core.instances.WD_VERDICTS`).
VERDICTS = WD_VERDICTS


@dataclass(frozen=True)
class WDReport:
    """What the labels say (see the module docstring).

    Attributes
    ----------
    labels
        Labels the evidence holds.
    best_depth
        The estimated best depth ``î`` (1-based).
    best_depth_certain
        Whether every other depth is shown worse by a confidence bound and ``î`` is not.
    label_free_depth
        The depth the label-free rule chooses (``None`` if not given).
    agrees
        ``label_free_depth == best_depth`` (``None`` if not given).
    verdict
        ``"holds"``, ``"violated"`` or ``"undecided"``.
    """

    labels: int
    best_depth: int
    best_depth_certain: bool
    label_free_depth: int | None
    agrees: bool | None
    verdict: str

    @property
    def advice(self) -> str | None:
        """What to do when the label-free choice contradicts a *certain* best depth; else ``None``.

        "Certain" is :attr:`best_depth_certain`: by the confidence bounds at the round's level
        (:mod:`~uss_stream.labels.evidence`), every other depth is worse than some depth and the best
        one is not. Then a label-free choice elsewhere is a cost the labels have measured: with WD
        violated it persists (every label-free policy keeps it), otherwise the policy may still be
        exploring.

        >>> print(WDReport(200, 2, True, 3, False, "violated").advice)
        the labels show depth 2 is best with confidence, the label-free choice is depth 3 and weak
        dominance is violated: it will stay there; use AuditedUSS (it checks the label-free choice
        with a few labels) or FixedDepth(2)
        >>> WDReport(200, 2, False, 3, False, "undecided").advice is None   # not certain
        True
        """
        if not self.best_depth_certain or self.agrees is not False:
            return None
        head = (
            f"the labels show depth {self.best_depth} is best with confidence, the label-free choice is "
            f"depth {self.label_free_depth}"
        )
        remedy = (
            "use AuditedUSS (it checks the label-free choice with a few labels) or "
            f"FixedDepth({self.best_depth})"
        )
        if self.verdict == "violated":
            return f"{head} and weak dominance is violated: it will stay there; {remedy}"
        return f"{head}: the policy may still be exploring; if this persists, {remedy}"

    def __str__(self) -> str:
        certainty = "certain" if self.best_depth_certain else "not yet certain"
        agreement = (
            ""
            if self.agrees is None
            else f"; the label-free choice (depth {self.label_free_depth}) "
            + ("agrees" if self.agrees else "disagrees")
        )
        return (
            f"WD {self.verdict} ({self.labels} labels): best depth {self.best_depth} ({certainty}){agreement}"
        )


def wd_report(
    cumulative_costs: Sequence[float],
    queried: Sequence[float],
    disagreements: Sequence[Sequence[float]],
    evidence: LabelEvidence,
    t: int,
    label_free_depth: int | None = None,
) -> WDReport:
    """The monitor's view of one state; see the module docstring.

    Parameters
    ----------
    cumulative_costs
        ``C_1..C_K``.
    queried, disagreements
        The label-free counts ``n_j`` and ``D_ij`` (``i < j``).
    evidence
        The label counts per pair.
    t
        The round (sets the confidence level).
    label_free_depth
        The label-free policy's choice, to compare with.

    Examples
    --------
    Stage 2 (``C = 0.11``) and stage 3 (``C = 0.22``) disagree on 15% of 5000 rounds; on 200
    labelled disagreements stage 3 was right 130 times and stage 2 seventy times, so
    ``δ̂_23 = 0.15·0.3 = 0.045`` is well below the extra cost 0.11 of stage 3, while
    ``p_23 = 0.15 >= 0.11``: WD fails at ``î = 2``. Stage 1 disagrees with stage 2 on 40% of the
    rounds, and the labels say stage 2 is right on every one of them.

    >>> from uss_stream.labels.evidence import LabelEvidence
    >>> evidence = LabelEvidence(3)
    >>> evidence.labelled, evidence.deeper_right = [60, 60, 200], [60, 60, 130]
    >>> evidence.shallower_right = [0, 0, 70]
    >>> report = wd_report([0.0, 0.11, 0.22], [5000, 5000, 5000],
    ...                    [[0, 2000, 2000], [0, 0, 750], [0, 0, 0]], evidence, t=5001, label_free_depth=3)
    >>> report.best_depth, report.best_depth_certain, report.agrees, report.verdict
    (2, True, False, 'violated')

    """
    costs = [float(c) for c in cumulative_costs]
    k = len(costs)
    if evidence.n_stages != k:
        raise ValueError(f"evidence has {evidence.n_stages} stages, the costs {k}")
    point, lower, upper, p_bounds = _pair_bounds(queried, disagreements, evidence, label_level(t))

    def gap(i: int, j: int) -> float:
        return costs[j] - costs[i]

    best = select_depth_by(k, lambda i, j: gap(i, j) > point[i, j]) - 1

    def worse(s: int, x: int) -> bool:
        """Whether stage ``s`` is shown worse than stage ``x``."""
        if s < x:
            return lower[s, x] > gap(s, x)
        return upper[x, s] < gap(x, s) or p_bounds[x, s][1] < gap(x, s)

    dominated = [any(worse(s, x) for x in range(k) if x != s) for s in range(k)]
    certain = not dominated[best] and all(dominated[s] for s in range(k) if s != best)
    verdict = "undecided"
    deeper = range(best + 1, k)
    if certain and all(p_bounds[best, j][1] < gap(best, j) for j in deeper):
        verdict = "holds"
    elif any(
        p_bounds[best, j][0] >= gap(best, j) and (certain or upper[best, j] < gap(best, j)) for j in deeper
    ):
        verdict = "violated"
    return WDReport(
        labels=evidence.labels,
        best_depth=best + 1,
        best_depth_certain=certain,
        label_free_depth=label_free_depth,
        agrees=None if label_free_depth is None else label_free_depth == best + 1,
        verdict=verdict,
    )


_Pairs = dict[tuple[int, int], float]


def _pair_bounds(
    queried: Sequence[float], disagreements: Sequence[Sequence[float]], evidence: LabelEvidence, level: float
) -> tuple[_Pairs, _Pairs, _Pairs, dict[tuple[int, int], tuple[float, float]]]:
    """Per pair ``(i, j)``: the point estimate ``δ̂``, the bounds ``δ^L``, ``δ^U`` and ``(p^L, p^U)``."""
    k = evidence.n_stages
    n_pairs = k * (k - 1) // 2
    point: _Pairs = {}
    lower: _Pairs = {}
    upper: _Pairs = {}
    p_bounds: dict[tuple[int, int], tuple[float, float]] = {}
    for j in range(1, k):
        for i in range(j):
            n = queried[j]
            pair = j * (j - 1) // 2 + i
            if not n > 0:
                point[i, j], lower[i, j], upper[i, j] = math.inf, -math.inf, math.inf
                p_bounds[i, j] = (0.0, math.inf)
                continue
            d = disagreements[i][j]
            p_hat = d / n
            radius = math.sqrt(pair_level(level, n, k) / (2.0 * n))
            p_bounds[i, j] = (p_hat - radius, p_hat + radius)
            m = evidence.labelled[pair]
            if m:
                plus, minus = evidence.deeper_right[pair], evidence.shallower_right[pair]
                e_low, e_high = e_bounds(m, plus, minus, pair_level(level, m, k))
                lower[i, j], upper[i, j] = delta_bounds(d, n, e_low, e_high, level, k)
                point[i, j] = p_hat * (plus - minus) / m
            else:
                point[i, j], lower[i, j], upper[i, j] = p_hat, -(p_hat + radius), p_hat + radius
    assert len(point) == n_pairs

    return point, lower, upper, p_bounds


class WDMonitor:
    """:func:`wd_report` that logs a warning once, the first time WD is judged violated.

    Parameters
    ----------
    cumulative_costs
        ``C_1..C_K`` of the cascade.
    name
        Shown in the warning (e.g. the cascade or policy).

    """

    def __init__(self, cumulative_costs: Sequence[float], name: str = "cascade") -> None:
        self.cumulative_costs = tuple(float(c) for c in cumulative_costs)
        self.name = name
        self._warned = False

    @property
    def warned(self) -> bool:
        """Whether the violation warning was logged."""
        return self._warned

    def report(self, *args: Any, **kwargs: Any) -> WDReport:
        """:func:`wd_report` with this monitor's costs (same remaining arguments)."""
        result = wd_report(self.cumulative_costs, *args, **kwargs)
        if result.verdict == "violated" and not self._warned:
            self._warned = True
            logger.warning(
                "%s: weak dominance is violated according to %d labels (best depth %d); label-free "
                "policies settle on a wrong depth here, use AuditedUSS",
                self.name,
                result.labels,
                result.best_depth,
            )
        return result
