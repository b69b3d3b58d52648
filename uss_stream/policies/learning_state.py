"""What a learner has learned, in the one vocabulary of the Python summaries and the service's metrics.

The Kafka service exposes these quantities on ``/metrics`` with the prefix ``uss_kafka_`` (e.g.
``uss_kafka_chosen_depth``); :meth:`uss_stream.CascadeClassifier.summary`,
:meth:`uss_stream.pending.PendingDecisions.summary` and a replay's summary use the same names
without the prefix (``docs/metrics.md`` lists them all):

``policy_round``
    The rounds (decisions) the policy has counted.
``chosen_depth``
    The depth (1-based) the policy would choose now, computed on its counts without stepping it
    (``None`` for a sequential policy, which decides per event from the stages' confidence).
``disagreement_ratio``
    ``{"i-j": p̂_ij}``: the pairwise disagreement rates the policy decides from, stages ``i < j``
    1-based, for the pairs observed at least once (``D_ij / n_j``).
``wd_verdict``
    Where labels arrive: what they say about weak dominance (:mod:`uss_stream.labels.wd_monitor`),
    ``"holds"``, ``"violated"`` or ``"undecided"``; ``None`` without labels.
``depth_mix``
    The rounds the policy learned from, by depth (``n_d - n_{d+1}``): where it has settled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uss_stream.core.instances import WD_VERDICTS
from uss_stream.core.stats import DisagreementStats
from uss_stream.labels.evidence import LabelEvidence
from uss_stream.labels.wd_monitor import wd_report
from uss_stream.policies import Policy

__all__ = ["WD_VERDICTS", "chosen_depth", "depth_mix", "disagreement_ratio", "learning_state"]


def chosen_depth(policy: Policy) -> int | None:
    """The depth ``policy`` would choose at its next round, without stepping it.

    Computed by the policy's vectorised rule (:meth:`~uss_stream.policies.Policy.decide_many`) on
    its counts (and, for a label-asking policy, its label evidence); ``None`` for a sequential
    policy.

    >>> from uss_stream.policies import USSUCB
    >>> policy = USSUCB([0.0, 0.15, 0.2], alpha=0.51)
    >>> chosen_depth(policy)          # nothing learned: query everything
    3
    >>> _ = policy.run([[1, 1, 1]] * 300)
    >>> chosen_depth(policy), policy.stats.decisions   # stage 1 always agreed: stop there
    (1, 300)

    """
    if policy.sequential:
        return None
    stats = policy.stats
    extra = {}
    if policy.asks_for_labels:
        seen = policy.evidence
        extra["evidence"] = np.array([[seen.labelled, seen.deeper_right, seen.shallower_right]])
    rounds = np.array([stats.decisions + 1])
    queried = np.array(stats.queried)[None, :]
    counts = np.array(stats.disagreements)[None, :, :]
    return int(policy.decide_many(rounds, queried, counts, **extra)[0])


def disagreement_ratio(stats: DisagreementStats) -> dict[str, float]:
    """``{"i-j": D_ij / n_j}`` of the counts, for the pairs ``i < j`` (1-based) observed at least once.

    >>> from uss_stream.policies import USSUCB
    >>> policy = USSUCB([0.0, 0.15, 0.2])
    >>> _ = policy.run([[1, 0, 1], [1, 1, 1], [0, 0, 0], [1, 1, 0]])
    >>> disagreement_ratio(policy.stats)
    {'1-2': 0.25, '1-3': 0.25, '2-3': 0.5}

    """
    k = stats.n_stages
    return {
        f"{i + 1}-{j + 1}": float(stats.disagreements[i][j] / stats.queried[j])
        for j in range(1, k)
        if stats.queried[j]
        for i in range(j)
    }


def depth_mix(stats: DisagreementStats) -> list[float]:
    """The rounds the counts hold by depth ``1..K`` (``n_d - n_{d+1}``; discounted counts are
    weighted).

    >>> from uss_stream.policies import FixedDepth
    >>> policy = FixedDepth(2, [0.0, 0.1, 0.3])
    >>> _ = policy.run([[1, 1, 1]] * 4)
    >>> depth_mix(policy.stats)
    [0, 4, 0]

    """
    queried = list(stats.queried)
    return [queried[d] - (queried[d + 1] if d + 1 < len(queried) else 0) for d in range(len(queried))]


def learning_state(policy: Policy, evidence: LabelEvidence | None = None) -> dict[str, Any]:
    """``policy_round``, ``chosen_depth``, ``depth_mix``, ``disagreement_ratio`` and ``wd_verdict``.

    Parameters
    ----------
    policy
        The learner's policy.
    evidence
        The labels seen (per pair, on disagreement rounds) for the WD verdict; a label-asking
        policy's own evidence by default. ``wd_verdict`` is ``None`` without either.

    Examples
    --------
    >>> from uss_stream.policies import AuditedUSS, USSKLUCB
    >>> state = learning_state(USSKLUCB([0.0, 0.5]))
    >>> state["policy_round"], state["chosen_depth"], state["disagreement_ratio"], state["wd_verdict"]
    (0, 2, {}, None)
    >>> learning_state(AuditedUSS([0.0, 0.5]))["wd_verdict"]   # no label yet
    'undecided'

    """
    if evidence is None and policy.asks_for_labels:
        evidence = policy.evidence
    stats = policy.stats
    verdict = None
    if evidence is not None:
        report = wd_report(
            policy.cumulative_costs, list(stats.queried), stats.disagreements, evidence, stats.decisions + 1
        )
        verdict = report.verdict
    return {
        "policy_round": int(stats.decisions),
        "chosen_depth": chosen_depth(policy),
        "depth_mix": depth_mix(stats),
        "disagreement_ratio": disagreement_ratio(stats),
        "wd_verdict": verdict,
    }
