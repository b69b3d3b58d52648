"""The metrics' vocabulary in Python: learning_state, PendingDecisions.summary, CascadeSummary.

Expectations are hand-computed from the definitions (``docs/metrics.md``) or come from the policy's
own scalar ``select`` (the quantities use its vectorised rule).
"""

from __future__ import annotations

import pytest
from river import linear_model

from uss_stream import CascadeClassifier, Stage
from uss_stream.core.stats import DisagreementStats
from uss_stream.labels.evidence import LabelEvidence
from uss_stream.pending import PendingDecisions
from uss_stream.policies import USSKLUCB, USSUCB, FixedDepth
from uss_stream.policies.learning_state import WD_VERDICTS, learning_state


def test_pending_decisions_summary_counts_by_hand():
    book = PendingDecisions(USSUCB([0.0, 0.5]))
    assert [book.decide(f"e{i}") for i in range(3)] == [2, 2, 2]
    book.report("e0", [1, 0])  # disagree
    book.report("e2", [1, 1])  # agree; e1 stays pending
    summary = book.summary()
    assert summary == {
        "policy_round": 3,
        "chosen_depth": summary["chosen_depth"],
        "depth_mix": [0, 2],
        "disagreement_ratio": {"1-2": 0.5},
        "wd_verdict": None,  # a label-free policy: no labels, no verdict
        "pending_decisions": 1,
    }
    probe = PendingDecisions(USSUCB([0.0, 0.5]))
    probe.load_state_dict(book.state_dict())
    assert summary["chosen_depth"] == probe.decide("next")  # the scalar rule's next decision


@pytest.mark.parametrize("decisions", [1, 50, 5000])
def test_chosen_depth_is_the_next_select_of_the_policy(decisions):
    policy = USSKLUCB([0.0, 0.11, 0.11])
    stats = DisagreementStats(3)
    stats.decisions = decisions
    stats.queried = [decisions, decisions, decisions // 2]
    stats.disagreements = [[0, decisions // 10, decisions // 8], [0, 0, decisions // 20], [0, 0, 0]]
    policy.load_stats(stats)
    state = learning_state(policy)
    assert state["chosen_depth"] == policy.select()
    assert state["policy_round"] == decisions
    assert state["depth_mix"] == [0, decisions - decisions // 2, decisions // 2]


def test_wd_verdict_is_one_of_the_metric_names_and_violated_where_the_labels_say_so():
    # wd_monitor's example: p_23 = 0.15 >= C_3 - C_2 = 0.11 but the labels say stage 3 gains 0.045.
    policy = USSKLUCB([0.0, 0.11, 0.11])
    stats = DisagreementStats(3)
    stats.decisions, stats.queried = 5000, [5000, 5000, 5000]
    stats.disagreements = [[0, 2000, 2000], [0, 0, 750], [0, 0, 0]]
    policy.load_stats(stats)
    evidence = LabelEvidence(3)
    evidence.labelled, evidence.deeper_right, evidence.shallower_right = (
        [60, 60, 200],
        [60, 60, 130],
        [0, 0, 70],
    )
    assert learning_state(policy, evidence)["wd_verdict"] == "violated"
    assert learning_state(policy, LabelEvidence(3))["wd_verdict"] == "undecided"  # no label yet
    assert set(WD_VERDICTS) == {"holds", "violated", "undecided"}


def test_cascade_summary_speaks_the_metrics_names():
    costs = [0.0, 0.25, 0.5]  # C = 0, 0.25, 0.75
    cascade = CascadeClassifier(
        [Stage(linear_model.LogisticRegression(), cost=c) for c in costs],
        policy=FixedDepth(2, costs),
        warm_up=3,
    )
    for i in range(10):
        x = {"x": float(i % 3)}
        cascade.decide_one(x)
        cascade.learn_one(x, i % 2 == 0)
    summary = cascade.summary()
    assert summary.cost_total == pytest.approx(3 * 0.75 + 7 * 0.25)  # warm-up at depth 3, then depth 2
    assert summary.full_cascade_cost_total == pytest.approx(10 * 0.75)
    assert (summary.chosen_depth, summary.policy_round) == (2, 7)
    assert summary.labels_requested_total == 0 and summary.wd_verdict in WD_VERDICTS
    assert summary.learning == cascade.learning_state()
    assert summary.disagreement_ratio == {"1-2": summary.disagreement.iloc[0, 1]}
