"""What a keyed policy has learned, per key and pooled: :class:`KeyedReport`.

The read-only side of :class:`~uss_stream.policies.keyed.KeyedPolicy`, in the vocabulary of the
learning metrics (:mod:`uss_stream.policies.learning_state`): a key's own counts, its depth and
its WD verdict from its labels, the pool's, and the keys' counters and depth mix, what the River
cascade's summary and the service's metrics show. It never steps a key.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from uss_stream.core.stats import DisagreementStats
from uss_stream.labels.evidence import LabelEvidence
from uss_stream.labels.wd_monitor import WDReport, wd_report
from uss_stream.policies.base import Policy
from uss_stream.policies.learning_state import chosen_depth, depth_mix, disagreement_ratio, verdict_name

if TYPE_CHECKING:
    from uss_stream.policies.keyed_counts import KeyedCounts
    from uss_stream.policies.keyed_store import KeyStore

__all__ = ["KeyedReport"]


class KeyedReport:
    """The read-only views of a keyed policy (see the module docstring); a base of
    :class:`~uss_stream.policies.keyed.KeyedPolicy`, which sets the attributes below."""

    policy: Policy
    _counts: KeyedCounts
    _store: KeyStore
    _pooled: bool

    @property
    def n_stages(self) -> int:
        """Number of stages ``K``."""
        return self.policy.n_stages

    @property
    def cumulative_costs(self) -> tuple[float, ...]:
        """``C_1..C_K``."""
        return self.policy.cumulative_costs

    @property
    def sequential(self) -> bool:
        """Whether keys decide stage by stage (:meth:`begin` / :meth:`step`), as the base policy."""
        return self.policy.sequential

    @property
    def asks_for_labels(self) -> bool:
        """Whether keys ask for labels (:attr:`label_request`, :meth:`learn_label`), as the base policy."""
        return self.policy.asks_for_labels

    @property
    def events(self) -> int:
        """Events decided, of all keys: the clock of ``ttl`` and ``pool_refresh``."""
        return self._counts.events

    @property
    def keys(self) -> list[Hashable]:
        """The live keys, least recently used first."""
        return list(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, key: object) -> bool:
        return key in self._store

    @property
    def keys_created(self) -> int:
        """Keys created so far (a key evicted and seen again counts again; loaded keys do not)."""
        return self._store.created

    @property
    def keys_evicted(self) -> int:
        """Keys evicted so far (least recently used, idle past ``ttl``, or by :meth:`evict`)."""
        return self._store.evicted

    def key_stats(self, key: Hashable) -> DisagreementStats:
        """A live key's own counts (``KeyError`` for another key)."""
        return self._counts.stats_from(self._store.counts[self._row(key)])

    def pool_stats(self) -> DisagreementStats:
        """The pooled counts of every event of every key (not those :meth:`share` added)."""
        return self._counts.stats_from(self._counts.pool)

    def label_evidence(self, key: Hashable | None = None) -> LabelEvidence | None:
        """The labels' evidence of a live key (``None`` without labels), or with ``None`` the pool's."""
        if key is None:
            return self._counts.evidence
        self._row(key)
        return self._store.evidence.get(key)

    def chosen_depth(self, key: Hashable | None = None) -> int | None:
        """The depth a live key would choose next, without stepping it; with ``None``, the depth of
        one learner on all the pooled counts (shared ones included). ``None`` for a sequential
        policy."""
        if self.sequential:
            return None
        if key is None:
            pooled = self._counts.pool + self._counts.foreign
            if self._pooled:
                return int(self._counts.rule(pooled[None, :], None)[0])
            return self._learner_depth(self._counts.stats_from(pooled), None)
        row = self._row(key)
        if self._pooled:
            return self._counts.decide(row, key)
        return self._learner_depth(self._counts.effective_stats(row), self._store.learners[row])

    def learner(self, key: Hashable) -> Policy | None:
        """A live key's learner object (base policies that are not count-vectorised; else ``None``)."""
        return self._store.learners[self._row(key)]

    def key_depths(self) -> list[int]:
        """How many live keys queried each depth ``1..K`` at their last event: the depth mix across keys."""
        rows = np.array([self._store.row(key) for key in self._store], dtype=np.int64)
        return np.bincount(self._store.last_depth[rows], minlength=self.n_stages + 1)[1:].tolist()

    def last_depth(self, key: Hashable) -> int:
        """The depth of a live key's last event (0 if none was decided)."""
        return int(self._store.last_depth[self._row(key)])

    def wd_report(self, key: Hashable | None = None) -> WDReport | None:
        """The WD monitor's report on a live key's labels and own counts (``None``: on the pool's
        labels and counts); ``None`` without labels."""
        evidence = self.label_evidence(key)
        if evidence is None or not evidence.labels:
            return None
        stats = self.pool_stats() if key is None else self.key_stats(key)
        return wd_report(
            self.cumulative_costs,
            stats.queried,
            stats.disagreements,
            evidence,
            stats.decisions + 1,
            self.chosen_depth(key),
        )

    def learning_state(self, key: Hashable | None = None) -> dict[str, Any]:
        """The learning quantities of a live key (its own counts and labels), or with ``None`` of
        the pool and the keys.

        Examples
        --------
        >>> from uss_stream.policies import KeyedPolicy, USSKLUCB
        >>> policy = KeyedPolicy(USSKLUCB([0.0, 0.5]))
        >>> _ = policy.run(["a", "a", "b"], [[0, 0], [0, 1], [1, 1]])   # "b" leans on "a"
        >>> state = policy.learning_state("a")
        >>> state["policy_round"], state["depth_mix"], state["disagreement_ratio"]
        (2, [1, 1], {'1-2': 0.0})
        >>> pooled = policy.learning_state()
        >>> pooled["policy_round"], pooled["keys_active"], pooled["key_depths"]
        (3, 2, [2, 0])

        """
        stats = self.pool_stats() if key is None else self.key_stats(key)
        report = self.wd_report(key)
        state: dict[str, Any] = {
            "policy_round": int(stats.decisions),
            "chosen_depth": self.chosen_depth(key),
            "depth_mix": depth_mix(stats),
            "disagreement_ratio": disagreement_ratio(stats),
            "wd_verdict": None if report is None else verdict_name(report.verdict),
        }
        if key is None:
            state["keys_active"] = len(self)
            state["keys_created_total"] = self.keys_created
            state["keys_evicted_total"] = self.keys_evicted
            state["key_depths"] = self.key_depths()
        return state

    def key_rows(self, *, differing_only: bool = False) -> list[dict[str, Any]]:
        """One row per live key (least recently used first): ``key``, its own ``rounds``, its
        ``last_depth``, ``chosen_depth`` and ``wd_verdict`` (``None`` without labels), ``labels``.

        With ``differing_only``, only the keys whose chosen depth differs from the pool's, or whose
        verdict differs from the pool's where both have one.
        """
        pool_depth = self.chosen_depth()
        pool_report = self.wd_report()
        pool_verdict = None if pool_report is None else verdict_name(pool_report.verdict)
        rows = []
        for key in self.keys:
            report = self.wd_report(key)
            verdict = None if report is None else verdict_name(report.verdict)
            depth = self.chosen_depth(key)
            differs = depth != pool_depth or (None not in (verdict, pool_verdict) and verdict != pool_verdict)
            if differing_only and not differs:
                continue
            rows.append(
                {
                    "key": key,
                    "rounds": self.key_stats(key).decisions,
                    "last_depth": self.last_depth(key),
                    "chosen_depth": depth,
                    "wd_verdict": verdict,
                    "labels": 0 if report is None else report.labels,
                }
            )
        return rows

    # -- internals -------------------------------------------------------------------------------
    def _row(self, key: Hashable) -> int:
        row = self._store.row(key)
        if row is None:
            raise KeyError(key)
        return row

    def _learner_depth(self, stats: DisagreementStats, learner: Policy | None) -> int:
        """The depth a learner object (with its label evidence) would choose on ``stats``."""
        probe = (learner or self.policy).clone(include_attributes=learner is not None)
        probe.load_stats(stats)
        return chosen_depth(probe)
