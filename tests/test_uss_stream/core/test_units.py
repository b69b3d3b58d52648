"""Costs in the user's units: the conversion by the price of one error, and unreachable depths.

"Unreachable" is checked against an independent computation: the best depth (the largest minimiser
of ``C_j + γ_j``, :attr:`Instance.optimal_depth`) under the error rates most favourable to depth
``j`` (``γ_j = 0``, every other stage always wrong). Depth ``j`` can be the best depth for some error
rates iff it is the best under those, iff ``C_j <= C_1 + 1``.
"""

from __future__ import annotations

import math
import warnings

import pytest

from uss_stream.core.instances import Instance
from uss_stream.core.units import (
    CostScaleWarning,
    check_price_of_error,
    in_error_units,
    reach_warning,
    unreachable_depths,
)


def _reachable_somehow(cumulative, j):
    gamma = [1.0] * len(cumulative)
    gamma[j - 1] = 0.0
    return Instance(cumulative_costs=cumulative, error_rates=gamma).optimal_depth == j


@pytest.mark.parametrize("first", [0.0, 0.25, 3.0])
@pytest.mark.parametrize("step", [-1, 0, 1])
def test_a_depth_is_unreachable_exactly_when_it_costs_more_than_one_error_above_depth_1(first, step):
    # C_2 - C_1 at 1 - 1e-9, 1 and 1 + 1e-9 (first + 1 is exact in binary for these firsts; the
    # reference counts totals within 1e-12 as tied, so it is compared beyond that).
    second = first + 1.0 + step * 1e-9
    cumulative = [first, second, second + 5.0]
    expected = [j for j in (2, 3) if not _reachable_somehow(cumulative, j)]
    assert unreachable_depths(cumulative) == expected
    assert expected == ([2, 3] if step > 0 else [3])


def test_the_warning_names_the_unreachable_suffix_and_is_silent_otherwise():
    # At C_2 - C_1 = 1 exactly, depth 2 is best if stage 1 is always wrong and stage 2 always right.
    assert unreachable_depths([0.0, 1.0]) == [] and unreachable_depths([0.0, math.nextafter(1.0, 2.0)]) == [2]
    assert reach_warning([0.0, 0.5, 1.0]) is None
    assert reach_warning([0.0, 0.5, 1.5]).startswith("depth 3 can never be the best depth: C_3 - C_1 = 1.5")
    assert reach_warning([5.0, 15.0, 35.0]).startswith("depths 2..3 can never be the best depth")
    assert "Every policy will settle on depth 1." in reach_warning([5.0, 15.0, 35.0])


def _converted(costs, price):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        converted = in_error_units(costs, price)
    return converted, [w for w in caught if issubclass(w.category, CostScaleWarning)]


def test_costs_in_dollars_with_the_price_of_an_error():
    # 5, 10 and 20 dollars with a wrong answer at 250 dollars: 0.02, 0.04 and 0.08 errors.
    converted, caught = _converted([5, 10, 20], 250)
    assert converted == pytest.approx([0.02, 0.04, 0.08]) and not caught
    # The same costs read as errors (no price): depths 2 and 3 are unreachable, one warning.
    converted, caught = _converted([5, 10, 20], None)
    assert converted == [5.0, 10.0, 20.0] and len(caught) == 1
    assert "price of one error" in str(caught[0].message)


@pytest.mark.parametrize(("second", "warns"), [(99.99, False), (100.0, False), (100.01, True)])
def test_the_warning_at_and_near_the_price_of_one_error(second, warns):
    # Stage 2 costs `second` dollars over stage 1 and an error costs 100 dollars.
    _, caught = _converted([40.0, second], 100.0)
    assert bool(caught) == warns
    if warns:
        assert "C_2 - C_1 = 100, more than the price of one error (100)" in str(caught[0].message)


@pytest.mark.parametrize("price", [0, -1.0, math.inf, math.nan, True, "100"])
def test_a_bad_price_is_one_clear_error(price):
    with pytest.raises(ValueError, match="price_of_error must be a finite number > 0"):
        check_price_of_error(price)
    with pytest.raises(ValueError, match="price_of_error"):
        in_error_units([1.0, 2.0], price)
