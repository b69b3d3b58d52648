"""Replay with shared learning: W workers, each deciding on its own counts plus stale copies of the others'.

The Kafka service runs one learner per input partition. With shared learning each learner decides on
its own counts (always up to date) plus the other partitions' counts as last published, a snapshot
refreshed periodically: disagreement counts add up (:meth:`uss_stream.core.stats.DisagreementStats.merge`),
so the merged counts are those of the union of the streams, minus what the snapshot lacks. This module
simulates that inside the replay engine, one numpy step per round for all repetitions and workers, and
decides through the policies' own :meth:`~uss_stream.policies.base.Policy.decide_many`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from uss_stream.policies.base import Policy
from uss_stream.policies.kernel import Counts, Reveal

__all__ = ["simulate_shared", "simulate_shared_many"]


def simulate_shared(
    policy: Policy,
    rows: np.ndarray,
    pairs: np.ndarray,
    sync_every: int | None,
    wrong: np.ndarray | None = None,
    on_progress: Callable[[int], Any] | None = None,
) -> np.ndarray:
    """The ``(reps, workers, horizon)`` depths of ``workers`` learners sharing stale counts.

    Rounds ``t = 1..horizon``; in round ``t`` every worker ``w`` takes its ``t``-th event. Worker
    ``w``'s decision at round ``t`` uses its own counts over its rounds ``1..t-1`` plus, for every
    other worker, that worker's counts as of the last sync; syncs happen after rounds that are
    multiples of ``sync_every`` (a snapshot of every worker's counts after that round).
    ``sync_every=None`` means never (isolated learners). The round number passed to
    :meth:`~Policy.decide_many` is the number of decisions in the counts used plus one:
    ``t + (workers - 1) * s`` with ``s`` the round of the last sync (0 before the first), as
    :meth:`~uss_stream.core.stats.DisagreementStats.merge` adds the decisions of merged counts. With one
    worker this is :func:`uss_stream.replay.delayed.simulate_delayed` with delay 0.

    Parameters
    ----------
    policy
        Evaluated through :meth:`~Policy.decide_many` only; worker ``w`` of repetition ``r`` of a
        randomised policy decides with stream ``r * workers + w`` of :meth:`~Policy.stream_keys`
        (as :meth:`~Policy.for_repetition` ``(r * workers + w)`` would). With ``discount=γ`` each
        worker's own counts are discounted at each of its rounds and the others' snapshots are
        added as published (``own + foreign``, ``foreign`` the other workers' snapshots summed in
        worker order, as :meth:`~uss_stream.core.stats.DisagreementStats.merge` would add them).
    rows
        ``(reps, workers, horizon)`` indices into the log: each worker's own event stream.
    pairs
        ``N x P`` 0/1 disagreement indicators of the log's rows, pairs ordered as
        :func:`uss_stream.policies.kernel.pair_order`.
    sync_every
        Rounds between two syncs (``>= 1``), or ``None`` for never.
    wrong
        ``N x K`` 0/1 error indicators, for policies that learn from labels (their error counts are
        shared like the disagreement counts).
    on_progress
        Called with the number of decisions taken at each round (``reps * workers``).

    Examples
    --------
    Two workers, costs ``(0, 0.9, 0.95)`` and stages that always agree. Isolated, each worker
    queries all 3 stages at round 1 and explores again at round 5, where
    ``sqrt(0.51 ln 5 / 1) = 0.906 > 0.9`` (see ``tests/test_uss_stream/replay/test_delayed.py``). Synced after
    every round, the counts at round 5 hold both workers' 4 rounds (``n_3 = 2``) and the round
    number is ``4 + 5 = 9``: ``sqrt(0.51 ln 9 / 2) = 0.75 < 0.9``, no exploration.

    >>> from uss_stream.policies import USSUCB
    >>> policy = USSUCB(stage_costs=[0.0, 0.9, 0.05])
    >>> pairs = np.zeros((1, 3), dtype=bool)
    >>> rows = np.zeros((1, 2, 6), dtype=np.int64)
    >>> simulate_shared(policy, rows, pairs, sync_every=None).tolist()
    [[[3, 1, 1, 1, 3, 1], [3, 1, 1, 1, 3, 1]]]
    >>> simulate_shared(policy, rows, pairs, sync_every=1).tolist()
    [[[3, 1, 1, 1, 1, 1], [3, 1, 1, 1, 1, 1]]]

    """
    return simulate_shared_many(policy, [(rows, sync_every)], pairs, wrong, on_progress)[0]


def simulate_shared_many(
    policy: Policy,
    settings: Sequence[tuple[np.ndarray, int | None]],
    pairs: np.ndarray,
    wrong: np.ndarray | None = None,
    on_progress: Callable[[int], Any] | None = None,
) -> list[np.ndarray]:
    """:func:`simulate_shared` for several ``(rows, sync_every)`` settings in one pass.

    The settings may differ in repetitions, workers and sync period but share the horizon. Each
    result is the one :func:`simulate_shared` returns for its setting alone (the decisions of a
    worker depend only on its counts, round number and stream); one :meth:`~Policy.decide_many`
    call per round serves all settings, which saves the per-round overhead of separate runs.
    ``on_progress`` is called with the number of decisions taken at each round, over all settings.

    Examples
    --------
    >>> from uss_stream.policies import USSUCB
    >>> policy = USSUCB(stage_costs=[0.0, 0.9, 0.05])
    >>> pairs = np.zeros((1, 3), dtype=bool)
    >>> rows = np.zeros((1, 2, 6), dtype=np.int64)
    >>> [a.shape for a in simulate_shared_many(policy, [(rows, 1), (rows[:, :1], None)], pairs)]
    [(1, 2, 6), (1, 1, 6)]

    """
    n_stages = policy.n_stages
    n_pairs = n_stages * (n_stages - 1) // 2
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] < n_pairs:
        raise ValueError(
            f"pairs must be an N x P array with P >= {n_pairs} (the policy's pairs), got shape {pairs.shape}"
        )
    if wrong is not None:
        wrong = np.asarray(wrong)
        if wrong.ndim != 2 or wrong.shape[0] != pairs.shape[0] or wrong.shape[1] < n_stages:
            raise ValueError(
                f"wrong must be an N x K array with N = {pairs.shape[0]} rows and K >= {n_stages}, "
                f"got shape {wrong.shape}"
            )
    if not settings:
        raise ValueError("settings must hold at least one (rows, sync_every) pair")
    checked = [(_check_rows(rows, len(pairs)), _check_sync_every(every)) for rows, every in settings]
    horizon = checked[0][0].shape[2]
    if any(rows.shape[2] != horizon for rows, _ in checked):
        raise ValueError(
            f"rows of all settings must share one horizon, got {sorted({r.shape[2] for r, _ in checked})}"
        )

    # Every (setting, repetition, worker) is one state of the batch, settings in contiguous blocks.
    blocks = []
    start = 0
    for rows, every in checked:
        reps, workers, _ = rows.shape
        blocks.append((start, start + reps * workers, reps, workers, every))
        start += reps * workers
    batch = start
    events = np.concatenate([r.reshape(-1, horizon) for r, _ in checked])
    keys = [policy.stream_keys(stop - begin) for begin, stop, *_ in blocks]
    streams = None if keys[0] is None else np.concatenate(keys)

    # One state per (setting, repetition, worker), in the kernel's layout of the counts
    # (uss_stream.policies.kernel.Counts: one row per count, the state index innermost): its own counts,
    # learnt through the kernel's record, and the sum of the others' last snapshots.
    gamma = getattr(policy, "discount", None)
    own = Counts.zeros(n_stages, batch, discount=gamma, errors=wrong is not None)
    used = Counts.zeros(n_stages, batch, discount=gamma, errors=wrong is not None)  # own + others
    reveal = Reveal(n_stages, pairs, wrong)
    width = own.values.shape[0]
    others = np.zeros_like(own.values)
    before = np.zeros(batch, dtype=np.int64)  # decisions of the others in the snapshot
    depths = np.empty((horizon, batch), dtype=np.int8 if n_stages < 128 else np.int32)

    for t in range(1, horizon + 1):
        np.add(own.values, others, out=used.values)
        depth = used.decide(policy, before + t, streams=streams)
        depths[t - 1] = depth
        own.record(reveal.step(events[:, t - 1], depth), discount=gamma)
        for begin, stop, reps, workers, every in blocks:
            if every is not None and t % every == 0:
                snapshot = own.values[:, begin:stop].reshape(width, reps, workers)
                foreign = np.zeros_like(snapshot)
                for other in range(workers):  # in worker order, as merges of the snapshots
                    foreign[:, :, np.arange(workers) != other] += snapshot[:, :, other : other + 1]
                others[:, begin:stop] = foreign.reshape(width, -1)
                before[begin:stop] = (workers - 1) * t
        if on_progress is not None:
            on_progress(batch)
    return [
        depths[:, begin:stop].T.reshape(reps, workers, horizon) for begin, stop, reps, workers, _ in blocks
    ]


def _check_rows(rows: Any, n_rows: int) -> np.ndarray:
    rows = np.asarray(rows)
    if rows.ndim != 3 or 0 in rows.shape or rows.dtype.kind not in "iu":
        raise ValueError(
            "rows must be a non-empty (reps, workers, horizon) array of integer row indices, "
            f"got shape {rows.shape} and dtype {rows.dtype}"
        )
    if rows.min() < 0 or rows.max() >= n_rows:
        raise ValueError(f"rows must index the log's {n_rows} rows, got values in {rows.min()}..{rows.max()}")
    return rows


def _check_sync_every(every: Any) -> int | None:
    if every is None:
        return None
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"sync_every must be an integer >= 1 or None, got {every!r}")
    return int(every)
