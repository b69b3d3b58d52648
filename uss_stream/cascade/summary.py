"""What a :class:`~uss_stream.CascadeClassifier` has done so far: :class:`CascadeSummary`.

:func:`summarise` reads the cascade's counters and its policy's counts; it never steps the policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from uss_stream.labels.evidence import LabelEvidence
from uss_stream.labels.wd_monitor import WDMonitor, WDReport
from uss_stream.policies import Policy
from uss_stream.policies.learning_state import chosen_depth
from uss_stream.rules.membership import set_membership

__all__ = ["CascadeSummary", "summarise"]


@dataclass(frozen=True)
class CascadeSummary:
    """What a :class:`CascadeClassifier` has done so far (from :meth:`CascadeClassifier.summary`).

    Attributes
    ----------
    events
        Decided events, warm-up included.
    warm_up_events
        Events answered during the warm-up (all stages queried, no policy step).
    learned
        Labelled samples every stage has learned from.
    total_cost
        Sum of ``C_depth`` over the events.
    next_depth
        The depth the policy will choose at its next step (``None`` for a sequential policy,
        which decides per event).
    stages
        One row per stage: ``model``, ``cost`` (``c_j``), ``cumulative_cost`` (``C_j``),
        ``answered`` (events whose deepest queried stage it was: the depth histogram),
        ``queried`` (events that ran it), ``in_B_l`` / ``in_B_h`` (membership of USS-(KL-)UCB's sets
        for the next step; missing for other policies).
    disagreement
        ``K x K`` empirical disagreement rates ``p̂_ij`` of the policy's steps (NaN while a pair
        has not been observed).
    labels_used
        Labels the policy learned from (only a label-asking policy asks).
    wd
        The WD monitor (:mod:`uss_stream.labels.wd_monitor`) on the labels of the stepped events seen by
        :meth:`CascadeClassifier.learn_one`: best depth, agreement of the label-free choice,
        verdict. ``None`` only for summaries built by hand.
    contexts
        What a sequential policy learned per context (``policy.contexts()``): for
        :class:`~uss_stream.policies.SequentialKLUCB` one row per context (stage, confidence bin):
        its confidence range, events, how many stopped there and the depth mix of its events, and
        what its cost test would do next; for :class:`~uss_stream.policies.ThresholdBandit` one
        row per threshold (its plays and mean reward); ``None`` for the other policies.
    learning
        :meth:`CascadeClassifier.learning_state`: the policy's quantities under the names of the
        Kafka service's metrics, also readable as the properties below (``docs/metrics.md``).
    scored, correct
        Decided events whose label :meth:`CascadeClassifier.learn_one` gave right after their
        decision (warm-up included), and how many of them the cascade answered right.
    price_of_error
        The cascade's ``price_of_error`` (costs here are in error units; ``None``: they were given
        in error units).
    """

    events: int
    warm_up_events: int
    learned: int
    total_cost: float
    next_depth: int | None
    stages: pd.DataFrame
    disagreement: pd.DataFrame
    contexts: pd.DataFrame | None = None
    labels_used: int = 0
    wd: WDReport | None = None
    learning: dict[str, Any] = field(default_factory=dict)
    scored: int = 0
    correct: int = 0
    price_of_error: float | None = None

    @property
    def cost_total(self) -> float:
        """``uss_kafka_cost_total``'s quantity: sum of ``C_depth`` over the events (``total_cost``)."""
        return self.total_cost

    @property
    def full_cascade_cost_total(self) -> float:
        """What querying every stage would have cost on the same events: ``events · C_K``."""
        return self.events * float(self.stages["cumulative_cost"].iloc[-1])

    @property
    def chosen_depth(self) -> int | None:
        """The depth the policy would choose now (``next_depth``)."""
        return self.next_depth

    @property
    def policy_round(self) -> int | None:
        """The rounds the policy has counted (the warm-up is not stepped)."""
        return self.learning.get("policy_round")

    @property
    def disagreement_ratio(self) -> dict[str, float]:
        """``{"i-j": p̂_ij}`` of the observed pairs ``i < j`` (1-based), as the metric's ``pair`` label."""
        return dict(self.learning.get("disagreement_ratio", {}))

    @property
    def wd_verdict(self) -> str | None:
        """``"holds"``, ``"violated"`` or ``"undecided"`` (the WD monitor's verdict)."""
        return None if self.wd is None else self.wd.verdict

    @property
    def labels_requested_total(self) -> int:
        """Labels a label-asking policy asked for (0 for the others)."""
        return int(self.learning.get("labels_requested_total", 0))

    @property
    def labels_answered_total(self) -> int:
        """Label requests answered by :meth:`CascadeClassifier.learn_one`."""
        return int(self.learning.get("labels_answered_total", 0))

    @property
    def labels_expired_total(self) -> int:
        """Label requests whose label did not come with the next :meth:`CascadeClassifier.learn_one`."""
        return int(self.learning.get("labels_expired_total", 0))

    @property
    def mean_cost(self) -> float:
        """Average acquisition cost per event (NaN before the first event)."""
        return self.total_cost / self.events if self.events else math.nan

    @property
    def cost_saved(self) -> float:
        """The share of the whole cascade's cost saved: ``1 - total_cost / full_cascade_cost_total``
        (NaN before the first event or if the whole cascade costs nothing)."""
        full = self.full_cascade_cost_total
        return 1.0 - self.total_cost / full if full > 0 else math.nan

    @property
    def accuracy(self) -> float:
        """``correct / scored``: the accuracy of the answers whose label came (NaN without one)."""
        return self.correct / self.scored if self.scored else math.nan

    @property
    def advice(self) -> str | None:
        """:attr:`WDReport.advice <uss_stream.labels.wd_monitor.WDReport.advice>`: what to do when
        the label-free choice contradicts a best depth the labels make certain; else ``None``."""
        return None if self.wd is None else self.wd.advice

    def __str__(self) -> str:
        cost = f"mean cost {self.mean_cost:.4g}"
        if self.price_of_error is not None:
            cost += f" ({self.mean_cost * self.price_of_error:.4g} at {self.price_of_error:g} per error)"
        saved = (
            "" if math.isnan(self.cost_saved) else f", {100 * self.cost_saved:.1f}% of the full cost saved"
        )
        accuracy = f"; accuracy {100 * self.accuracy:.2f}% on {self.scored} labels" if self.scored else ""
        head = (
            f"{self.events} events ({self.warm_up_events} in warm-up), {self.learned} labelled, "
            f"{cost}{saved}{accuracy}, next depth {self.next_depth}"
        )
        rates = self.disagreement.round(4).to_string()
        monitor = "" if self.wd is None else f"; {self.wd}"
        labels = f"labels used by the policy: {self.labels_used}{monitor}"
        if self.advice is not None:
            labels += f"\nadvice: {self.advice}"
        text = f"{head}\n{labels}\n{self.stages.to_string()}\ndisagreement rates:\n{rates}"
        if self.contexts is not None:
            text += f"\ncontexts:\n{self.contexts.to_string(index=False)}"
        return text


