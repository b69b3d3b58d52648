"""The reach of the hindsight references: costs, objectives and the counts the report draws from them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from studies.adaptive_depth import streams
from studies.adaptive_reach import (
    COMPUTE_MICROSECONDS,
    REACH_MULTIPLIERS,
    compute_profile,
    frontier_cost_within,
    reach,
    reach_section,
)


def test_compute_profile_is_the_cumulative_share_of_time_and_names_a_bad_parameter():
    assert compute_profile([2.0, 1.0, 1.0]).tolist() == [0.5, 0.75, 1.0]
    with pytest.raises(ValueError, match="stage_seconds"):
        compute_profile([1.0, 0.0])
    with pytest.raises(ValueError, match="stage_seconds"):
        compute_profile([1.0])


def test_reach_scores_each_reference_by_hand_on_three_stages():
    # Six events, three stages, cumulative costs (0, 0.5, 1) x 0.1 x m. Stage 3 is always right.
    # Events 0-1: stage 1 right and sure (0.9). Events 2-3: stage 1 wrong, unsure (0.6); stage 2
    # right and sure (0.95). Events 4-5: stages 1 and 2 wrong and unsure (0.6, 0.7). Three quantile
    # bins per stage put these groups apart (stage 1: 0.6 | 0.9; stage 2: 0.7 | 0.9 | 0.95).
    codes = np.array([[0, 0, 0], [1, 1, 1], [1, 0, 0], [0, 1, 1], [1, 1, 0], [0, 0, 1]])
    labels = np.array([0, 1, 0, 1, 0, 1])
    confidences = np.array([[0.9, 0.9, 1]] * 2 + [[0.6, 0.95, 1]] * 2 + [[0.6, 0.7, 1]] * 2)
    frame = reach(codes, labels, confidences, np.array([0.0, 0.5, 1.0]), multipliers=(1.0, 4.0), n_bins=3)
    one, four = frame.to_dict("records")
    # m = 1 (C = 0, 0.05, 0.1): fixed depths 4/6, 2/6 + 0.05, 0.1 -> Oracle depth 3 = 0.1. Best
    # rule: stop at 1 on 0-1 (0), at 2 on 2-3 (0.05), go to 3 on 4-5 (0.1): mean 0.05.
    assert one["oracle"] == pytest.approx(0.1)
    assert one["threshold"] == pytest.approx(0.05) and one["rule"] == pytest.approx(0.05)
    assert one["best_ratio"] == pytest.approx(0.5)
    # m = 4 (C = 0, 0.2, 0.4): fixed 0.667, 0.533, 0.4 -> Oracle 0.4; the same rule costs
    # (0 + 0 + 0.2 + 0.2 + 0.4 + 0.4) / 6 = 0.2, and going on from events 4-5 is still worth it.
    assert four["oracle"] == pytest.approx(0.4)
    assert four["rule"] == pytest.approx(0.2) and four["best_ratio"] == pytest.approx(0.5)
    # The history rule can do no better here: the three groups are all there is to tell apart.
    assert one["history"] == pytest.approx(0.05) and four["history"] == pytest.approx(0.2)


def test_frontier_cost_within_one_point_takes_the_cheapest_accurate_thresholds():
    # 100 events, two stages, stage 2 always right, costs (0.2, 1). Stage 1 is wrong on 1 of the 90
    # sure events (0.9) and on 5 of the 10 unsure ones (0.6). Stopping on the sure ones errs 1%
    # (within 1 point) at cost (90·0.2 + 10·1) / 100 = 0.28 of the full cascade's.
    labels = np.zeros(100, dtype=int)
    first = np.zeros(100, dtype=int)
    first[[0, 90, 91, 92, 93, 94]] = 1
    codes = np.stack([first, labels], axis=1)
    confidences = np.stack([np.r_[np.full(90, 0.9), np.full(10, 0.6)], np.ones(100)], axis=1)
    assert frontier_cost_within(codes, labels, confidences, np.array([0.2, 1.0])) == pytest.approx(0.28)
    # Half a point allowed: the sure events must go on too (stopping errs 1 point) -> 1.0.
    assert frontier_cost_within(codes, labels, confidences, np.array([0.2, 1.0]), points=0.5) == 1.0


def _stream(ratios: list[float], frontier: float, cheapest_cost: float, policy_ratio: float) -> dict:
    reach_frame = pd.DataFrame({"multiplier": REACH_MULTIPLIERS, "best_ratio": ratios})
    policy = pd.DataFrame(
        {
            "multiplier": REACH_MULTIPLIERS,
            "excess": 0.0,
            "ratio": policy_ratio,
            "cost_ratio": [cheapest_cost] + [1.0] * (len(REACH_MULTIPLIERS) - 1),
            "error_points": [0.5] + [0.0] * (len(REACH_MULTIPLIERS) - 1),
        }
    )
    rule = {
        "profile": np.array([0.1, 1.0]),
        "measured": (1.0, 9.0),
        "reach": reach_frame,
        "frontier_within": frontier,
        "policy": policy,
    }
    return {"share": rule, "compute": rule}


def test_reach_section_counts_streams_per_multiplier_and_per_stream():
    n = len(REACH_MULTIPLIERS)
    reaches = {
        "A": _stream([0.85] + [1.0] * (n - 1), 0.5, 0.55, 0.99),  # <= 0.9 at the first multiplier only
        "B": _stream([1.0] * (n - 1) + [0.9], 0.7, 0.65, 0.97),  # at the last only, exactly 0.9
        "C": _stream([0.95] * n, 0.3, 0.7, 1.02),
    }
    text = "\n".join(reach_section(reaches))
    assert "| **streams ≤ 0.9** | share | 1 | " + " | ".join(["0"] * (n - 2)) + " | 1 |" in text
    assert "reach at most 1 (share rule)" in text
    assert "best multiplier, which the target does not allow, would they reach 2 (A, B)" in text
    assert "own best ratio, on any stream at any multiplier and under either rule, is 0.970" in text
    # The trade-off: frontier <= 0.6 on A and C; the policy's cheapest within 1 point on A only.
    assert "the frontier 2 (share)" in text and "Sequential KL-UCB 1 (share)" in text


def test_every_river_stream_has_fixed_compute_costs_and_the_paper_streams_keep_their_dollars():
    specs = {spec.name: spec for spec in streams()}
    river = {name for name, spec in specs.items() if spec.profile is None}
    assert set(COMPUTE_MICROSECONDS) == river
    for name in river:
        assert len(COMPUTE_MICROSECONDS[name]) == len(specs[name].stages)
