"""Disagreement statistics: the plain, mergeable counts every USS policy learns from.

A cascade query of depth ``d`` reveals the outputs of stages ``1..d``. Because stage ``j`` is only
ever queried together with every cheaper stage, the number of rounds in which the pair ``(i, j)``
(``i < j``) was observed equals the number of rounds in which stage ``j`` was queried:
``N_ij = n_j``. The statistics are therefore

* ``decisions``: how many depths were decided (the round counter ``t - 1`` of the paper),
* ``queried[j]``: ``n_j``, the rounds in which stage ``j`` was queried,
* ``disagreements[i][j]``: ``D_ij`` for ``i < j``, the rounds in which stages ``i`` and ``j``
  were both queried and output different labels.

All are non-negative integers, so the statistics of two workers' streams add up to those of the
union of the streams (:meth:`DisagreementStats.merge`), and they travel as plain JSON
(:meth:`DisagreementStats.to_dict`, :meth:`DisagreementStats.from_dict`).

With ``discount=γ`` the counts forget: every recorded round multiplies all of them by ``γ`` before
adding its own indicators, so they are floats (``decisions`` stays an integer). See
:mod:`uss_stream.core.forgetting` for the semantics, including what merging discounted counts means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from uss_stream.core.forgetting import check_discount
from uss_stream.core.schema import (
    JsonState,
    is_count,
    is_weight,
    show,
    state_count,
    state_discount,
    state_object,
)

__all__ = ["STATE_FORMAT", "DisagreementStats"]

STATE_FORMAT = "uss-stream/disagreement-stats/v1"


class DisagreementStats(JsonState):
    """Pairwise disagreement counts of a K-stage cascade.

    Parameters
    ----------
    n_stages
        Number of stages ``K`` in the cascade (``K >= 1``).
    discount
        ``None`` (plain counts, the paper's) or the factor ``0 < γ < 1`` applied to every count
        at each recorded round (:mod:`uss_stream.core.forgetting`).

    Examples
    --------
    >>> stats = DisagreementStats(3)
    >>> stats.decisions = 2          # a policy counts its decisions ...
    >>> stats.record([1, 0, 1])      # ... and records the outputs: stages 1-2 and 2-3 disagree
    >>> stats.record(["a", "a"])     # a depth-2 round: any hashable label works
    >>> stats.queried
    [2, 2, 1]
    >>> stats.disagreements
    [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
    >>> stats.disagreement_rate(0, 1)
    0.5

    The counts of two workers add up:

    >>> other = DisagreementStats.from_dict(stats.to_dict())
    >>> stats.merge(other).queried
    [4, 4, 2]

    Discounted counts (``γ = 0.5``): the second round halves the first one's counts.

    >>> discounted = DisagreementStats(2, discount=0.5)
    >>> discounted.record([0, 1])
    >>> discounted.record([1])
    >>> discounted.queried, discounted.disagreements[0][1]
    ([1.5, 0.5], 0.5)

    """

    __slots__ = ("_discount", "_n_stages", "decisions", "disagreements", "queried")

    def __init__(self, n_stages: int, discount: float | None = None) -> None:
        if isinstance(n_stages, bool) or not isinstance(n_stages, int) or n_stages < 1:
            raise ValueError(f"n_stages must be an integer >= 1, got {n_stages!r}")
        self._n_stages = n_stages
        self._discount = check_discount(discount)
        zero = 0 if self._discount is None else 0.0
        self.decisions = 0
        self.queried = [zero] * n_stages
        self.disagreements = [[zero] * n_stages for _ in range(n_stages)]

    @property
    def n_stages(self) -> int:
        """Number of stages ``K``."""
        return self._n_stages

    @property
    def discount(self) -> float | None:
        """The per-round discount ``γ`` of the counts, ``None`` for plain counts."""
        return self._discount

    def record(self, outputs: Sequence[Any]) -> None:
        """Count one round in which stages ``1..len(outputs)`` were queried.

        Only equality of the outputs is used. The caller validates the outputs; see
        :func:`uss_stream.core.validation.check_outputs`. All or nothing: outputs that cannot be compared
        (``pd.NA``, arrays) or more outputs than stages raise ``ValueError`` before anything is
        counted. With a discount, every count is first multiplied by ``γ`` (``γ·x + 1.0`` or
        ``γ·x + 0.0``: the replay engine does the same floating-point operations).

        >>> import pandas as pd
        >>> stats = DisagreementStats(2)
        >>> stats.record([1, pd.NA])
        Traceback (most recent call last):
        ...
        ValueError: outputs[0] and outputs[1] cannot be compared: boolean value of NA is ambiguous
        >>> stats.queried
        [0, 0]

        """
        depth = len(outputs)
        if depth > self._n_stages:
            raise ValueError(f"outputs holds {depth} outputs but there are {self._n_stages} stages")
        if self._discount is not None:
            self._record_discounted(depth, _differing_pairs(outputs, depth))
            return
        # Count as we compare (the hot path), and take the counts back if a comparison fails.
        # The outputs are iterated, not indexed, with the positions counted alongside: the same
        # comparisons in the same order, with fewer bytecodes per pair.
        queried = self.queried
        disagreements = self.disagreements
        i = j = 0
        try:
            for output_j in outputs:
                i = 0
                for output_i in outputs:
                    if i == j:
                        break
                    if output_i != output_j:
                        disagreements[i][j] += 1
                    i += 1
                queried[j] += 1
                j += 1
        except (TypeError, ValueError) as error:
            for done_j in range(j + 1):
                for done_i in range(i if done_j == j else done_j):
                    if outputs[done_i] != outputs[done_j]:
                        disagreements[done_i][done_j] -= 1
                if done_j < j:
                    queried[done_j] -= 1
            raise ValueError(f"outputs[{i}] and outputs[{j}] cannot be compared: {error}") from None

    def _record_discounted(self, depth: int, differing: list[tuple[int, int]]) -> None:
        gamma = self._discount
        seen = set(differing)
        queried = self.queried
        disagreements = self.disagreements
        for j in range(self._n_stages):
            queried[j] = gamma * queried[j] + (1.0 if j < depth else 0.0)
            for i in range(j):
                disagreements[i][j] = gamma * disagreements[i][j] + (1.0 if (i, j) in seen else 0.0)

    def disagreement_rate(self, i: int, j: int) -> float:
        """Empirical ``P(Y^i != Y^j)`` for stage indices ``i < j`` (0-based); NaN if unobserved."""
        if not 0 <= i < j < self._n_stages:
            raise ValueError(f"need 0 <= i < j < {self._n_stages}, got i={i}, j={j}")
        n = self.queried[j]
        return self.disagreements[i][j] / n if n else float("nan")

    def merge(self, other: DisagreementStats) -> DisagreementStats:
        """Return the statistics of the union of both streams (the counts add up).

        Discounted statistics merge only with the same ``γ``; see :mod:`uss_stream.core.forgetting` for
        what their sum means.
        """
        if not isinstance(other, DisagreementStats):
            raise TypeError(f"other must be DisagreementStats, got {type(other).__name__}")
        if other.n_stages != self._n_stages:
            raise ValueError(f"cannot merge statistics of {self._n_stages} and {other.n_stages} stages")
        if other.discount != self._discount:
            raise ValueError(
                f"cannot merge statistics with discount {self._discount!r} and {other.discount!r}"
            )
        merged = DisagreementStats(self._n_stages, discount=self._discount)
        merged.decisions = self.decisions + other.decisions
        merged.queried = [a + b for a, b in zip(self.queried, other.queried)]
        merged.disagreements = [
            [a + b for a, b in zip(row, other_row)]
            for row, other_row in zip(self.disagreements, other.disagreements)
        ]
        return merged

    def subtract(self, other: DisagreementStats) -> DisagreementStats:
        """Return the statistics of this stream without ``other``'s, a part merged into it earlier.

        Plain counts only; a count that would go negative means ``other`` was not part of this
        stream and raises ``ValueError``.

        >>> own = DisagreementStats(2)
        >>> own.decisions = 1
        >>> own.record([0, 1])
        >>> pooled = own.merge(own)
        >>> pooled.subtract(own) == own
        True
        >>> own.subtract(pooled)
        Traceback (most recent call last):
        ...
        ValueError: cannot subtract statistics that are not part of these (decisions would be -1)

        """
        if not isinstance(other, DisagreementStats):
            raise TypeError(f"other must be DisagreementStats, got {type(other).__name__}")
        if other.n_stages != self._n_stages:
            raise ValueError(f"cannot subtract statistics of {other.n_stages} stages from {self._n_stages}")
        if self._discount is not None or other.discount is not None:
            raise ValueError("discounted statistics cannot be subtracted: only plain counts are additive")
        difference = DisagreementStats(self._n_stages)
        difference.decisions = self.decisions - other.decisions
        difference.queried = [a - b for a, b in zip(self.queried, other.queried)]
        difference.disagreements = [
            [a - b for a, b in zip(row, other_row)]
            for row, other_row in zip(self.disagreements, other.disagreements)
        ]
        for field, counts in (
            ("decisions", [difference.decisions]),
            ("queried", difference.queried),
            ("disagreements", [count for row in difference.disagreements for count in row]),
        ):
            if min(counts) < 0:
                raise ValueError(
                    f"cannot subtract statistics that are not part of these ({field} would be {min(counts)})"
                )
        return difference

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable document of the counts (with ``"discount"`` if they are discounted)."""
        document: dict[str, Any] = {
            "format": STATE_FORMAT,
            "n_stages": self._n_stages,
            "decisions": self.decisions,
            "queried": list(self.queried),
            "disagreements": [list(row) for row in self.disagreements],
        }
        if self._discount is not None:
            document["discount"] = self._discount
        return document

    @classmethod
    def from_dict(cls, document: Any) -> DisagreementStats:
        """Load and validate counts.

        Raises
        ------
        ValueError
            Naming what is wrong: wrong format tag, wrong shapes, counts that are not integers in
            ``0..2**53`` (:data:`~uss_stream.core.schema.MAX_COUNT`; numbers in ``[0, 2**53]`` when
            discounted; booleans are not counts), a bad discount, ``D_ij > n_j``, counts
            below the diagonal, ``n_j`` increasing with ``j`` or larger than the number of decisions.
        """
        state_object(document, STATE_FORMAT, ("n_stages", "decisions", "queried", "disagreements"))
        n_stages = state_count(document["n_stages"], "n_stages", 1, expected="an integer >= 1")
        decisions = state_count(document["decisions"], "decisions")
        discount = state_discount(document)
        valid, kind = (
            (is_count, "an integer in 0..2**53")
            if discount is None
            else (is_weight, "a finite number >= 0 (at most 2**53)")
        )
        queried = document["queried"]
        if not isinstance(queried, list) or len(queried) != n_stages:
            raise ValueError(f"state field 'queried' must be a list of {n_stages} counts")
        for j, n in enumerate(queried):
            if not valid(n):
                raise ValueError(f"state field 'queried[{j}]' must be {kind}, got {show(n)}")
            if j and n > queried[j - 1]:
                raise ValueError(
                    f"state field 'queried' must be non-increasing (stage {j + 1} is only queried "
                    f"after stage {j}), got {show(queried)}"
                )
        if queried[0] > decisions:
            raise ValueError(f"state field 'queried[0]'={queried[0]} exceeds 'decisions'={decisions}")
        rows = document["disagreements"]
        if not isinstance(rows, list) or len(rows) != n_stages:
            raise ValueError(f"state field 'disagreements' must be a {n_stages}x{n_stages} matrix")
        for i, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != n_stages:
                raise ValueError(f"state field 'disagreements' must be a {n_stages}x{n_stages} matrix")
            for j, d in enumerate(row):
                if not valid(d):
                    raise ValueError(f"state field 'disagreements[{i}][{j}]' must be {kind}, got {show(d)}")
                if j <= i and d:
                    raise ValueError(
                        f"state field 'disagreements[{i}][{j}]' must be 0 (only pairs i < j are counted)"
                    )
                if j > i and d > queried[j]:
                    raise ValueError(
                        f"state field 'disagreements[{i}][{j}]'={d} exceeds 'queried[{j}]'={queried[j]}"
                    )
        stats = cls(n_stages, discount=discount)
        stats.decisions = decisions
        if discount is None:
            stats.queried = list(queried)
            stats.disagreements = [list(row) for row in rows]
        else:
            stats.queried = [float(n) for n in queried]
            stats.disagreements = [[float(d) for d in row] for row in rows]
        return stats

    def __repr__(self) -> str:
        discount = "" if self._discount is None else f", discount={self._discount!r}"
        return (
            f"DisagreementStats(n_stages={self._n_stages}, decisions={self.decisions}, "
            f"queried={self.queried}{discount})"
        )


def _differing_pairs(outputs: Sequence[Any], depth: int) -> list[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i < j < depth``, whose outputs differ; ``ValueError`` if one cannot tell."""
    differing = []
    i = j = 0
    try:
        for j in range(1, depth):
            output_j = outputs[j]
            for i in range(j):
                if outputs[i] != output_j:
                    differing.append((i, j))
    except (TypeError, ValueError) as error:
        raise ValueError(f"outputs[{i}] and outputs[{j}] cannot be compared: {error}") from None
    return differing
