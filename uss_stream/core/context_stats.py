"""Disagreement counts per context: what a sequential (stop-or-continue) policy learns from.

A sequential policy decides after each queried stage ``s`` whether to go on, looking at that
stage's *confidence* (its largest class probability). The events that reach stage ``s`` are split
into contexts by that confidence, and for each context the disagreements between stage ``s`` and
every deeper stage are counted, exactly as :class:`~uss_stream.core.stats.DisagreementStats` counts them
for the whole stream (the deeper stages are observed label-free whenever an event goes on).

**Cells and bins.** The confidence axis is cut into :data:`CELL_EDGES` (16 fixed *cells*, finer
towards 1 where confident models put most events). Every cell of every stage ``s < K`` holds a
``DisagreementStats`` over stages ``s..K`` (index 0 is stage ``s`` itself: ``queried[0]`` is the
number of events in the cell). The policy's contexts are ``n_bins`` *bins* per stage that adapt to
the stream: consecutive cells grouped into quantiles of the confidences seen so far at that stage
(:func:`quantile_groups`). A bin's counts are the sums of its cells' counts, so regrouping never
mixes stale counts: it only re-sums them. The grouping is recomputed when a stage's number of
events reaches 8·n_bins, then doubles (at most every 4096 events), so a stationary stream's bins
settle; it is part of the state (merging recomputes it from the merged histogram).

**State.** Plain counts, JSON (:meth:`ContextStats.to_dict`), mergeable
(:meth:`ContextStats.merge` adds the cells), and discountable: with ``discount=γ`` every cell
forgets at the pace of its own events (a cell's counts are multiplied by ``γ`` each time an event
falls into it), which is the discounted semantics of :mod:`uss_stream.core.forgetting` applied to each
context's sub-stream.

Examples
--------
Three stages; one event answered by stage 1 with confidence 0.97 that went on to stage 3:

>>> stats = ContextStats(3, n_bins=2)
>>> stats.record(["a", "b", "b"], [0.97, 0.6, 0.99])
>>> stats.decisions, stats.cell_of(0.97)
(1, 11)
>>> stats.cells[0][11].queried, stats.cells[0][11].disagreements[0]
([1, 1, 1], [0, 1, 1])
>>> stats.cells[1][stats.cell_of(0.6)].queried   # stage 2's own cell: stages 2..3
[1, 1]
>>> stats.merge(stats).cells[0][11].queried
[2, 2, 2]

"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from typing import Any

from uss_stream.core.forgetting import check_discount
from uss_stream.core.schema import JsonState, is_count, state_count, state_discount, state_object
from uss_stream.core.stats import DisagreementStats

__all__ = ["CELL_EDGES", "CONTEXT_FORMAT", "ContextStats", "quantile_groups"]

CONTEXT_FORMAT = "uss-stream/context-stats/v1"

#: Upper edges of the confidence cells (cell ``c`` holds confidences in ``[e_{c-1}, e_c)``; the last
#: cell is ``[0.999, 1]``). Below 0.5 only multiclass stages answer; abstaining stages count as 0.
CELL_EDGES = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.925, 0.95, 0.975, 0.99, 0.995, 0.999)
N_CELLS = len(CELL_EDGES) + 1
_FIRST_REGROUP = 8
_MAX_REGROUP_STEP = 4096


def quantile_groups(histogram: Sequence[float], n_bins: int) -> list[int]:
    """Group consecutive cells into ``n_bins`` quantile bins of the histogram's mass.

    Cell ``c`` goes to bin ``min(B - 1, floor(B·(H_<c + h_c / 2) / H))``: the bin of its mid-mass
    quantile. Bins are non-decreasing in the cell; an empty histogram gives one bin.

    >>> quantile_groups([0, 10, 10, 0, 20], 2)
    [0, 0, 0, 1, 1]
    >>> quantile_groups([0, 0, 0], 3)
    [0, 0, 0]

    """
    total = float(sum(histogram))
    if not total > 0.0:
        return [0] * len(histogram)
    groups = []
    below = 0.0
    for h in histogram:
        groups.append(min(n_bins - 1, int(n_bins * (below + h / 2.0) / total)))
        below += h
    return groups


class ContextStats(JsonState):
    """Per-stage, per-confidence-cell disagreement counts of a K-stage cascade, grouped into bins.

    Parameters
    ----------
    n_stages
        Number of stages ``K >= 2``.
    n_bins
        Number of adaptive confidence bins (contexts) per stage, ``>= 1``.
    discount
        ``None`` (plain counts) or ``0 < γ < 1``, applied per cell (see the module docstring).

    Attributes
    ----------
    decisions
        Number of events recorded.
    cells
        ``cells[s][c]``: the :class:`~uss_stream.core.stats.DisagreementStats` over stages ``s..K`` of the
        events whose stage ``s`` had a confidence in cell ``c`` (``s < K - 1``, 0-based).
    groups
        ``groups[s][c]``: the bin of cell ``c`` at stage ``s``.
    """

    def __init__(self, n_stages: int, n_bins: int = 4, discount: float | None = None) -> None:
        if isinstance(n_stages, bool) or not isinstance(n_stages, int) or n_stages < 2:
            raise ValueError(f"n_stages must be an integer >= 2, got {n_stages!r}")
        if isinstance(n_bins, bool) or not isinstance(n_bins, int) or not 1 <= n_bins <= N_CELLS:
            raise ValueError(f"n_bins must be an integer in 1..{N_CELLS}, got {n_bins!r}")
        self._n_stages = n_stages
        self._n_bins = n_bins
        self._discount = check_discount(discount)
        self.decisions = 0
        self.cells = [
            [DisagreementStats(n_stages - s, discount=self._discount) for _ in range(N_CELLS)]
            for s in range(n_stages - 1)
        ]
        self.groups = [[0] * N_CELLS for _ in range(n_stages - 1)]
        self._visits = [0] * (n_stages - 1)
        self._regroup_at = [_FIRST_REGROUP * n_bins] * (n_stages - 1)
        self._bins: list[list[DisagreementStats]] = []
        self._sum_bins()

    @property
    def n_stages(self) -> int:
        """Number of stages ``K``."""
        return self._n_stages

    @property
    def n_bins(self) -> int:
        """Number of bins per stage."""
        return self._n_bins

    @property
    def discount(self) -> float | None:
        """The per-cell discount ``γ``, ``None`` for plain counts."""
        return self._discount

    @staticmethod
    def cell_of(confidence: float) -> int:
        """The cell of a confidence (``None`` or NaN, an abstaining stage, is cell 0)."""
        if confidence is None or confidence != confidence:
            return 0
        return bisect.bisect_right(CELL_EDGES, confidence)

    def bin_stats(self, stage: int, bin_: int) -> DisagreementStats:
        """The summed counts of a bin (a live reference: do not modify)."""
        return self._bins[stage][bin_]

    def context(self, stage: int, cell: int) -> tuple[int, DisagreementStats]:
        """The bin of ``cell`` at ``stage`` and that bin's counts."""
        bin_ = self.groups[stage][cell]
        return bin_, self._bins[stage][bin_]

    def histogram(self, stage: int) -> list[int]:
        """Events per cell at ``stage`` (the cells' round counters)."""
        return [cell.decisions for cell in self.cells[stage]]

    def bin_range(self, stage: int, bin_: int) -> tuple[float, float]:
        """The confidence interval ``[low, high)`` a bin covers (``(nan, nan)`` if it holds no cell)."""
        members = [c for c, g in enumerate(self.groups[stage]) if g == bin_]
        if not members:
            return float("nan"), float("nan")
        edges = (0.0, *CELL_EDGES, 1.0)
        return edges[members[0]], edges[members[-1] + 1]

    def record(
        self,
        outputs: Sequence[Any],
        confidences: Sequence[float] | None = None,
        cells: Sequence[int] | None = None,
    ) -> None:
        """Count one event that queried stages ``1..len(outputs)`` with the given confidences.

        Give either the confidences or their cells (:meth:`cell_of`). All or nothing: a bad
        argument raises ``ValueError`` before anything is counted.
        """
        if (confidences is None) == (cells is None):
            raise ValueError("give exactly one of confidences and cells")
        depth = len(outputs)
        if not 1 <= depth <= self._n_stages:
            raise ValueError(f"outputs must hold 1..{self._n_stages} stage outputs, got {depth}")
        decided = min(depth, self._n_stages - 1)
        if cells is None:
            cells = [self.cell_of(confidences[s]) for s in range(decided)]
        elif len(cells) < decided or not all(type(c) is int and 0 <= c < N_CELLS for c in cells[:decided]):
            raise ValueError(f"cells must be {decided} integers in 0..{N_CELLS - 1}, got {list(cells)}")
        self.record_cells(outputs, cells)

    def record_cells(self, outputs: Sequence[Any], cells: Sequence[int]) -> None:
        """:meth:`record` for a caller that validated ``1 <= len(outputs) <= K`` and computed the cells.

        The comparisons, the only step that can still fail (outputs whose ``!=`` raises), come
        before any count changes.
        """
        depth = len(outputs)
        plain = self._discount is None
        if depth == 1 and plain:
            # The commonest event of an early-exit cascade: stage 1 only, no pair to compare.
            self.decisions += 1
            cell = cells[0]
            counts = self.cells[0][cell]
            bin_counts = self._bins[0][self.groups[0][cell]]
            counts.decisions += 1
            counts.queried[0] += 1
            bin_counts.decisions += 1
            bin_counts.queried[0] += 1
            visits = self._visits[0] = self._visits[0] + 1
            if visits >= self._regroup_at[0]:
                self._regroup(0)
            return
        decided = min(depth, self._n_stages - 1)
        differing = [(i, j) for j in range(1, depth) for i in range(j) if bool(outputs[i] != outputs[j])]
        self.decisions += 1
        for s in range(decided):
            cell = cells[s]
            counts = self.cells[s][cell]
            bin_ = self.groups[s][cell]
            counts.decisions += 1
            if plain:
                # The cell and its bin get the same indicators: one pass updates both.
                bin_counts = self._bins[s][bin_]
                bin_counts.decisions += 1
                cell_n, bin_n = counts.queried, bin_counts.queried
                for j in range(depth - s):
                    cell_n[j] += 1
                    bin_n[j] += 1
                cell_d, bin_d = counts.disagreements, bin_counts.disagreements
                for i, j in differing:
                    if i >= s:
                        cell_d[i - s][j - s] += 1
                        bin_d[i - s][j - s] += 1
            else:
                counts.record(outputs[s:depth])
                self._sum_bin(s, bin_)
            visits = self._visits[s] = self._visits[s] + 1
            if visits >= self._regroup_at[s]:
                self._regroup(s)

    def _regroup(self, stage: int) -> None:
        visits = self._visits[stage]
        self._regroup_at[stage] = visits + min(max(visits, 1), _MAX_REGROUP_STEP)
        self.groups[stage] = quantile_groups(self.histogram(stage), self._n_bins)
        self._bins[stage] = [self._summed(stage, g) for g in range(self._n_bins)]

    def _summed(self, stage: int, bin_: int) -> DisagreementStats:
        total = DisagreementStats(self._n_stages - stage, discount=self._discount)
        for cell, g in zip(self.cells[stage], self.groups[stage]):
            if g == bin_:
                total = total.merge(cell)
        return total

    def _sum_bin(self, stage: int, bin_: int) -> None:
        self._bins[stage][bin_] = self._summed(stage, bin_)

    def _sum_bins(self) -> None:
        self._bins = [[self._summed(s, g) for g in range(self._n_bins)] for s in range(self._n_stages - 1)]

    def merge(self, other: ContextStats) -> ContextStats:
        """The counts of both streams added cell by cell; the bins are regrouped on the sum."""
        if not isinstance(other, ContextStats):
            raise TypeError(f"other must be ContextStats, got {type(other).__name__}")
        if (other.n_stages, other.n_bins, other.discount) != (self._n_stages, self._n_bins, self._discount):
            raise ValueError(
                "cannot merge context statistics with different (n_stages, n_bins, discount): "
                f"{(self._n_stages, self._n_bins, self._discount)} and "
                f"{(other.n_stages, other.n_bins, other.discount)}"
            )
        merged = ContextStats(self._n_stages, self._n_bins, self._discount)
        merged.decisions = self.decisions + other.decisions
        merged.cells = [
            [a.merge(b) for a, b in zip(mine, theirs)] for mine, theirs in zip(self.cells, other.cells)
        ]
        merged._visits = [a + b for a, b in zip(self._visits, other._visits)]
        for s in range(self._n_stages - 1):
            merged._regroup(s)
        return merged

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable document: every cell's counts, the grouping and its schedule."""
        document: dict[str, Any] = {
            "format": CONTEXT_FORMAT,
            "n_stages": self._n_stages,
            "n_bins": self._n_bins,
            "decisions": self.decisions,
            "stages": [
                {
                    "groups": list(self.groups[s]),
                    "regroup_at": self._regroup_at[s],
                    "cells": [cell.to_dict() for cell in self.cells[s]],
                }
                for s in range(self._n_stages - 1)
            ],
        }
        if self._discount is not None:
            document["discount"] = self._discount
        return document

    @classmethod
    def from_dict(cls, document: Any) -> ContextStats:
        """Load and validate a :meth:`to_dict` document (``ValueError`` naming the bad field)."""
        state_object(document, CONTEXT_FORMAT, ("n_stages", "n_bins", "decisions", "stages"))
        discount = state_discount(document)
        stages = document["stages"]
        n_stages = document["n_stages"]
        # The shape is checked against the stage list before anything is allocated.
        if (
            not is_count(n_stages)
            or n_stages < 2
            or not isinstance(stages, list)
            or len(stages) != n_stages - 1
        ):
            raise ValueError(
                f"state fields 'n_stages' ({n_stages!r}) and 'stages' must describe K >= 2 stages "
                "with one entry per stage but the last"
            )
        n_bins = state_count(document["n_bins"], "n_bins", 1, N_CELLS)
        decisions = state_count(document["decisions"], "decisions")
        stats = cls(n_stages, n_bins, discount)
        stats.decisions = decisions
        for s, entry in enumerate(stages):
            where = f"stages[{s}]"
            if not isinstance(entry, dict):
                raise ValueError(f"state field '{where}' must be an object")
            groups = entry.get("groups")
            if (
                not isinstance(groups, list)
                or len(groups) != N_CELLS
                or not all(is_count(g, n_bins - 1) for g in groups)
                or any(b < a for a, b in itertools.pairwise(groups))
            ):
                raise ValueError(
                    f"state field '{where}.groups' must be {N_CELLS} non-decreasing bins in 0..{n_bins - 1}"
                )
            regroup_at = state_count(entry.get("regroup_at"), f"{where}.regroup_at", 1)
            cells = entry.get("cells")
            if not isinstance(cells, list) or len(cells) != N_CELLS:
                raise ValueError(f"state field '{where}.cells' must be a list of {N_CELLS} counts")
            loaded = []
            for c, cell in enumerate(cells):
                try:
                    counts = DisagreementStats.from_dict(cell)
                except ValueError as error:
                    raise ValueError(f"state field '{where}.cells[{c}]': {error}") from None
                if counts.n_stages != n_stages - s or counts.discount != discount:
                    raise ValueError(
                        f"state field '{where}.cells[{c}]' must count {n_stages - s} stages "
                        f"with discount {discount!r}"
                    )
                loaded.append(counts)
            visits = sum(cell.decisions for cell in loaded)
            # Every event passes stage 1 once, and reaches stage s+1 only after stage s.
            limit = decisions if s == 0 else stats._visits[s - 1]
            if visits > limit or (s == 0 and visits != decisions):
                raise ValueError(
                    f"state field '{where}.cells' counts {visits} events, which does not fit "
                    f"{'decisions' if s == 0 else f'stages[{s - 1}]'} ({limit})"
                )
            stats.cells[s] = loaded
            stats.groups[s] = list(groups)
            stats._regroup_at[s] = regroup_at
            stats._visits[s] = visits
        stats._sum_bins()
        return stats

    def __repr__(self) -> str:
        return (
            f"ContextStats(n_stages={self._n_stages}, n_bins={self._n_bins}, "
            f"decisions={self.decisions}, discount={self._discount!r})"
        )
