"""The paper's "supervised bandit": USS-UCB's test on label-based error-rate differences."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from uss_stream.core.validation import check_label, check_outputs
from uss_stream.policies.base import CountStates
from uss_stream.policies.uss_ucb import USSUCB
from uss_stream.rules.selection_rule import select_depth, select_depth_many

__all__ = ["SupervisedUCB"]


class SupervisedUCB(USSUCB):
    """USS-UCB with the true label revealed after each round (a reference, not deployable).

    The paper (Section 5, "Supervised v/s Unsupervised") replaces the disagreement estimate of
    USS-UCB's line 4 by estimated marginal error rates: for stages ``i < j``,
    ``U_ij = (γ̂_i - γ̂_j) + sqrt(α·log f(t) / n_j)`` with ``γ̂_j = E_j / n_j`` and ``E_j`` the
    rounds in which stage ``j`` was queried and wrong. The sets ``B^l``, ``B^h`` and the depth rule
    are USS-UCB's. :meth:`update` takes the label as well.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``.
    alpha
        Exploration parameter ``α > 0``.
    f
        Exploration function, ``None`` for ``f(t) = t``.
    discount
        ``None`` or ``0 < γ < 1``: the disagreement and error counts are discounted alike
        (:mod:`uss_stream.core.forgetting`).

    Examples
    --------
    >>> from uss_stream.policies import SupervisedUCB
    >>> policy = SupervisedUCB(stage_costs=[0.0, 0.3, 0.2])
    >>> policy.select()
    3
    >>> policy.update([0, 1, 1], label=1)
    >>> policy.errors
    [1, 0, 0]

    """

    def __init__(
        self,
        stage_costs: Sequence[float],
        alpha: float = 0.51,
        f: Callable[[int], float] | None = None,
        discount: float | None = None,
    ) -> None:
        super().__init__(stage_costs, alpha=alpha, f=f, discount=discount)
        self._errors: list[Any] = [0 if self.discount is None else 0.0] * self.n_stages

    @property
    def supervised(self) -> bool:
        return True

    @property
    def errors(self) -> list[Any]:
        """``E_j``: rounds in which stage ``j`` was queried and wrong (discounted if ``discount``)."""
        return list(self._errors)

    def update(self, outputs: Sequence[Any], label: Hashable | None = None) -> None:  # type: ignore[override]
        """Learn from the outputs of stages ``1..depth`` and the true label of the event.

        All or nothing: a missing or uncomparable label or output raises ``ValueError`` before
        anything is counted, and the decision stays pending.
        """
        if label is None or (isinstance(label, float) and label != label):
            raise ValueError("label is required by SupervisedUCB.update (got None/NaN)")
        check_label(label, "label")
        values = check_outputs(outputs, self._pending())
        try:
            wrong = [bool(value != label) for value in values]
        except (TypeError, ValueError) as error:
            raise ValueError(f"outputs cannot be compared with the label {label!r}: {error}") from None
        self._stats.record(values)
        self._pending_depth = None
        errors = self._errors
        gamma = self.discount
        if gamma is None:
            for j, is_wrong in enumerate(wrong):
                if is_wrong:
                    errors[j] += 1
            return
        depth = len(values)
        for j in range(self.n_stages):
            errors[j] = gamma * errors[j] + (1.0 if j < depth and wrong[j] else 0.0)

    def run(self, outputs: Any, labels: Any = None) -> np.ndarray:  # type: ignore[override]
        """The select/update loop over ``T x K`` outputs and ``T`` labels."""
        if labels is None:
            raise ValueError("labels are required by SupervisedUCB.run")
        labels = list(labels.tolist() if hasattr(labels, "tolist") else labels)
        rows = outputs.tolist() if hasattr(outputs, "tolist") else [list(r) for r in outputs]
        if len(labels) != len(rows):
            raise ValueError(f"labels has {len(labels)} entries, outputs has {len(rows)} rows")
        depths = np.empty(len(rows), dtype=np.int64)
        with self._all_or_nothing():
            for t, (row, label) in enumerate(zip(rows, labels)):
                if len(row) != self.n_stages:
                    raise ValueError(f"outputs must have {self.n_stages} columns, row {t} has {len(row)}")
                depth = self.select()
                self.update(row[:depth], label=label)
                depths[t] = depth
        return depths

    def _decide(self, t: int) -> int:
        return select_depth(self._costs, self._bound(t))  # USS-UCB's set test on the error bounds

    def _bound(self, t: int) -> Callable[[int, int], float]:
        """``U(i, j) = (γ̂_i - γ̂_j) + Ψ_ij`` at round ``t``."""
        queried = self._stats.queried
        errors = self._errors
        scale = self.alpha * self._log_f(t)

        def bound(i: int, j: int) -> float:
            n = queried[j]
            if n:
                return (errors[i] / queried[i] - errors[j] / n) + math.sqrt(scale / n)
            return math.inf

        return bound

    def _decide_many(self, states: CountStates) -> np.ndarray:
        rounds, queried, errors = states.rounds, states.queried, states.errors
        if errors is None:
            raise ValueError("SupervisedUCB.decide_many needs the error counts (labels)")
        scale = self.alpha * self._log_f.many(rounds)
        n = queried.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            rates = errors / n
            radius = np.sqrt(scale[:, None] / n)
            upper = (rates[:, :, None] - rates[:, None, :]) + radius[:, None, :]
        upper[np.broadcast_to((n == 0)[:, None, :], upper.shape)] = np.inf
        return select_depth_many(self._gaps, upper)

    def state_dict(self) -> dict[str, Any]:
        document = super().state_dict()
        document["errors"] = list(self._errors)
        return document

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`: the counts and ``errors`` are validated before either is replaced."""
        stats = self._checked_stats(document)
        errors = document.get("errors")
        if not isinstance(errors, list) or len(errors) != self.n_stages:
            raise ValueError(f"state field 'errors' must be a list of {self.n_stages} counts")
        kinds = (int,) if self.discount is None else (int, float)
        for j, e in enumerate(errors):
            if isinstance(e, bool) or not isinstance(e, kinds) or not 0 <= e <= stats.queried[j]:
                kind = "an integer" if self.discount is None else "a number"
                shown = repr(e) if len(repr(e)) <= 60 else f"{repr(e)[:40]}..."
                raise ValueError(f"state field 'errors[{j}]' must be {kind} in 0..queried[{j}], got {shown}")
        self._stats = stats
        self._errors = list(errors) if self.discount is None else [float(e) for e in errors]
        self._pending_depth = None
