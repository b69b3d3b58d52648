"""Costs in the units of one error, and the conversion from the user's own units.

Every policy minimises the error probability plus the acquisition cost: answering from depth ``d``
costs ``γ_d + C_d`` (``γ_d`` the error rate of stage ``d``, ``C_d = c_1 + ... + c_d``). Costs are
therefore in **units of one error**: a stage cost of 0.05 is worth paying if the stage removes at
least one error in 20 events.

Costs in any other unit (dollars, milliseconds, API calls) need the **price of one error** in that
unit: a stage costing ``c`` dollars, where one error costs ``price_of_error`` dollars, costs
``c / price_of_error`` errors. Every entry point takes the costs in the user's units with
``price_of_error`` (``CascadeClassifier(price_of_error=...)``, ``uss-stream replay
--price-of-error``, ``uss-stream kafka run|orchestrate --price-of-error``) and converts them with
:func:`in_error_units`; without it the costs are taken to be in error units already.

**Unreachable depths.** An error rate lies in ``[0, 1]``, so going from stage 1 to depth ``j``
buys at most one error per event (``γ_1 - γ_j <= 1``). Depth ``j`` is *unreachable* when
``C_j - C_1 > 1``: then ``γ_1 + C_1 <= 1 + C_1 < C_j <= γ_j + C_j`` whatever the error rates, so
``j`` is never the best depth, and a label-free policy, which goes deeper only where the
disagreement rate (also at most 1) exceeds the extra cost, settles on a shallower one. At
``C_j - C_1 = 1`` exactly, ``j`` is best only if stage 1 is always wrong and stage ``j`` always
right. Unreachable depths are a suffix ``j0..K`` of the cascade (``C_j`` is non-decreasing), and
:func:`in_error_units` warns (:class:`CostScaleWarning`) when there are any: the usual cause is
costs in a currency given without ``price_of_error``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from uss_stream.core.validation import check_stage_costs

__all__ = [
    "COST_UNIT",
    "CostScaleWarning",
    "check_price_of_error",
    "in_error_units",
    "reach_warning",
    "unreachable_depths",
]

#: How documentation and ``--help`` texts name the unit of costs.
COST_UNIT = "units of one error (or in any unit, with the price of one error in that unit)"


class CostScaleWarning(UserWarning):
    """The costs make some depths unreachable (:func:`unreachable_depths`)."""


def check_price_of_error(value: Any, name: str = "price_of_error") -> float | None:
    """``None``, or the price of one error as a finite number ``> 0``.

    >>> check_price_of_error(250), check_price_of_error(None)
    (250.0, None)
    >>> check_price_of_error(0)
    Traceback (most recent call last):
    ...
    ValueError: price_of_error must be a finite number > 0 (the price of one error in the costs' unit), got 0

    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"{name} must be a finite number > 0 (the price of one error in the costs' unit), got {value!r}"
        )
    return float(value)


def unreachable_depths(cumulative_costs: Sequence[float]) -> list[int]:
    """The depths ``j`` (1-based) with ``C_j - C_1 > 1``, which no error rates make the best depth.

    ``cumulative_costs`` are ``C_1..C_K`` in error units (see the module docstring).

    >>> unreachable_depths([0.0, 0.4, 1.0])       # C_3 - C_1 = 1: reachable, just
    []
    >>> unreachable_depths([0.2, 0.7, 1.3, 2.0])  # C_4 - C_1 = 1.8, C_3 - C_1 = 1.1
    [3, 4]

    """
    first = float(cumulative_costs[0])
    return [j for j, cost in enumerate(cumulative_costs, start=1) if float(cost) - first > 1.0]


def reach_warning(cumulative_costs: Sequence[float], price_of_error: float | None = None) -> str | None:
    """The warning's text if some depths are unreachable, else ``None``.

    ``cumulative_costs`` are in error units; ``price_of_error`` (if the user gave one) is named in
    the text, with the costs in the user's units.

    >>> print(reach_warning([5.0, 15.0, 35.0, 75.0]))  # doctest: +NORMALIZE_WHITESPACE
    depths 2..4 can never be the best depth: C_2 - C_1 = 10 error units, more than the one error
    per event that a deeper stage can save. Every policy will settle on depth 1. Costs are in units
    of one error (the objective is error probability + cost); if yours are in another unit (a
    currency, milliseconds), give the price of one error in that unit (price_of_error,
    --price-of-error)
    >>> print(reach_warning([0.0, 0.5, 1.5], price_of_error=20.0))  # doctest: +NORMALIZE_WHITESPACE
    depth 3 can never be the best depth: C_3 - C_1 = 30, more than the price of one error (20). Every
    policy will settle on depths 1..2. Check the costs and the price of one error
    >>> reach_warning([0.0, 0.5, 1.0]) is None
    True

    """
    depths = unreachable_depths(cumulative_costs)
    if not depths:
        return None
    first, k = depths[0], len(cumulative_costs)
    which = f"depth {first}" if first == k else f"depths {first}..{k}"
    gap = float(cumulative_costs[first - 1]) - float(cumulative_costs[0])
    if price_of_error is None:
        excess = f"{gap:.4g} error units, more than the one error per event that a deeper stage can save"
        hint = (
            "Costs are in units of one error (the objective is error probability + cost); if yours are "
            "in another unit (a currency, milliseconds), give the price of one error in that unit "
            "(price_of_error, --price-of-error)"
        )
    else:
        excess = f"{gap * price_of_error:.4g}, more than the price of one error ({price_of_error:.4g})"
        hint = "Check the costs and the price of one error"
    settles = f"depths 1..{first - 1}" if first > 2 else "depth 1"
    return (
        f"{which} can never be the best depth: C_{first} - C_1 = {excess}. Every policy will settle on "
        f"{settles}. {hint}"
    )


def in_error_units(
    stage_costs: Any, price_of_error: float | None = None, *, warn: bool = True, stacklevel: int = 2
) -> list[float]:
    """Per-stage costs in error units: ``c_j / price_of_error`` (``c_j`` itself without a price).

    The one conversion of every entry point. It validates the costs and the price and, with
    ``warn``, issues a :class:`CostScaleWarning` (:func:`reach_warning`) when some depths are
    unreachable.

    Parameters
    ----------
    stage_costs
        ``c_1..c_K >= 0`` in the user's units.
    price_of_error
        The price of one error in the same units; ``None``: the costs are in error units already.
    warn
        Whether to warn about unreachable depths.
    stacklevel
        Of the warning, as :func:`warnings.warn` counts (2: the line that calls this function).

    Examples
    --------
    Three tests costing 5, 10 and 20 dollars, where a wrong answer costs 250 dollars:

    >>> in_error_units([5, 10, 20], price_of_error=250)
    [0.02, 0.04, 0.08]

    The same costs without a price are taken as errors: depths 2 and 3 are unreachable.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     in_error_units([5, 10, 20])
    [5.0, 10.0, 20.0]
    >>> caught[0].category.__name__, str(caught[0].message)[:39]
    ('CostScaleWarning', 'depths 2..3 can never be the best depth')

    """
    cumulative = check_stage_costs(stage_costs)
    price = check_price_of_error(price_of_error)
    costs = [float(c) for c in stage_costs]
    if price is not None:
        costs = [c / price for c in costs]
        cumulative = check_stage_costs(costs)
    if warn:
        message = reach_warning(cumulative, price)
        if message is not None:
            warnings.warn(message, CostScaleWarning, stacklevel=stacklevel)
    return costs
