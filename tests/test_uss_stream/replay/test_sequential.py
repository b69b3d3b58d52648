"""Replay with confidences: the hindsight comparators against loops written here, and the policies' rounds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from uss_stream.policies import USSKLUCB, FixedDepth, SequentialKLUCB
from uss_stream.replay.sequential import (
    best_fixed_depth,
    best_history_rule,
    best_stopping_rule,
    confidence_bins,
    context_wd,
    headroom,
    replay_sequential,
    stage_values,
    threshold_depths,
    threshold_frontier,
)


def log(n=600, seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    conf = rng.random((n, 3))
    wrong1 = rng.random(n) < 0.5 * (1 - conf[:, 0])
    wrong2 = rng.random(n) < 0.3 * (1 - conf[:, 1])
    outputs = np.stack([truth ^ wrong1, truth ^ wrong2, truth ^ (rng.random(n) < 0.05)], axis=1)
    return outputs, conf, truth


def slow_depth(bin_row, table):
    depth = 1
    for s, b in enumerate(bin_row):
        if depth == s + 1 and table[s][b]:
            depth += 1
    return depth


def test_best_stopping_rule_is_the_exhaustive_minimum():
    outputs, conf, truth = log()
    costs = np.array([0.0, 0.08, 0.2])
    values = costs[None, :] + (outputs != truth[:, None])
    bins, _ = confidence_bins(conf, 2)
    table, value = best_stopping_rule(values, bins, 2)
    best = np.inf
    for flat in itertools.product([False, True], repeat=4):
        rule = [flat[:2], flat[2:]]
        total = sum(values[i, slow_depth(bins[i], rule) - 1] for i in range(len(values)))
        best = min(best, total / len(values))
    assert value == pytest.approx(best)
    achieved = np.mean([values[i, slow_depth(bins[i], table) - 1] for i in range(len(values))])
    assert achieved == pytest.approx(value)
    # a rule class holding every fixed depth is never worse than the best one
    assert value <= best_fixed_depth(values)[1] + 1e-12


def test_confidence_bins_are_quantiles():
    conf = np.array([[0.1, 0.0], [0.5, 0.0], [0.7, 0.0], [0.9, 0.0]])
    bins, edges = confidence_bins(conf, 4)
    assert bins[:, 0].tolist() == [0, 1, 2, 3]
    assert edges[0].tolist() == pytest.approx([0.4, 0.6, 0.75])


def test_threshold_frontier_scores_by_hand():
    conf = np.array([[0.9, 0.5, 0.5], [0.2, 0.9, 0.5], [0.2, 0.2, 0.5]])
    costs = [0.0, 0.1, 0.3]
    wrong = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0]])
    values = np.array(costs)[None, :] + wrong
    assert threshold_depths(conf, [0.5, 0.5]).tolist() == [1, 2, 3]
    frontier = threshold_frontier(values, costs, conf, n_levels=2)
    row = frontier[(frontier["tau_1"] == np.inf) & (frontier["tau_2"] == np.inf)].iloc[0]
    assert (row["cost"], row["error"]) == pytest.approx((0.3, 0.0))
    always = frontier[(frontier["tau_1"] == 0.0)].iloc[0]
    assert (always["cost"], always["error"]) == pytest.approx((0.0, 2 / 3))


def test_context_wd_by_hand():
    # Context (stage 1, bin 0): stage 1 wrong on both rows, stage 2 right: p_12 = 1 > C_2 - C_1,
    # optimal depth 2; bin 1: all right, optimal depth 1, ξ = 0.1 - 0 > 0.
    codes = np.array([[0, 1], [0, 1], [1, 1], [1, 1]])
    labels = np.array([1, 1, 1, 1])
    bins = np.array([[0], [0], [1], [1]])
    table = context_wd(codes, labels, bins, [0.0, 0.1])
    assert table["optimal_depth"].tolist() == [2, 1]
    assert table["wd"].tolist() == [True, True]
    assert table.loc[1, "xi"] == pytest.approx(0.1)


def test_replay_runs_each_policy_on_its_repetition_rows():
    outputs, conf, truth = log(400, seed=1)
    costs = [0.0, 0.08, 0.12]
    policies = {"seq": SequentialKLUCB(costs), "kl": USSKLUCB(costs), "two": FixedDepth(2, costs)}
    result = replay_sequential(
        outputs, conf, truth, stage_costs=costs, policies=policies, horizon=500, reps=3, n_bins=2
    )
    for r in range(3):
        rows = result.rows[r]
        alone = policies["seq"].for_repetition(r).run(outputs[rows], conf[rows])
        assert result.depths["seq"][r].tolist() == alone.tolist()
        assert result.depths["kl"][r].tolist() == USSKLUCB(costs).run(outputs[rows]).tolist()
    assert (result.depths["two"] == 2).all()
    # regret against the best fixed depth, recomputed with a loop
    values = np.array(costs).cumsum()[None, :] + (outputs != truth[:, None])
    depth, _ = best_fixed_depth(values)
    r0 = result.rows[0]
    expected = sum(values[row, d - 1] - values[row, depth - 1] for row, d in zip(r0, result.depths["seq"][0]))
    assert result.cumulative_regret("seq", "fixed")[0, -1] == pytest.approx(expected)
    assert set(result.summary()["policy"]) == {"seq", "kl", "two"}


def test_bad_input_is_named():
    outputs, conf, truth = log(50)
    costs = [0.0, 0.1, 0.1]
    with pytest.raises(ValueError, match="confidences must have"):
        replay_sequential(outputs, conf[:, :2], truth, stage_costs=costs, policies={})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        replay_sequential(outputs, conf + 1, truth, stage_costs=costs, policies={})
    with pytest.raises(ValueError, match="labels"):
        replay_sequential(outputs, conf, None, stage_costs=costs, policies={})
    with pytest.raises(ValueError, match="stage_costs must hold 3"):
        replay_sequential(outputs, conf, truth, stage_costs=[0.0, 0.1], policies={})
    with pytest.raises(ValueError, match="n_bins"):
        replay_sequential(outputs, conf, truth, stage_costs=costs, policies={}, n_bins=9)


def test_regret_against_the_best_stopping_rule_flattens_where_each_context_has_wd():
    # Two contexts by stage 1's confidence: unsure (0.6), where stage 1 is wrong 40% of the time,
    # and sure (0.99), where it is wrong 2%; stage 2 (cost 0.1) is always right, so strong (hence
    # weak) dominance holds in each context. The best rule continues exactly when unsure
    # (0.4 > 0.1 > 0.02); the regret against it must grow much slower than linearly.
    rng = np.random.default_rng(7)
    n = 4000
    truth = rng.integers(0, 2, n)
    unsure = rng.random(n) < 0.4
    wrong = rng.random(n) < np.where(unsure, 0.4, 0.02)
    outputs = np.stack([truth ^ wrong, truth], axis=1)
    conf = np.stack([np.where(unsure, 0.6, 0.99), np.full(n, 0.9)], axis=1)
    costs = [0.0, 0.1]
    result = replay_sequential(
        outputs,
        conf,
        truth,
        stage_costs=costs,
        policies={"seq": SequentialKLUCB(costs, n_bins=2), "kl": USSKLUCB(costs)},
        horizon=16_000,
        reps=3,
        n_bins=2,
    )
    assert result.best_rule.tolist() == [[True, False]]
    regret = result.cumulative_regret("seq", "rule").mean(axis=0)
    half, end = regret[7_999], regret[-1]
    # a linear regret would be 16000 · (regret per round); logarithmic exploration is a few dozen
    assert end < 0.002 * 16_000
    assert end - half < 0.5 * half  # the second 8000 rounds add less than half the first's
    # a fixed depth cannot do this: USS-KL-UCB's regret against the rule grows linearly
    fixed = result.cumulative_regret("kl", "rule").mean(axis=0)
    assert fixed[-1] - fixed[7_999] > 0.8 * fixed[7_999]


def test_split_confidence_log_pairs_columns_and_names_what_is_wrong():
    import pandas as pd

    from uss_stream.replay.sequential import split_confidence_log

    frame = pd.DataFrame({"a": [1], "b": [0], "a_confidence": [0.7], "b_confidence": [0.9], "y": [1]})
    outputs, confidences, labels = split_confidence_log(frame, label="y")
    assert list(outputs.columns) == ["a", "b"] and confidences.tolist() == [[0.7, 0.9]]
    assert labels.tolist() == [1]
    with pytest.raises(ValueError, match="no confidence column"):
        split_confidence_log(frame.drop(columns="b_confidence"), label="y")
    with pytest.raises(ValueError, match="no stage column"):
        split_confidence_log(frame.drop(columns="b"), label="y")
    with pytest.raises(ValueError, match="no column 'label'"):
        split_confidence_log(frame)


def test_headroom_with_silent_confidences_leaves_only_the_agreements_to_the_references():
    # Every stage always reports the same confidence: a threshold stops all events or none, and
    # every event falls in one bin, so the threshold cascade and the bin rule are fixed depths.
    # The history rule may still stop or go on after stage 2 by whether stages 1 and 2 agree.
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 2, 400)
    codes = np.stack([np.where(rng.random(400) < p, 1 - truth, truth) for p in (0.3, 0.2, 0.1)], axis=1)
    costs = [0.0, 0.05, 0.2]
    gain = headroom(codes, truth, np.full((400, 3), 0.8), costs)
    v = (codes != truth[:, None]) + np.array(costs)
    fixed = v.mean(axis=0).min()
    agree = codes[:, 0] == codes[:, 1]
    after_two = sum(min(v[agree == a, 1].sum(), v[agree == a, 2].sum()) for a in (False, True))
    history = min(v[:, 0].sum(), after_two) / 400
    assert gain["fixed_depth"] == int(np.argmin(v.mean(axis=0))) + 1
    assert gain["fixed"] == pytest.approx(fixed)
    assert gain["threshold"] == pytest.approx(fixed) and gain["rule"] == pytest.approx(fixed)
    assert gain["history"] == pytest.approx(history) and history < fixed
    assert gain["ratio"] == pytest.approx(history / fixed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_best_history_rule_is_the_best_of_every_rule_on_bins_and_agreements_by_enumeration(seed):
    rng = np.random.default_rng(seed)
    n = 60
    truth = rng.integers(0, 3, n)
    codes = np.stack(
        [np.where(rng.random(n) < p, rng.integers(0, 3, n), truth) for p in (0.6, 0.4, 0.2)], axis=1
    )
    confidences = rng.random((n, 3))
    values = stage_values(codes, truth, [0.0, 0.1, 0.25])
    bins, _ = confidence_bins(confidences, 2)
    # The contexts by hand: after stage 1 its bin; after stage 2 both bins and whether 1 and 2 agree.
    first = [(b,) for b in bins[:, 0]]
    second = [(b1, b2, a) for b1, b2, a in zip(bins[:, 0], bins[:, 1], codes[:, 0] == codes[:, 1])]
    firsts, seconds = sorted(set(first)), sorted(set(second))
    best = np.inf
    for goes_on in itertools.product([False, True], repeat=len(firsts) + len(seconds)):
        on_1 = dict(zip(firsts, goes_on[: len(firsts)]))
        on_2 = dict(zip(seconds, goes_on[len(firsts) :]))
        depth = [1 if not on_1[c1] else (2 if not on_2[c2] else 3) for c1, c2 in zip(first, second)]
        best = min(best, values[np.arange(n), np.array(depth) - 1].mean())
    assert best_history_rule(values, codes, confidences, 2) == pytest.approx(best)


def test_best_history_rule_on_two_stages_is_the_best_stopping_rule():
    outputs, conf, labels = log(400, seed=4)
    values = stage_values(outputs[:, :2], labels, [0.0, 0.15])
    bins, _ = confidence_bins(conf[:, :2], 4)
    _, rule = best_stopping_rule(values, bins, 4)
    assert best_history_rule(values, outputs[:, :2], conf[:, :2], 4) == pytest.approx(rule)
