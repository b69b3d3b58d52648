"""AuditedUSS, its label evidence, the labelled replay, late labels in PendingDecisions and the WD monitor."""

from __future__ import annotations

import json
import logging
import math
import pickle

import numpy as np
import pytest
from river import base as river_base

from uss_stream import CascadeClassifier, Stage
from uss_stream.datasets.bsc import generate_bsc
from uss_stream.datasets.paper import paper_case
from uss_stream.labels.evidence import LabelEvidence, e_bounds
from uss_stream.labels.wd_monitor import WDMonitor, wd_report
from uss_stream.pending import PendingDecisions, RejectedReport
from uss_stream.policies import USSKLUCB, AuditedUSS
from uss_stream.replay.engine import encode_log, pair_indicators, replay, sample_rows
from uss_stream.replay.labelled import simulate_labelled


# -- label evidence ---------------------------------------------------------------------------------
def test_evidence_counts_only_disagreeing_pairs():
    evidence = LabelEvidence(3)
    evidence.record(["a", "b", "b"], "b")  # pairs (1,2), (1,3) disagree; the deeper stages are right
    evidence.record(["a", "a", "c"], "c")  # pairs (1,3), (2,3) disagree; stage 3 right
    evidence.record(["a", "b", "c"], "z")  # every pair disagrees, nobody right: w+ and w- unchanged
    evidence.record(["a", "a"], "b")  # agreement: nothing counted but the label
    # pair order (1,2), (1,3), (2,3)
    assert evidence.labelled == [2, 3, 2]
    assert evidence.deeper_right == [1, 2, 1]
    assert evidence.shallower_right == [0, 0, 0]
    assert evidence.labels == 4
    assert LabelEvidence.from_dict(json.loads(json.dumps(evidence.to_dict()))) == evidence


def test_evidence_rejects_a_mask_pair_that_agrees_and_bad_documents():
    evidence = LabelEvidence(2)
    with pytest.raises(ValueError, match="does not disagree"):
        evidence.record([1, 1], 1, pairs=1)
    with pytest.raises(ValueError, match="beyond"):
        evidence.record([1, 0], 1, pairs=2)
    document = evidence.to_dict()
    document["deeper_right"] = [1]
    with pytest.raises(ValueError, match="exceeds labelled"):
        LabelEvidence.from_dict(document)


@pytest.mark.parametrize(
    ("m", "plus", "minus", "level"), [(10, 7, 3, 2.0), (40, 40, 0, 5.0), (25, 5, 15, 3.0)]
)
def test_e_bounds_are_the_kl_bounds(m, plus, minus, level):
    # Independent computation: scan q on a fine grid for m·kl(x̄, q) <= level.
    mean = (plus - minus + m) / (2 * m)

    def kl(p, q):
        total = p * math.log(p / q) if p > 0 else 0.0
        return total + ((1 - p) * math.log((1 - p) / (1 - q)) if p < 1 else 0.0)

    grid = np.linspace(1e-6, 1 - 1e-6, 200_001)
    inside = [q for q in grid if m * kl(mean, q) <= level]
    lower, upper = e_bounds(m, plus, minus, level)
    assert lower == pytest.approx(2 * min(inside) - 1, abs=2e-5)
    assert upper == pytest.approx(2 * max(inside) - 1, abs=2e-5) or (mean == 1 and upper == 1.0)
    assert e_bounds(0, 0, 0, level) == (-1.0, 1.0)


def _bisected(m, plus, minus, level, upper):
    """The plain bisection of e_bounds: every one of its 28 steps evaluates m·kl at the midpoint."""
    mean = (plus - minus + m) / (2 * m)
    log_p = math.log(mean) if mean > 0.0 else 0.0
    rest = 1.0 - mean
    log_rest = math.log(rest) if mean < 1.0 else 0.0

    def within(q):
        total = 0.0
        if mean > 0.0:
            total += mean * (log_p - math.log(q))
        if mean < 1.0:
            total += rest * (log_rest - math.log(1.0 - q))
        return m * total <= level

    if upper:
        if mean >= 1.0:
            return 1.0
        low, high = mean, 1.0
        for _ in range(28):
            middle = 0.5 * (low + high)
            low, high = (middle, high) if within(middle) else (low, middle)
        return 2.0 * high - 1.0
    if mean <= 0.0:
        return -1.0
    low, high = 0.0, mean
    for _ in range(28):
        middle = 0.5 * (low + high)
        low, high = (low, middle) if within(middle) else (middle, high)
    return 2.0 * low - 1.0


