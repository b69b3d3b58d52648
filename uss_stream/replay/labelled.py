"""Replay of policies that ask for labels: all repetitions in lock-step, labels ``D`` rounds late.

A label-asking policy (``policy.asks_for_labels``, :class:`~uss_stream.policies.AuditedUSS`)
decides on its disagreement counts, on the labels that have arrived *and* on how many it requested
(its budget); a label requested in round ``s`` is applied just before the decision of round ``s + D
+ 1`` (as :meth:`AuditedUSS.run <uss_stream.policies.AuditedUSS.run>` does). Within one
confidence level (:func:`~uss_stream.labels.evidence.label_level` changes only at powers of
two) the decision is a function of the round, the disagreement counts, the labels arrived and the
requests made, so :func:`simulate_labelled` speculates as :func:`uss_stream.policies.kernel.speculate` does:
each repetition guesses that it keeps its depth for a window of rounds, and every speculated state
is decided (and its label request computed) in one vectorised call. The labels that arrive within
a window were requested before it, so each state gets the evidence of its own round; the window's
own requests are counted against the budget thresholds
(:meth:`AuditedUSS.budget_thresholds_many <uss_stream.policies.AuditedUSS.budget_thresholds_many>`).
A repetition accepts its rounds up to the first changed decision, the first round where its count
of requests crosses a threshold the states did not see, ``D + 1`` rounds after its first request
in the window (when that label arrives), or the next level change. The depths and requests equal
the streaming loop's (tested).

Cost: each label is counted and its pairs' ``e`` bounds made once per level (a repetition's chain
of the evidence after each waiting label serves both the windows it arrives in and its
application), the strict bound only for the states where a pair is decisive, and the logarithms
of the exploration level by table look-up. Every ``M x P`` array of a window has the state index
innermost, as the counts do (numpy buffers and copies each operation that mixes two layouts), and
none is reduced along its short pair axis (numpy's slowest case): the work per state is that of
USS-KL-UCB's replay plus the label relations.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from uss_stream.core.forgetting import EffectiveHorizon
from uss_stream.labels.evidence import e_bounds, e_upper, label_level_many
from uss_stream.policies.base import Policy
from uss_stream.policies.kernel import (
    FIRST_WINDOW,
    MAX_STATES,
    MAX_WINDOW,
    next_window,
    pair_order,
    window_rows,
)
from uss_stream.rules.confidence import portable_log_many

__all__ = ["LabelledRun", "simulate_labelled"]


@dataclass
class LabelledRun:
    """What :func:`simulate_labelled` returns.

    Attributes
    ----------
    depths
        ``(reps, horizon)`` depths.
    requests
        ``(reps, horizon)`` booleans: the round asked for its label.
    queried, pair_counts
        Final label-free counts ``n_j`` ``(reps, K)`` and ``D_ij`` per pair ``(reps, P)``.
    evidence
        Final label counts ``(reps, 3, P)``: ``m``, ``w⁺``, ``w⁻`` per pair.
    """

    depths: np.ndarray
    requests: np.ndarray
    queried: np.ndarray
    pair_counts: np.ndarray
    evidence: np.ndarray


def simulate_labelled(
    policy: Policy,
    rows: np.ndarray,
    pairs: np.ndarray,
    wrong: np.ndarray,
    label_delay: int = 0,
    on_progress: Callable[[int], Any] | None = None,
) -> LabelledRun:
    """Run a label-asking ``policy`` on each repetition's rows (see the module docstring).

    Parameters
    ----------
    policy
        A policy with ``asks_for_labels`` (``relations_many``, ``depth_many``, ``request_many``,
        ``budget_thresholds_many``);
        its own state is not used.
    rows
        ``(reps, horizon)`` indices into the log.
    pairs
        ``N x P`` disagreement indicators of the log (:func:`uss_stream.replay.engine.pair_indicators`).
    wrong
        ``N x K`` error indicators of the log (from its labels).
    label_delay
        Rounds ``D >= 0`` between a request and its label.
    on_progress
        Called with the number of rounds decided at each step.
    """
    if isinstance(label_delay, bool) or not isinstance(label_delay, (int, np.integer)) or label_delay < 0:
        raise ValueError(f"label_delay must be an integer >= 0, got {label_delay!r}")
    run = _LabelledReplay(policy, rows, pairs, wrong, int(label_delay))
    active = np.arange(rows.shape[0])
    window = FIRST_WINDOW
    while active.size:
        accepted, window = run.step(active, window)
        if on_progress is not None:
            on_progress(accepted)
        active = active[run.t[active] <= run.horizon]
    return run.finish()


class _LabelTables:
    """The log's label relations and the logarithm tables of a labelled replay (read only).

    ``deeper_bits`` / ``shallower_bits``: per log row, the pairs whose deeper (shallower) stage
    alone is right, as bit masks; ``log_horizons`` / ``log_counts``: the logarithms of the
    exploration function and of ``K·n`` by table look-up (a speculated state's round and counts
    stay below ``horizon + MAX_WINDOW``).
    """

    def __init__(self, policy: Policy, rows: np.ndarray, pairs: np.ndarray, wrong: np.ndarray) -> None:
        horizon = rows.shape[1]
        n_stages = policy.n_stages
        self.n_stages = n_stages
        self.n_pairs = n_pairs = n_stages * (n_stages - 1) // 2
        upper_i, upper_j = pair_order(n_stages)
        self.pair_planes = np.ascontiguousarray(np.asarray(pairs[:, :n_pairs], dtype=bool).T, dtype=np.int8)
        wrong = np.asarray(wrong[:, :n_stages], dtype=bool)
        self.deeper_right = wrong[:, upper_i] & ~wrong[:, upper_j]
        self.shallower_right = ~wrong[:, upper_i] & wrong[:, upper_j]
        self.stage = np.arange(n_stages)
        self.pair = np.arange(n_pairs)
        self.bits = np.left_shift(np.int64(1), self.pair.astype(np.int64))
        self.deeper_bits = (self.deeper_right * self.bits).sum(axis=1).tolist()
        self.shallower_bits = (self.shallower_right * self.bits).sum(axis=1).tolist()
        self.pairs_below = self.stage * (self.stage + 1) // 2
        table_size = horizon + MAX_WINDOW + 1
        self.log_horizons = portable_log_many(
            EffectiveHorizon(policy.discount).many(np.arange(1, table_size + 1))
        )
        self.log_counts = portable_log_many(
            n_stages * np.maximum(np.arange(table_size), 1).astype(np.float64)
        )
        self.count_logs = self.log_counts.tolist()


class _LabelledReplay(_LabelTables):
    """The state of :func:`simulate_labelled`: counts, label evidence and waiting requests of every
    repetition, advanced one speculation window at a time (:meth:`step`)."""

    def __init__(
        self, policy: Policy, rows: np.ndarray, pairs: np.ndarray, wrong: np.ndarray, delay: int
    ) -> None:
        super().__init__(policy, rows, pairs, wrong)
        self.policy, self.rows, self.delay = policy, rows, delay
        reps, self.horizon = rows.shape
        n_stages, n_pairs = self.n_stages, self.n_pairs
        self.rows_flat = rows.ravel()
        self.spare = reps * self.horizon
        self.t = np.ones(reps, dtype=np.int64)
        self.queried = np.zeros((n_stages, reps), dtype=np.int64)
        self.counts = np.zeros((n_pairs, reps), dtype=np.int64)
        self.evidence = np.zeros((reps, 3, n_pairs), dtype=np.int64)
        self.e_lower = np.full((reps, n_pairs), -1.0)
        self.e_upper = np.full((reps, n_pairs), 1.0)
        self.e_level = [0.0] * reps
        self.waiting: list[deque[int]] = [deque() for _ in range(reps)]
        # Per repetition, the evidence after each of its first waiting labels in turn (applied onto
        # its current evidence), with the bounds at the level ``e_level``: each label is counted and
        # bounded once, whether it arrives within a window (speculated) or before one.
        self.chains: list[list[_Arrived]] = [[] for _ in range(reps)]
        self.requested = np.zeros(reps, dtype=np.int64)
        self.guess = np.full(reps, n_stages, dtype=np.int64)
        self.depths = np.zeros(self.spare + 1, dtype=np.int8 if n_stages < 128 else np.int32)
        self.masks = np.zeros(self.spare + 1, dtype=np.int64)
        self.memo: dict[tuple[int, int, int, float], tuple[float, float]] = {}
        self.strict_memo: dict[tuple[int, int, int, float], float] = {}

    def bounds_of(self, m: int, plus: int, minus: int, value: float) -> tuple[float, float]:
        """Memoised :func:`e_bounds` of a pair's counts at the label level ``value`` (its
        ``pair_level`` with ``log(K·m)`` from the table; ``m`` labels stay below the horizon)."""
        key = (m, plus, minus, value)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = e_bounds(m, plus, minus, max(value - self.count_logs[m], 1.0))
        return found

    def apply_label(self, r: int, s: int) -> list[int]:
        """Count the label of repetition ``r``'s round ``s`` into its evidence (the pairs it changed)."""
        mask = int(self.masks[r * self.horizon + s - 1])
        return _count_label(
            self.evidence[r], mask, self.rows[r, s - 1], self.bits, self.deeper_right, self.shallower_right
        )

    def extend_chain(self, r: int, count: int, value: float) -> list[_Arrived]:
        """Repetition ``r``'s chain (``chains``), extended over its first ``count`` waiting labels
        with the bounds at the level ``value``."""
        n_pairs = self.n_pairs
        chain = self.chains[r]
        queue = self.waiting[r]
        while len(chain) < count:
            # Plain lists: a label touches a few pairs, and numpy's per-call cost would dominate.
            if chain:
                before = chain[-1]
                counted = [list(side) for side in before.evidence]
                bounds = list(before.bounds)
            else:
                counted = self.evidence[r].tolist()
                bounds = (
                    [float(m > 0) for m in counted[0]] + self.e_lower[r].tolist() + self.e_upper[r].tolist()
                )
            s = queue[len(chain)]
            source = int(self.rows[r, s - 1])
            mask = int(self.masks[r * self.horizon + s - 1])
            plus, minus = self.deeper_bits[source], self.shallower_bits[source]
            labelled, deeper, shallower = counted
            for p in range(mask.bit_length()):
                if mask >> p & 1:
                    labelled[p] += 1
                    deeper[p] += plus >> p & 1
                    shallower[p] += minus >> p & 1
                    bounds[p] = 1.0
                    bounds[n_pairs + p], bounds[2 * n_pairs + p] = self.bounds_of(
                        labelled[p], deeper[p], shallower[p], value
                    )
            chain.append(_Arrived(counted, bounds))
        return chain

    def apply_arrivals(self, active: np.ndarray, start: np.ndarray, level: np.ndarray) -> None:
        """Apply the labels due before the decision of each active repetition's round ``start``
        (the requests of rounds up to ``start - D - 1``), at the label ``level`` of that round."""
        n_pairs = self.n_pairs
        for r, first_round, value in zip(active.tolist(), start.tolist(), level.tolist()):
            queue = self.waiting[r]
            cutoff = first_round - self.delay - 1
            due = 0
            if queue and queue[0] <= cutoff:
                for s in queue:
                    if s > cutoff:
                        break
                    due += 1
            if due:
                chain = self.chains[r]
                # The chain's counts hold at any level, its bounds at the level they were made for;
                # at a new level every labelled pair's bounds are made again below.
                known = due if self.e_level[r] == value else min(due, len(chain))
                if known:
                    arrived = self.extend_chain(r, known, value)[known - 1]
                    self.evidence[r] = arrived.evidence
                    self.e_lower[r], self.e_upper[r] = (
                        arrived.bounds[n_pairs : 2 * n_pairs],
                        arrived.bounds[2 * n_pairs :],
                    )
                    del chain[:known]
                for _ in range(known):
                    queue.popleft()
                while queue and queue[0] <= cutoff:
                    self.apply_label(r, queue.popleft())
            if self.e_level[r] != value:
                self.e_level[r] = value
                self.chains[r].clear()
                changed = np.flatnonzero(self.evidence[r, 0]).tolist()
                _e_fill(self.evidence[r], changed, value, self.bounds_of, self.e_lower[r], self.e_upper[r])

    def window_evidence(
        self, active: np.ndarray, start: np.ndarray, level: np.ndarray, width: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
        """Each state's label evidence in a window of ``width`` rounds: ``m > 0``, ``e^L`` and
        ``e^U`` (``M x P``) and the strict bound on demand.

        The labels requested before the window that arrive within it are known, so the window runs
        on across their arrivals. Row ``version[o, c]`` of the ``table`` is what state ``(o, c)``
        knows: its repetition's row, or the chain's entry of the last label arrived by its round.
        """
        n_active, n_pairs, delay = active.size, self.n_pairs, self.delay
        arrivals = np.full((width, n_active), -1, dtype=np.int64)
        current = np.concatenate(
            (self.evidence[active, 0] > 0, self.e_lower[active], self.e_upper[active]), axis=1
        )
        in_window: list[_Arrived] = []
        for column, (r, first_round, value) in enumerate(
            zip(active.tolist(), start.tolist(), level.tolist())
        ):
            queue = self.waiting[r]
            if not queue or queue[0] + delay + 1 - first_round >= width:
                continue
            count = 0
            for s in queue:
                if s + delay + 1 - first_round >= width:
                    break
                count += 1
            chain = self.extend_chain(r, count, value)
            for k in range(count):
                arrivals[queue[k] + delay + 1 - first_round, column] = len(in_window)
                in_window.append(chain[k])
        if in_window:
            table = np.concatenate((current, np.array([a.bounds for a in in_window])))
            version = np.maximum.accumulate(arrivals, axis=0)
            version = np.where(version >= 0, version + n_active, np.arange(n_active)).ravel()
        else:
            table = current
            version = np.broadcast_to(np.arange(n_active), (width, n_active)).reshape(n_active * width)
        # Gathered pair-major (3P x M: m > 0, e^L, e^U; transposed back): every M x P array of the
        # relations then has the state index innermost, as the counts do, and numpy never mixes
        # the two layouts.
        gathered = np.ascontiguousarray(table.T).take(version, axis=1)
        has_labels = (gathered[:n_pairs] != 0.0).T
        state_lower, state_upper = gathered[n_pairs : 2 * n_pairs].T, gathered[2 * n_pairs :].T
        # Only the decisive pairs' states read the strict bound: it and the counts are made on demand.
        strict = partial(_strict_of, self.evidence[active], in_window, version, level, self.strict_memo)
        return has_labels, state_lower, state_upper, strict

    def step(self, active: np.ndarray, window: int) -> tuple[int, int]:
        """Decide one speculation window of the ``active`` repetitions (at most ``window`` rounds
        each); the rounds accepted and the next window."""
        policy, n_stages, n_pairs, stage, pair = (
            self.policy,
            self.n_stages,
            self.n_pairs,
            self.stage,
            self.pair,
        )
        start = self.t[active]
        level = label_level_many(start)
        self.apply_arrivals(active, start, level)
        n_active = active.size
        limit = _level_limit(start, self.horizon)
        # Rounds past a repetition's limit are wasted: aim at the typical limit, not the largest.
        width = max(1, min(window, MAX_WINDOW, MAX_STATES // n_active, _upper_quartile(limit.tolist())))
        n_states = n_active * width
        has_labels, state_lower, state_upper, strict = self.window_evidence(active, start, level, width)
        offset, _, flat, row = window_rows(active, start, width, self.rows_flat, self.horizon)
        depth = self.guess[active]
        observed = pair[:, None] < self.pairs_below[depth - 1]
        # The window's disagreement indicators, gathered once for the counts and the requests.
        planes = self.pair_planes.take(row, axis=1)
        step = planes * observed[:, None, :]
        state_d = np.cumsum(step, axis=1, dtype=np.int64)
        state_d -= step
        state_d += self.counts[:, None, active]
        state_q = self.queried[:, None, active] + offset * (stage[:, None] < depth)[:, None, :]
        rounds = (start + offset).ravel()
        relations = policy.relations_many(
            rounds,
            state_q.reshape(n_stages, n_states).T,
            state_d.reshape(n_pairs, n_states).T,
            has_labels,
            state_lower,
            state_upper,
            strict,
            log_horizon=self.log_horizons.take(rounds - 1),
            log_count=self.log_counts.take(state_q).reshape(n_stages, n_states).T,
        )
        # Decisions and requests use the count of requests before the window; they are exact while
        # the count with the window's own requests is on the same side of every budget threshold.
        before = np.broadcast_to(self.requested[active], (width, n_active)).reshape(n_states)
        decided = policy.depth_many(rounds, relations, before)
        disagreeing = planes.view(bool).reshape(n_pairs, n_states).T
        asks = _pair_masks(policy.request_many(rounds, decided, disagreeing, relations, before))
        asks = asks.reshape(width, n_active)
        decided = decided.reshape(width, n_active)
        self.depths[flat] = decided
        self.masks[flat] = asks

        first = np.where(decided != depth, offset, width).min(axis=0)
        asked = asks != 0
        first_ask = np.where(asked, offset, width).min(axis=0)
        counted = (np.cumsum(asked, axis=0) - asked).reshape(n_states) + before
        moved = np.zeros(n_states, dtype=bool)
        for threshold in policy.budget_thresholds_many(rounds, relations).T:
            moved |= (before < threshold) != (counted < threshold)
        first_moved = np.where(moved.reshape(width, n_active), offset, width).min(axis=0)
        # A label requested in the window arrives D + 1 rounds later: the window ends there.
        accept = np.minimum(np.minimum(first + 1, np.minimum(limit, width)), first_ask + self.delay + 1)
        accept = np.minimum(accept, first_moved)
        last = accept - 1
        column = np.arange(n_active)
        new_depth = decided[last, column]
        last_row = row[last, column]
        self.queried[:, active] = state_q[:, last, column] + (stage[:, None] < new_depth)
        self.counts[:, active] = state_d[:, last, column] + self.pair_planes[:, last_row] * (
            pair[:, None] < self.pairs_below[new_depth - 1]
        )
        self.t[active] += accept
        taken = asked & (offset < accept)
        self.requested[active] += taken.sum(axis=0)
        position, column = np.divmod(np.flatnonzero(taken), n_active)
        for r, asked_round in zip(active[column].tolist(), (start[column] + position).tolist()):
            self.waiting[r].append(asked_round)
        self.guess[active] = np.where(first == 0, new_depth, depth)
        return int(accept.sum()), next_window(width, accept.sum() / np.minimum(limit, width).sum(), window)

    def finish(self) -> LabelledRun:
        """The run after the last decision: the labels due by then arrive (as in the streaming
        loop); those still in flight at the horizon are requested (and paid for) but never applied."""
        reps, horizon = self.rows.shape
        for r in range(reps):
            for s in self.waiting[r]:
                if s <= horizon - self.delay:
                    self.apply_label(r, s)
        return LabelledRun(
            depths=self.depths[: self.spare].reshape(reps, horizon),
            requests=self.masks[: self.spare].reshape(reps, horizon) != 0,
            queried=self.queried.T.copy(),
            pair_counts=self.counts.T.copy(),
            evidence=self.evidence,
        )


def _level_limit(start: np.ndarray, horizon: int) -> np.ndarray:
    """The rounds from each ``start`` up to the horizon or the next change of the label level
    (at the powers of two), whichever comes first.

    >>> _level_limit(np.array([1, 2, 3, 5, 9]), 10).tolist()
    [1, 1, 2, 4, 2]
    """
    _, exponent = np.frexp((start - 1).astype(np.float64))
    return np.minimum(horizon - start + 1, np.left_shift(np.int64(1), exponent.astype(np.int64)) - start + 1)


def _pair_masks(pairs: np.ndarray) -> np.ndarray:
    """The bit masks (``int64``, bit ``p`` for column ``p``) of the rows of an ``M x P`` boolean array,
    a column at a time (the columns are contiguous in the replay's layout).

    >>> _pair_masks(np.array([[True, False, True], [False, True, False]])).tolist()
    [5, 2]
    """
    masks = np.zeros(pairs.shape[0], dtype=np.int64)
    for p in range(pairs.shape[1]):
        masks |= np.left_shift(pairs[:, p], p, dtype=np.int64)
    return masks


def _upper_quartile(values: list[int]) -> int:
    """``int(np.percentile(values, 75))`` (linear interpolation) of a short list, in plain Python.

    >>> _upper_quartile([5, 1, 9, 3]), int(np.percentile([5, 1, 9, 3], 75))
    (6, 6)
    """
    ordered = sorted(values)
    position = 0.75 * (len(ordered) - 1)
    below = int(position)
    fraction = position - below
    low, high = ordered[below], ordered[min(below + 1, len(ordered) - 1)]
    if fraction >= 0.5:
        return int(high - (high - low) * (1.0 - fraction))
    return int(low + (high - low) * fraction)


class _Arrived(NamedTuple):
    """One repetition's label evidence after a label: the ``3 x P`` counts, then a row of ``3P``
    floats: ``m > 0`` (1.0 or 0.0), ``e^L`` and ``e^U`` per pair (lists)."""

    evidence: list[list[int]]
    bounds: list[float]


def _count_label(
    evidence: np.ndarray,
    mask: int,
    source: int,
    bits: np.ndarray,
    deeper_right: np.ndarray,
    shallower_right: np.ndarray,
) -> list[int]:
    """Add the label of log row ``source``, requested with the pair bit ``mask``, to one
    repetition's ``3 x P`` counts (in place); the pairs it counted for."""
    got = (mask & bits) != 0
    evidence[0] += got
    evidence[1] += got & deeper_right[source]
    evidence[2] += got & shallower_right[source]
    return np.flatnonzero(got).tolist()


def _e_fill(
    evidence: np.ndarray,
    pairs: Iterable[int],
    level: float,
    bounds_of: Callable[[int, int, int, float], tuple[float, float]],
    lower: np.ndarray,
    upper: np.ndarray,
) -> None:
    """Write ``e^L`` and ``e^U`` of the given ``pairs`` of one repetition into ``lower`` and
    ``upper`` (``bounds_of``: the memoised scalar :func:`e_bounds` of the counts at ``level``)."""
    for p in pairs:
        lower[p], upper[p] = bounds_of(int(evidence[0, p]), int(evidence[1, p]), int(evidence[2, p]), level)


def _strict_of(
    current: np.ndarray,
    arrived: list[_Arrived],
    version: np.ndarray,
    level: np.ndarray,
    memo: dict[tuple[int, int, int, float], float],
    states: np.ndarray,
    pairs: np.ndarray,
) -> np.ndarray:
    """:func:`_strict_bounds` with the counts of a window's table: the repetitions' ``current``
    counts, then those after each label ``arrived`` within the window."""
    known = np.concatenate((current, np.array([a.evidence for a in arrived]))) if arrived else current
    return _strict_bounds(known, version, level, memo, states, pairs)


def _strict_bounds(
    known: np.ndarray,
    version: np.ndarray,
    level: np.ndarray,
    memo: dict[tuple[int, int, int, float], float],
    states: np.ndarray,
    pairs: np.ndarray,
) -> np.ndarray:
    """The strict ``e^U`` (at the level ``L_t`` itself) of the given ``(state, pair)`` entries:
    state ``s`` has the counts ``known[version[s]]`` and the level of its column,
    ``level[s % len(level)]`` (memoised scalar :func:`e_upper`, once per distinct entry)."""
    n_pairs = known.shape[2]
    entry = version[states] * n_pairs + pairs
    # Mark the entries read (a flat table over the rows of ``known``): each is made once.
    values = np.zeros(known.shape[0] * n_pairs)
    read = np.zeros(values.size, dtype=bool)
    read[entry] = True
    unique = np.flatnonzero(read)
    which, pair = np.divmod(unique, n_pairs)
    # A state reading each entry: all states reading a row of ``known`` are of its column.
    reader = np.empty(values.size, dtype=np.int64)
    reader[entry] = states
    made: list[float] = []
    for (m, w_plus, w_minus), value in zip(
        known[which, :, pair].tolist(), level[reader[unique] % level.size].tolist()
    ):
        key = (m, w_plus, w_minus, value)
        found = memo.get(key)
        if found is None:
            found = memo[key] = e_upper(m, w_plus, w_minus, value)
        made.append(found)
    values[unique] = made
    return values[entry]
