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
window of thousands of events costs one call. It is the replay engine's loop
(:func:`uss_stream.kernel.speculate`) on a single stream that starts from the policy's current
counts, discounted ones included: the counts go in and out as
:class:`~uss_stream.kernel.Counts` (:meth:`~uss_stream.kernel.Counts.of_stats`,
:meth:`~uss_stream.policies.base.Policy.load_stats`), never through JSON. Randomised policies
(USS-TS) decide on their own stream, the one ``select`` uses. A policy that is not
:attr:`~uss_stream.policies.base.Policy.vectorised` is stepped event by event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from uss_stream.kernel import Counts, pair_order, speculate
from uss_stream.policies.base import Policy

__all__ = ["MIN_BATCH", "MIN_RUN", "PROBE_AFTER", "PROBE_EVENTS", "BatchDecider", "decide_batch"]

#: Below this many events the sequential loop is cheaper than the vectorised one.
MIN_BATCH = 32
#: The kernel pays while its speculation accepts at least this many events per step; below
#: (decisions that change every few events, as discounted counts near a cost gap make them) the
#: ``select``/``update`` loop is cheaper.
MIN_RUN = 32
#: Events of a batch on which :class:`BatchDecider` measures the kernel's run before it decides
#: the rest of the batch with the kernel or the loop.
PROBE_EVENTS = 512
#: Events a :class:`BatchDecider` steps with the loop before it tries the kernel again.
PROBE_AFTER = 20_000


def decide_batch(policy: Policy, outputs: Sequence[Any], guess: int | None = None) -> list[int]:
    """Step ``policy`` once per event; returns the depths, exactly as the ``select``/``update`` loop.

    Parameters
    ----------
    policy
        Any label-free policy; on return its counts include every event (as after the loop).
        A :attr:`~uss_stream.policies.base.Policy.vectorised` policy is stepped by the kernel's
        speculative loop, any other by its own ``select``/``update`` loop.
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
    return BatchDecider().decide(policy, outputs, guess)


class BatchDecider:
    """:func:`decide_batch` for one learner's stream of batches, on the cheaper of its exact paths.

    With plain counts the kernel is the cheaper path (its speculated states advance by cumulative
    sums): it decides every batch. With discounted counts each speculated state costs a step of
    the streaming arithmetic, and where decisions change every few events (discounted counts near
    a cost gap) the ``select``/``update`` loop is cheaper. For them the decider runs the kernel on
    the first :data:`PROBE_EVENTS` events of a batch and counts the events it accepts per
    speculation step: from :data:`MIN_RUN` on, the kernel decides the rest of the batch and the
    next ones; below, the loop does, for :data:`PROBE_AFTER` events, before the kernel is tried
    again. A count, not a clock: the choice is the same on a busy
    machine. Both paths give the same depths and counts; only speed depends on the choice.

    Examples
    --------
    >>> import numpy as np
    >>> from uss_stream.policies import USSUCB
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(0, 2, 4000)
    >>> rows = np.stack([truth ^ (rng.random(4000) < 0.3), truth ^ (rng.random(4000) < 0.2), truth], axis=1)
    >>> decider, batched = BatchDecider(), USSUCB([0, 0.15, 0.2], discount=0.99)
    >>> batches = [rows[start : start + 500].ravel().tolist() for start in range(0, 4000, 500)]
    >>> depths = [d for batch in batches for d in decider.decide(batched, batch)]
    >>> depths == USSUCB([0, 0.15, 0.2], discount=0.99).run(rows).tolist()
    True

    """

    __slots__ = ("_loop_for", "_probing")

    def __init__(self) -> None:
        self._loop_for = 0  # events to step with the loop before the kernel is tried again
        self._probing = True  # the kernel's run is not known: measure it on the next batch's head

    def decide(self, policy: Policy, outputs: Sequence[Any], guess: int | None = None) -> list[int]:
        """The depths of one batch (see :func:`decide_batch`)."""
        n_stages = policy.n_stages
        if len(outputs) % n_stages:
            raise ValueError(f"outputs must hold {n_stages} values per event, got {len(outputs)} values")
        n_events = len(outputs) // n_stages
        if not policy.vectorised or n_events < MIN_BATCH or self._loop_for > 0:
            self._loop_for = max(0, self._loop_for - n_events)
            self._probing = self._probing or self._loop_for == 0
            return _loop(policy, outputs)
        guess = n_stages if guess is None else guess
        if policy.discount is None or not self._probing:
            depths, steps = _speculate(policy, _disagreements(outputs, n_stages), guess)
            self._probing = n_events < MIN_RUN * steps
            return depths
        head = min(n_events, PROBE_EVENTS) * n_stages
        depths, steps = _speculate(policy, _disagreements(outputs[:head], n_stages), guess)
        if head // n_stages < MIN_RUN * steps:
            self._loop_for = PROBE_AFTER
            return depths + _loop(policy, outputs[head:])
        self._probing = False
        if head < len(outputs):
            depths += _speculate(policy, _disagreements(outputs[head:], n_stages), depths[-1])[0]
        return depths


def _loop(policy: Policy, outputs: Sequence[Any]) -> list[int]:
    depths = []
    select, update = policy.select, policy.update
    n_stages = policy.n_stages
    for start in range(0, len(outputs), n_stages):
        depth = select()
        update(outputs[start : start + depth])
        depths.append(depth)
    return depths


def _disagreements(outputs: Sequence[Any], n_stages: int) -> np.ndarray:
    """``N x P`` int8 indicators ``output_i != output_j`` per event, with Python's equality semantics."""
    upper_i, upper_j = pair_order(n_stages)
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


def _speculate(policy: Policy, indicators: np.ndarray, guess: int) -> tuple[list[int], int]:
    """The kernel's speculative loop on one stream, from and back to the policy's counts; returns
    the depths and the number of speculation steps it took."""
    counts = Counts.of_stats(policy.stats)
    rows = np.arange(len(indicators))[None, :]
    steps: list[int] = []
    depths = speculate(policy, rows, indicators, on_progress=steps.append, counts_of=counts, guess=guess)
    policy.load_stats(counts.to_stats(0, discount=policy.discount))
    return depths[0].tolist(), len(steps)
