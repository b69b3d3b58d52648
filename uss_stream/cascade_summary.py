"""What a :class:`~uss_stream.CascadeClassifier` has done so far: :class:`CascadeSummary`.

:func:`summarise` reads the cascade's counters and its policy's counts; it never steps the policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from uss_stream.policies import Policy
from uss_stream.policies.label_evidence import LabelEvidence
from uss_stream.policies.membership import set_membership
from uss_stream.wd_monitor import WDMonitor, WDReport

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
        The WD monitor (:mod:`uss_stream.wd_monitor`) on the labels of the stepped events seen by
        :meth:`CascadeClassifier.learn_one`: best depth, agreement of the label-free choice,
        verdict. ``None`` only for summaries built by hand.
    contexts
        For a sequential policy, one row per context (stage, confidence bin): its confidence
        range, events, how many stopped there and the depth mix of its events, and what its cost
        test would do next (:meth:`~uss_stream.policies.SequentialKLUCB.contexts`); else ``None``.
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

    @property
    def mean_cost(self) -> float:
        """Average acquisition cost per event (NaN before the first event)."""
        return self.total_cost / self.events if self.events else math.nan

    def __str__(self) -> str:
        head = (
            f"{self.events} events ({self.warm_up_events} in warm-up), {self.learned} labelled, "
            f"mean cost {self.mean_cost:.4g}, next depth {self.next_depth}"
        )
        rates = self.disagreement.round(4).to_string()
        monitor = "" if self.wd is None else f"; {self.wd}"
        labels = f"labels used by the policy: {self.labels_used}{monitor}"
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
) -> CascadeSummary:
    """The summary of a cascade whose policy is ``policy``.

    ``answered`` is the depth histogram; ``counters`` are the events, warm-up events, labelled
    samples and labels used by the policy. The policy's next depth is computed by its vectorised
    rule (:meth:`~uss_stream.policies.Policy.decide_many`) on its counts, so the summary does not
    step it.
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
    next_depth: int | None = None
    if not sequential:
        extra = {}
        if policy.asks_for_labels:
            seen = policy.evidence
            extra["evidence"] = np.array([[seen.labelled, seen.deeper_right, seen.shallower_right]])
        next_depth = int(policy.decide_many(np.array([t]), queried[None, :], counts[None, :, :], **extra)[0])
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
    )
