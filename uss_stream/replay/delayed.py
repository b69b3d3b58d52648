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

from uss_stream.policies.base import Policy
from uss_stream.policies.kernel import Counts, Reveal

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
        :func:`uss_stream.policies.kernel.pair_order`.
    delays
        ``(reps, horizon)`` non-negative delays, e.g. from :func:`feedback_delays`.
    wrong
        ``N x K`` 0/1 error indicators, for policies that learn from labels.
    on_progress
        Called with the number of decisions taken at each round.

    Notes
    -----
    One numpy step per round (all repetitions at once), on counts in the kernel's layout
    (:class:`uss_stream.policies.kernel.Counts`), decided on with
    :meth:`~uss_stream.policies.kernel.Counts.decide`
    and learnt with :meth:`~uss_stream.policies.kernel.Counts.record`. The reports in flight wait in a
    ring buffer of length ``max(delays) + 2``. Plain counts add up, so the reports arriving
    before a round are recorded as their sum; a policy with ``discount=γ`` records them one by
    one, in the order of their decisions (every report discounts the counts once, as
    :meth:`~uss_stream.core.stats.DisagreementStats.record` does; a round without reports does not).
    """
    reps, horizon = rows.shape
    if delays.shape != rows.shape:
        raise ValueError(f"delays must have shape {rows.shape}, got {delays.shape}")
    if delays.size and delays.min() < 0:
        raise ValueError("delays must be >= 0")
    n_stages = policy.n_stages
    gamma = getattr(policy, "discount", None)
    longest = int(delays.max(initial=0))
    ring = longest + 2
    every = np.arange(reps)
    counts = Counts.zeros(n_stages, reps, discount=gamma, errors=wrong is not None)
    reveal = Reveal(n_stages, pairs, wrong)
    depths = np.empty((reps, horizon), dtype=np.int8 if n_stages < 128 else np.int32)
    streams = policy.stream_keys(reps)  # randomised policies: repetition r = for_repetition(r)
    if gamma is None:
        due = np.zeros((ring, reps, counts.values.shape[0]), dtype=np.int64)  # summed, by arrival
    else:
        sent = np.zeros((ring, reps, counts.values.shape[0]), dtype=np.int8)  # by decision round
        arrival = np.arange(2, horizon + 2) + delays  # round before which each report is applied

    for t in range(1, horizon + 1):
        if gamma is None:
            slot = t % ring
            counts.record(due[slot], discount=None)
            due[slot] = 0
        else:
            first = max(1, t - 1 - longest)  # the earliest decision that can arrive now
            rank = np.cumsum(arrival[:, first - 1 : t - 1] == t, axis=1)
            rank[arrival[:, first - 1 : t - 1] != t] = 0
            for k in range(1, int(rank.max(initial=0)) + 1):  # each repetition's k-th report
                rep, offset = np.nonzero(rank == k)
                counts.record(sent[(first + offset) % ring, rep], discount=gamma, columns=rep)
        depth = counts.decide(policy, np.full(reps, t, dtype=np.int64), streams=streams)
        depths[:, t - 1] = depth
        step = reveal.step(rows[:, t - 1], depth)
        if gamma is None:
            due[(t + delays[:, t - 1] + 1) % ring, every] += step
        else:
            sent[t % ring] = step
        if on_progress is not None:
            on_progress(reps)
    return depths