def test_e_bounds_equal_the_plain_bisection_to_the_bit():
    # e_bounds decides most steps without their logarithms (certified bounds around the root).
    rng = np.random.default_rng(5)
    counts = [
        (m, plus, minus) for m in range(1, 13) for plus in range(m + 1) for minus in range(m + 1 - plus)
    ]
    for _ in range(300):
        m = int(rng.choice([rng.integers(13, 200), rng.integers(200, 5000)]))
        plus = int(rng.integers(0, m + 1))
        counts.append((m, plus, int(rng.integers(0, m - plus + 1))))
    levels = [1.0, 1.7, math.log(2.0) * 11, 19.3]
    for m, plus, minus in counts:
        for level in levels:
            expected = (_bisected(m, plus, minus, level, False), _bisected(m, plus, minus, level, True))
            assert e_bounds(m, plus, minus, level) == expected, (m, plus, minus, level)


# -- the policy --------------------------------------------------------------------------------------
def test_without_labels_it_decides_as_uss_kl_ucb():
    outputs, _ = generate_bsc(3000, seed=3)
    costs = [0.0, 0.11, 0.11]
    assert np.array_equal(AuditedUSS(costs).run(outputs), USSKLUCB(costs).run(outputs))


def test_request_rule_by_hand():
    policy = AuditedUSS([0.0, 0.5], label_budget=0.5, label_allotment=1.0)
    assert policy.select() == 2
    policy.update([0, 1])  # t = 1: 0 requests < 1 + 0.5·sqrt(1), the pair disagrees and is open
    assert policy.label_request == 1 and policy.labels_requested == 1
    assert policy.select() == 2
    policy.update([0, 1])  # t = 2: 1 request < 1 + 0.5·sqrt(2) = 1.71: still within the budget
    assert policy.label_request == 1 and policy.labels_requested == 2
    assert policy.select() == 2
    policy.update([0, 1])  # t = 3: 2 requests >= 1 + 0.5·sqrt(3) = 1.87: the budget is spent
    assert policy.label_request == 0
    fresh = AuditedUSS([0.0, 0.5])
    fresh.select()
    fresh.update([1, 1])  # the stages agree: a label would say nothing
    assert fresh.label_request == 0 and fresh.labels_requested == 0


def test_learn_label_checks_its_mask():
    policy = AuditedUSS([0.0, 0.5])
    with pytest.raises(ValueError, match="mask"):
        policy.learn_label([0, 1], 1, 0)
    policy.learn_label([0, 1], 1, 1)
    assert policy.evidence.deeper_right == [1] and policy.labels_received == 1


def test_state_round_trip_and_validation():
    outputs, labels = generate_bsc(2000, seed=2)
    policy = AuditedUSS([0.0, 0.11, 0.11])
    policy.run(outputs, labels=labels, label_delay=5)
    document = json.loads(json.dumps(policy.state_dict()))
    twin = AuditedUSS([0.0, 0.11, 0.11])
    twin.load_state_dict(document)
    assert twin.state_dict() == policy.state_dict()
    assert twin.select() == policy.select()
    broken = dict(document, labels_requested=-1)
    with pytest.raises(ValueError, match="labels_requested"):
        twin.load_state_dict(broken)


def test_a_trained_policy_pickles_and_decides_as_before():
    # Its per-round relations cache holds a closure, which pickle cannot carry: it is left out.
    outputs, labels = generate_bsc(500, seed=2)
    policy = AuditedUSS([0.0, 0.11, 0.11])
    policy.run(outputs, labels=labels, label_delay=5)
    twin = pickle.loads(pickle.dumps(policy))
    assert twin.state_dict() == policy.state_dict()
    assert twin.select() == policy.select()


