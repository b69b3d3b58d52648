"""Problem instances: the paper's definitions, and Table 1 from our BSC generator."""

from __future__ import annotations

import numpy as np
import pytest

from uss_stream.core.instances import Instance
from uss_stream.datasets.bsc import BSC_CASES, TABLE1_OPTIMAL, TABLE1_WD, bsc_instance, generate_bsc


def test_definitions_by_hand():
    # C = (0, 0.15, 0.35), gamma = (0.4, 0.1, 0.05): totals (0.4, 0.25, 0.4) -> i* = 2.
    p = [[0, 0.42, 0.422], [0.42, 0, 0.122], [0.422, 0.122, 0]]
    instance = Instance(cumulative_costs=[0, 0.15, 0.35], error_rates=[0.4, 0.1, 0.05], disagreement=p)
    assert instance.optimal_depth == 2
    assert instance.xi == pytest.approx(0.2 - 0.122)  # C_3 - C_2 - p_23
    assert instance.rho == pytest.approx(0.2 / 0.122)
    assert instance.satisfies_wd
    assert instance.gaps.tolist() == pytest.approx([0.15, 0.0, 0.15])
    assert instance.stage_costs.tolist() == pytest.approx([0, 0.15, 0.2])
    # SD needs p_ij = gamma_i - gamma_j (binary labels): 0.42 != 0.3.
    assert not instance.satisfies_sd


def test_sd_identity_and_optimal_last_stage():
    gamma = [0.3, 0.2, 0.1]
    p = [[0, 0.1, 0.2], [0.1, 0, 0.1], [0.2, 0.1, 0]]
    instance = Instance(stage_costs=[0, 0.01, 0.01], error_rates=gamma, disagreement=p)
    assert instance.satisfies_sd
    assert instance.optimal_depth == 3
    assert instance.xi == float("inf") and instance.satisfies_wd


def test_wd_boundary_rho_equal_one_is_not_wd():
    # xi = C_2 - C_1 - p_12 = 0.25 - 0.25 = 0: the excluded rho = 1 case (Proposition 1).
    instance = Instance(
        cumulative_costs=[0, 0.25], error_rates=[0.3, 0.1], disagreement=[[0, 0.25], [0.25, 0]]
    )
    assert instance.optimal_depth == 1
    assert not instance.satisfies_wd


def test_from_log_frequencies_by_hand():
    outputs = [[0, 0], [0, 1], [1, 1], [1, 1]]
    labels = [0, 1, 1, 0]
    instance = Instance.from_log(outputs, labels, stage_costs=[0, 0.1])
    assert instance.error_rates.tolist() == [0.5, 0.25]
    assert instance.disagreement[0, 1] == 0.25
    # Rows (outputs | label): (0,0|0) both right, (0,1|1) stage 1 wrong, (1,1|1) both right,
    # (1,1|0) both wrong. No row has stage 1 right and stage 2 wrong: SD holds.
    assert instance.satisfies_sd


@pytest.mark.slow
def test_table1_from_one_million_bsc_samples():
    outputs, labels = generate_bsc(1_000_000, seed=2019)
    measured = {}
    for case, costs in BSC_CASES.items():
        instance = Instance.from_log(outputs, labels, cumulative_costs=costs)
        measured[case] = (instance.optimal_depth, instance.satisfies_wd)
        exact = bsc_instance(case)
        assert (exact.optimal_depth, exact.satisfies_wd) == measured[case]
    assert measured == {case: (TABLE1_OPTIMAL[case], TABLE1_WD[case]) for case in BSC_CASES}
    assert np.allclose(
        Instance.from_log(outputs, labels, cumulative_costs=BSC_CASES[1]).error_rates,
        [0.4, 0.1, 0.05],
        atol=2e-3,
    )


def test_swapping_stages_two_and_three():
    swapped = bsc_instance(4).swapped(2, 3)
    assert swapped.error_rates.tolist() == pytest.approx([0.4, 0.05, 0.1])
    # C = (0.2, 0.36, 0.4); totals (0.6, 0.41, 0.5) -> 2; xi = C_3 - C_2 - p_{2,3} = 0.04 - 0.122 < 0.
    assert swapped.optimal_depth == 2
    assert not swapped.satisfies_wd
