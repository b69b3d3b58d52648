"""Keyed selection: one learner per key (a device, a site, a tenant), learned together through a pool.

One learner for a whole stream chooses one depth for every event in it. When the stream mixes
sources whose best depth differs (a site whose cheap sensor is broken needs depth 3, the others
stop at depth 1), that learner pays linear regret on every source whose best depth is not the
majority's. :class:`KeyedPolicy` keeps one learner per key instead, created on the key's first
event, and a **pool**: the counts of every event of every key (an evicted key's counts stay in
it). A key decides on its own counts plus a prior drawn from the other keys' counts in the pool,
whose strength decays as the key's own rounds grow (:mod:`uss_stream.policies.keyed_prior`), so a
new or rare key starts where the pool is instead of from nothing, and a key with many events
decides on its own.

**What is per key, what is pooled.** Per key: its counts (JSON, :meth:`KeyedPolicy.key_state`),
its last depth, its labels' evidence and WD verdict, and for policies that are not
count-vectorised (:class:`~uss_stream.policies.AuditedUSS`, :class:`~uss_stream.policies.SequentialKLUCB`)
its learner's other state (label evidence, contexts). Pooled: the counts of all events, refreshed
into the snapshot the priors are drawn from every ``pool_refresh`` events, and the labels'
evidence of all keys (the pool's WD verdict).

**Exactness.** A key's decision is a function of its own counts, the snapshot and the base
policy's rule; :meth:`KeyedPolicy.select` / :meth:`KeyedPolicy.update`, :meth:`KeyedPolicy.run`
and :meth:`KeyedPolicy.decide_many` give the same depths and leave the same state, and a state
saved and loaded (:meth:`KeyedPolicy.state_dict`) continues the same depth sequence.

**Which policies.** Policies that decide from counts alone (``policy.vectorised``: USS-KL-UCB,
USS-UCB, USS-TS, UEE-UCB, Algorithm 2, fixed depth) keep no object per key: a row of integers.
:meth:`KeyedPolicy.decide_many` decides their plain counts vectorised across keys
(:mod:`uss_stream.policies.keyed_batch`); discounted ones are stepped event by event. Other
policies get one learner object per key, handed the key's effective counts before each decision
(:class:`~uss_stream.policies.AuditedUSS`), or, for a sequential policy, one independent learner
per key with its own contexts (its counts are per confidence bin, and the pool prior is not
applied to them). Policies that learn from every label (:class:`~uss_stream.policies.SupervisedUCB`)
are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from uss_stream.core.stats import DisagreementStats
from uss_stream.core.validation import check_outputs
from uss_stream.policies.base import Policy
from uss_stream.policies.batch import MIN_BATCH, pair_disagreements
from uss_stream.policies.keyed_counts import KeyedCounts
from uss_stream.policies.keyed_prior import PoolPrior
from uss_stream.policies.keyed_report import KeyedReport
from uss_stream.policies.keyed_state import merge_documents, read_state_document, state_document
from uss_stream.policies.keyed_store import check_key

__all__ = [
    "DEFAULT_POOL_REFRESH",
    "DEFAULT_PRIOR_HALF_LIFE",
    "DEFAULT_PRIOR_STRENGTH",
    "DEFAULT_PRIOR_TOLERANCE",
    "KeyedPolicy",
]

#: The prior's defaults, chosen on the development split of the keyed evaluation (``docs/evidence/keyed.md``).
DEFAULT_PRIOR_STRENGTH = 100
DEFAULT_PRIOR_HALF_LIFE: int | None = None
DEFAULT_PRIOR_TOLERANCE: float | None = 3.0
#: Events between two refreshes of the pool snapshot the priors are drawn from.
DEFAULT_POOL_REFRESH = 4096


class KeyedPolicy(KeyedReport):
    """One learner per key, each started from (and leaning on) the pooled counts of all keys.

    Parameters
    ----------
    policy
        The base policy, with its stage costs: every key decides by its rule. A template (it is
        not stepped).
    prior_strength
        ``m``: the rounds' worth of the other keys' counts a new key decides with (``0``:
        independent learners).
    prior_half_life
        ``h``: the prior's strength halves after ``h`` own rounds of a key, and keeps decaying
        (``None``: a fixed prior of ``m`` rounds).
    prior_tolerance
        ``c``: a key whose own counts show, at level ``c``, that some pair's cost test comes out
        the other way than on the other keys' counts decides without the prior (``None``: no
        test; :class:`~uss_stream.policies.keyed_prior.PoolPrior`).
    pool_refresh
        Events (of all keys) between two refreshes of the pool snapshot the priors are drawn from,
        once the clock reaches it; before, the snapshot is refreshed at every power of two (so a
        short stream pools from its first events).
    max_keys
        Live keys at most; a new key then evicts the least recently used one (``None``: no bound).
    ttl
        A key with no event in the last ``ttl`` events (of all keys) is evicted (``None``: never).
    on_evict
        Called with each evicted key (e.g. to write a tombstone for it).

    Examples
    --------
    Two sites: on "north" stage 1 agrees with stage 2 on 95% of the events, on "south" only on 60%;
    stage 2 costs 0.2 more. Each site settles on its own depth:

    >>> import numpy as np
    >>> from uss_stream.policies import USSKLUCB
    >>> rng = np.random.default_rng(0)
    >>> keys = rng.choice(["north", "south"], size=4000)
    >>> truth = rng.integers(0, 2, size=4000)
    >>> flip = rng.random(4000) < np.where(keys == "north", 0.05, 0.4)
    >>> outputs = np.stack([truth ^ flip, truth], axis=1)
    >>> policy = KeyedPolicy(USSKLUCB([0.0, 0.2]))
    >>> depths = policy.run(keys.tolist(), outputs)
    >>> late = depths[-1000:], np.array(keys[-1000:])
    >>> [np.bincount(late[0][late[1] == site], minlength=3)[1:].tolist() for site in ("north", "south")]
    [[523, 13], [0, 464]]

    The loop, the batch and a restored state agree:

    >>> batched = KeyedPolicy(USSKLUCB([0.0, 0.2]))
    >>> batched.decide_many(keys.tolist(), outputs) == depths.tolist()
    True
    >>> restored = KeyedPolicy(USSKLUCB([0.0, 0.2]))
    >>> restored.load_state_dict(policy.state_dict())
    >>> restored.state_dict() == batched.state_dict()
    True

    """

    def __init__(
        self,
        policy: Policy,
        *,
        prior_strength: int = DEFAULT_PRIOR_STRENGTH,
        prior_half_life: int | None = DEFAULT_PRIOR_HALF_LIFE,
        prior_tolerance: float | None = DEFAULT_PRIOR_TOLERANCE,
        pool_refresh: int = DEFAULT_POOL_REFRESH,
        max_keys: int | None = None,
        ttl: int | None = None,
        on_evict: Callable[[Hashable], Any] | None = None,
    ) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a uss_stream.policies.Policy, got {type(policy).__name__}")
        if policy.supervised:
            raise TypeError(f"policy: {type(policy).__name__} learns from every label; keyed policies do not")
        _check_count(pool_refresh, "pool_refresh", optional=False)
        _check_count(max_keys, "max_keys")
        _check_count(ttl, "ttl")
        self.policy = policy
        self.prior_strength = prior_strength
        self.prior_half_life = prior_half_life
        self.prior_tolerance = prior_tolerance
        self.pool_refresh = pool_refresh
        self.max_keys = max_keys
        self.ttl = ttl
        self.on_evict = on_evict
        self._pooled = policy.vectorised
        self._counts = KeyedCounts(
            policy.clone(),
            PoolPrior(prior_strength, prior_half_life, prior_tolerance, policy.cumulative_costs),
            pool_refresh=pool_refresh,
            max_keys=max_keys,
            ttl=ttl,
            on_evict=on_evict,
        )
        self._store = self._counts.store
        self._pending: tuple[Hashable, int, int] | None = None
        self._sequence: list[Any] | None = None
        self._request = 0

    @property
    def label_request(self) -> int:
        """The pair bit mask whose label the last :meth:`update` asked for (0: none)."""
        return self._request

    # -- the streaming protocol ------------------------------------------------------------------
    def select(self, key: Hashable) -> int:
        """Decide how many stages to query for ``key``'s next event (the key is created if new)."""
        if self.sequential:
            raise TypeError(f"{type(self.policy).__name__} is sequential: use begin(key) and step(key, ...)")
        row = self._open(key)
        if self._pooled:
            depth = self._counts.decide(row, key)
        else:
            learner = self._learner(row)
            learner.load_stats(self._counts.effective_stats(row))
            depth = learner.select()
        self._pending = (key, row, depth)
        return depth

    def update(self, key: Hashable, outputs: Sequence[Any]) -> None:
        """Learn from the outputs of stages ``1..depth`` of the last :meth:`select`, for ``key``."""
        _, row, depth = self._pending_for(key)
        values = check_outputs(outputs, depth)
        indicators = self._indicators(values)
        learner = self._store.learners[row]
        if learner is not None:
            learner.update(values)
            self._request = learner.label_request if self.asks_for_labels else 0
        self._counts.record(row, depth, indicators)
        self._pending = None

    def cancel(self, key: Hashable) -> None:
        """Withdraw the pending decision for ``key``: nothing is learned (the key stays live)."""
        _, row, _ = self._pending_for(key)
        learner = self._store.learners[row]
        if learner is not None:
            learner.cancel()
        self._counts.withdraw()
        self._sequence = None
        self._pending = None

    def begin(self, key: Hashable) -> None:
        """Start an event of ``key`` for a sequential policy; then :meth:`step` after each stage."""
        if not self.sequential:
            raise TypeError(f"{type(self.policy).__name__} decides a depth up front: use select(key)")
        row = self._open(key)
        self._learner(row).begin()
        self._pending = (key, row, 0)
        self._sequence = []

    def step(self, key: Hashable, output: Any, confidence: float | None) -> bool:
        """The next stage's output and confidence in ``key``'s event; ``True`` if the following stage
        is worth it. When it returns ``False`` the event is learned from and ends."""
        _, row, _ = self._pending_for(key)
        goes_on = self._store.learners[row].step(output, confidence)
        self._sequence.append(output)
        if not goes_on:
            values, self._sequence = self._sequence, None
            self._counts.record(row, len(values), self._indicators(values))
            self._pending = None
        return goes_on

    def run(self, keys: Sequence[Hashable], outputs: Any, confidences: Any = None) -> np.ndarray:
        """The per-event loop on ``N`` events: their keys and the ``N x K`` outputs of all stages
        (and, for a sequential policy, confidences); returns the ``N`` depths."""
        rows = np.asarray(outputs).tolist() if isinstance(outputs, np.ndarray) else [list(r) for r in outputs]
        if len(rows) != len(keys):
            raise ValueError(f"keys has {len(keys)} entries, outputs has {len(rows)} rows")
        if self.sequential and confidences is None:
            raise ValueError("confidences: a sequential policy needs the N x K stage confidences")
        sure = None if confidences is None else np.asarray(confidences, dtype=np.float64).tolist()
        depths = np.empty(len(rows), dtype=np.int64)
        for n, (key, row) in enumerate(zip(keys, rows)):
            if self.sequential:
                self.begin(key)
                j = 0
                while self.step(key, row[j], sure[n][j]):
                    j += 1
                depths[n] = j + 1
            else:
                depths[n] = depth = self.select(key)
                self.update(key, row[:depth])
        return depths

    def decide_many(
        self,
        keys: Sequence[Hashable],
        outputs: Any,
        *,
        confidences: Any = None,
        requests: list[int] | None = None,
    ) -> list[int]:
        """Decide and learn ``N`` events of any keys at once: the depths and the state of the loop.

        Parameters
        ----------
        keys
            The key of each event.
        outputs
            The outputs of all ``K`` stages of each event (no missing values): flat (event ``n``'s
            are ``outputs[n*K:(n+1)*K]``), ``N`` rows or an ``N x K`` array.
        confidences
            For a sequential policy, the ``N x K`` stages' confidences.
        requests
            If given, each event's label request mask (:attr:`label_request`) is appended to it.

        Notes
        -----
        Plain counts of a count-vectorised policy are decided vectorised across keys
        (:meth:`~uss_stream.policies.keyed_counts.KeyedCounts.decide_batch`), other policies by the
        loop.
        """
        k = self.n_stages
        flat = outputs
        if isinstance(outputs, np.ndarray):
            flat = outputs.ravel().tolist()
        elif len(outputs) and isinstance(outputs[0], (list, tuple)):
            flat = [value for row in outputs for value in row]
        if len(flat) != len(keys) * k:
            raise ValueError(f"outputs must hold {k} values per event ({len(keys)} events), got {len(flat)}")
        if self._pending is not None:
            raise RuntimeError(
                f"a decision for key {self._pending[0]!r} is pending: update() or cancel() it first"
            )
        vectorised = self._pooled and self.policy.discount is None and len(keys) >= MIN_BATCH
        if not vectorised:
            rows = [flat[n * k : (n + 1) * k] for n in range(len(keys))]
            if self.sequential:
                return self.run(keys, rows, confidences).tolist()
            depths = []
            for key, row in zip(keys, rows):
                depths.append(self.select(key))
                self.update(key, row[: depths[-1]])
                if requests is not None:
                    requests.append(self._request)
            return depths
        checked = keys if set(map(type, keys)) <= {str, int} else [check_key(key) for key in keys]
        indicators = pair_disagreements(flat, k)
        depths = self._counts.decide_batch(checked, indicators)
        if requests is not None:
            requests.extend([0] * len(depths))
        return depths

    # -- labels ----------------------------------------------------------------------------------
    def learn_label(self, key: Hashable, outputs: Sequence[Any], label: Hashable, pairs: int) -> None:
        """The label ``key``'s learner asked for (:attr:`label_request` ``pairs``), with the event's
        outputs; skipped if the key was evicted since."""
        row = self._store.row(check_key(key))
        if row is not None and self._store.learners[row] is not None:
            self._store.learners[row].learn_label(outputs, label, pairs)
            self._store.mark_changed(key)

    def record_label(self, key: Hashable, outputs: Sequence[Any], label: Hashable) -> None:
        """A label of one of ``key``'s events, with its queried outputs: evidence for the key's WD
        verdict and the pool's (only the pool's if the key was evicted since)."""
        self._counts.record_label(check_key(key), list(outputs), label)

    # -- bounded memory, checkpoints, workers ----------------------------------------------------
    def expire(self) -> list[Hashable]:
        """Evict every key idle for more than ``ttl`` events now; returns them (``on_evict`` is called)."""
        return self._store.expire(self._counts.events)

    def evict(self, key: Hashable) -> None:
        """Evict a live key now (its counts stay in the pool; ``on_evict`` is called)."""
        self._row(key)
        if self._pending is not None and self._pending[0] == key:
            raise RuntimeError(f"key {key!r} has a pending decision: update() or cancel() it first")
        self._store.evict(key)

    def pop_changes(self) -> tuple[list[Hashable], list[Hashable]]:
        """The live keys whose state changed, and the keys evicted (and not live again), since the
        last call: what a checkpoint writes (:meth:`key_state` of each changed key, a tombstone for
        each evicted one, and :meth:`pool_state`)."""
        return self._store.pop_changes()

    def key_state(self, key: Hashable) -> dict[str, Any]:
        """A live key's state as a JSON document (:mod:`uss_stream.policies.keyed_state`)."""
        self._row(key)
        return self._counts.key_document(key)

    def key_states(self, keys: Sequence[Hashable]) -> list[dict[str, Any]]:
        """:meth:`key_state` of each of ``keys`` (live keys), read from their rows together: what a
        checkpoint of the changed keys writes.

        Examples
        --------
        >>> from uss_stream.policies import USSKLUCB
        >>> policy = KeyedPolicy(USSKLUCB([0.0, 0.2]))
        >>> policy.decide_many(["a", "b", "a"], [[1, 1], [0, 1], [1, 0]])
        [2, 1, 2]
        >>> policy.key_states(["b", "a"]) == [policy.key_state("b"), policy.key_state("a")]
        True
        >>> policy.key_states(["a"])[0]["stats"]["disagreements"]
        [[0, 1], [0, 0]]
        """
        for key in keys:
            self._row(key)
        return self._counts.key_documents(keys)

    def pool_state(self) -> dict[str, Any]:
        """The pool's state as a JSON document: the clock, the pooled, snapshot and shared counts,
        the pooled labels' evidence."""
        return self._counts.pool_document(type(self.policy).__name__)

    def state_dict(self) -> dict[str, Any]:
        """The whole state: the pool and every live key (least recently used first), JSON."""
        return state_document(self.pool_state(), [self._counts.key_document(key) for key in self._store])

    def load_pool_state(self, document: dict[str, Any]) -> None:
        """Restore :meth:`pool_state` (validated first; the keys are left as they are)."""
        self._counts.load_pool(document, type(self.policy).__name__)
        self._pending = None

    def load_key_states(self, documents: Iterable[dict[str, Any]]) -> None:
        """Restore keys from :meth:`key_state` documents in any order (all validated before any is
        loaded); a live key is replaced. The keys' recency follows their last events."""
        self._counts.load_keys(documents, self.policy.clone)
        self._pending = None

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`: the pool and exactly the keys it holds."""
        pool, keys = read_state_document(document)
        self.load_pool_state(pool)
        self._store.clear()
        self.load_key_states(keys)
        self._store.pop_changes()

    def share(self, foreign: DisagreementStats) -> None:
        """Decide from now on with other workers' pooled counts added to the pool snapshot (shared
        learning); they replace those shared before."""
        self._counts.share(foreign)

    def merge(self, other: KeyedPolicy) -> KeyedPolicy:
        """Two workers' states as one (:func:`~uss_stream.policies.keyed_state.merge_documents`)."""
        if not isinstance(other, KeyedPolicy):
            raise TypeError(f"other must be a KeyedPolicy, got {type(other).__name__}")
        merged = self.clone()
        merged.load_state_dict(merge_documents(self.state_dict(), other.state_dict()))
        return merged

    def clone(self, policy: Policy | None = None) -> KeyedPolicy:
        """A fresh keyed policy with the same parameters (and ``policy`` as the base policy, if
        given): no key, an empty pool."""
        return KeyedPolicy(
            self.policy if policy is None else policy,
            prior_strength=self.prior_strength,
            prior_half_life=self.prior_half_life,
            prior_tolerance=self.prior_tolerance,
            pool_refresh=self.pool_refresh,
            max_keys=self.max_keys,
            ttl=self.ttl,
            on_evict=self.on_evict,
        )

    def __repr__(self) -> str:
        return (
            f"KeyedPolicy({self.policy!r}, prior_strength={self.prior_strength}, "
            f"prior_half_life={self.prior_half_life}, prior_tolerance={self.prior_tolerance}, "
            f"pool_refresh={self.pool_refresh}, "
            f"max_keys={self.max_keys}, ttl={self.ttl})"
        )

    # -- internals -------------------------------------------------------------------------------
    def _open(self, key: Hashable) -> int:
        key = check_key(key)
        if self._pending is not None:
            raise RuntimeError(
                f"a decision for key {self._pending[0]!r} is pending: update() or cancel() it first"
            )
        return self._counts.open(key)

    def _pending_for(self, key: Hashable) -> tuple[Hashable, int, int]:
        pending = self._pending
        if pending is None:
            raise RuntimeError("update() called without a preceding select()")
        if type(pending[0]) is not type(key) or pending[0] != key:
            raise RuntimeError(f"the pending decision is key {pending[0]!r}'s, not {key!r}'s")
        return pending

    def _learner(self, row: int) -> Policy:
        learner = self._store.learners[row]
        if learner is None:
            learner = self._store.learners[row] = self.policy.clone()
        return learner

    def _indicators(self, values: list[Any]) -> np.ndarray:
        """The ``P`` disagreement indicators of one event's queried outputs (unqueried pairs 0), in
        pair order; ``ValueError`` for outputs that cannot be compared."""
        k = self.n_stages
        indicators = np.zeros(k * (k - 1) // 2, dtype=np.int8)
        p = 0
        try:
            for j in range(1, len(values)):
                for i in range(j):
                    if values[i] != values[j]:
                        indicators[p] = 1
                    p += 1
        except (TypeError, ValueError) as error:
            raise ValueError(f"outputs cannot be compared: {error}") from None
        return indicators


def _check_count(value: Any, name: str, *, optional: bool = True) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1{' or None' if optional else ''}, got {value!r}")
