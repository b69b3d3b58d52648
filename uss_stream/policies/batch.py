"""Exact batched policy steps: the depths ``select``/``update`` would choose, for many events at once.

A policy's decision is a deterministic function of the round and its counts, and
:meth:`~uss_stream.policies.base.Policy.decide_many` evaluates it for many count states in one
call (the library checks it returns exactly what :meth:`~uss_stream.policies.base.Policy.select`
returns). For a batch of events whose stage outputs are all known (outputs mode), the connector
first asks the policy to *certify* the longest window of events over which no outputs can change
its depth (:meth:`~uss_stream.policies.base.Policy.certify_many`): those events take that depth
and their counts follow by sums, without a decision evaluated; a converged stream is decided in
a few array operations per batch. Where no window is certified, it *speculates* that the next
``W`` events are queried at the last depth ``d``: their counts then follow by cumulative sums of
the disagreement indicators of the pairs a depth-``d`` query observes, one ``decide_many`` call
evaluates every speculated state, and the events up to and including the first whose decision
differs from ``d`` are accepted (that state is still exact). The window grows while speculations
hold. The result is the sequential loop's depth sequence. With the compiled kernels installed
(``uss-stream[fast]``, :mod:`uss_stream.core.compiled`) the same loop runs in Rust for the
policies they know. It is the replay engine's loop
(:func:`uss_stream.policies.kernel.speculate`) on a single stream that starts from the policy's current
counts: they go in and out as :class:`~uss_stream.policies.kernel.Counts`
(:meth:`~uss_stream.policies.kernel.Counts.of_stats`, :meth:`~uss_stream.policies.base.Policy.load_stats`),
never through JSON. Randomised policies (USS-TS) decide on their own stream, the one ``select``
uses. Any policy whose :attr:`~uss_stream.policies.base.Policy.vectorised` capability says so is
decided this way; the others are stepped event by event.

Discounted counts are stepped event by event too, although the kernel decides them exactly (it
applies the streaming statistics' operations, ``x <- γ·x + step``, one speculated round at a
time): on a single stream that costs a NumPy step per speculated state, and discounted decisions
near a cost gap change every few events, so the kernel's windows stay short. Measured on 100 000
events in batches of 5000 (K = 3, γ = 0.999, on a loaded 2-core machine): the kernel decides
USS-UCB at 0.3-0.5x, USS-KL-UCB at 0.4-0.5x and USS-TS at 0.3-0.8x the events per second of the
``select``/``update`` loop; with plain counts it decides them at 1.2-2x, 1.1-1.5x and 2-6x.
(The replay's repetitions share each kernel step, which is why the replay keeps it for
discounted policies.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from uss_stream.policies.base import Policy
from uss_stream.policies.kernel import FIRST_WINDOW, MAX_WINDOW, Counts, pair_order, speculate

__all__ = ["MIN_BATCH", "decide_batch", "next_window", "pair_disagreements"]

#: Below this many events the sequential loop is cheaper than the vectorised one.
MIN_BATCH = 32


def decide_batch(
    policy: Policy,
    outputs: Sequence[Any],
    guess: int | None = None,
    window: int | None = None,
    on_step: Callable[[int], Any] | None = None,
) -> list[int]:
    """Step ``policy`` once per event; returns the depths, exactly as the ``select``/``update`` loop.

    Parameters
    ----------
    policy
        Any label-free policy; on return its counts include every event (as after the loop).
        A :attr:`~uss_stream.policies.base.Policy.vectorised` policy with plain counts is stepped
        by the kernel's speculative loop; one with discounted counts, or one that is not
        vectorised, by its own ``select``/``update`` loop (see the module's notes).
    outputs
        Validated outputs of all ``K`` stages of each event (no missing values), flat: event
        ``n``'s outputs are ``outputs[n*K:(n+1)*K]``.
    guess
        The depth to speculate first (e.g. the last one decided); only speed depends on it.
    window
        The events speculated by the first step (the kernel's default if ``None``, e.g.
        :func:`next_window` of the previous batch); only speed depends on it.
    on_step
        Called with the events decided by each speculative step (not called by the loop).

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
    if not policy.vectorised or policy.discount is not None or len(outputs) < MIN_BATCH * n_stages:
        return _loop(policy, outputs)
    indicators = pair_disagreements(outputs, n_stages)
    return _speculate(policy, indicators, n_stages if guess is None else guess, window, on_step)


def _loop(policy: Policy, outputs: Sequence[Any]) -> list[int]:
    depths = []
    select, update = policy.select, policy.update
    n_stages = policy.n_stages
    for start in range(0, len(outputs), n_stages):
        depth = select()
        update(outputs[start : start + depth])
        depths.append(depth)
    return depths


def pair_disagreements(outputs: Sequence[Any], n_stages: int) -> np.ndarray:
    """``N x P`` int8 indicators ``output_i != output_j`` per event, with Python's equality semantics.

    ``outputs`` is flat (event ``n``'s are ``outputs[n*K:(n+1)*K]``); pairs in
    :func:`~uss_stream.policies.kernel.pair_order`.

    >>> pair_disagreements([1, 1, 0, "a", "b", "b"], 3).tolist()   # pairs (1,2), (1,3), (2,3)
    [[0, 1, 1], [1, 1, 0]]
    """
    upper_i, upper_j = pair_order(n_stages)
    flat = None
    if type(outputs) is list:
        # Integers (and booleans) in 0..255, the usual labels, are bytes: read without a NumPy
        # conversion of each Python object. Anything else (a string, a float, a large integer)
        # does not fit and is converted below. Only a list: bytes() of an array is its memory.
        with contextlib.suppress(TypeError, ValueError):
            flat = np.frombuffer(bytes(outputs), dtype=np.uint8)
    if flat is None:
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


def next_window(events: int, steps: int) -> int | None:
    """The first window of the next batch: twice the events a step decided in this one.

    Each speculative step costs a fixed overhead (a few NumPy calls) beside its states, and the
    kernel starts every call with a window of 8 that doubles while speculations hold: on a
    stream whose decisions stay put for hundreds of events, most steps of a batch were spent
    growing the window again. ``None`` (the kernel's default) if no step ran.

    >>> next_window(5000, 4), next_window(5000, 2000), next_window(10**6, 1), next_window(0, 0)
    (2500, 8, 4096, None)

    """
    if not steps:
        return None
    return max(FIRST_WINDOW, min(MAX_WINDOW, 2 * events // steps))


def _speculate(
    policy: Policy,
    indicators: np.ndarray,
    guess: int,
    window: int | None = None,
    on_step: Callable[[int], Any] | None = None,
) -> list[int]:
    """The kernel's speculative loop on one stream, from and back to the policy's counts."""
    counts = Counts.of_stats(policy.stats)
    rows = np.arange(len(indicators))[None, :]
    depths = speculate(
        policy, rows, indicators, on_progress=on_step, counts_of=counts, guess=guess, window=window
    )
    policy.load_stats(counts.to_stats(0, discount=policy.discount))
    return depths[0].tolist()
