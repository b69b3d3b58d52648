"""The label-request budget of :class:`~uss_stream.policies.AuditedUSS`: when, and about which pairs, to ask.

A :class:`LabelBudget` counts the labels requested and allows a request in round ``t`` while fewer
than ``allotment + base·sqrt(t)`` were requested, or (with a raised budget) fewer than
``allotment + raised·sqrt(t)`` and a contradiction of the label-free rule is decisive; beyond
``allotment + base·sqrt(t)`` only the *contested* stages' pairs (the shallower stages of the
decisive pairs) are asked about. The streaming form (:meth:`LabelBudget.request`)
reads one round's relations (:class:`~uss_stream.labels.relations.Relations`); the
vectorised forms read ``M`` states' (:meth:`~uss_stream.policies.AuditedUSS.relations_many`), to
the bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from uss_stream.core.validation import check_positive, plain_number
from uss_stream.labels.relations import Relations

__all__ = ["LabelBudget", "contested_many", "request_mask"]


class LabelBudget:
    """The count of requested labels and the ``c·sqrt(t)`` budgets it is held to.

    Parameters
    ----------
    base
        ``c > 0`` of the budget while no contradiction is decisive.
    raised
        ``c`` while one is (``>= base``; ``None``: ``base``, no raise).
    allotment
        ``a >= 0`` labels allowed up front: the budget of round ``t`` is ``a + c·sqrt(t)``.

    Examples
    --------
    >>> budget = LabelBudget(1.0, raised=3.0)
    >>> budget.allowed(4, contradicted=False)   # 0 requested < 1·sqrt(4)
    True
    >>> budget.requested = 2
    >>> budget.allowed(4, contradicted=False), budget.allowed(4, contradicted=True)   # 2 < 3·2
    (False, True)
    >>> budget.allotment = 10.0
    >>> budget.allowed(4, contradicted=False)   # 2 < 10 + 1·sqrt(4)
    True

    """

    __slots__ = ("allotment", "base", "raised", "requested")

    def __init__(self, base: float, raised: float | None = None, allotment: float = 0.0) -> None:
        base = check_positive(base, "label_budget")
        allotment = plain_number(allotment)
        if isinstance(allotment, bool) or not isinstance(allotment, (int, float)) or not allotment >= 0:
            raise ValueError(f"label_allotment must be a number >= 0, got {allotment!r}")
        self.allotment = float(allotment)
        if raised is not None:
            raised = check_positive(raised, "contradicted_budget")
            if raised < base:
                raise ValueError(f"contradicted_budget must be >= label_budget ({base}), got {raised}")
        self.base = base
        self.raised = base if raised is None else float(raised)
        self.requested = 0

    def below_base(self, t: int) -> bool:
        """Fewer labels requested than ``allotment + base·sqrt(t)``."""
        return self.requested < self.allotment + self.base * math.sqrt(t)

    def allowed(self, t: int, contradicted: bool | Relations) -> bool:
        """Fewer labels requested than the budget of round ``t`` (``raised`` once ``contradicted``;
        given :class:`Relations`, their ``contradicted`` is read only when it matters)."""
        root = math.sqrt(t)
        if self.requested < self.allotment + self.base * root:
            return True
        if self.requested >= self.allotment + self.raised * root:
            return False
        return contradicted if isinstance(contradicted, bool) else contradicted.contradicted

    def request(self, t: int, outputs: Sequence[Any], relations: Relations) -> int:
        """The pair bit mask of round ``t``'s request for these outputs (0: none; else counted).

        The pairs ``(i, j)`` queried and disagreeing on this event, ``i`` plausible, the pair open
        or audited, and ``i`` in scope: any stage below ``base·sqrt(t)``, a contested one below
        the raised budget, none beyond.
        """
        if self.below_base(t):
            scope = None
        elif self.allowed(t, relations):
            scope = {i for i, _ in relations.decisive_pairs}
        else:
            return 0
        mask = request_mask(outputs, relations, scope)
        if mask:
            self.requested += 1
        return mask

    def withdraw(self) -> None:
        """Take back the last request counted by :meth:`request`."""
        if self.requested < 1:
            raise RuntimeError("no label request to withdraw")
        self.requested -= 1

    def many(self, rounds: np.ndarray, contradicted: np.ndarray) -> np.ndarray:
        """The budget of each state's round (:meth:`allowed`'s, to the bit)."""
        return self._scaled(np.sqrt(np.asarray(rounds, dtype=np.float64)), contradicted)

    def _scaled(self, root: np.ndarray, contradicted: np.ndarray) -> np.ndarray:
        """:meth:`many` given the square roots of the rounds (computed once by each caller)."""
        return self.allotment + np.where(contradicted, self.raised, self.base) * root

    def thresholds_many(self, rounds: np.ndarray, contradicted: np.ndarray) -> np.ndarray:
        """``M x 2``: ``base·sqrt(t)`` and the state's budget (``contradicted``: some pair of the
        state is decisive), the numbers of requested labels the count is compared with."""
        root = np.sqrt(np.asarray(rounds, dtype=np.float64))
        return np.stack([self.allotment + self.base * root, self._scaled(root, contradicted)], axis=1)

    def scope_many(
        self, rounds: np.ndarray, requested: np.ndarray, contradicted: np.ndarray, contested: np.ndarray
    ) -> np.ndarray:
        """``M x K``: the stages :meth:`request` may ask about, for ``M`` states (``requested``
        before each state's round, ``contested`` from :func:`contested_many`)."""
        root = np.sqrt(np.asarray(rounds, dtype=np.float64))
        base = requested < self.allotment + self.base * root
        raised = requested < self._scaled(root, contradicted)
        return base[:, None] | (raised[:, None] & contested)


def request_mask(outputs: Sequence[Any], relations: Relations, scope: set[int] | None) -> int:
    """The bit mask of the pairs ``(i, j)`` of ``outputs`` that disagree, with ``i`` plausible,
    the pair open or audited, and ``i`` in ``scope`` (``None``: every stage)."""
    mask = 0
    for j in range(1, len(outputs)):
        output = outputs[j]
        for i in range(j):
            if (
                outputs[i] != output
                and (scope is None or i in scope)
                and relations.plausible(i)
                and (relations.open(i, j) or relations.audit(i, j))
            ):
                mask |= 1 << (j * (j - 1) // 2 + i)
    return mask


def contested_many(decisive: np.ndarray, pairs: Sequence[tuple[int, int]], n_stages: int) -> np.ndarray:
    """``M x K``: stage ``i`` is the shallower stage of a decisive pair (``decisive``: ``M x P``).

    >>> contested_many(np.array([[False, False, True]]), [(0, 1), (0, 2), (1, 2)], 3).tolist()
    [[False, True, False]]
    """
    contested = np.zeros((n_stages, decisive.shape[0]), dtype=bool)
    for p, (i, _) in enumerate(pairs):
        contested[i] |= decisive[:, p]
    return contested.T