def test_weak_dominance_failure_is_corrected():
    # BSC case 5: i* = 2, WD fails (p_23 > C_3 - C_2); label-free USS-KL-UCB stays at depth 3.
    outputs, labels = generate_bsc(20_000, seed=1)
    costs = [0.0, 0.11, 0.11]
    plain = USSKLUCB(costs).run(outputs)
    audited = AuditedUSS(costs)
    depths = audited.run(outputs, labels=labels, label_delay=100)
    assert (plain[-5000:] == 3).mean() > 0.9
    assert (depths[-5000:] == 2).mean() > 0.9
    assert audited.labels_requested <= 3.0 * math.sqrt(20_000)


# -- the labelled replay equals the streaming loop ---------------------------------------------------
@pytest.mark.parametrize(("name", "delay"), [("bsc-5", 100), ("heart-2", 0), ("synthetic1-5", 7)])
def test_replay_equals_streaming(name, delay):
    case = paper_case(name)
    outputs, labels = case.log()
    codes, label_codes = encode_log(outputs, labels)
    rows = sample_rows(len(codes), horizon=2500, reps=3, seed=11)
    template = AuditedUSS(case.stage_costs)
    run = simulate_labelled(template, rows, pair_indicators(codes), codes != label_codes[:, None], delay)
    for r in range(3):
        policy = template.clone()
        depths = policy.run(codes[rows[r]], labels=label_codes[rows[r]], label_delay=delay)
        assert np.array_equal(depths, run.depths[r])
        assert policy.labels_requested == run.requests[r].sum()
        assert policy.evidence.labelled == run.evidence[r, 0].tolist()


@pytest.mark.parametrize(
    ("name", "params"),
    [("synthetic1-5", {"label_budget": 0.5, "contradicted_budget": 2.0}), ("pima-2", {})],
)
def test_replay_equals_streaming_with_late_labels_and_a_binding_budget(name, params):
    # D = 100: a window holds arrivals of labels requested before it, and several requests; a
    # small budget makes the count of requests cross its thresholds inside windows.
    case = paper_case(name)
    outputs, labels = case.log()
    codes, label_codes = encode_log(outputs, labels)
    rows = sample_rows(len(codes), horizon=3000, reps=3, seed=5)
    template = AuditedUSS(case.stage_costs, **params)
    run = simulate_labelled(template, rows, pair_indicators(codes), codes != label_codes[:, None], 100)
    for r in range(3):
        policy = template.clone()
        depths = policy.run(codes[rows[r]], labels=label_codes[rows[r]], label_delay=100)
        assert np.array_equal(depths, run.depths[r])
        assert np.array_equal(
            np.flatnonzero(run.requests[r]),
            np.flatnonzero(
                [m != 0 for m in _streaming_requests(template, codes[rows[r]], label_codes[rows[r]])]
            ),
        )
        counts = (policy.evidence.labelled, policy.evidence.deeper_right, policy.evidence.shallower_right)
        assert [list(c) for c in counts] == run.evidence[r].tolist()


def _streaming_requests(template, outputs, labels):
    """The request mask of every round of the streaming loop (labels 100 rounds late)."""
    policy = template.clone()
    waiting, masks = {}, []
    for t, row in enumerate(outputs.tolist()):
        depth = policy.select()
        policy.update(row[:depth])
        masks.append(policy.label_request)
        if policy.label_request:
            waiting[t + 100] = (row[:depth], policy.label_request)
        arrived = waiting.pop(t, None)
        if arrived is not None:
            policy.learn_label(arrived[0], int(labels[t - 100]), arrived[1])
    return masks


