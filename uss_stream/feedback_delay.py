"""Replay with delayed feedback: each decision's outputs are reported ``D`` rounds later.

In a physical cascade the outputs of the queried sensors come back after the depth is decided,
so later decisions are taken on counts that miss the most recent reports. This module simulates
that inside the replay engine: the report of the decision at round ``s`` with delay ``d_s`` is
applied just before the decision at round ``s + d_s + 1`` (``d_s = 0`` is the synchronous loop).
It is the vectorised counterpart of :class:`uss_stream.pending.PendingDecisions` fed in the same
order, and decides through the policies' own :meth:`~uss_stream.policies.base.Policy.decide_many`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from uss_stream.kernel import pair_order
from uss_stream.policies.base import Policy

__all__ = ["feedback_delays", "simulate_delayed"]


def feedback_delays(
    delay: int | tuple[int, int], *, reps: int, horizon: int, seed: int | None = 0
) -> np.ndarray:
    """The ``(reps, horizon)`` delay of each decision's report, in rounds.

    ``delay`` is a fixed number of rounds, or ``(low, high)`` for delays drawn uniformly from
    ``low..high`` (inclusive) with ``numpy.random.default_rng(seed)``.

    >>> feedback_delays(3, reps=1, horizon=4).tolist()
    [[3, 3, 3, 3]]
    >>> bool((feedback_delays((0, 5), reps=2, horizon=100) <= 5).all())
    True

    """
    if isinstance(delay, tuple):
        if len(delay) != 2 or not all(isinstance(v, (int, np.integer)) for v in delay):
            raise ValueError(f"delay must be an integer or a (low, high) pair of integers, got {delay!r}")
        low, high = int(delay[0]), int(delay[1])
        if not 0 <= low <= high:
            raise ValueError(f"delay range must satisfy 0 <= low <= high, got {delay!r}")
        return np.random.default_rng(seed).integers(low, high + 1, size=(reps, horizon))
    if isinstance(delay, bool) or not isinstance(delay, (int, np.integer)) or delay < 0:
        raise ValueError(f"delay must be an integer >= 0 or a (low, high) pair, got {delay!r}")
    return np.full((reps, horizon), int(delay), dtype=np.int64)


def simulate_delayed(
    policy: Policy,
    rows: np.ndarray,
    pairs: np.ndarray,
    delays: np.ndarray,
    wrong: np.ndarray | None = None,
    on_progress: Callable[[int], Any] | None = None,
) -> np.ndarray:
    """The ``(reps, horizon)`` depths ``policy`` chooses when reports arrive ``delays`` rounds late.

    Parameters
    ----------
    policy
        Evaluated through :meth:`~Policy.decide_many` only; repetition ``r`` of a randomised
        policy decides as :meth:`~Policy.for_repetition` ``(r)`` would.
    rows
        ``(reps, horizon)`` indices into the log.
    pairs
        ``N x P`` 0/1 disagreement indicators of the log's rows, pairs ordered as
        :func:`uss_stream.kernel.pair_order`.
    delays
        ``(reps, horizon)`` non-negative delays, e.g. from :func:`feedback_delays`.
    wrong
        ``N x K`` 0/1 error indicators, for policies that learn from labels.
    on_progress
        Called with the number of decisions taken at each round.

    Notes
    -----
    One numpy step per round (all repetitions at once); the reports in flight wait in a ring
    buffer indexed by their arrival round, of length ``max(delays) + 2``.
    """
    reps, horizon = rows.shape
    if getattr(policy, "discount", None) is not None:
        raise ValueError(
            "simulate_delayed accumulates plain counts: a policy with discount= is not supported"
        )
    if delays.shape != rows.shape:
        raise ValueError(f"delays must have shape {rows.shape}, got {delays.shape}")
    if delays.size and delays.min() < 0:
        raise ValueError("delays must be >= 0")
    n_stages = policy.n_stages
    n_pairs = n_stages * (n_stages - 1) // 2
    upper_i, upper_j = pair_order(n_stages)
    stage = np.arange(n_stages)
    pair_depth = upper_j + 1  # a pair is observed by queries of depth >= j + 1
    ring = int(delays.max(initial=0)) + 2
    every = np.arange(reps)

    queried = np.zeros((reps, n_stages), dtype=np.int64)
    disagreements = np.zeros((reps, n_stages, n_stages), dtype=np.int64)
    errors = None if wrong is None else np.zeros((reps, n_stages), dtype=np.int64)
    due_q = np.zeros((ring, reps, n_stages), dtype=np.int64)
    due_d = np.zeros((ring, reps, n_pairs), dtype=np.int64)
    due_e = None if wrong is None else np.zeros((ring, reps, n_stages), dtype=np.int64)
    depths = np.empty((reps, horizon), dtype=np.int8 if n_stages < 128 else np.int32)
    streams = policy.stream_keys(reps)  # randomised policies: repetition r = for_repetition(r)

    for t in range(1, horizon + 1):
        slot = t % ring
        queried += due_q[slot]
        disagreements[:, upper_i, upper_j] += due_d[slot]
        due_q[slot] = 0
        due_d[slot] = 0
        if errors is not None:
            errors += due_e[slot]
            due_e[slot] = 0
        depth = policy.decide_many(
            np.full(reps, t, dtype=np.int64), queried, disagreements, errors, streams=streams
        )
        depths[:, t - 1] = depth
        row = rows[:, t - 1]
        arrival = (t + delays[:, t - 1] + 1) % ring
        asked = stage[None, :] < depth[:, None]
        due_q[arrival, every] += asked
        due_d[arrival, every] += pairs[row][:, :n_pairs] & (pair_depth[None, :] <= depth[:, None])
        if due_e is not None:
            due_e[arrival, every] += wrong[row][:, :n_stages] & asked
        if on_progress is not None:
            on_progress(reps)
    return depths
