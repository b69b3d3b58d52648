"""SequentialKLUCB and ContextStats: rounds computed by hand, state as JSON, merge, discount."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from uss_stream.core.context_stats import CELL_EDGES, ContextStats, quantile_groups
from uss_stream.policies import USSKLUCB, SequentialKLUCB

NO_FORCED = 1e-12  # explore scale so small that the forced-exploration coin never fires here


def play(policy, outputs, confidences):
    """One event through begin/step; returns the depth."""
    policy.begin()
    for j, (output, confidence) in enumerate(zip(outputs, confidences)):
        if not policy.step(output, confidence):
            return j + 1
    raise AssertionError("step() never returned False")


def test_first_event_explores_to_the_last_stage():
    # Context (1, bin 0) has t = 1: the coin fires with probability min(1, 1/1) = 1; stage 2 is
    # committed through (target K), and stage 3 ends the event.
    policy = SequentialKLUCB([0.0, 0.1, 0.1])
    policy.begin()
    assert policy.step("a", 0.9) is True
    assert policy.step("a", 0.9) is True
    assert policy.step("a", 0.9) is False
    assert policy.reason == "last stage"
    assert policy.context_stats.decisions == 1


def test_agreeing_context_stops_by_the_cost_test():
    # 100 events in which stages 1 and 2 agreed: n_2 = 100, D_12 = 0. Round t = 101 of the context:
    # level x = max(0, log 101 - log(2·100)) = 0, so stage 1 beats stage 2 iff 0.3 > p̂ = 0: stop.
    policy = SequentialKLUCB([0.0, 0.3], explore=NO_FORCED)
    for _ in range(100):
        policy.context_stats.record(["a", "a"], [0.99, 0.9])
    assert play(policy, ["a", "b"], [0.99, 0.9]) == 1
    assert policy.reason == "cost test"
    # one cell holds all the mass: its mid-mass quantile 0.5 puts it in bin floor(4·0.5) = 2
    assert policy.stop_context == (1, 2)


def test_disagreeing_context_continues():
    # p̂ = 50/100 = 0.5 > 0.3: stage 2 is worth its cost whatever the level.
    policy = SequentialKLUCB([0.0, 0.3], explore=NO_FORCED)
    for i in range(100):
        policy.context_stats.record(["a", "a" if i % 2 else "b"], [0.99, 0.9])
    assert play(policy, ["a", "a"], [0.99, 0.9]) == 2
    assert policy.reason == "last stage"


def test_kl_level_keeps_a_rarely_observed_pair_optimistic():
    # 100 events in the context, only 10 of them went on to stage 2, all agreeing: t = 101,
    # x = log 101 - log(2·10) = 1.619; 10·kl(0, 0.3) = -10·log(0.7) = 3.567 > x: stage 1 beats 2.
    # With 2 observations: 2·kl(0, 0.3) = 0.713 < x = log(101/4) = 3.229: stage 2 stays optimistic.
    for n, expected in ((10, 1), (2, 2)):
        policy = SequentialKLUCB([0.0, 0.3], explore=NO_FORCED)
        for i in range(100):
            policy.context_stats.record(["a", "a"] if i < n else ["a"], [0.99, 0.9])
        assert play(policy, ["a", "a"], [0.99, 0.9]) == expected
    assert -10 * math.log(0.7) > math.log(101 / 20)
    assert -2 * math.log(0.7) < math.log(101 / 4)


def _commit_log(policy, deep_events):
    """Stage 1 at 0.99 agrees with stage 2 and, on the ``deep_events`` that went on, disagrees with
    stage 3; stage 2 at 0.99 (reached from stage 1 at 0.6) always agrees with stage 3."""
    for i in range(200):
        policy.context_stats.record(["c", "d", "d"], [0.6, 0.99, 0.9])
        policy.context_stats.record(["a", "a", "b"] if i < deep_events else ["a", "a"], [0.99, 0.6, 0.9])
    return policy.context_stats.groups[1][ContextStats.cell_of(0.99)]


def test_the_target_commits_the_stages_in_between_while_its_pair_is_rare():
    # Stage 1's context at 0.99: t = 201, n_2 = 200 with p̂_12 = 0, n_3 = 10 with p̂_13 = p̂_23 = 1.
    # Level of stage 2: log₊(201 / (3·200)) = 0, so U_12 = 0 < 0.05: stage 1 beats 2; U_13 = 1 > 0.1
    # and U_23 = 1 > 0.05: the target is depth 3. n_3 = 10 < √201 = 14.2: stage 2 is committed
    # although its own context at 0.99 (p̂_23 = 0 over 200 events) would stop.
    policy = SequentialKLUCB([0.0, 0.05, 0.05], n_bins=2, explore=NO_FORCED)
    stage2 = _commit_log(policy, deep_events=10)
    assert policy.context_stats.bin_stats(1, stage2).disagreements[0][1] == 0
    assert math.sqrt(201) > 10
    policy.begin()
    assert policy.step("a", 0.99) is True
    assert policy.step("a", 0.99) is True
    assert policy.step("b", 0.9) is False
    assert policy.reason == "last stage"


def test_a_well_observed_target_lets_the_next_stage_decide():
    # The same target 3 with n_3 = 200 >= √201: the event goes on to stage 2 only, whose context at
    # 0.99 (t = 201, n_3 = 200, p̂_23 = 0, level log₊(201 / (2·200)) = 0) stops by its cost test.
    policy = SequentialKLUCB([0.0, 0.05, 0.05], n_bins=2, explore=NO_FORCED)
    stage2 = _commit_log(policy, deep_events=200)
    assert policy.context_stats.bin_stats(0, policy.context_stats.groups[0][13]).queried == [200, 200, 200]
    policy.begin()
    assert policy.step("a", 0.99) is True
    assert policy.step("a", 0.99) is False
    assert policy.reason == "cost test" and policy.stop_context == (2, stage2)


def test_going_on_beats_the_fixed_depth_when_the_next_stage_is_sure():
    # Stage 1 is a coin (error 1/2); stage 2 is right when sure (0.99, half the events) and wrong
    # 40% of the time when unsure (0.6); stage 3 is always right. C = (0, 0.05, 0.1): the fixed
    # depths score 0.5, 0.05 + 0.2 = 0.25 and 0.1 (the best), but the stopping rule "go on after
    # stage 1, stop after stage 2 where it is sure" scores (0.05 + 0.1) / 2 = 0.075. Stage 1's test
    # targets depth 3 (p̂_13 = 1/2 > 0.1, p̂_23 = 0.2 > 0.05 overall); committing every event to it
    # would score 0.1.
    rng = np.random.default_rng(1)
    n = 6000
    truth = rng.integers(0, 2, size=n)
    sure = rng.random(n) < 0.5
    wrong2 = ~sure & (rng.random(n) < 0.4)
    outputs = np.stack([rng.integers(0, 2, size=n), truth ^ wrong2, truth], axis=1)
    confidences = np.stack([np.full(n, 0.6), np.where(sure, 0.99, 0.6), np.full(n, 0.9)], axis=1)
    depths = SequentialKLUCB([0.0, 0.05, 0.05]).run(outputs, confidences)
    late = np.arange(n) >= n // 2
    assert np.mean(depths[late & sure] == 2) > 0.95
    assert np.mean(depths[late & ~sure] == 3) > 0.95
    cost = np.array([0.0, 0.05, 0.1])[depths - 1]
    error = outputs[np.arange(n), depths - 1] != truth
    assert (cost + error)[late].mean() < 0.085


def test_forced_exploration_follows_the_log_schedule():
    # The context explores (to depth K) in its rounds t where floor(explore·ln t) steps up; with
    # explore = 20 and t = 101..130 that is every 5 rounds or so (20·ln t grows by ~20/t per round).
    explore = 20.0
    policy = SequentialKLUCB([0.0, 0.3], explore=explore)
    for _ in range(100):
        policy.context_stats.record(["a", "a"], [0.99, 0.9])
    expected = []
    for t in range(101, 131):  # every event falls in the same context: its round is the event number
        steps_up = math.floor(explore * math.log(t)) > math.floor(explore * math.log(t - 1))
        expected.append(2 if steps_up else 1)
        assert play(policy, ["a", "a"], [0.99, 0.9]) == expected[-1]
    assert 4 <= expected.count(2) <= 8


def test_bins_adapt_and_each_bin_decides_on_its_own_counts():
    # Low confidence (0.6): stage 1 is wrong half the time; high (0.99): never. After 8·2 = 16
    # events at stage 1 the cells are regrouped into 2 quantile bins, one per confidence.
    rng = np.random.default_rng(1)
    n = 3000
    unsure = rng.random(n) < 0.3
    truth = rng.integers(0, 2, n)
    stage1 = np.where(unsure & (rng.random(n) < 0.5), 1 - truth, truth)
    outputs = np.stack([stage1, truth], axis=1)
    confidences = np.stack([np.where(unsure, 0.6, 0.99), np.full(n, 0.9)], axis=1)
    policy = SequentialKLUCB([0.0, 0.2], n_bins=2)
    depths = policy.run(outputs, confidences)
    low, high = ContextStats.cell_of(0.6), ContextStats.cell_of(0.99)
    groups = policy.context_stats.groups[0]
    assert groups[low] == 0 and groups[high] == 1
    tail = slice(2000, None)
    assert depths[tail][unsure[tail]].mean() == 2.0
    assert depths[tail][~unsure[tail]].mean() < 1.01
    table = policy.contexts()
    assert table["events"].sum() == n
    assert table.loc[table["bin"] == 0, "next"].item() == "continue to 2"
    assert table.loc[table["bin"] == 1, "next"].item() == "stop"
    # each context's events and depth mix are those of the events whose stage-1 confidence it
    # holds (bin 0: the unsure ones, bin 1: the sure ones), counted here from the run's depths
    for bin_, events in ((0, unsure), (1, ~unsure)):
        row = table.loc[table["bin"] == bin_].iloc[0]
        mix = np.bincount(depths[events], minlength=3)[1:].tolist()
        assert [row["events"], row["stopped"], row["depth_1"], row["depth_2"]] == [events.sum(), mix[0], *mix]


def test_a_context_with_a_cheap_deep_stage_matches_uss_kl_ucb():
    # With one bin and no forced exploration the last decision point is USS-KL-UCB on stages s..K:
    # for K = 2 the depths equal those of USS-KL-UCB run on the same stream (whose round 1 also
    # queries everything).
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 2, 1500)
    outputs = np.stack([truth ^ (rng.random(1500) < 0.2), truth], axis=1)
    confidences = np.full(outputs.shape, 0.8)
    sequential = SequentialKLUCB([0.0, 0.15], n_bins=1, explore=NO_FORCED)
    fixed = USSKLUCB([0.0, 0.15])
    assert sequential.run(outputs, confidences).tolist() == fixed.run(outputs).tolist()


def test_quantile_groups_by_hand():
    # mass 5 | 5 | 10 | 20, total 40, 4 bins: midpoints 2.5, 7.5, 15, 30 -> floor(4·m/40)
    assert quantile_groups([5, 5, 10, 20], 4) == [0, 0, 1, 3]
    assert quantile_groups([1, 0, 0, 0, 1], 2) == [0, 1, 1, 1, 1]


def test_cell_edges():
    assert ContextStats.cell_of(0.3) == 0
    assert ContextStats.cell_of(0.5) == 1
    assert ContextStats.cell_of(1.0) == len(CELL_EDGES)
    assert ContextStats.cell_of(None) == 0 and ContextStats.cell_of(float("nan")) == 0


def test_record_counts_by_hand():
    stats = ContextStats(3, n_bins=1)
    stats.record(["x", "y"], [0.7, 0.8])  # depth 2: stage 1's cell sees stages 1-2, stage 2's cell 2
    stats.record(["x"], [0.7])  # depth 1
    cell1 = stats.cells[0][ContextStats.cell_of(0.7)]
    assert cell1.decisions == 2 and cell1.queried == [2, 1, 0]
    assert cell1.disagreements[0] == [0, 1, 0]
    cell2 = stats.cells[1][ContextStats.cell_of(0.8)]
    assert cell2.decisions == 1 and cell2.queried == [1, 0]
    assert stats.bin_stats(0, 0).queried == [2, 1, 0]


def test_discount_applies_per_cell():
    # γ = 0.5: the cell of 0.7 sees two events; the cell of 0.99 one, in between, which does not
    # discount the first cell.
    stats = ContextStats(2, n_bins=1, discount=0.5)
    stats.record(["a", "b"], [0.7, 0.9])
    stats.record(["a", "a"], [0.99, 0.9])
    stats.record(["a"], [0.7, 0.9])
    cell = stats.cells[0][ContextStats.cell_of(0.7)]
    assert cell.queried == [0.5 * 1 + 1, 0.5 * 1 + 0]
    assert cell.disagreements[0][1] == 0.5
    assert stats.bin_stats(0, 0).queried == [1.5 + 1.0, 0.5 + 1.0]


def test_merge_equals_the_union_and_json_round_trips():
    rng = np.random.default_rng(2)
    rows = [(list(rng.integers(0, 2, int(d))), list(rng.random(3))) for d in rng.integers(1, 4, 400)]
    a, b, union = ContextStats(3), ContextStats(3), ContextStats(3)
    for i, (outputs, confidences) in enumerate(rows):
        (a if i % 2 else b).record(outputs, confidences)
        union.record(outputs, confidences)
    merged = a.merge(b)
    assert merged.cells == union.cells
    assert merged.decisions == union.decisions == 400
    # the bins are the quantile groups of the merged histogram
    assert merged.groups[0] == quantile_groups(union.histogram(0), 4)
    text = json.dumps(merged.to_dict())
    assert ContextStats.from_json(text) == merged


def test_policy_state_round_trip_continues_identically():
    rng = np.random.default_rng(4)
    truth = rng.integers(0, 2, (600, 1))
    outputs = np.concatenate([truth ^ (rng.random((600, 1)) < 0.2), truth, truth], axis=1)
    confidences = rng.random((600, 3))
    first = SequentialKLUCB([0.0, 0.1, 0.1])
    first.run(outputs[:300], confidences[:300])
    second = SequentialKLUCB([0.0, 0.1, 0.1])
    second.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert (
        first.run(outputs[300:], confidences[300:]).tolist()
        == second.run(outputs[300:], confidences[300:]).tolist()
    )


def test_misuse_gets_clear_errors():
    policy = SequentialKLUCB([0.0, 0.1])
    assert policy.sequential is True and USSKLUCB([0.0, 0.1]).sequential is False
    with pytest.raises(TypeError, match="sequential"):
        policy.select()
    with pytest.raises(RuntimeError, match="without begin"):
        policy.step("a", 0.5)
    policy.begin()
    with pytest.raises(RuntimeError, match="before the event ended"):
        policy.begin()
    with pytest.raises(ValueError, match="confidence"):
        policy.step("a", 1.5)
    policy.cancel()
    assert policy.context_stats.decisions == 0
    with pytest.raises(ValueError, match="at least 2 stages"):
        SequentialKLUCB([0.0])
    with pytest.raises(ValueError, match="n_bins"):
        SequentialKLUCB([0.0, 0.1], n_bins=0)
    with pytest.raises(ValueError, match="explore"):
        SequentialKLUCB([0.0, 0.1], explore=0.0)
    with pytest.raises(ValueError, match="n_stages, n_bins, discount"):
        policy.load_state_dict(SequentialKLUCB([0.0, 0.1], n_bins=2).state_dict())
    with pytest.raises(ValueError, match="cells"):
        document = policy.state_dict()
        document["contexts"]["stages"][0]["cells"] = []
        policy.load_state_dict(document)
    with pytest.raises(ValueError, match="confidences"):
        policy.run(np.zeros((3, 2)))


@pytest.mark.parametrize("params", list(SequentialKLUCB._unit_test_params()))
def test_unit_test_params_build_clone_and_repr(params):
    policy = SequentialKLUCB(**params)
    twin = policy.clone()
    assert repr(twin) == repr(policy)
    assert twin.context_stats.decisions == 0
    assert policy.clone({"n_bins": 3}).n_bins == 3
    rng = np.random.default_rng(0)
    outputs = rng.integers(0, 2, (50, policy.n_stages))
    depths = policy.run(outputs, rng.random((50, policy.n_stages)))
    assert policy.stats.decisions == 50
    # every event passes stage 1: 50 plain counts, fewer once each cell forgets
    if policy.discount is None:
        assert policy.stats.queried[0] == 50
        # the depths returned are the depths learned: stage 1's contexts hold each event once
        first = policy.contexts().query("stage == 1")
        learned = [int(first[f"depth_{d}"].sum()) for d in range(1, policy.n_stages + 1)]
        assert learned == np.bincount(depths, minlength=policy.n_stages + 1)[1:].tolist()
    else:
        assert 0 < policy.stats.queried[0] < 50
        assert set(depths.tolist()) <= set(range(1, policy.n_stages + 1))


def test_bins_are_regrouped_on_the_documented_schedule():
    # n_bins = 2: first regroup at 8·2 = 16 events of the stage, then at 32, 64, ...
    stats = ContextStats(2, n_bins=2)
    low, high = ContextStats.cell_of(0.6), ContextStats.cell_of(0.99)
    for _ in range(16):
        stats.record(["a"], [0.6])
    # at 16 all the mass is in `low`: its mid-mass quantile 8/16 puts it (and every cell above,
    # at quantile 16/16) in bin floor(2·0.5) = 1
    assert stats.groups[0][low] == 1 and stats.groups[0][high] == 1
    for _ in range(15):
        stats.record(["a"], [0.99])
    assert stats.bin_stats(0, 1).queried == [31, 0]  # 31 events: not regrouped yet
    stats.record(["a"], [0.99])
    # the 32nd regroups {low: 16, high: 16}: low 8/32 -> bin 0, high 24/32 -> bin 1
    assert stats.groups[0][low] == 0 and stats.groups[0][high] == 1
    assert stats.bin_stats(0, 0).queried == [16, 0] and stats.bin_stats(0, 1).queried == [16, 0]
