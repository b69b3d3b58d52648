"""The stage-by-stage protocol: what every sequential policy shares.

A *sequential* policy (:attr:`~uss_stream.policies.Policy.sequential`) decides after each queried
stage instead of before the first: :meth:`SequentialPolicy.begin` starts an event, then
:meth:`SequentialPolicy.step` receives each queried stage's output, its confidence (its largest
class probability) and, where the caller has them, its class probabilities, and returns whether
the next stage is worth asking. :meth:`SequentialPolicy.run` is the batch entry point over logged
outputs (the sequential replay calls it); it decides exactly as the ``begin``/``step`` loop.
:class:`~uss_stream.cascade.CascadeClassifier` drives the same two methods event by event.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from uss_stream.policies.base import CountStates, Policy

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SequentialPolicy", "checked_confidence", "entropy_of"]


class SequentialPolicy(Policy):
    """Base class of the policies that decide stage by stage (``begin``/``step``).

    A subclass implements :meth:`begin`, :meth:`step` and :meth:`cancel`; the depth-first protocol
    (``select``/``update``/``decide_many``) is refused by name. ``K >= 2`` stages: with one there
    is nothing to decide.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``.
    discount
        As :class:`~uss_stream.policies.Policy`.
    """

    def __init__(self, stage_costs: Sequence[float], discount: float | None = None) -> None:
        super().__init__(stage_costs, discount=discount)
        if self.n_stages < 2:
            raise ValueError(f"stage_costs: a sequential policy needs at least 2 stages, got {self.n_stages}")
        self._reason: str | None = None

    @property
    def sequential(self) -> bool:
        """``True``: decides after each stage (:meth:`begin` / :meth:`step`)."""
        return True

    @property
    def reason(self) -> str | None:
        """Why the last event stopped (the policy's own word, or ``"last stage"``; ``None`` before one)."""
        return self._reason

    @abc.abstractmethod
    def begin(self) -> None:
        """Start an event; then call :meth:`step` after each queried stage."""

    @abc.abstractmethod
    def step(self, output: Any, confidence: float | None, proba: Any = None) -> bool:
        """Report the next stage's output, confidence and (optionally) class probabilities.

        Returns ``True`` if the following stage is worth asking; when it returns ``False`` the
        event is learned from and ends. ``confidence`` is the stage's largest class probability in
        ``[0, 1]`` (``None`` or NaN for a stage that abstained); ``proba`` its class probabilities
        (a mapping class -> probability or a sequence of probabilities; ``None``: not given).
        """

    @abc.abstractmethod
    def cancel(self) -> None:
        """Withdraw the event in progress (e.g. a stage failed): nothing is learned."""

    def contexts(self) -> pd.DataFrame | None:
        """What the policy learned, one row per context it keeps; ``None`` if it keeps none."""
        return None

    def select(self) -> int:
        raise TypeError(f"{type(self).__name__} is sequential: use begin() and step(), not select()")

    def update(self, outputs: Sequence[Any]) -> None:
        raise TypeError(f"{type(self).__name__} is sequential: use begin() and step(), not update()")

    def _decide(self, t: int) -> int:
        raise TypeError(f"{type(self).__name__} is sequential: it has no depth before the first stage")

    def _decide_many(self, states: CountStates) -> np.ndarray:
        raise TypeError(
            f"{type(self).__name__} is sequential: replay it with uss_stream.replay.sequential, not replay()"
        )

    def run(self, outputs: Any, confidences: Any = None, probabilities: Any = None) -> np.ndarray:
        """Run :meth:`begin` / :meth:`step` over ``T x K`` outputs and confidences; returns the depths.

        ``probabilities`` (optional) is ``T x K x C``: each stage's class probabilities, in any
        class order (zeros pad a stage with fewer classes); row ``t``, stage ``j`` goes to
        :meth:`step` as ``proba``.
        """
        if confidences is None:
            raise ValueError("confidences: a sequential policy needs the T x K stage confidences")
        outputs = np.asarray(outputs)
        confidences = np.asarray(confidences, dtype=np.float64)
        if outputs.ndim != 2 or outputs.shape[1] != self.n_stages or confidences.shape != outputs.shape:
            raise ValueError(
                f"outputs and confidences must both be T x {self.n_stages} arrays, got "
                f"{outputs.shape} and {confidences.shape}"
            )
        rows = outputs.tolist()
        confidence_rows = confidences.tolist()
        probability_rows = self._probability_rows(probabilities, outputs.shape)
        depths = np.empty(len(rows), dtype=np.int64)
        step = self.step
        for t, (row, confidence_row) in enumerate(zip(rows, confidence_rows)):
            self.begin()
            j = 0
            if probability_rows is None:
                while step(row[j], confidence_row[j]):
                    j += 1
            else:
                probas = probability_rows[t]
                while step(row[j], confidence_row[j], probas[j]):
                    j += 1
            depths[t] = j + 1
        return depths

    @staticmethod
    def _probability_rows(probabilities: Any, shape: tuple[int, ...]) -> np.ndarray | None:
        if probabilities is None:
            return None
        array = np.asarray(probabilities, dtype=np.float64)
        if array.ndim != 3 or array.shape[:2] != shape:
            raise ValueError(
                f"probabilities must be a T x K x C array matching the outputs {shape}, got {array.shape}"
            )
        return array


def checked_confidence(confidence: Any) -> float:
    """A stage's confidence as a float in ``[0, 1]``; ``None`` or NaN (an abstaining stage) is NaN.

    >>> checked_confidence(0.75), checked_confidence(None)
    (0.75, nan)
    >>> checked_confidence(1.5)
    Traceback (most recent call last):
    ...
    ValueError: confidence must be a number in [0, 1], None or NaN, got 1.5
    """
    if confidence is None:
        return math.nan
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float, np.integer, np.floating))
        or not (confidence != confidence or 0.0 <= confidence <= 1.0)
    ):
        raise ValueError(f"confidence must be a number in [0, 1], None or NaN, got {confidence!r}")
    return float(confidence)


def entropy_of(proba: Any, confidence: float) -> float:
    """The entropy (nats) of a stage's class probabilities; NaN if it abstained.

    ``proba`` is a mapping class -> probability or a sequence of probabilities; ``None`` when only
    the top probability ``confidence`` is known, then the entropy is that of the two-class
    distribution ``(p, 1 - p)``: exact for two classes, and the least entropy any distribution
    with top probability ``p >= 1/2`` can have.

    >>> round(entropy_of({"a": 0.5, "b": 0.5}, 0.5), 4), round(entropy_of(None, 0.5), 4)
    (0.6931, 0.6931)
    >>> round(entropy_of([0.5, 0.25, 0.25], 0.5), 4), entropy_of([1.0, 0.0], 1.0)
    (1.0397, 0.0)
    """
    if confidence != confidence:
        return math.nan
    if proba is None:
        values: Any = (confidence, 1.0 - confidence)
    elif isinstance(proba, Mapping):
        values = proba.values()
    else:
        values = proba
    total = 0.0
    for p in values:
        p = float(p)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"proba: class probabilities must lie in [0, 1], got {p!r}")
        if p > 0.0:
            total -= p * math.log(p)
    return total + 0.0
