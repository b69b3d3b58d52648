"""Drift-aware statistics: discounted disagreement counts and the effective horizon they imply.

The paper's statistics are plain counts, so a disagreement seen in round 1 weighs as much as one
seen now. When the stages drift (a stage that learns online gets better, a sensor degrades) the
old disagreements keep the policy on a depth that is no longer optimal for a long time. Every
learning policy therefore accepts ``discount=γ`` (``0 < γ < 1``; ``None``, the default, keeps the
paper's counts): each recorded round first multiplies **all** counts by ``γ`` and then adds its own
indicators, as in discounted UCB (Garivier & Moulines, ALT 2011):

* ``n_j ← γ·n_j + 1[stage j queried]``, ``D_ij ← γ·D_ij + 1[stages i, j queried and disagree]``,
* a round ``a`` rounds ago weighs ``γ^a``; the counts are floats and the memory is about
  ``1 / (1 - γ)`` rounds (``γ = 0.999``: the last thousand or so),
* the exploration terms use the *effective horizon* ``τ_t = Σ_{s=1..t} γ^{t-s} = (1 - γ^t)/(1 - γ)``
  (:func:`effective_horizon`) in place of the round ``t``: ``log f(τ_t)`` for USS-UCB and
  Algorithm 2, ``log₊(τ_t / (K·n_j))`` for USS-KL-UCB; USS-TS samples from the discounted Beta
  posteriors ``Beta(1 + D_ij, 1 + n_j - D_ij)``.

The round counter ``t`` (``DisagreementStats.decisions``) stays an integer; USS-TS keys its random
numbers on it.

**State and merge.** Discounted statistics travel in the same JSON document as plain counts, with a
``"discount"`` field and float counts (JSON round trips are exact). Validation checks what the
recursion guarantees: ``0 <= D_ij <= n_j``, ``n_j`` non-increasing in ``j`` and ``n_1 <= decisions``.
:meth:`~uss_stream.core.stats.DisagreementStats.merge` adds the counts of two statistics with the same
``γ``: every event keeps the weight ``γ^a`` it has in its own stream, ``a`` counted in that
stream's rounds. For partitions of one stream processed in parallel this is forgetting at the pace
of each partition's own traffic; it is not the discount the union would have if replayed as one
interleaved stream (that depends on the interleaving, which the counts do not record).

**Default.** No forgetting, also for stages that keep learning online (the River cascade): the
paper's guarantees are for stationary streams, discounting costs regret when nothing drifts (the
policy keeps re-exploring, about ``log(1/(1-γ)) / kl`` rounds per ``1/(1-γ)`` rounds), and a stage
that merely keeps improving changes the disagreement rates slowly; the cascade's warm-up keeps the
untrained stages' answers out of the counts. Forget (:data:`DRIFT_DISCOUNT`) when the *relative*
quality of the stages can change abruptly: a stage is retrained or replaced, a sensor degrades.
``docs/evidence/results.md``, "Beyond the paper", has the measurements behind both choices.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from uss_stream.core.round_table import RoundTable

__all__ = ["DRIFT_DISCOUNT", "EffectiveHorizon", "check_discount", "effective_horizon"]

#: The discount recommended when the stages' relative quality drifts (a memory of about 1000 rounds).
DRIFT_DISCOUNT = 0.999


def check_discount(discount: Any) -> float | None:
    """Validate a discount factor: ``None`` (no forgetting) or a number ``0 < γ < 1``.

    >>> check_discount(0.99), check_discount(None)
    (0.99, None)
    >>> check_discount(1)
    Traceback (most recent call last):
    ...
    ValueError: discount must be a number with 0 < discount < 1 (None: no forgetting), got 1

    """
    if discount is None:
        return None
    if (
        isinstance(discount, bool)
        or not isinstance(discount, (int, float, np.integer, np.floating))
        or not 0.0 < discount < 1.0
    ):
        raise ValueError(
            f"discount must be a number with 0 < discount < 1 (None: no forgetting), got {discount!r}"
        )
    return float(discount)


def effective_horizon(t: int, discount: float | None) -> float:
    """``τ_t = Σ_{s=1..t} γ^{t-s} = (1 - γ^t) / (1 - γ)``, the discounted round count (``t`` if no ``γ``).

    >>> effective_horizon(1, 0.5), effective_horizon(3, 0.5), effective_horizon(3, None)
    (1.0, 1.75, 3.0)

    """
    if discount is None:
        return float(t)
    return (1.0 - math.pow(discount, t)) / (1.0 - discount)


class EffectiveHorizon:
    """``τ_t`` of :func:`effective_horizon` for a fixed discount, for one round or many.

    The streaming path keeps only the last value; the vectorised path tabulates the rounds it is
    asked about with the same scalar function (a sliding :class:`~uss_stream.core.round_table.RoundTable`),
    so both see the same floats.

    >>> horizon = EffectiveHorizon(0.5)
    >>> horizon(2), horizon.many(np.array([1, 2, 3])).tolist()
    (1.5, [1.0, 1.5, 1.75])

    """

    def __init__(self, discount: float | None = None) -> None:
        self._discount = check_discount(discount)
        self._last: tuple[int, float] = (0, 0.0)
        self._table = RoundTable()

    def _horizons(self, start: int, stop: int) -> list[float]:
        return [effective_horizon(t, self._discount) for t in range(start, stop)]

    def __call__(self, t: int) -> float:
        last_t, last_value = self._last
        if t != last_t:
            last_value = effective_horizon(t, self._discount)
            self._last = (t, last_value)
        return last_value

    def many(self, rounds: np.ndarray) -> np.ndarray:
        """``τ_t`` for an array of rounds (``>= 1``)."""
        if self._discount is None:  # τ_t = t: exact as a float, no table to build
            return rounds.astype(np.float64)
        return self._table(rounds, self._horizons)
