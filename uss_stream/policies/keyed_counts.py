"""The counts of a keyed policy: every key's row, the pool, its snapshot and the clock.

:class:`KeyedCounts` is what a :class:`~uss_stream.policies.keyed.KeyedPolicy` learns, apart from
its learner objects: the keys' rows (:class:`~uss_stream.policies.keyed_store.KeyStore`), the
pooled counts of every event, the snapshot of the pool the priors are drawn from (refreshed every
``pool_refresh`` events), the counts other workers shared, the pooled labels' evidence and the
clock (events of all keys). It turns rows into effective counts (own plus prior,
:class:`~uss_stream.policies.keyed_prior.PoolPrior`) and decides a batch of plain counts
vectorised across keys (:func:`~uss_stream.policies.keyed_batch.speculate_keys`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from uss_stream.core.stats import STATE_FORMAT as STATS_FORMAT
from uss_stream.core.stats import DisagreementStats
from uss_stream.labels.evidence import LabelEvidence
from uss_stream.policies.base import Policy
from uss_stream.policies.keyed_batch import speculate_keys
from uss_stream.policies.keyed_prior import CountLayout, PoolPrior
from uss_stream.policies.keyed_state import (
    KEY_FORMAT,
    KeyRecord,
    key_document,
    pool_document,
    read_key_document,
    read_pool_document,
)
from uss_stream.policies.keyed_store import KeyStore
from uss_stream.rules.counter_rng import repetition_key

__all__ = ["KeyedCounts", "key_stream"]


class KeyedCounts:
    """The keys' rows, the pool and the clock of a keyed policy (see the module docstring).

    Parameters
    ----------
    policy
        The base policy (a fresh one: only its rule, :meth:`~uss_stream.policies.Policy.decide_many`,
        is used); its discount makes the rows floats.
    prior
        The pool prior.
    pool_refresh, max_keys, ttl, on_evict
        As :class:`~uss_stream.policies.keyed.KeyedPolicy`'s (the snapshot is also refreshed at
        every power of two below ``pool_refresh``: :meth:`next_refresh`).

    Examples
    --------
    >>> from uss_stream.policies import USSKLUCB
    >>> prior = PoolPrior(10, None)
    >>> counts = KeyedCounts(USSKLUCB([0.0, 0.5]), prior, pool_refresh=1, max_keys=None, ttl=None)
    >>> row = counts.open("a")
    >>> counts.record(row, 2, np.array([1]))
    >>> counts.stats_from(counts.pool).queried, counts.events
    ([1, 1], 1)
    >>> counts.effective(np.zeros((1, 4), dtype=np.int64)).tolist()   # a new key leans on "a"
    [[1, 1, 1, 1]]

    """

    def __init__(
        self,
        policy: Policy,
        prior: PoolPrior,
        *,
        pool_refresh: int,
        max_keys: int | None,
        ttl: int | None,
        on_evict: Callable[[Hashable], Any] | None = None,
    ) -> None:
        n_stages, discount = policy.n_stages, policy.discount
        self.policy = policy
        self.layout = CountLayout(n_stages)
        self.discount = discount
        streams = policy.stream_keys(1)
        self._stream_root = None if streams is None else int(streams[0])
        self._scratch = policy.clone()
        self.prior = prior
        self.pool_refresh = pool_refresh
        dtype = np.int64 if discount is None else np.float64
        self.store = KeyStore(self.layout.width, dtype, max_keys, ttl, on_evict)
        self.pool = np.zeros(self.layout.width, dtype=dtype)
        self.foreign = np.zeros(self.layout.width, dtype=dtype)
        self.snapshot = np.zeros(self.layout.width, dtype=dtype)
        #: The base rule's depth on the snapshot (with a tolerance; else 0).
        self.pool_depth = 0
        self.events = 0
        self.evidence = LabelEvidence(n_stages)
        self._guess = n_stages
        self._window: int | None = None

    def open(self, key: Hashable) -> int:
        """Count the next event on the clock and return ``key``'s row (created if new)."""
        event = self.events + 1
        row, _ = self.store.touch(key, event)
        self.events = event
        return row

    def withdraw(self) -> None:
        """Take back the last :meth:`open` (its decision was cancelled); the key stays live."""
        self.events -= 1

    def record(self, row: int, depth: int, indicators: np.ndarray) -> None:
        """Count a decided event of ``row`` at ``depth`` (its pairs' ``indicators``), in the row and
        the pool; refresh the snapshot every ``pool_refresh`` events."""
        step = self.layout.step_of(depth, indicators)
        rows = self.store.counts
        gamma = self.discount
        if gamma is None:
            rows[row] += step
            self.pool += step
        else:
            for target in (rows[row], self.pool):
                target[0] += 1.0
                target[1:] = gamma * target[1:] + step[1:]
        self.store.last_depth[row] = depth
        self._guess = depth
        self._refresh()

    def _refresh(self) -> None:
        if self.next_refresh(self.events - 1) == self.events:
            self.set_snapshot(self.pool + self.foreign)

    def set_snapshot(self, snapshot: np.ndarray) -> None:
        """Draw the priors from ``snapshot`` from now on; with a tolerance, note the pool's depth
        (the base rule on it), whose cost tests the keys' counts are checked against."""
        self.snapshot = snapshot
        self.pool_depth = 0
        if self.prior.tolerance is not None and not self.policy.sequential:
            self.pool_depth = int(self.rule(snapshot[None, :], None)[0])

    def next_refresh(self, events: int) -> int:
        """The first clock value after ``events`` whose event refreshes the snapshot: every power
        of two below ``pool_refresh`` (a short stream pools early), then every multiple of it.

        >>> from uss_stream.policies import FixedDepth
        >>> prior = PoolPrior(0, None)
        >>> counts = KeyedCounts(FixedDepth(1, [0.0]), prior, pool_refresh=16, max_keys=None, ttl=None)
        >>> [counts.next_refresh(e) for e in (0, 1, 2, 5, 8, 15, 16, 40)]
        [1, 2, 4, 8, 16, 16, 32, 48]
        """
        every = self.pool_refresh
        following = (events // every + 1) * every
        power = 1 << events.bit_length()  # the least power of two above events
        return power if power < every else following

    def share(self, foreign: DisagreementStats) -> None:
        """Other workers' pooled counts, added to the snapshot from now on."""
        self.foreign = self.row_of(foreign)
        self.set_snapshot(self.pool + self.foreign)

    def effective(self, own: np.ndarray) -> np.ndarray:
        """The effective counts (own plus prior) of ``(M, width)`` own rows on the snapshot."""
        return self.prior.effective(own, self.snapshot, self.pool_depth)

    def decide(self, row: int, key: Hashable) -> int:
        """The depth the live key ``key`` (in ``row``) chooses next by the base rule.

        A deterministic rule decides on a policy object loaded with the key's effective counts
        (its ``select``, equal to ``decide_many`` by every policy's contract, and faster for one
        state); a randomised one through ``decide_many`` with the key's stream.
        """
        if self._stream_root is not None:
            return int(self.rule(self.effective(self.store.counts[row : row + 1]), self.streams([key]))[0])
        scratch = self._scratch
        scratch.load_stats(self.effective_stats(row))
        depth = scratch.select()
        scratch.cancel()
        return depth

    def rule(self, counts: np.ndarray, streams: np.ndarray | None) -> np.ndarray:
        """The base policy's depths on ``(M, width)`` effective counts (and the keys' streams)."""
        layout = self.layout
        rounds = counts[:, 0].astype(np.int64) + 1
        return self.policy.decide_many(
            rounds, layout.queried(counts), layout.matrices(counts), streams=streams
        )

    def streams(self, keys: list[Hashable]) -> np.ndarray | None:
        """The keys' random streams for a randomised base policy (``None`` for a deterministic one)."""
        if self._stream_root is None:
            return None
        return np.array([key_stream(self._stream_root, key) for key in keys], dtype=np.uint64)

    def record_label(self, key: Hashable, outputs: list[Any], label: Any) -> None:
        """Count a label in the pool's evidence and, if ``key`` is live, in its own."""
        self.evidence.record(outputs, label)
        row = self.store.row(key)
        if row is not None:
            evidence = self.store.evidence.get(key)
            if evidence is None:
                evidence = self.store.evidence[key] = LabelEvidence(self.layout.n_stages)
            evidence.record(outputs, label)
            self.store.mark_changed(key)

    def effective_stats(self, row: int) -> DisagreementStats:
        """A key's effective counts as :class:`DisagreementStats` (for a policy object)."""
        own = self.store.counts[row].tolist()
        plain = self.discount is None
        return self.stats_from(self.prior.effective_one(own, self.snapshot.tolist(), plain, self.pool_depth))

    def stats_from(self, counts: np.ndarray | list[Any]) -> DisagreementStats:
        """The :class:`DisagreementStats` of one row of counts."""
        k = self.layout.n_stages
        values = counts.tolist() if isinstance(counts, np.ndarray) else counts
        stats = DisagreementStats(k, discount=self.discount)
        stats.decisions = int(values[0])
        stats.queried = values[1 : 1 + k]
        for i, j, d in zip(self.layout.upper_i.tolist(), self.layout.upper_j.tolist(), values[1 + k :]):
            stats.disagreements[i][j] = d
        return stats

    def row_of(self, stats: DisagreementStats) -> np.ndarray:
        """The row of counts of ``stats``, checked for ``K`` and the discount."""
        if not isinstance(stats, DisagreementStats):
            raise TypeError(f"counts must be DisagreementStats, got {type(stats).__name__}")
        k = self.layout.n_stages
        if stats.n_stages != k or stats.discount != self.discount:
            raise ValueError(
                f"counts have (n_stages, discount) {(stats.n_stages, stats.discount)}, "
                f"the policy {(k, self.discount)}"
            )
        layout = self.layout
        pairs = [stats.disagreements[i][j] for i, j in zip(layout.upper_i.tolist(), layout.upper_j.tolist())]
        return np.array([stats.decisions, *stats.queried, *pairs], dtype=self.pool.dtype)

    def key_document(self, key: Hashable) -> dict[str, Any]:
        """A live key's document (:func:`~uss_stream.policies.keyed_state.key_document`)."""
        store = self.store
        row = store.row(key)
        learner = store.learners[row]
        record = KeyRecord(
            key=key,
            stats=self.stats_from(store.counts[row]),
            last_seen=int(store.last_seen[row]),
            last_depth=int(store.last_depth[row]),
            learner=None if learner is None else learner.state_dict(),
            evidence=store.evidence.get(key),
        )
        return key_document(record)

    def key_documents(self, keys: Sequence[Hashable]) -> list[dict[str, Any]]:
        """:meth:`key_document` of many live keys, equal document for document. The plain counts of
        keys without a learner or labels are read from their rows in one array operation (a
        checkpoint writes every changed key: tens of thousands at a time); other keys go through
        :meth:`key_document`."""
        store = self.store
        rows = np.fromiter((store.row(key) for key in keys), np.int64, len(keys))
        if self.discount is not None or not len(keys):
            return [self.key_document(key) for key in keys]
        k = self.layout.n_stages
        counts = store.counts[rows]
        decisions = counts[:, 0].tolist()
        queried = counts[:, 1 : 1 + k].tolist()
        matrices = self.layout.matrices(counts).tolist()
        seen, depths = store.last_seen[rows].tolist(), store.last_depth[rows].tolist()
        learners, evidence = store.learners, store.evidence
        documents = []
        for n, (key, row) in enumerate(zip(keys, rows.tolist())):
            if learners[row] is not None or key in evidence:
                documents.append(self.key_document(key))
                continue
            stats = {
                "format": STATS_FORMAT,
                "n_stages": k,
                "decisions": decisions[n],
                "queried": queried[n],
                "disagreements": matrices[n],
            }
            document = {"format": KEY_FORMAT, "key": key, "last_seen": seen[n], "last_depth": depths[n]}
            document["stats"] = stats
            documents.append(document)
        return documents

    def pool_document(self, policy: str) -> dict[str, Any]:
        """The pool's document, for a base policy of class name ``policy``."""
        rows = {"pool": self.pool, "snapshot": self.snapshot, "foreign": self.foreign}
        stats = {name: self.stats_from(row) for name, row in rows.items()}
        return pool_document(policy, self.events, stats, self.evidence)

    def load_pool(self, document: Any, policy: str) -> None:
        """Restore :meth:`pool_document` (validated first)."""
        events, stats, evidence = read_pool_document(document, policy, self.layout.n_stages, self.discount)
        self.pool, snapshot, self.foreign = (
            self.row_of(stats[name]) for name in ("pool", "snapshot", "foreign")
        )
        self.set_snapshot(snapshot)
        self.events = events
        self.evidence = evidence

    def load_keys(self, documents: Iterable[Any], new_learner: Callable[[], Any]) -> None:
        """Restore keys from their documents in any order, all validated before any is loaded (a
        document with a learner state is loaded into ``new_learner()``); recency follows ``last_seen``."""
        records = []
        for document in documents:
            record = read_key_document(document, self.layout.n_stages, self.discount)
            learner = None
            if record.learner is not None:
                learner = new_learner()
                learner.load_state_dict(record.learner)
            records.append((record, learner, self.row_of(record.stats)))
        store = self.store
        for record, learner, counts in records:
            if record.key in store:
                store.drop(record.key)
            row = store.insert(record.key, counts, record.last_seen)
            store.last_depth[row] = record.last_depth
            store.learners[row] = learner
            if record.evidence is not None:
                store.evidence[record.key] = record.evidence
        store.sort_by_recency()

    def decide_batch(
        self,
        keys: list[Hashable],
        indicators: np.ndarray,
    ) -> list[int]:
        """Decide and count ``N`` events of plain counts (their ``N x P`` pair ``indicators``),
        exactly as the loop would.

        The keys are resolved event by event (creation, eviction, recency), then each segment
        between two snapshot refreshes is decided by
        :func:`~uss_stream.policies.keyed_batch.speculate_keys`.
        """
        instance_of, rows, alive, firsts, counts, guess = self._instances(keys)
        streams = self.streams([keys[n] for n in firsts.tolist()])
        depths = np.empty(len(keys), dtype=np.int64)
        begin = 0
        while begin < len(keys):
            end = min(len(keys), begin + self.next_refresh(self.events) - self.events)
            decided, self._window = speculate_keys(
                lambda own, of: self.rule(self.effective(own), None if streams is None else streams[of]),
                self.layout,
                counts,
                instance_of[begin:end],
                indicators[begin:end],
                guess,
                self._window,
            )
            depths[begin:end] = decided
            self.pool += self.layout.steps(decided, indicators[begin:end]).sum(axis=0)
            self.events += end - begin
            self._refresh()
            begin = end
        last = np.zeros(len(rows), dtype=np.int64)
        np.maximum.at(last, instance_of, np.arange(len(keys)))
        store = self.store
        store.counts[rows[alive]] = counts[alive]
        store.last_depth[rows[alive]] = depths[last[alive]]
        self._guess = int(depths[-1])
        return depths.tolist()

    def _instances(
        self, keys: list[Hashable]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Resolve the events' keys in order, as the loop would (creation, eviction, recency).

        An *instance* is a key's life in a row: a key evicted and seen again, or a row freed and
        taken by another key, starts a new one; an instance goes on with its row's counts if its
        key was live before the batch. Returns each event's instance, each instance's row,
        whether it is live after the batch, its first event, its starting counts and its first
        guess (its row's last depth, or the last depth decided for a new key).
        """
        store = self.store
        where, created = store.touch_many(keys, self.events + 1)
        order = np.argsort(where, kind="stable")
        ordered_rows = where[order]
        births = np.cumsum(created[order])
        starts = np.flatnonzero(np.r_[True, ordered_rows[1:] != ordered_rows[:-1]])
        base = np.r_[0, births][starts]  # creations of earlier rows, before each row's first event
        generation = births - np.repeat(base, np.diff(np.r_[starts, len(keys)]))
        lives, inverse = np.unique(ordered_rows * (len(keys) + 1) + generation, return_inverse=True)
        instance_of = np.empty(len(keys), dtype=np.int64)
        instance_of[order] = inverse
        rows, generations = np.divmod(lives, len(keys) + 1)
        firsts = np.full(len(rows), len(keys), dtype=np.int64)
        np.minimum.at(firsts, instance_of, np.arange(len(keys)))
        going_on = generations == 0  # no creation in the row before: the key was live before
        counts = np.zeros((len(rows), self.layout.width), dtype=np.int64)
        counts[going_on] = store.counts[rows[going_on]]
        guess = np.where(going_on, store.last_depth[rows], self._guess).astype(np.int64)
        # A row's last instance is live after the batch unless its key was evicted after its last
        # event (then its row was freed in the batch).
        alive = np.r_[rows[1:] != rows[:-1], True]  # lives are sorted by row, then generation
        for instance in np.flatnonzero(alive & np.isin(rows, store.freed)).tolist():
            alive[instance] = store.row(keys[firsts[instance]]) == rows[instance]
        return instance_of, rows, alive, firsts, counts, guess


def key_stream(root: int, key: Hashable) -> int:
    """The random stream of ``key`` for a randomised base policy (USS-TS) whose own stream is
    ``root``: a function of the key's value, the same in every process.

    >>> key_stream(1, "a") == key_stream(1, "a") != key_stream(1, "b") != key_stream(1, 7)
    True
    """
    tag = b"s" + key.encode() if isinstance(key, str) else b"i" + str(key).encode()
    digest = int.from_bytes(hashlib.blake2b(tag, digest_size=8).digest(), "little")
    return repetition_key(root, digest)
