"""Checks of user input shared by every entry point: costs and stage outputs.

Each raises :class:`ValueError` naming the offending parameter, so that bad input is rejected
before it touches any learned state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["check_label", "check_outputs", "check_positive", "check_stage_costs", "plain_number"]


_FLOATS = (float, np.floating)


def plain_number(value: Any) -> Any:
    """A NumPy scalar number as the Python number it holds (anything else unchanged), so that a
    parameter given as ``np.int64(1)`` is accepted where ``1`` is, and saves as plain JSON.

    >>> plain_number(np.int64(3)), plain_number(np.float32(0.5)), plain_number("x")
    (3, 0.5, 'x')
    """
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value


def check_positive(value: Any, name: str) -> float:
    """Validate a finite number ``> 0`` (an exploration parameter, say) and return it (a Python number).

    >>> check_positive(0.51, "alpha"), check_positive(np.int64(2), "alpha")
    (0.51, 2)
    >>> check_positive(0, "alpha")
    Traceback (most recent call last):
    ...
    ValueError: alpha must be a finite number > 0, got 0

    """
    value = plain_number(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def check_stage_costs(stage_costs: Any) -> list[float]:
    """Validate per-stage costs ``c_1..c_K`` and return the cumulative costs ``C_1..C_K``.

    >>> check_stage_costs([0, 0.15, 0.2])
    [0.0, 0.15, 0.35]
    >>> check_stage_costs([1, -1])
    Traceback (most recent call last):
    ...
    ValueError: stage_costs[1] must be >= 0, got -1

    """
    if (
        isinstance(stage_costs, (str, bytes))
        or not isinstance(stage_costs, (Sequence, np.ndarray))
        or getattr(stage_costs, "ndim", 1) != 1
    ):
        kind = type(stage_costs).__name__
        shape = f" of shape {stage_costs.shape}" if isinstance(stage_costs, np.ndarray) else ""
        raise ValueError(f"stage_costs must be a sequence of per-stage costs, got {kind}{shape}")
    if len(stage_costs) == 0:
        raise ValueError("stage_costs must hold at least one stage cost, got an empty sequence")
    cumulative = []
    total = 0.0
    for j, cost in enumerate(stage_costs):
        if isinstance(cost, bool) or not isinstance(cost, (int, float, np.integer, np.floating)):
            raise ValueError(f"stage_costs[{j}] must be a number, got {cost!r}")
        if not math.isfinite(cost):
            raise ValueError(f"stage_costs[{j}] must be finite, got {cost!r}")
        if cost < 0:
            raise ValueError(f"stage_costs[{j}] must be >= 0, got {cost!r}")
        total += float(cost)
        cumulative.append(total)
    return cumulative


def check_outputs(outputs: Any, depth: int) -> list[Any]:
    """Validate the outputs of stages ``1..depth`` and return them as a list.

    An output is a label: present (not None/NaN), hashable and equal to itself, so that agreement
    between stages is well defined (a nested list, ``pd.NA`` or an array is refused).

    >>> check_outputs((1, 0), 2)
    [1, 0]
    >>> check_outputs([1, None], 2)
    Traceback (most recent call last):
    ...
    ValueError: outputs[1] is missing (None); every queried stage must report an output
    >>> check_outputs([[1], 0], 2)
    Traceback (most recent call last):
    ...
    ValueError: outputs[0] must be a label (a string, number or other hashable value), got list

    """
    if type(outputs) is list:
        values = outputs
    elif type(outputs) is tuple:
        values = list(outputs)
    elif isinstance(outputs, np.ndarray):
        values = outputs.tolist()
    elif isinstance(outputs, Sequence) and not isinstance(outputs, (str, bytes)):
        values = list(outputs)
    else:
        raise ValueError(f"outputs must be a sequence of stage outputs, got {type(outputs).__name__}")
    if len(values) != depth:
        raise ValueError(f"outputs must hold the outputs of the {depth} queried stage(s), got {len(values)}")
    for value in values:  # the common labels, checked by type alone ...
        kind = type(value)
        if kind is not int and kind is not str and kind is not bool:
            _check_labels(values)  # ... any other one, by value
            break
    return values


def _check_labels(values: list[Any]) -> None:
    for j, value in enumerate(values):
        kind = type(value)
        if kind is int or kind is str or kind is bool:
            continue
        if value is None or (isinstance(value, _FLOATS) and value != value):
            _raise_missing(values)
        if kind is not float:
            check_label(value, f"outputs[{j}]")


def check_label(value: Any, name: str) -> Any:
    """Validate one label (a stage output or a ground truth): hashable and equal to itself.

    >>> check_label("cat", "label")
    'cat'
    >>> import pandas as pd
    >>> check_label(pd.NA, "label")
    Traceback (most recent call last):
    ...
    ValueError: label is missing or not comparable (it is not equal to itself), got <NA>

    """
    if value is None or (isinstance(value, _FLOATS) and value != value):
        raise ValueError(f"{name} is missing (None/NaN)")
    try:
        hash(value)
    except TypeError:
        raise ValueError(
            f"{name} must be a label (a string, number or other hashable value), got {type(value).__name__}"
        ) from None
    try:
        equal = value == value
        comparable = equal is True or (isinstance(equal, np.bool_) and bool(equal))
    except (TypeError, ValueError):
        comparable = False
    if not comparable:
        raise ValueError(f"{name} is missing or not comparable (it is not equal to itself), got {value!r}")
    return value


def _raise_missing(values: list[Any]) -> None:
    for j, value in enumerate(values):
        if value is None:
            raise ValueError(f"outputs[{j}] is missing (None); every queried stage must report an output")
        if isinstance(value, _FLOATS) and value != value:
            raise ValueError(f"outputs[{j}] is NaN; every queried stage must report an output")
