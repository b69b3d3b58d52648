"""Exact batched policy steps: the depths ``select``/``update`` would choose, for many events at once.

A policy's decision is a deterministic function of the round and its counts, and
:meth:`~uss_stream.policies.base.Policy.decide_many` evaluates it for many count states in one
call (the library checks it returns exactly what :meth:`~uss_stream.policies.base.Policy.select`
returns). For a batch of events whose stage outputs are all known (outputs mode), the connector
*speculates* that the next ``W`` events are queried at the last depth ``d``: their counts then
follow by cumulative sums of the disagreement indicators of the pairs a depth-``d`` query observes,
one ``decide_many`` call evaluates every speculated state, and the events up to and including the
first whose decision differs from ``d`` are accepted (that state is still exact). The window grows
while speculations hold. The result is the sequential loop's depth sequence; in steady state a
window of thousands of events costs one call. This is the replay engine's technique
(:func:`uss_stream.replay.simulate`) for a single stream that starts from a policy's current counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from uss_stream.policies.base import Policy

__all__ = ["MIN_BATCH", "decide_batch"]

#: Below this many events the sequential loop is cheaper than the vectorised one.
MIN_BATCH = 32

_FIRST_WINDOW = 64
_MAX_WINDOW = 4096


def decide_batch(policy: Policy, outputs: Sequence[Any], guess: int | None = None) -> list[int]:
    """Step ``policy`` once per event; returns the depths, exactly as the ``select``/``update`` loop.

    Parameters
    ----------
    policy
        A label-free policy; on return its counts include every event (as after the loop).
    outputs
        Validated outputs of all ``K`` stages of each event (no missing values), flat: event
        ``n``'s outputs are ``outputs[n*K:(n+1)*K]``.
    guess
        The depth to speculate first (e.g. the last one decided); only speed depends on it.

    Examples
    --------
    >>> import numpy as np
    >>> from uss_stream.policies import USSUCB
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(0, 2, 3000)
    >>> rows = np.stack([truth ^ (rng.random(3000) < 0.2), truth, truth], axis=1)
    >>> batched, looped = USSUCB([0, 0.15, 0.2]), USSUCB([0, 0.15, 0.2])
    >>> decide_batch(batched, rows.ravel().tolist()) == looped.run(rows).tolist()
    True
    >>> batched.state_dict() == looped.state_dict()
    True

    """
    n_stages = policy.n_stages
    if len(outputs) % n_stages:
        raise ValueError(f"outputs must hold {n_stages} values per event, got {len(outputs)} values")
    if len(outputs) < MIN_BATCH * n_stages:
        return _loop(policy, outputs)
    indicators = _disagreements(outputs, n_stages)
    return _speculate(policy, indicators, n_stages if guess is None else guess)


def _loop(policy: Policy, outputs: Sequence[Any]) -> list[int]:
    depths = []
    select, update = policy.select, policy.update
    n_stages = policy.n_stages
    for start in range(0, len(outputs), n_stages):
        depth = select()
        update(outputs[start : start + depth])
        depths.append(depth)
    return depths


def _pairs(n_stages: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(i, j)``, ``i < j``, by ``j`` then ``i``: depth ``d`` observes the first ``d(d-1)/2``."""
    upper_i = [i for j in range(n_stages) for i in range(j)]
    upper_j = [j for j in range(n_stages) for _ in range(j)]
    return np.array(upper_i, dtype=np.intp), np.array(upper_j, dtype=np.intp)


def _disagreements(outputs: Sequence[Any], n_stages: int) -> np.ndarray:
    """``N x P`` int8 indicators ``output_i != output_j`` per event, with Python's equality semantics."""
    upper_i, upper_j = _pairs(n_stages)
    try:
        flat = np.asarray(outputs)
    except (OverflowError, ValueError):
        flat = None
    # Integers and booleans compare in NumPy exactly as in Python; for anything else (strings,
    # floats that may meet large integers, mixed types) Python decides.
    if flat is not None and flat.ndim == 1 and flat.dtype.kind in "biu":
        table = flat.reshape(-1, n_stages)
        return (table[:, upper_i] != table[:, upper_j]).astype(np.int8)
    n_events = len(outputs) // n_stages
    indicators = np.empty((n_events, len(upper_i)), dtype=np.int8)
    for p, (i, j) in enumerate(zip(upper_i.tolist(), upper_j.tolist())):
        left, right = outputs[i::n_stages], outputs[j::n_stages]
        indicators[:, p] = [a != b for a, b in zip(left, right)]
    return indicators


def _speculate(policy: Policy, indicators: np.ndarray, guess: int) -> list[int]:
    n_stages = policy.n_stages
    upper_i, upper_j = _pairs(n_stages)
    n_pairs = len(upper_i)
    document = policy.state_dict()
    stats = document["stats"]
    start_round = stats["decisions"]
    queried = np.array(stats["queried"], dtype=np.int64)
    disagreements = np.array(stats["disagreements"], dtype=np.int64)[upper_i, upper_j]
    stage = np.arange(n_stages)
    pair = np.arange(n_pairs)
    pairs_below = stage * (stage + 1) // 2  # pairs observed by depth d = stage + 1
    n_rows = len(indicators)
    depths = np.empty(n_rows, dtype=np.int64)
    counts = np.zeros((_MAX_WINDOW, n_stages, n_stages), dtype=np.int64)
    position = 0
    window = _FIRST_WINDOW
    while position < n_rows:
        width = min(window, n_rows - position)
        observed = pair < pairs_below[guess - 1]
        step = indicators[position : position + width] * observed
        state_d = np.cumsum(step, axis=0, dtype=np.int64)
        state_d -= step
        state_d += disagreements
        offset = np.arange(width)[:, None]
        state_q = queried + offset * (stage < guess)
        counts[:width, upper_i, upper_j] = state_d
        decided = policy.decide_many(start_round + position + 1 + np.arange(width), state_q, counts[:width])
        misses = np.flatnonzero(decided != guess)
        last = int(misses[0]) if misses.size else width - 1
        depths[position : position + last + 1] = decided[: last + 1]
        new_depth = int(decided[last])
        queried = state_q[last] + (stage < new_depth)
        disagreements = state_d[last] + indicators[position + last] * (pair < pairs_below[new_depth - 1])
        position += last + 1
        if misses.size:
            # A deviation after accepted rounds is usually a single exploration round: keep the
            # old guess; a deviation at once means the depth changed.
            if last == 0:
                guess = new_depth
            window = max(16, window // 2)
        else:
            window = min(2 * window, _MAX_WINDOW)
    matrix = np.zeros((n_stages, n_stages), dtype=np.int64)
    matrix[upper_i, upper_j] = disagreements
    stats["decisions"] = start_round + n_rows
    stats["queried"] = queried.tolist()
    stats["disagreements"] = matrix.tolist()
    policy.load_state_dict(document)
    return depths.tolist()
