"""The simulation kernel: the decision loop that the replay and the service's batch decider share.

Every simulator of the package steps a policy through many rounds of one or many streams and asks it
for its decisions through :meth:`~uss_stream.policies.base.Policy.decide_many`. The kernel holds the
one pair order (:func:`pair_order`), the one layout of the counts of many streams (:class:`Counts`:
one row per count, the stream index innermost, decided on with :meth:`Counts.decide` and advanced
by :class:`Reveal` steps through :meth:`Counts.record`) and the speculative, discount-aware loop
(:func:`speculate`): the replay runs it from zero counts, ``uss_stream.policies.batch`` from a live
policy's counts (:meth:`Counts.of_stats`, handed back with
:meth:`~uss_stream.policies.base.Policy.load_stats`, no JSON round trip), and the per-round loops
of :mod:`uss_stream.replay.delayed` and :mod:`uss_stream.replay.shared` keep their counts in
:class:`Counts`, decide through :meth:`Counts.decide` and learn through :meth:`Counts.record`, with
or without a discount.

How :func:`speculate` steps: each step first asks the policy to certify, for every unfinished
repetition, windows of the rounds it has left, half of them, a quarter ... at its guessed depth
(:meth:`~uss_stream.policies.base.Policy.certify_many`: no outputs over the window can change the
depth); a repetition advances over the longest one certified, its rounds all at that depth and its
counts by the sums of the rows' indicators (``LADDER`` windows per repetition and call; one
refused again and again pauses certifying for a few steps). Then it speculates as follows, from
where each repetition stands. The step takes the ``A`` unfinished repetitions and a window of ``B``
rounds (the same for all; it grows while nearly all speculations hold and shrinks when many fail). A
repetition whose speculation fails after ``k > 0`` accepted rounds speculates its old depth again;
one that fails at once speculates the new depth. The ``A x B`` speculated states are laid out with
the state index innermost (arrays ``(K, B, A)``, passed to ``decide_many`` as transposed views), so
every elementwise operation runs over long contiguous loops. Speculated decisions beyond the
accepted ones are written too and are overwritten when those rounds are decided for real; rounds
past the horizon write to a spare slot. With a discount ``γ`` the speculated counts follow ``x_{k+1}
= γ·x_k + step_k`` one round of the window at a time (the operations of the streaming statistics),
instead of cumulative sums; discounted counts are never certified.

With the compiled kernels installed (``uss-stream[fast]``, :mod:`uss_stream.core.compiled`),
:func:`speculate` hands the policies they know (those whose ``_compiled_rule`` names one: USS-UCB,
USS-KL-UCB, Hanawal et al.'s Algorithm 2 and fixed depths, with plain counts) to their loop, which
decides round by round in Rust over the windows its own certificates allow; the depths and counts
are the same to the bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from uss_stream.core.compiled import kernels
from uss_stream.core.stats import DisagreementStats
from uss_stream.policies.base import Policy

__all__ = [
    "FIRST_WINDOW",
    "MAX_STATES",
    "MAX_WINDOW",
    "Counts",
    "Reveal",
    "next_window",
    "pair_order",
    "speculate",
    "window_rows",
]

# Speculation window (rounds per repetition and engine step): it doubles while more than 90% of
# the speculated states are accepted and halves below 60% (:func:`next_window`); the states per
# step are capped so that the working set stays in cache. Every speculating simulator uses these.
FIRST_WINDOW = 8
MAX_WINDOW = 4096
MAX_STATES = 1 << 14
# Windows certified per repetition, depth and call: the rounds left, then from four times the last
# window certified down by halves (fewer where a call's arrays per state, window and pair would pass
# LADDER_ENTRIES entries).
LADDER = 7
LADDER_ENTRIES = 1 << 20
# Up to this many candidates (a single stream: the service), every halving of the rounds left.
FEW_STREAMS = 8
# Steps a repetition whose windows are refused again and again skips certifying, at most.
MAX_PAUSE = 15


def next_window(width: int, accepted: float, window: int) -> int:
    """The next speculation window after a step of ``width`` rounds whose states were
    ``accepted`` (a share in ``[0, 1]``): doubled above 90%, halved below 60%, else ``window``.

    >>> next_window(8, 0.95, 8), next_window(8, 0.5, 8), next_window(8, 0.7, 8), next_window(4096, 1.0, 4096)
    (16, 4, 8, 4096)
    """
    if accepted > 0.9:
        return min(2 * width, MAX_WINDOW)
    if accepted < 0.6:
        return max(2, width // 2)
    return window


def pair_order(n_stages: int) -> tuple[np.ndarray, np.ndarray]:
    """Stage pairs ``(i, j)``, ``i < j`` (0-based), ordered by ``j`` then ``i``.

    The pairs a depth-``d`` query observes (``j < d``) are then the first ``d(d-1)/2``.

    Examples
    --------
    >>> [a.tolist() for a in pair_order(3)]
    [[0, 0, 1], [1, 2, 2]]

    """
    upper_i = [i for j in range(n_stages) for i in range(j)]
    upper_j = [j for j in range(n_stages) for _ in range(j)]
    return np.array(upper_i, dtype=np.int64), np.array(upper_j, dtype=np.int64)


class Counts:
    """The counts of ``reps`` independent streams in one ``(width, reps)`` array, stream index innermost.

    Row block by row block: ``n_1..n_K`` (:attr:`queried`), ``D_ij`` of the ``P`` pairs in
    :func:`pair_order` (:attr:`disagreements`) and, for policies that learn from labels, the error
    counts ``e_1..e_K`` (:attr:`errors`); each block is a view of :attr:`values`, so a step that
    adds a whole count vector is one operation. :attr:`rounds` holds the rounds decided so far.
    Plain counts are ``int64``, discounted ones ``float64`` (the streaming statistics' values).

    Examples
    --------
    >>> from uss_stream.core.stats import DisagreementStats
    >>> stats = DisagreementStats(3)
    >>> stats.record([0, 1, 1])
    >>> stats.decisions = 1
    >>> counts = Counts.of_stats(stats)
    >>> counts.values[:, 0].tolist()  # n_1, n_2, n_3, then D for pairs (0, 1), (0, 2), (1, 2)
    [1, 1, 1, 1, 1, 0]
    >>> counts.to_stats(0, discount=None) == stats
    True
    """

    def __init__(
        self, n_stages: int, rounds: np.ndarray, values: np.ndarray, *, errors: bool = False
    ) -> None:
        self.n_stages = n_stages
        self.n_pairs = n_stages * (n_stages - 1) // 2
        self.rounds = rounds
        self.values = values
        self.has_errors = errors
        self._matrix = np.zeros((n_stages, n_stages, 0), dtype=values.dtype)

    @property
    def queried(self) -> np.ndarray:
        """``(K, reps)`` counts ``n_j``."""
        return self.values[: self.n_stages]

    @property
    def disagreements(self) -> np.ndarray:
        """``(P, reps)`` counts ``D_ij``, pairs in :func:`pair_order`."""
        return self.values[self.n_stages : self.n_stages + self.n_pairs]

    @property
    def errors(self) -> np.ndarray | None:
        """``(K, reps)`` error counts, or ``None`` for counts without labels."""
        return self.values[self.n_stages + self.n_pairs :] if self.has_errors else None

    @staticmethod
    def width(n_stages: int, *, errors: bool = False) -> int:
        """Rows of :attr:`values`: ``K + P``, plus ``K`` with error counts."""
        return n_stages + n_stages * (n_stages - 1) // 2 + (n_stages if errors else 0)

    @classmethod
    def zeros(cls, n_stages: int, reps: int, *, discount: float | None, errors: bool = False) -> Counts:
        """Zero counts (round 0) for ``reps`` streams."""
        dtype = np.int64 if discount is None else np.float64
        values = np.zeros((cls.width(n_stages, errors=errors), reps), dtype=dtype)
        return cls(n_stages, np.zeros(reps, dtype=np.int64), values, errors=errors)

    @classmethod
    def of_stats(cls, stats: DisagreementStats) -> Counts:
        """One stream starting from ``stats`` (a policy's :attr:`~uss_stream.policies.base.Policy.stats`)."""
        counts = cls.zeros(stats.n_stages, 1, discount=stats.discount)
        upper_i, upper_j = pair_order(stats.n_stages)
        matrix = np.array(stats.disagreements, dtype=counts.values.dtype).reshape(stats.n_stages, -1)
        counts.rounds[0] = stats.decisions
        counts.queried[:, 0] = stats.queried
        counts.disagreements[:, 0] = matrix[upper_i, upper_j]
        return counts

    def to_stats(self, stream: int, *, discount: float | None) -> DisagreementStats:
        """Stream ``stream``'s counts as a :class:`~uss_stream.core.stats.DisagreementStats`."""
        stats = DisagreementStats(self.n_stages, discount=discount)
        upper_i, upper_j = pair_order(self.n_stages)
        matrix = np.zeros((self.n_stages, self.n_stages), dtype=self.values.dtype)
        matrix[upper_i, upper_j] = self.disagreements[:, stream]
        stats.decisions = int(self.rounds[stream])
        stats.queried = self.queried[:, stream].tolist()
        stats.disagreements = matrix.tolist()
        return stats

    def check(self, n_stages: int, reps: int, *, discount: float | None, errors: bool) -> None:
        """Raise ``ValueError`` unless these are counts of ``reps`` streams of a ``K``-stage policy."""
        shape = (self.width(n_stages, errors=errors), reps)
        if self.n_stages != n_stages or self.has_errors != errors or self.values.shape != shape:
            raise ValueError(
                f"counts must be {shape[0]} x {reps} (K = {n_stages}, error counts: {errors}), got "
                f"{self.values.shape[0]} x {self.values.shape[1]} (K = {self.n_stages}, "
                f"error counts: {self.has_errors})"
            )
        if self.rounds.shape != (reps,):
            raise ValueError(f"counts.rounds must have shape ({reps},), got {self.rounds.shape}")
        dtype = np.int64 if discount is None else np.float64
        if self.values.dtype != dtype:
            raise ValueError(f"counts must be {np.dtype(dtype)} for discount={discount!r}")

    def record(self, step: np.ndarray, *, discount: float | None, columns: np.ndarray | None = None) -> None:
        """Count one more round on every stream, or on the streams ``columns``: the vectorised
        :meth:`~uss_stream.core.stats.DisagreementStats.record`.

        ``step`` holds one row of :class:`Reveal` indicators per stream (``(len(columns), width)``).
        Plain counts add it (so the sum of several rounds' steps records them all at once); with
        a discount ``γ`` every count of the stream becomes ``γ·x + step``, the floating-point
        operations of the streaming statistics.

        Examples
        --------
        >>> counts = Counts.zeros(2, 2, discount=0.5)
        >>> counts.record(np.array([[1, 1, 1], [1, 0, 0]]), discount=0.5)
        >>> counts.record(np.array([[1, 0, 0]]), discount=0.5, columns=np.array([0]))
        >>> counts.values.T.tolist()  # stream 0 recorded twice, stream 1 once
        [[1.5, 0.5, 0.5], [1.0, 0.0, 0.0]]
        """
        if columns is None:
            if discount is None:
                self.values += step.T
            else:
                self.values *= discount
                self.values += step.T
        elif discount is None:
            self.values[:, columns] += step.T
        else:
            self.values[:, columns] = discount * self.values[:, columns] + step.T

    def decide(self, policy: Policy, rounds: np.ndarray, *, streams: np.ndarray | None = None) -> np.ndarray:
        """``policy.decide_many`` on every stream's counts, through views of this layout.

        Only the ``K x K`` matrix of ``D_ij`` the policies read is filled (a reused buffer).
        """
        reps = self.values.shape[1]
        if self._matrix.shape[2] != reps:
            self._matrix = np.zeros((self.n_stages, self.n_stages, reps), dtype=self.values.dtype)
        upper_i, upper_j = pair_order(self.n_stages)
        self._matrix[upper_i, upper_j] = self.disagreements
        errors = self.errors
        return policy.decide_many(
            rounds,
            self.queried.T,
            self._matrix.transpose(2, 0, 1),
            None if errors is None else errors.T,
            streams=streams,
        )

    def matrix(self, streams: np.ndarray) -> np.ndarray:
        """``(len(streams), K, K)`` matrices of ``D_ij`` (``i < j``; zero elsewhere) of ``streams``.

        >>> counts = Counts.zeros(3, 2, discount=None)
        >>> counts.disagreements[:, 1] = [1, 2, 3]
        >>> counts.matrix(np.array([1]))[0].tolist()
        [[0, 1, 2], [0, 0, 3], [0, 0, 0]]
        """
        upper_i, upper_j = pair_order(self.n_stages)
        matrix = np.zeros((len(streams), self.n_stages, self.n_stages), dtype=self.values.dtype)
        matrix[:, upper_i, upper_j] = self.disagreements[:, streams].T
        return matrix


class Reveal:
    """What querying a log row to depth ``d`` adds to the counts, as a vector of :class:`Counts` rows.

    Parameters
    ----------
    n_stages
        ``K``.
    pairs
        ``N x P`` 0/1 disagreement indicators of the log's rows, pairs in :func:`pair_order`.
    wrong
        ``N x K`` 0/1 error indicators, for counts with errors; else ``None``.

    Examples
    --------
    >>> reveal = Reveal(3, np.array([[1, 1, 0]]))
    >>> reveal.step(np.array([0, 0]), np.array([1, 2])).tolist()  # n_1..n_3, D_01, D_02, D_12
    [[1, 0, 0, 0, 0, 0], [1, 1, 0, 1, 0, 0]]
    """

    def __init__(self, n_stages: int, pairs: np.ndarray, wrong: np.ndarray | None = None) -> None:
        n_pairs = n_stages * (n_stages - 1) // 2
        width = Counts.width(n_stages, errors=wrong is not None)
        _, upper_j = pair_order(n_stages)
        self.full = np.zeros((len(pairs), width), dtype=np.int8)  # all K stages queried
        self.full[:, :n_stages] = 1
        self.full[:, n_stages : n_stages + n_pairs] = pairs[:, :n_pairs]
        self.seen = np.zeros((n_stages + 1, width), dtype=np.int8)  # what depth d reveals
        for depth in range(1, n_stages + 1):
            self.seen[depth, :n_stages] = np.arange(n_stages) < depth
            self.seen[depth, n_stages : n_stages + n_pairs] = upper_j < depth
        if wrong is not None:
            self.full[:, n_stages + n_pairs :] = wrong[:, :n_stages]
            self.seen[:, n_stages + n_pairs :] = self.seen[:, :n_stages]

    def step(self, rows: np.ndarray, depths: np.ndarray) -> np.ndarray:
        """``(len(rows), width)`` int8: the counts each row adds when queried to its depth."""
        step = self.full.take(rows, axis=0)
        step &= self.seen.take(depths, axis=0)
        return step


def window_rows(
    active: np.ndarray, start: np.ndarray, width: int, rows_flat: np.ndarray, horizon: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The log rows of a speculation window of ``width`` rounds of the ``active`` repetitions
    from their rounds ``start``: the offsets (``width x 1``), the rounds remaining per repetition,
    the flat positions into the ``(reps, horizon)`` results (``rows_flat.size`` past the horizon,
    a spare slot) and the ``width x A`` log rows (clipped past the horizon).

    >>> rows = np.arange(6).reshape(2, 3)
    >>> offset, remaining, flat, row = window_rows(np.array([0, 1]), np.array([3, 1]), 2, rows.ravel(), 3)
    >>> remaining.tolist(), flat.tolist(), row.tolist()
    ([1, 3], [[2, 3], [6, 4]], [[2, 3], [5, 4]])
    """
    offset = np.arange(width)[:, None]
    remaining = horizon - start + 1
    flat = np.where(offset < remaining, active * horizon + start - 1 + offset, rows_flat.size)
    return offset, remaining, flat, rows_flat.take(flat, mode="clip")


def speculate(
    policy: Policy,
    rows: np.ndarray,
    pairs: np.ndarray,
    wrong: np.ndarray | None = None,
    on_progress: Callable[[int], Any] | None = None,
    *,
    streams: np.ndarray | None = None,
    counts_of: Counts | None = None,
    guess: int | None = None,
    window: int | None = None,
) -> np.ndarray:
    """The ``(reps, horizon)`` depths ``policy`` chooses on each repetition's rows.

    Parameters
    ----------
    policy
        Evaluated through :meth:`~uss_stream.policies.base.Policy.decide_many` only; its own counts
        are not used. Its ``discount`` (if any) is applied to the counts as the streaming
        statistics do.
    rows
        ``(reps, horizon)`` indices into the log.
    pairs
        ``N x P`` 0/1 disagreement indicators of the log's rows, pairs ordered as
        :func:`pair_order` (``P = K(K-1)/2``).
    wrong
        ``N x K`` 0/1 error indicators, for policies that learn from labels; else ``None``.
    on_progress
        Called with the number of rounds decided at each step.
    streams
        ``reps`` ``uint64`` stream keys for a randomised policy (:meth:`~Policy.stream_keys`),
        passed to ``decide_many(..., streams=...)`` for the states of each repetition; ``None``
        for deterministic policies.
    counts_of
        The counts each repetition starts from (default: zero counts at round 0); updated in place
        to the counts after the last row.
    guess
        The depth speculated first (default ``K``); only speed depends on it.
    window
        The rounds speculated by the first step (default 8); only speed depends on it. A caller
        continuing a stream whose decisions were stable may start wider than the default.

    Notes
    -----
    See the module docstring for how the steps speculate.

    """
    compiled = _compiled(policy, rows, pairs, wrong, streams, counts_of)
    if compiled is not None:
        if on_progress is not None:
            on_progress(compiled.size)
        return compiled
    reps, horizon = rows.shape
    n_stages = policy.n_stages
    n_pairs = n_stages * (n_stages - 1) // 2
    pair_planes = np.ascontiguousarray(pairs[:, :n_pairs].T, dtype=np.int8)
    planes = (
        pair_planes,
        None if wrong is None else np.ascontiguousarray(wrong[:, :n_stages].T, dtype=np.int8),
    )
    rows_flat, spare = rows.ravel(), reps * horizon
    gamma = policy.discount
    count_type = np.int64 if gamma is None else np.float64
    if counts_of is None:
        counts_of = Counts.zeros(n_stages, reps, discount=gamma, errors=wrong is not None)
    counts_of.check(n_stages, reps, discount=gamma, errors=wrong is not None)
    first_round = counts_of.rounds
    t = np.ones(reps, dtype=np.int64)  # 1 + the rounds of `rows` decided so far
    guess = np.full(reps, n_stages if guess is None else guess, dtype=np.int64)
    depths = np.zeros(spare + 1, dtype=np.int8 if n_stages < 128 else np.int32)
    counts = np.zeros((n_stages, n_stages, 0), dtype=count_type)
    active = np.arange(reps)
    window = FIRST_WINDOW if window is None else max(1, int(window))

    certifying = wrong is None and _certifies(policy)
    other = guess.copy()  # the depth each repetition speculated before its guess changed
    pause = np.zeros((2, reps), dtype=np.int64)  # steps to skip certifying, and the next pause
    hint = np.full(reps, horizon, dtype=np.int64)  # the last window certified (where a ladder centres)

    while active.size:
        partly = None
        if certifying:
            progress = (active, t, guess, other, hint, pause)
            active, partly = _certify_step(
                policy, counts_of, progress, (rows_flat, horizon), pair_planes, depths, on_progress
            )
            if not active.size:
                active = np.flatnonzero(t <= horizon)
                continue
        n_active = active.size
        width = _step_width(window, n_active, partly)
        n_states = n_active * width
        start = t[active]
        offset, remaining, flat, row = window_rows(active, start, width, rows_flat, horizon)
        depth = guess[active]
        state_q, state_d, state_e = _speculated_counts(counts_of, active, row, depth, planes, gamma)
        if counts.shape[2] < n_states:
            counts = np.zeros((n_stages, n_stages, n_states), dtype=count_type)
        keys = None if streams is None else np.tile(streams[active], width)
        rounds = (first_round[active] + start + offset).ravel()
        decided = _decide_window(policy, rounds, (state_q, state_d, state_e), counts, keys)
        depths[flat] = decided

        # Accept up to and including the first round whose decision differs from the guess.
        first = np.where(decided != depth, offset, width).min(axis=0)
        last = np.minimum(first, np.minimum(width, remaining) - 1)
        new_depth = _accept(
            counts_of, active, (row, last), decided, (state_q, state_d, state_e), planes, gamma
        )
        advanced = last + 1
        t[active] += advanced
        guess[active] = np.where(first == 0, new_depth, depth)
        other[active] = depth
        window = next_window(width, advanced.sum() / n_states, window)
        if on_progress is not None:
            on_progress(int(advanced.sum()))
        active = np.flatnonzero(t <= horizon) if certifying else active[t[active] <= horizon]
    counts_of.rounds += horizon
    return depths[:spare].reshape(reps, horizon)


def _certify_step(
    policy: Policy,
    counts_of: Counts,
    progress: tuple[np.ndarray, ...],
    log: tuple[np.ndarray, int],
    pair_planes: np.ndarray,
    depths: np.ndarray,
    on_progress: Callable[[int], Any] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Advance the ``active`` repetitions of ``progress`` (``active, t, guess, other, hint, pause``)
    over the longest window each certifies from its next round (those not pausing); returns the
    repetitions left before the horizon and the rounds each certified."""
    active, t, guess, other, hint, pause = progress
    trying = pause[0, active] == 0
    pause[0, active[~trying]] -= 1
    certified = np.zeros(active.size, dtype=np.int64)
    if trying.any():
        asked = (active[trying], t, guess, other, hint)
        certified[trying] = _certified_windows(policy, counts_of, asked, log, pair_planes, depths)
        _back_off(pause, active[trying], certified[trying] > 0)
    if on_progress is not None and certified.any():
        on_progress(int(certified.sum()))
    left = t[active] <= log[1]
    return active[left], certified[left]


def _step_width(window: int, n_active: int, partly: np.ndarray | None) -> int:
    """The rounds the next step speculates for ``n_active`` repetitions, given the rounds each
    certified at this step (``partly``; ``None`` for a policy that does not certify)."""
    width = max(1, min(window, MAX_WINDOW, MAX_STATES // n_active))
    if partly is not None and partly.all() and n_active <= FEW_STREAMS:
        # A stream certified part of the rounds left: what changes it is within as many.
        width = max(1, min(width, int(partly.max())))
    elif partly is not None and 2 * np.count_nonzero(partly) > n_active:
        # Most repetitions certified as far as their certificates go: what changes their depth
        # is at their next rounds, where a short window decides it.
        width = min(width, FIRST_WINDOW)
    return width


def _accept(
    counts_of: Counts,
    active: np.ndarray,
    rounds: tuple[np.ndarray, np.ndarray],
    decided: np.ndarray,
    states: tuple[np.ndarray | None, ...],
    planes: tuple[np.ndarray, np.ndarray | None],
    gamma: float | None,
) -> np.ndarray:
    """Count each active repetition's rounds up to its ``last`` (``rounds``: the window's rows and
    ``last``) in ``counts_of``; returns the depth decided at ``last``."""
    row, last = rounds
    column = np.arange(active.size)
    new_depth = decided[last, column]
    kept = [None if state is None else state[:, last, column] for state in states]
    _count_round(counts_of, active, row[last, column], new_depth, kept, planes, gamma)
    return new_depth


def _compiled(
    policy: Policy,
    rows: np.ndarray,
    pairs: np.ndarray,
    wrong: np.ndarray | None,
    streams: np.ndarray | None,
    counts_of: Counts | None,
) -> np.ndarray | None:
    """:func:`speculate`'s depths from the compiled kernels (:mod:`uss_stream.core.compiled`),
    counts and rounds updated as it does; ``None`` where they do not apply (not installed, forced
    off, a discount, labels, a randomised policy or one without a compiled rule, more than 127
    stages): then the pure path decides."""
    module = kernels()
    if module is None or wrong is not None or streams is not None or policy.discount is not None:
        return None
    rule = policy._compiled_rule() if policy.vectorised else None
    n_stages = policy.n_stages
    if rule is None or n_stages > 127:
        return None
    reps, horizon = rows.shape
    if counts_of is None:
        counts_of = Counts.zeros(n_stages, reps, discount=None)
    counts_of.check(n_stages, reps, discount=None, errors=False)
    if not (counts_of.values.flags.c_contiguous and counts_of.rounds.flags.c_contiguous):
        return None
    n_pairs = n_stages * (n_stages - 1) // 2
    identity = reps == 1 and len(pairs) == horizon and np.array_equal(rows[0], np.arange(horizon))
    depths = np.empty((reps, horizon), dtype=np.int8)
    module.run_streams(
        rule[0],
        rule[1],
        [float(c) for c in policy.cumulative_costs],
        np.empty(0, dtype=np.int64) if identity else np.ascontiguousarray(rows, dtype=np.int64),
        np.ascontiguousarray(pairs[:, :n_pairs], dtype=np.uint8),
        n_pairs,
        counts_of.values,
        counts_of.rounds,
        depths,
    )
    return depths


def _certifies(policy: Policy) -> bool:
    """Whether ``policy`` may certify windows (:meth:`~uss_stream.policies.base.Policy.certify_many`)."""
    return policy.vectorised and policy.discount is None and type(policy)._certify_many is not _NO_CERTIFICATE


def _certified_windows(
    policy: Policy,
    counts_of: Counts,
    progress: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    log: tuple[np.ndarray, int],
    pair_planes: np.ndarray,
    depths: np.ndarray,
) -> np.ndarray:
    """Advance every repetition over the longest window the policy certifies from its next round;
    per ``active`` repetition, the rounds advanced (0 where none was certified).

    ``progress`` holds the ``active`` repetitions and, per repetition, the next round ``t`` of
    ``rows``, the depth ``guess`` it speculates, the ``other`` depth it speculated before (after
    a single deviating round, such as an exploration, the depth it returns to) and the ``hint``, the
    last window it certified (after a call that certified nothing, where that call's ladder ended);
    ``log`` the flat ``rows`` and the horizon. One call certifies, for both
    depths, the windows of :func:`_ladder` (a call's cost hardly depends on its number of states):
    a repetition takes the longest window certified and its depth becomes the guess.
    The window's rounds all take that depth (written into ``depths``, the flat results), and its
    counts grow by the sums of its rows' indicators over the pairs observed.
    """
    active, t, guess, other, hint = progress
    rows_flat, horizon = log
    n_stages = counts_of.n_stages
    start = t[active]
    left = horizon - start + 1
    n_pairs = max(counts_of.n_pairs, 1)
    candidate, depth, ladder = _ladder(
        active.size, left, hint[active], (guess[active], other[active]), n_pairs
    )
    states = active[candidate]
    ok = policy.certify_many(
        counts_of.rounds[states] + start[candidate],
        counts_of.queried[:, states].T,
        counts_of.matrix(states),
        depth,
        ladder,
    )
    width = np.where(ok, ladder, 0).max(axis=1)  # the longest window certified per candidate
    ok = width > 0
    best = np.zeros(active.size, dtype=np.int64)
    np.maximum.at(best, candidate, np.where(ok, width, 0))
    refused = active[best == 0]  # the next ladder starts below this one's shortest window
    hint[refused] = np.maximum(hint[refused] >> (ladder.shape[1] - 1), 1)
    if not best.any():
        return best
    chosen = np.flatnonzero(best)
    winner = np.zeros(active.size, dtype=np.int64)
    winner[candidate[ok & (width == best[candidate])]] = depth[ok & (width == best[candidate])]
    reps, width, depth = active[chosen], best[chosen], winner[chosen]
    guess[reps] = depth
    hint[reps] = width
    begin = np.cumsum(width) - width
    flat = np.repeat(reps * horizon + start[chosen] - 1 - begin, width) + np.arange(int(width.sum()))
    depths[flat] = np.repeat(depth, width)
    log_rows = rows_flat[flat]
    observed = _pairs_below(n_stages)[depth - 1]
    for p in range(int(observed.max())):
        sums = np.add.reduceat(pair_planes[p][log_rows], begin, dtype=np.int64)
        counts_of.disagreements[p, reps] += np.where(p < observed, sums, 0)
    counts_of.queried[:, reps] += (np.arange(n_stages)[:, None] < depth) * width
    t[reps] += width
    return best


def _back_off(pause: np.ndarray, tried: np.ndarray, certified: np.ndarray) -> None:
    """After certifying ``tried``: a repetition refused pauses certifying for its next pause in steps,
    which doubles (up to :data:`MAX_PAUSE`) while it is refused; one certified pauses no more.

    >>> pause = np.zeros((2, 2), dtype=np.int64)
    >>> for _ in range(3):
    ...     _back_off(pause, np.array([0, 1]), np.array([False, True]))
    >>> pause.tolist()
    [[3, 0], [7, 0]]
    """
    refused = tried[~certified]
    pause[0, refused] = pause[1, refused]
    pause[1, refused] = np.minimum(2 * pause[1, refused] + 1, MAX_PAUSE)
    pause[:, tried[certified]] = 0


def _ladder(
    n_active: int, left: np.ndarray, hint: np.ndarray, depths: tuple[np.ndarray, np.ndarray], n_pairs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The windows to certify: ``(candidate, depth, widths)``, ``candidate`` indexing the active
    repetitions. Each repetition tries its guess and, where it differs, its other depth (``depths``),
    each on the ``left`` rounds, then on four times the last window it certified (``hint``), twice,
    once, half of it ... (``widths``: one row per candidate, ``LADDER`` columns at most, fewer if the
    certificate's per-pair arrays would pass ``LADDER_ENTRIES`` entries). For a few candidates (a
    single stream), on every halving of ``left`` down to 1 and on four times the hint.

    >>> guess, other = np.array([1]), np.array([2])   # one stream, two depths to try
    >>> candidate, depth, widths = _ladder(1, np.array([100]), np.array([5]), (guess, other), 1)
    >>> candidate.tolist(), depth.tolist(), widths[0].tolist()
    ([0, 0], [1, 2], [100, 50, 25, 12, 6, 3, 1, 20])
    >>> many = np.ones(9, dtype=np.int64)   # nine streams, one depth each
    >>> candidate, depth, widths = _ladder(9, 100 * many, 5 * many, (many, many), 1)
    >>> candidate.size, widths[0].tolist()
    (9, [100, 20, 10, 5, 2, 1, 1])
    """
    guess, other = depths
    differ = np.flatnonzero(other != guess)
    candidate = np.concatenate([np.arange(n_active), differ])
    depth = np.concatenate([guess, other[differ]])
    left = left[candidate][:, None]
    if candidate.size <= FEW_STREAMS:  # a call costs the same for any few rungs: halve down to 1
        rungs = np.concatenate(
            [left >> np.arange(int(left.max()).bit_length()), 4 * hint[candidate][:, None]], 1
        )
        return candidate, depth, np.clip(rungs, 1, left)
    rungs = max(1, min(LADDER, LADDER_ENTRIES // (candidate.size * n_pairs)))
    below = np.minimum(4 * hint[candidate][:, None] >> np.arange(rungs - 1), left)
    return candidate, depth, np.maximum(np.concatenate([left, below], axis=1), 1)


_NO_CERTIFICATE = Policy._certify_many


def _decide_window(
    policy: Policy,
    rounds: np.ndarray,
    states: tuple[np.ndarray, np.ndarray, np.ndarray | None],
    counts: np.ndarray,
    streams: np.ndarray | None,
) -> np.ndarray:
    """``policy.decide_many`` on a window's ``(rows, B, A)`` counts (queried, disagreements per pair,
    errors), the ``K x K`` disagreement matrices written into the buffer ``counts``; ``B x A`` depths."""
    state_q, state_d, state_e = states
    n_stages, width, n_active = state_q.shape
    n_states = width * n_active
    upper_i, upper_j = pair_order(n_stages)
    for p in range(state_d.shape[0]):
        counts[upper_i[p], upper_j[p], :n_states] = state_d[p].ravel()
    return policy.decide_many(
        rounds,
        state_q.reshape(n_stages, n_states).T,
        counts[:, :, :n_states].transpose(2, 0, 1),
        None if state_e is None else state_e.reshape(n_stages, n_states).T,
        streams=streams,
    ).reshape(width, n_active)


def _speculated_counts(
    counts_of: Counts,
    active: np.ndarray,
    row: np.ndarray,
    depth: np.ndarray,
    planes: tuple[np.ndarray, np.ndarray | None],
    gamma: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The counts ``n_j``, ``D_ij`` (and errors) before each round of a window (``(rows, B, A)``
    arrays), the repetitions ``active`` querying ``depth`` on the window's log rows ``row``
    (``B x A``) from their counts in ``counts_of``; ``planes``: the log's pair and error indicators,
    ``gamma``: the discount."""
    pair_planes, wrong_planes = planes
    n_pairs = pair_planes.shape[0]
    n_stages = counts_of.queried.shape[0]
    width, n_active = row.shape
    observed = np.arange(n_pairs)[:, None] < _pairs_below(n_stages)[depth - 1]
    step = np.empty((n_pairs, width, n_active), dtype=np.int8)
    for p in range(n_pairs):
        np.multiply(pair_planes[p][row], observed[p], out=step[p])
    asked = np.arange(n_stages)[:, None] < depth
    step_e = None
    if wrong_planes is not None:
        step_e = np.empty((n_stages, width, n_active), dtype=np.int8)
        for k in range(n_stages):
            np.multiply(wrong_planes[k][row], asked[k], out=step_e[k])
    errors = counts_of.errors
    if gamma is None:
        state_d = _before_each(step, counts_of.disagreements[:, active])
        state_q = counts_of.queried[:, None, active] + np.arange(width)[:, None] * asked[:, None, :]
        state_e = None if step_e is None else _before_each(step_e, errors[:, active])
    else:
        state_d = _discounted_before_each(step, counts_of.disagreements[:, active], gamma)
        constant = np.broadcast_to(asked[:, None, :].astype(np.int8), (n_stages, width, n_active))
        state_q = _discounted_before_each(constant, counts_of.queried[:, active], gamma)
        state_e = None if step_e is None else _discounted_before_each(step_e, errors[:, active], gamma)
    return state_q, state_d, state_e


def _count_round(
    counts_of: Counts,
    active: np.ndarray,
    last_row: np.ndarray,
    depth: np.ndarray,
    kept: list[np.ndarray | None],
    planes: tuple[np.ndarray, np.ndarray | None],
    gamma: float | None,
) -> None:
    """Set the ``active`` repetitions' counts to those after their last accepted round: the counts
    ``kept`` before it (queried, disagreements, errors; discounted once by ``gamma``), plus that
    round's log row ``last_row`` queried to ``depth``."""
    pair_planes, wrong_planes = planes
    n_stages = counts_of.queried.shape[0]
    kept_q, kept_d, kept_e = kept
    if gamma is not None:
        kept_q, kept_d = gamma * kept_q, gamma * kept_d
        kept_e = None if kept_e is None else gamma * kept_e
    asked = np.arange(n_stages)[:, None] < depth
    observed = np.arange(pair_planes.shape[0])[:, None] < _pairs_below(n_stages)[depth - 1]
    counts_of.queried[:, active] = kept_q + asked
    counts_of.disagreements[:, active] = kept_d + pair_planes[:, last_row] * observed
    if counts_of.errors is not None:
        counts_of.errors[:, active] = kept_e + wrong_planes[:, last_row] * asked


def _pairs_below(n_stages: int) -> np.ndarray:
    """Per depth ``d = index + 1``, the number of pairs ``(i, j)`` with ``j < d`` (pair order)."""
    stage = np.arange(n_stages)
    return stage * (stage + 1) // 2


def _before_each(step: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Counts before each round of a window: ``start + step_0 + ... + step_{k-1}`` at offset ``k``."""
    state = np.cumsum(step, axis=1, dtype=np.int64)
    state -= step
    state += start[:, None, :]
    return state


def _discounted_before_each(step: np.ndarray, start: np.ndarray, gamma: float) -> np.ndarray:
    """Discounted counts before each round of a window: ``x_0 = start``, ``x_{k+1} = γ·x_k + step_k``."""
    state = np.empty(step.shape, dtype=np.float64)
    state[:, 0] = start
    for k in range(1, step.shape[1]):
        np.multiply(state[:, k - 1], gamma, out=state[:, k])
        state[:, k] += step[:, k - 1]
    return state
