"""What a replay reports beyond regret: savings, accuracy against the deepest stage and the best fixed
depth, the log's weak-dominance verdict, and a printed table under 100 columns.

The log below has 10 rows and is replayed in log order (``sampling="sequential"``, horizon 10), so
every repetition sees each row once and the expectations are counts over the 10 rows.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from uss_stream.commands.replay import TABLE_WIDTH, describe_instance, printed_table
from uss_stream.core.instances import Instance
from uss_stream.policies import FixedDepth
from uss_stream.replay.engine import replay

LABELS = [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]
# Stage 1 is wrong on rows 0, 1, 2 (3 of 10), stage 2 on row 0 only, stage 3 never.
STAGE_1 = [1, 0, 1, 1, 0, 1, 0, 1, 0, 1]
STAGE_2 = [1, 1, 0, 1, 0, 1, 0, 1, 0, 1]
OUTPUTS = np.column_stack([STAGE_1, STAGE_2, LABELS])
COSTS = [0.0, 0.05, 0.25]  # C = (0, 0.05, 0.3); C + γ = (0.3, 0.15, 0.3): the best fixed depth is 2


def _summary(**kwargs):
    policies = {f"d{d}": FixedDepth(d, COSTS) for d in (1, 2, 3)}
    result = replay(OUTPUTS, policies=policies, horizon=10, reps=2, sampling="sequential", **kwargs)
    return result, result.summary().set_index("policy")


def test_savings_and_accuracy_against_the_deepest_stage_and_the_best_fixed_depth():
    result, summary = _summary(labels=LABELS)
    assert result.instance.optimal_depth == 2
    # Accuracy 0.7, 0.9, 1.0 at depths 1, 2, 3; mean cost 0, 0.05, 0.3 against C_3 = 0.3.
    assert summary["accuracy"].tolist() == pytest.approx([0.7, 0.9, 1.0])
    assert summary["accuracy_vs_deepest"].tolist() == pytest.approx([-0.3, -0.1, 0.0])
    assert summary["accuracy_vs_best_fixed"].tolist() == pytest.approx([-0.2, 0.0, 0.1])
    assert summary["cost_saved"].tolist() == pytest.approx([1.0, 1 - 0.05 / 0.3, 0.0])
    # p_23 = 0.1 (row 0) < C_3 - C_2 = 0.25: WD holds at the best depth 2, in every row.
    assert summary["best_fixed_depth"].tolist() == [2, 2, 2]
    assert summary["instance_wd_verdict"].tolist() == ["holds"] * 3


def test_without_labels_the_accuracy_is_the_expected_one_from_the_given_error_rates():
    _, summary = _summary(error_rates=[0.4, 0.2, 0.1])
    assert summary["accuracy"].tolist() == pytest.approx([0.6, 0.8, 0.9])
    assert summary["accuracy_vs_deepest"].tolist() == pytest.approx([-0.3, -0.1, 0.0])
    # C + γ = (0.4, 0.25, 0.4): depth 2 is the best fixed depth.
    assert summary["accuracy_vs_best_fixed"].tolist() == pytest.approx([-0.2, 0.0, 0.1])


def test_a_cascade_whose_deepest_stage_is_free_saves_nothing_measurable():
    policies = {"d1": FixedDepth(1, [0.0, 0.0])}
    result = replay(OUTPUTS[:, :2], LABELS, policies=policies, horizon=10, reps=1, sampling="sequential")
    assert math.isnan(result.summary()["cost_saved"].item())


def test_the_instance_line_names_the_verdict_and_the_best_fixed_depth():
    result, _ = _summary(labels=LABELS)
    instance = result.instance
    # p_23 = 0.1 (row 0), C_3 - C_2 = 0.25: xi = 0.15 > 0, WD holds at depth 2.
    assert instance.xi == pytest.approx(0.15) and instance.wd_verdict == "holds"
    text = describe_instance(instance)
    assert text.splitlines()[0].startswith("best fixed depth 2 of 3: cost 0.05 + error rate 0.1 = 0.15 per")
    assert "weak dominance holds (ξ = 0.15)" in text
    # Stage 3 at 0.01 over stage 2 and as accurate as stage 2: C + γ = (0.3, 0.15, 0.16), the best
    # depth is still 2, but p_23 = 0.1 > 0.01: xi = 0.01 - 0.1 < 0, WD is violated.
    violated = Instance(
        cumulative_costs=[0.0, 0.05, 0.06], error_rates=[0.3, 0.1, 0.1], disagreement=instance.disagreement
    )
    assert violated.optimal_depth == 2 and violated.wd_verdict == "violated"
    assert "weak dominance violated (ξ = -0.09)" in describe_instance(violated)
    assert all(len(line) <= TABLE_WIDTH for line in describe_instance(violated).splitlines())


def _table_row(name, k, mix):
    row = {"policy": name, "regret_mean": 1234.5, "regret_ci_low": 1000.0, "regret_ci_high": 1469.0,
           "mean_cost": 0.123456, "cost_saved": 0.5, "accuracy": 0.75, "accuracy_vs_deepest": -0.125,
           "labels_mean": 10000.0}  # fmt: skip
    row.update({f"depth_{d}": mix[d - 1] for d in range(1, k + 1)})
    return row


def test_the_printed_table_fits_100_columns_with_long_names_and_many_stages():
    names = ["audited:label_budget=2,alpha=1,label_allotment=300", "uss-kl-ucb"]
    five = pd.DataFrame([_table_row(name, 5, [0.12, 0.13, 0.25, 0.25, 0.25]) for name in names])
    text = printed_table(five)
    lines = text.splitlines()
    assert max(map(len, lines)) <= TABLE_WIDTH
    assert lines[0].split()[-2:] == ["depth", "%"] and lines[1].endswith("12/13/25/25/25")
    assert lines[1].split("  ")[0] == "audited:label_budget=…"  # the first 22 characters of the name
    assert "1234 ± 234" in lines[1]
    assert "50.0%" in lines[2] and "75.0%" in lines[2] and "-12.5 pt" in lines[2] and "10000" in lines[2]
    # Twelve stages: the mix would not fit, the mean depth replaces it (sum of d * f_d).
    mix = [1 / 12] * 12
    twelve = pd.DataFrame([_table_row(name, 12, mix) for name in names])
    lines = printed_table(twelve).splitlines()
    assert max(map(len, lines)) <= TABLE_WIDTH
    assert lines[0].endswith("mean depth") and lines[1].endswith("6.50")
