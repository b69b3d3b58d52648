"""Deciding many keys' events at once, exactly as the per-event loop of a keyed policy does.

Between two refreshes of the pool snapshot, a key's decisions depend on its own counts and on the
(fixed) snapshot only, so the keys of a batch are independent streams. :func:`speculate_keys`
steps them together, as the replay engine steps repetitions
(:func:`uss_stream.policies.kernel.speculate`), but with a different number of events per key: each
step takes the next ``min(window, left)`` events of every unfinished key, speculates that they are
all queried at the key's last depth, builds every speculated state by a cumulative sum of the
events' count steps within each key, decides all states in one call and accepts each key's events
up to and including its first decision that differs from the speculation (that state is still
exact). A key that fails at once speculates its new depth next; one that fails later, its old depth
(exploration rounds are mostly single). The window grows while speculations hold.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from uss_stream.policies.kernel import FIRST_WINDOW, MAX_WINDOW, next_window
from uss_stream.policies.keyed_prior import CountLayout

__all__ = ["speculate_keys"]


def speculate_keys(
    decide: Callable[[np.ndarray, np.ndarray], np.ndarray],
    layout: CountLayout,
    counts: np.ndarray,
    instances: np.ndarray,
    indicators: np.ndarray,
    guess: np.ndarray,
    window: int | None = None,
) -> tuple[np.ndarray, int]:
    """The depths of ``S`` events of many keys, and the window to start the next call with.

    Parameters
    ----------
    decide
        ``decide(rows, instances)``: the depths for ``(M, width)`` own counts of the keys
        ``instances`` (``M``), on the snapshot of this segment.
    layout
        The rows' :class:`~uss_stream.policies.keyed_prior.CountLayout`.
    counts
        ``(I, width)`` int64: each key's counts before its first event here; updated in place to
        its counts after its last one.
    instances
        ``S`` key indices into ``counts``, in event order.
    indicators
        ``(S, P)`` 0/1 disagreement indicators of the events' pairs (all ``K`` stages known).
    guess
        ``I`` depths to speculate first per key (only speed depends on them); updated in place to
        each key's last depth.
    window
        The events per key speculated by the first step (:data:`~uss_stream.policies.kernel.FIRST_WINDOW`
        if ``None``).

    Examples
    --------
    Two keys and a rule that queries 2 stages until a key has 3 rounds, then 1:

    >>> layout = CountLayout(2)
    >>> def decide(rows, keys):
    ...     return np.where(rows[:, 0] < 3, 2, 1)
    >>> counts = np.zeros((2, layout.width), dtype=np.int64)
    >>> depths, _ = speculate_keys(decide, layout, counts, np.array([0, 1, 0, 0, 0, 1]),
    ...                            np.array([[1], [0], [1], [0], [1], [1]]), np.full(2, 2))
    >>> depths.tolist(), counts.tolist()     # key 0: rounds 1-3 at depth 2, round 4 at depth 1
    ([2, 2, 2, 2, 1, 2], [[4, 4, 3, 2], [2, 2, 2, 1]])

    """
    n_events = instances.size
    depths = np.zeros(n_events, dtype=np.int64)
    if not n_events:
        return depths, FIRST_WINDOW if window is None else window
    order = np.argsort(instances, kind="stable")
    keys, start, length = np.unique(instances[order], return_index=True, return_counts=True)
    done = np.zeros(keys.size, dtype=np.int64)
    active = np.arange(keys.size)
    window = FIRST_WINDOW if window is None else max(1, min(int(window), MAX_WINDOW))
    while active.size:
        take = np.minimum(length[active] - done[active], window)
        first = np.cumsum(take) - take  # each key's first state in the flat step
        offset = np.arange(int(take.sum())) - np.repeat(first, take)
        group = np.repeat(active, take)
        event = order[start[group] + done[group] + offset]
        key = keys[group]
        speculated = guess[key]
        step = layout.steps(speculated, indicators[event])
        before = np.cumsum(step, axis=0)
        before -= step
        before -= np.repeat(before[first], take, axis=0)
        before += counts[key]
        decided = decide(before, key)
        wrong = np.where(decided != speculated, offset, MAX_WINDOW + 1)
        first_wrong = np.minimum.reduceat(wrong, first)
        accepted = np.minimum(first_wrong + 1, take)
        kept = offset < np.repeat(accepted, take)
        depths[event[kept]] = decided[kept]
        last = first + accepted - 1
        last_depth = decided[last]
        counts[keys[active]] = before[last] + layout.steps(last_depth, indicators[event[last]])
        guess[keys[active]] = np.where(first_wrong == 0, last_depth, speculated[first])
        done[active] += accepted
        window = next_window(window, accepted.sum() / take.sum(), window)
        active = active[done[active] < length[active]]
    return depths, window