def test_replay_counts_labels_and_charges_them():
    case = paper_case("bsc-5")
    outputs, labels = case.log()
    policies = {"audited": AuditedUSS(case.stage_costs), "kl": USSKLUCB(case.stage_costs)}
    free = replay(outputs, labels, policies=policies, horizon=1500, reps=3, label_delay=20)
    paid = replay(outputs, labels, policies=policies, horizon=1500, reps=3, label_delay=20, label_cost=0.5)
    used = free.labels_used["audited"]
    assert used.shape == (3,) and (used > 0).all()
    assert (free.labels_used["kl"] == 0).all()
    extra = paid.cumulative_regret["audited"][:, -1] - free.cumulative_regret["audited"][:, -1]
    assert extra == pytest.approx(0.5 * used)
    table = free.summary().set_index("policy")
    assert table.loc["audited", "labels_mean"] == pytest.approx(used.mean())
    assert table.loc["audited", "wd_verdict"].split(" ")[0] in ("holds", "violated", "undecided")
    with pytest.raises(ValueError, match="label_delay"):
        replay(outputs, labels, policies=policies, horizon=10, reps=1, label_delay=-1)
    with pytest.raises(ValueError, match="learns from labels"):
        replay(outputs, policies=policies, horizon=10, reps=1, error_rates=[0.4, 0.1, 0.05])


# -- late labels through PendingDecisions -------------------------------------------------------------
def test_pending_late_labels_match_the_streaming_loop():
    outputs, labels = generate_bsc(1500, seed=4)
    costs = [0.0, 0.11, 0.11]
    delay = 30
    reference = AuditedUSS(costs)
    expected = reference.run(outputs, labels=labels, label_delay=delay)
    book = PendingDecisions(AuditedUSS(costs))
    depths = []
    for t in range(len(outputs)):
        depth = book.decide(t)
        depths.append(depth)
        book.report(t, outputs[t, :depth].tolist())
        if t >= delay and book.label_requested(t - delay):
            book.report_label(t - delay, int(labels[t - delay]))
    assert depths == expected.tolist()
    assert book.label_counters["applied"] == book.policy.labels_received == reference.labels_received


def test_pending_rejects_bad_labels_and_expires_them():
    book = PendingDecisions(AuditedUSS([0.0, 0.5]), max_label_age_decisions=2)
    book.decide("a")
    book.report("a", [0, 1])
    book.decide("b")
    book.report("b", [1, 1])  # agreement: no request
    with pytest.raises(RejectedReport) as rejected:
        book.report_label("b", 1)
    assert rejected.value.reason == "not_requested"
    with pytest.raises(RejectedReport) as rejected:
        book.report_label("nope", 1)
    assert rejected.value.reason == "unknown"
    book.decide("c")  # "a" asked two decisions ago: its label expires
    with pytest.raises(RejectedReport) as rejected:
        book.report_label("a", 1)
    assert rejected.value.reason == "expired"
    assert book.label_counters["expired"] == 1
    assert book.label_counters["rejected_not_requested"] == 1
    assert book.label_counters["rejected_unknown"] == 1
    book.decide("d")
    book.report("d", [0, 1])
    book.report_label("d", 1)
    restored = PendingDecisions(AuditedUSS([0.0, 0.5]))
    restored.load_state_dict(json.loads(json.dumps(book.state_dict())))
    assert restored.label_counters == book.label_counters
    # The ids whose label was applied or expired are restored: a replayed label keeps its reason.
    for decision_id, reason in (("d", "duplicate"), ("a", "expired")):
        with pytest.raises(RejectedReport) as rejected:
            restored.report_label(decision_id, 1)
        assert rejected.value.reason == reason


# -- the WD monitor -----------------------------------------------------------------------------------
def test_monitor_says_holds_when_every_depth_is_settled_and_warns_once_on_violation(caplog):
    # WD holds: stage 1 is best (C + γ) and its disagreement rate with stage 2 (0.05) is below
    # C_2 - C_1 = 0.3; the labels show stage 2 right on every disagreement.
    evidence = LabelEvidence(2)
    evidence.labelled, evidence.deeper_right, evidence.shallower_right = [100], [100], [0]
    report = wd_report(
        [0.0, 0.3], [10_000, 10_000], [[0, 500], [0, 0]], evidence, t=10_001, label_free_depth=1
    )
    assert (report.best_depth, report.best_depth_certain, report.agrees, report.verdict) == (
        1,
        True,
        True,
        "holds",
    )
    # Violated: stage 2 is best, yet it disagrees with stage 3 on 30% of the rounds, above C_3 - C_2.
    violated = LabelEvidence(3)
    violated.labelled = [200, 200, 300]
    violated.deeper_right = [200, 200, 165]
    violated.shallower_right = [0, 0, 135]
    monitor = WDMonitor([0.0, 0.1, 0.3])
    counts = [[0, 4000, 4000], [0, 0, 3000], [0, 0, 0]]
    with caplog.at_level(logging.WARNING, logger="uss_stream.labels.wd_monitor"):
        first = monitor.report([10_000] * 3, counts, violated, 10_001, 3)
        monitor.report([10_000] * 3, counts, violated, 10_001, 3)
    assert (first.best_depth, first.verdict, first.agrees) == (2, "violated", False)
    assert sum("weak dominance is violated" in r.message for r in caplog.records) == 1
    undecided = wd_report([0.0, 0.3], [10, 10], [[0, 5], [0, 0]], LabelEvidence(2), t=11)
    assert undecided.verdict == "undecided" and undecided.agrees is None