def summarise(
    policy: Policy,
    *,
    names: Sequence[str],
    models: Sequence[str],
    stage_costs: Sequence[float],
    cumulative: Sequence[float],
    answered: Sequence[int],
    counters: tuple[int, int, int, int],
    total_cost: float,
    monitor: WDMonitor,
    evidence: LabelEvidence,
    learning: dict[str, Any] | None = None,
    scored: tuple[int, int] = (0, 0),
    price_of_error: float | None = None,
) -> CascadeSummary:
    """The summary of a cascade whose policy is ``policy``.

    ``answered`` is the depth histogram; ``counters`` are the events, warm-up events, labelled
    samples and labels used by the policy; ``learning`` the cascade's
    :meth:`~uss_stream.CascadeClassifier.learning_state`; ``scored`` the labelled decided events and
    those answered right; ``price_of_error`` the cascade's. The policy's next depth is computed by
    its vectorised rule (:meth:`~uss_stream.policies.Policy.decide_many`) on its counts, so the
    summary does not step it.
    """
    events, warm_up_events, learned, labels_used = counters
    stats = policy.stats
    k = len(names)
    queried = np.array(stats.queried)
    counts = np.array(stats.disagreements)
    rates = np.full((k, k), np.nan)
    for i in range(k):
        rates[i, i] = 0.0 if queried[i] else np.nan
        for j in range(i + 1, k):
            if queried[j]:
                rates[i, j] = rates[j, i] = counts[i, j] / queried[j]
    t = stats.decisions + 1
    sequential = policy.sequential
    next_depth = chosen_depth(policy)
    bounds = policy.upper_bounds()
    if bounds is not None:
        in_low, in_high = set_membership(cumulative, bounds)
    else:
        in_low = in_high = [pd.NA] * k
    table = pd.DataFrame(
        {
            "model": list(models),
            "cost": list(stage_costs),
            "cumulative_cost": list(cumulative),
            "answered": list(answered),
            "queried": [sum(answered[j:]) for j in range(k)],
            "in_B_l": pd.array(in_low, dtype="boolean"),
            "in_B_h": pd.array(in_high, dtype="boolean"),
        },
        index=pd.Index(list(names), name="stage"),
    )
    label_free = policy.label_free_depth() if policy.asks_for_labels else next_depth
    wd = monitor.report(list(queried), counts.tolist(), evidence, t, label_free)
    return CascadeSummary(
        labels_used=labels_used,
        wd=wd,
        events=events,
        warm_up_events=warm_up_events,
        learned=learned,
        total_cost=total_cost,
        next_depth=next_depth,
        stages=table,
        disagreement=pd.DataFrame(rates, index=table.index, columns=list(names)),
        contexts=policy.contexts() if sequential else None,
        learning=dict(learning or {}),
        scored=scored[0],
        correct=scored[1],
        price_of_error=price_of_error,
    )
