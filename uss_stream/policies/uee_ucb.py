"""UEE-UCB: the unsupervised early-exit rule of Hanawal's group (arXiv 2209.09480), a baseline."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from uss_stream.core.validation import check_positive
from uss_stream.policies.base import CountStates, Policy
from uss_stream.rules.certificates import log_range
from uss_stream.rules.confidence import portable_log, portable_log_many

__all__ = ["UEEUCB"]


class UEEUCB(Policy):
    """Play the exit that maximises its optimistic disagreement with the first exit, net of cost.

    Round 1 plays ``K`` (every exit is then observed once). From round ``t = 2`` on it plays

    ``argmax_j  p̂_1j + C_1 - C_j + sqrt(α·log t / N_j)``

    (logarithms by :func:`~uss_stream.rules.confidence.portable_log`, so that the replay agrees
    with the streaming loop to the bit) with ``p̂_1j = D_1j / N_j`` the rate at which exit ``j``
    disagreed with exit 1 (``p̂_11 = 0``) and ``N_j`` the rounds in which exit ``j`` was observed
    (ties: the cheapest exit). Under strong dominance against the first exit (a deeper exit is
    right whenever exit 1 is) ``p_1j = γ_1 - γ_j`` and the index is an upper confidence bound of
    ``c(1) - c(j)``: a standard UCB on the surrogate reward. Without it the surrogate is biased
    (``p_1j >= γ_1 - γ_j``) towards exits that disagree with exit 1 for the wrong reasons, for
    instance an exit at chance level.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``.
    alpha
        Exploration scale ``α > 0``.
    discount
        ``None`` or ``0 < γ < 1``: discounted counts (:mod:`uss_stream.core.forgetting`); ``t`` stays
        the round number.

    Examples
    --------
    Round 1 plays ``K``; round 2 compares ``0 + 0 + sqrt(log 2)`` (exit 1) with
    ``1 + 0.1 - 0.4 + sqrt(log 2)`` (exit 2, which disagreed with exit 1):

    >>> from uss_stream.policies import UEEUCB
    >>> policy = UEEUCB(stage_costs=[0.1, 0.3])
    >>> policy.select()
    2
    >>> policy.update([0, 1])
    >>> policy.select()
    2

    """

    def __init__(
        self, stage_costs: Sequence[float], alpha: float = 1.0, discount: float | None = None
    ) -> None:
        super().__init__(stage_costs, discount=discount)
        self.alpha = check_positive(alpha, "alpha")
        costs = self._costs
        self._net = [costs[0] - c for c in costs]
        self._net_array = np.array(self._net)

    def _decide(self, t: int) -> int:
        queried = self._stats.queried
        if not queried[-1] > 0:
            return self.n_stages
        first = self._stats.disagreements[0]
        scale = self.alpha * portable_log(t)
        best, best_index = 0, -math.inf
        for j, net in enumerate(self._net):
            n = queried[j]
            index = (first[j] / n if j else 0.0) + net + math.sqrt(scale / n)
            if index > best_index:
                best, best_index = j, index
        return best + 1

    def _decide_many(self, states: CountStates) -> np.ndarray:
        rounds, queried, disagreements = states.rounds, states.queried, states.disagreements
        n = np.asarray(queried, dtype=np.float64)
        observed = n[:, -1] > 0.0
        safe = np.where(n > 0.0, n, 1.0)
        rate = np.asarray(disagreements, dtype=np.float64)[:, 0, :] / safe
        rate[:, 0] = 0.0
        scale = self.alpha * portable_log_many(np.asarray(rounds, dtype=np.float64))
        index = (rate + self._net_array) + np.sqrt(scale[:, None] / safe)
        # The scalar loop keeps the first maximum; argmax does the same.
        depth = np.argmax(index, axis=1) + 1
        return np.where(observed, depth, self.n_stages).astype(np.int64)

    def _certify_many(self, states: CountStates, depths: np.ndarray, widths: np.ndarray) -> np.ndarray:
        """Ranges of every index over each window (the operations of :meth:`_decide_many` at the
        window's extreme counts and logarithms, :mod:`uss_stream.rules.certificates`): certified
        when the chosen exit's smallest index beats every other exit's largest (strictly for the
        cheaper ones, which win ties)."""
        first = np.asarray(states.rounds, dtype=np.float64)[:, None]
        log_low, log_high = log_range(first, first + (widths - 1))
        n = np.asarray(states.queried, dtype=np.float64)[:, None, :]
        d = np.asarray(states.disagreements, dtype=np.float64)[:, None, 0, :]
        exits = np.arange(self.n_stages)
        observed = exits < depths[:, None, None]
        grown = observed * (widths - 1.0)[:, :, None]  # M x L x K
        n_high = n + grown
        with np.errstate(divide="ignore", invalid="ignore"):
            rate_low = d / n_high
            rate_high = np.maximum(d / n, (d + grown) / n_high)
            rate_low[..., 0] = rate_high[..., 0] = 0.0
            low = (rate_low + self._net_array) + np.sqrt((self.alpha * log_low)[:, :, None] / n_high)
            high = (rate_high + self._net_array) + np.sqrt((self.alpha * log_high)[:, :, None] / n)
        chosen = (depths - 1)[:, None, None]
        smallest = np.take_along_axis(low, np.broadcast_to(chosen, (*low.shape[:2], 1)), axis=2)
        beaten = np.where(exits < chosen, smallest > high, smallest >= high) | (exits == chosen)
        return (n > 0.0).all(axis=2) & beaten.all(axis=2)

    def indices(self) -> np.ndarray:
        """The ``K`` indices the next :meth:`select` compares (``+inf`` before round 2)."""
        queried = self._stats.queried
        if not queried[-1] > 0:
            return np.full(self.n_stages, np.inf)
        scale = self.alpha * portable_log(self._stats.decisions + 1)
        first = self._stats.disagreements[0]
        return np.array(
            [
                (first[j] / queried[j] if j else 0.0) + net + math.sqrt(scale / queried[j])
                for j, net in enumerate(self._net)
            ]
        )

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {"stage_costs": [0.0, 0.5], "alpha": 0.5}