@pytest.mark.parametrize("params", list(AuditedUSS._unit_test_params()))
def test_vectorised_rule_equals_the_scalar_rule_on_random_states(params):
    # Random counts and label evidence; decide_many must return what select() returns on each.
    rng = np.random.default_rng(7)
    template = AuditedUSS(**params)
    k = template.n_stages
    n_pairs = k * (k - 1) // 2
    states = []
    for _ in range(200):
        t = int(rng.integers(2, 5000))
        queried = np.sort(rng.integers(0, t, size=k))[::-1]
        disagreements = np.zeros((k, k), dtype=np.int64)
        evidence = np.zeros((3, n_pairs), dtype=np.int64)
        for j in range(1, k):
            for i in range(j):
                d = int(rng.integers(0, queried[j] + 1))
                disagreements[i, j] = d
                pair = j * (j - 1) // 2 + i
                m = int(rng.integers(0, min(d, 60) + 1)) if rng.random() < 0.7 else 0
                plus = int(rng.integers(0, m + 1))
                minus = int(rng.integers(0, m - plus + 1))
                evidence[:, pair] = (m, plus, minus)
        states.append((t, queried, disagreements, evidence))
    vectorised = template.decide_many(
        np.array([s[0] for s in states]),
        np.array([s[1] for s in states]),
        np.array([s[2] for s in states]),
        evidence=np.array([s[3] for s in states]),
        requested=np.array([int(s[3][0].max()) for s in states]),
    )
    for (t, queried, disagreements, evidence), depth in zip(states, vectorised):
        policy = template.clone()
        document = policy.state_dict()
        document["stats"].update(
            decisions=t - 1, queried=queried.tolist(), disagreements=disagreements.tolist()
        )
        document["evidence"].update(
            labelled=evidence[0].tolist(),
            deeper_right=evidence[1].tolist(),
            shallower_right=evidence[2].tolist(),
            labels=int(evidence[0].max()),
        )
        document["labels_requested"] = int(evidence[0].max())
        policy.load_state_dict(document)
        assert policy.select() == depth


# -- CascadeClassifier ---------------------------------------------------------------------------------
class _Column(river_base.Classifier):
    """A 'stage' that answers with one logged output column (learning does nothing)."""

    def __init__(self, column: str) -> None:
        self.column = column

    def learn_one(self, x, y, **kwargs):
        return None

    def predict_proba_one(self, x):
        return {x[self.column]: 1.0}


def test_cascade_feeds_requested_labels_to_the_policy_as_the_streaming_loop_does():
    outputs, labels = generate_bsc(3000, seed=5)
    costs = [0.0, 0.11, 0.11]
    names = ("s1", "s2", "s3")
    cascade = CascadeClassifier(
        stages=[Stage(_Column(name), cost=c, name=name) for name, c in zip(names, costs)],
        policy=AuditedUSS(costs),
        warm_up=0,
    )
    depths = []
    for row, y in zip(outputs.tolist(), labels.tolist()):
        x = dict(zip(names, row))
        depths.append(cascade.decide_one(x).depth)
        cascade.learn_one(x, y)
    reference = AuditedUSS(costs)
    expected = reference.run(outputs, labels=labels, label_delay=0)
    assert depths == expected.tolist()
    summary = cascade.summary()
    assert summary.labels_used == reference.labels_received > 0
    assert summary.wd is not None and summary.wd.labels == 3000 - (np.array(depths) == 1).sum()
    assert "labels used by the policy" in str(summary)
    assert summary.next_depth == reference.select()


def test_monitor_flags_a_violation_on_one_certified_pair_before_the_best_depth_is_certain():
    # Stage 2 is best on the labels; stages 2 and 3 disagree on 30% of the rounds (above the cost
    # gap 0.2) while the labels show stage 3 not worth it; stage 4 was seen 10 times only, so the
    # best depth is not certain, yet the failure WD rules out is established at depth 2.
    evidence = LabelEvidence(4)
    evidence.labelled = [200, 200, 300, 0, 0, 0]
    evidence.deeper_right = [200, 200, 165, 0, 0, 0]
    evidence.shallower_right = [0, 0, 135, 0, 0, 0]
    counts = [[0, 4000, 4000, 4], [0, 0, 3000, 3], [0, 0, 0, 3], [0, 0, 0, 0]]
    report = wd_report([0.0, 0.1, 0.3, 0.5], [10_000, 10_000, 10_000, 10], counts, evidence, t=10_001)
    assert (report.best_depth, report.best_depth_certain, report.verdict) == (2, False, "violated")
    # The same counts without the labels of pair (2, 3): nothing is established.
    evidence.labelled[2] = evidence.deeper_right[2] = evidence.shallower_right[2] = 0
    assert wd_report(
        [0.0, 0.1, 0.3, 0.5], [10_000, 10_000, 10_000, 10], counts, evidence, t=10_001
    ).verdict == ("undecided")


# -- a reference implementation of the decision and request rule -------------------------------------
def _reference(costs, t, queried, disagreements, evidence, requested, outputs, budget=(3.0, 3.0, 0.0)):
    """AuditedUSS's depth for round ``t`` and its request mask for ``outputs``, from docs/audited.md.

    Label-free "beats" is USS-KL-UCB's (its own tests); the label bounds are ``e_bounds`` (tested
    above against a grid) with Hoeffding on ``p``; everything else is written out here. ``budget``:
    ``(c, c', a)``, at most ``a + c·sqrt(t)`` labels, ``a + c'·sqrt(t)`` while a contradiction counts.
    """
    k = len(costs)
    cumulative = np.cumsum(costs)
    label_free = USSKLUCB(costs)
    document = label_free.state_dict()
    document["stats"].update(decisions=t - 1, queried=list(queried), disagreements=disagreements)
    label_free.load_state_dict(document)
    kl = label_free._beats(t)
    level = ((t - 1).bit_length() + 1) * math.log(2)

    def delta(i, j, e_level):
        pair = j * (j - 1) // 2 + i
        m, plus, minus = (int(v) for v in evidence[:, pair])
        n = queried[j]
        p_hat = disagreements[i][j] / n
        radius = math.sqrt(max(level - math.log(k * n), 1.0) / (2 * n))
        p_low, p_up = max(p_hat - radius, 0.0), min(p_hat + radius, 1.0)
        e_low, e_up = e_bounds(m, plus, minus, e_level(m))
        low = p_low * e_low if e_low >= 0 else p_up * e_low
        up = p_up * e_up if e_up >= 0 else p_low * e_up
        return low, up

    def labelled(i, j):
        return evidence[0, j * (j - 1) // 2 + i] > 0

    def reduced(m):
        return max(level - math.log(k * m), 1.0)

    pairs = [(i, j) for j in range(k) for i in range(j)]
    gap = {(i, j): cumulative[j] - cumulative[i] for i, j in pairs}
    by_labels = {(i, j): labelled(i, j) and gap[i, j] > delta(i, j, reduced)[1] for i, j in pairs}
    beats = {(i, j): kl(i, j) or by_labels[i, j] for i, j in pairs}
    worth = {(i, j): labelled(i, j) and delta(i, j, reduced)[0] > gap[i, j] for i, j in pairs}
    plausible = [
        not any(beats[h, i] for h in range(i)) and not any(worth[i, j] for j in range(i + 1, k))
        for i in range(k)
    ]

    def set_test(relation):
        in_low = [not any(relation[h, i] for h in range(i)) for i in range(k)]
        in_high = [all(relation[i, j] for j in range(i + 1, k)) for i in range(k)]
        return min([i + 1 for i in range(k) if in_low[i] and in_high[i]] + [k])

    depth = set_test(beats)
    label_free = set_test({(i, j): kl(i, j) for i, j in pairs})
    # A contradiction counts only where it concerns the decision: the label-free depth queries the
    # deeper stage.
    contradicted = [(i, j) for i, j in pairs if by_labels[i, j] and not kl(i, j) and j + 1 <= label_free]
    audits = {(i, j) for i, j in contradicted if not gap[i, j] > delta(i, j, lambda m: level)[1]}
    c, raised, allotment = budget
    budget = allotment + (raised if contradicted else c) * math.sqrt(t)
    label_informed = depth
    if requested < budget:
        depth = max([depth] + [j + 1 for i, j in audits if plausible[i]])
    # Within a + c·sqrt(t) every open or audited pair may be asked about; beyond it (a raised budget)
    # only those of a stage that the labels show to beat a deeper stage (a contested stage).
    scope = set(range(k)) if requested < allotment + c * math.sqrt(t) else {i for i, _ in contradicted}
    shown = outputs[:depth]
    mask = 0
    if requested < budget:
        for i, j in pairs:
            open_pair = (not beats[i, j] and not worth[i, j]) or (i, j) in audits
            if j < depth and shown[i] != shown[j] and i in scope and plausible[i] and open_pair:
                mask |= 1 << (j * (j - 1) // 2 + i)
    overstated = any(by_labels[i, j] and not kl(i, j) for i, j in pairs)
    return depth, mask, depth > label_informed, bool(contradicted), overstated and not contradicted


@pytest.mark.parametrize("budget", [None, (3.0, 9.0, 0.0)])
@pytest.mark.parametrize("costs", [[0.0, 0.11, 0.11], [0.01, 0.011, 0.011, 0.068, 0.033]])
def test_decision_and_request_equal_a_reference_implementation(costs, budget):
    # None: the defaults (one budget, with its allotment); else a raised budget once contradicted.
    defaults = AuditedUSS(costs)
    if budget is None:
        budget = (defaults.label_budget, defaults.label_budget, defaults.label_allotment)
    params = {"label_budget": budget[0], "contradicted_budget": budget[1], "label_allotment": budget[2]}
    rng = np.random.default_rng(3)
    k = len(costs)
    n_pairs = k * (k - 1) // 2
    # How often each rule decides something ("ignored": a contradiction that does not concern the decision).
    seen = {"audit": 0, "mask": 0, "contradicted": 0, "ignored": 0}
    for _ in range(500):
        t = int(rng.integers(50, 40_000))
        queried = [t - 1, *sorted(rng.integers(1, t, size=k - 1).tolist(), reverse=True)]
        disagreements = [[0] * k for _ in range(k)]
        evidence = np.zeros((3, n_pairs), dtype=np.int64)
        for j in range(1, k):
            for i in range(j):
                p = rng.uniform(0.01, 0.4)
                d = int(rng.binomial(queried[j], p))
                disagreements[i][j] = d
                if rng.random() < 0.8 and d:
                    m = int(rng.integers(1, min(d, 600) + 1))
                    e = rng.uniform(-0.2, 1.0)
                    plus = int(rng.binomial(m, (1 + e) / 2))
                    evidence[:, j * (j - 1) // 2 + i] = (m, plus, m - plus)
        # Around the budget's thresholds: below the base, between base and raised, beyond both.
        requested = int(rng.integers(0, 2 * (budget[2] + budget[1] * math.sqrt(t)) + 1))
        outputs = rng.integers(0, 2, size=k).tolist()
        policy = AuditedUSS(costs, **params)
        document = policy.state_dict()
        document["stats"].update(decisions=t - 1, queried=queried, disagreements=disagreements)
        document["evidence"].update(
            labelled=evidence[0].tolist(),
            deeper_right=evidence[1].tolist(),
            shallower_right=evidence[2].tolist(),
            labels=int(evidence[0].max()),
        )
        document["labels_requested"] = max(requested, int(evidence[0].max()))
        policy.load_state_dict(document)
        requested = document["labels_requested"]
        depth, mask, audit, contradicted, ignored = _reference(
            costs, t, queried, disagreements, evidence, requested, outputs, budget
        )
        assert policy.select() == depth
        policy.update(outputs[:depth])
        assert policy.label_request == mask
        seen["audit"] += audit
        seen["mask"] += mask != 0
        seen["contradicted"] += contradicted
        seen["ignored"] += ignored
    # The random states reach every rule under test.
    assert min(seen.values()) >= 5, seen


def _policy_in_state(costs, t, queried, disagreements, evidence, requested, **params):
    policy = AuditedUSS(costs, **params)
    document = policy.state_dict()
    document["stats"].update(decisions=t - 1, queried=queried, disagreements=disagreements)
    document["evidence"].update(
        labelled=evidence[0], deeper_right=evidence[1], shallower_right=evidence[2], labels=max(evidence[0])
    )
    document["labels_requested"] = requested
    policy.load_state_dict(document)
    return policy


@pytest.mark.parametrize(("d23", "depth", "mask"), [(100, 2, 0), (3000, 3, 1)])
def test_a_contradiction_counts_only_where_it_concerns_the_decision(d23, depth, mask):
    # C = (0, 0.1, 0.2); 10 000 rounds at depth 3. Stages 1-2 and 1-3 disagree on 30% of them, above
    # both cost gaps, so stage 1 beats neither label-free; 200 labels of pair (1, 3) say e ≈ 0.05,
    # δ_13 <= 0.31 · 0.4 < 0.2: stage 1 beats 3 by the labels (a contradiction), even at the strict
    # level (so nothing is audited). A raised budget (c = 3, c' = 9): 500 labels requested, above
    # 3·sqrt(t) = 300, below 9·sqrt(t).
    # d23 = 100 (p = 1%): stage 2 beats 3 label-free, the label-free depth is 2, and the contradiction
    # on stage 3 (not queried at depth 2) changes nothing: no label beyond the base budget.
    # d23 = 3000: the label-free depth is 3, it pays for stage 3, so the contradiction is decisive:
    # stage 1 is contested and its open pair (1, 2) (bit 0), disagreeing, is asked about.
    t = 10_001
    disagreements = [[0, 3000, 3000], [0, 0, d23], [0, 0, 0]]
    evidence = [[0, 200, 0], [0, 20, 0], [0, 10, 0]]
    raised = {"label_budget": 3.0, "contradicted_budget": 9.0, "label_allotment": 0.0}
    policy = _policy_in_state([0.0, 0.1, 0.1], t, [10_000] * 3, disagreements, evidence, 500, **raised)
    assert policy.label_free_depth() == (2 if d23 == 100 else 3)
    assert policy.select() == depth
    policy.update([0, 1, 1][:depth])
    assert policy.label_request == mask


@pytest.mark.parametrize("restart", [False, True])
def test_label_age_counts_from_each_decision_although_reports_come_out_of_order(restart):
    # "a" is decided first and reported last: the oldest request sits behind a younger one.
    book = PendingDecisions(AuditedUSS([0.0, 0.5]), max_label_age_decisions=3)
    book.decide("a")  # round 1
    book.decide("b")  # round 2
    book.report("b", [0, 1])
    book.report("a", [0, 1])
    assert book.label_requested("a") and book.label_requested("b")
    if restart:
        document = json.loads(json.dumps(book.state_dict()))
        book = PendingDecisions(AuditedUSS([0.0, 0.5]), max_label_age_decisions=3)
        book.load_state_dict(document)
    book.decide("c")  # round 3
    book.decide("d")  # round 4: "a" is 3 decisions old, "b" 2
    assert not book.label_requested("a") and book.label_requested("b")
    with pytest.raises(RejectedReport) as rejected:
        book.report_label("a", 1)
    assert rejected.value.reason == "expired"
    book.report_label("b", 1)
    assert book.label_counters["expired"] == 1 and book.label_counters["applied"] == 1
    book.decide("e")  # "b" was answered: nothing more expires
    assert book.label_counters["expired"] == 1
