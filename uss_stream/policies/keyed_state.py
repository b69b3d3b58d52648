"""The JSON documents of a keyed policy: one per key, one for the pool, and the whole state.

A key's document (``uss-stream/keyed-key/v1``) is what a checkpoint writes per key::

    {"format": "uss-stream/keyed-key/v1", "key": "site-7", "last_seen": 1234, "last_depth": 2,
     "stats": {...own counts, uss-stream/disagreement-stats/v1...},
     "evidence": {...its labels, uss-stream/label-evidence/v1...},      # only with labels
     "learner": {...the learner's state_dict()...}}                     # only for learner objects

``last_seen`` is the number of the key's last event on the policy's clock (all keys' events), which
sets its recency and its idle time; ``last_depth`` the depth of that event. The pool's document
(``uss-stream/keyed-pool/v1``) holds the clock (``events``), the pooled counts of every event
(``pool``), the snapshot the priors are drawn from (``snapshot``), the counts other workers shared
(``foreign``), the pooled labels' evidence and the base policy's class name. The whole state
(``uss-stream/keyed/v1``) is ``{"pool": ..., "keys": [...]}``, keys least recently used first.

Two workers' states merge (:func:`merge_documents`): the pools add up, a key both hold gets the sum
of its counts and labels (and of its learners' label evidence, requests or contexts) and the later
``last_seen``; the clock is the later one, the shared counts are dropped (share them again).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from uss_stream.core.context_stats import ContextStats
from uss_stream.core.schema import show, state_count, state_object
from uss_stream.core.stats import DisagreementStats
from uss_stream.labels.evidence import LabelEvidence

__all__ = [
    "KEY_FORMAT",
    "POOL_FORMAT",
    "STATE_FORMAT",
    "KeyRecord",
    "key_document",
    "merge_documents",
    "pool_document",
    "read_key_document",
    "read_pool_document",
    "read_state_document",
    "state_document",
]

KEY_FORMAT = "uss-stream/keyed-key/v1"
POOL_FORMAT = "uss-stream/keyed-pool/v1"
STATE_FORMAT = "uss-stream/keyed/v1"
_POOL_COUNTS = ("pool", "snapshot", "foreign")


@dataclass(frozen=True)
class KeyRecord:
    """One key's state, as its document holds it."""

    key: Hashable
    stats: DisagreementStats
    last_seen: int
    last_depth: int
    learner: dict[str, Any] | None = None
    evidence: LabelEvidence | None = None


def key_document(record: KeyRecord) -> dict[str, Any]:
    """The JSON document of a key's state."""
    document: dict[str, Any] = {
        "format": KEY_FORMAT,
        "key": record.key,
        "last_seen": record.last_seen,
        "last_depth": record.last_depth,
        "stats": record.stats.to_dict(),
    }
    if record.evidence is not None:
        document["evidence"] = record.evidence.to_dict()
    if record.learner is not None:
        document["learner"] = record.learner
    return document


def read_key_document(document: Any, n_stages: int, discount: float | None) -> KeyRecord:
    """A key's document, validated for a policy of ``n_stages`` stages and ``discount``.

    >>> stats = DisagreementStats(2)
    >>> document = key_document(KeyRecord("a", stats, last_seen=3, last_depth=2))
    >>> read_key_document(document, 2, None).last_seen
    3
    >>> read_key_document({**document, "key": 1.5}, 2, None)
    Traceback (most recent call last):
    ...
    ValueError: state field 'key' must be a string or an integer, got 1.5

    """
    state_object(document, KEY_FORMAT, ("key", "last_seen", "last_depth", "stats"))
    key = document["key"]
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise ValueError(f"state field 'key' must be a string or an integer, got {show(key)}")
    stats = _stats(document["stats"], "stats", n_stages, discount)
    evidence = None
    if document.get("evidence") is not None:
        evidence = LabelEvidence.from_dict(document["evidence"])
        if evidence.n_stages != n_stages:
            raise ValueError(
                f"state field 'evidence' has {evidence.n_stages} stages, the policy has {n_stages}"
            )
    learner = document.get("learner")
    if learner is not None and not isinstance(learner, dict):
        raise ValueError(f"state field 'learner' must be an object, got {type(learner).__name__}")
    return KeyRecord(
        key=key,
        stats=stats,
        last_seen=state_count(document["last_seen"], "last_seen"),
        last_depth=state_count(document["last_depth"], "last_depth", 0, n_stages),
        learner=learner,
        evidence=evidence,
    )


def pool_document(
    policy: str, events: int, counts: dict[str, DisagreementStats], evidence: LabelEvidence
) -> dict[str, Any]:
    """The JSON document of the pool (``counts``: ``pool``, ``snapshot`` and ``foreign``)."""
    document: dict[str, Any] = {"format": POOL_FORMAT, "policy": policy, "events": events}
    for name in _POOL_COUNTS:
        document[name] = counts[name].to_dict()
    document["evidence"] = evidence.to_dict()
    return document


def read_pool_document(
    document: Any, policy: str, n_stages: int, discount: float | None
) -> tuple[int, dict[str, DisagreementStats], LabelEvidence]:
    """``(events, counts, evidence)`` of a pool document, validated for the policy."""
    state_object(document, POOL_FORMAT, ("policy", "events", *_POOL_COUNTS, "evidence"))
    if document["policy"] != policy:
        raise ValueError(f"state document is for policy {show(document['policy'])}, not {policy!r}")
    events = state_count(document["events"], "events")
    counts = {name: _stats(document[name], name, n_stages, discount) for name in _POOL_COUNTS}
    evidence = LabelEvidence.from_dict(document["evidence"])
    if evidence.n_stages != n_stages:
        raise ValueError(f"state field 'evidence' has {evidence.n_stages} stages, the policy has {n_stages}")
    return events, counts, evidence


def state_document(pool: dict[str, Any], keys: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole state: the pool's document and the keys' documents."""
    return {"format": STATE_FORMAT, "pool": pool, "keys": keys}


def read_state_document(document: Any) -> tuple[Any, list[Any]]:
    """The pool's document and the keys' documents of a whole state (checked further when loaded)."""
    state_object(document, STATE_FORMAT, ("pool", "keys"))
    keys = document["keys"]
    if not isinstance(keys, list):
        raise ValueError(f"state field 'keys' must be a list of key documents, got {type(keys).__name__}")
    return document["pool"], keys


def merge_documents(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two workers' whole states as one (see the module docstring).

    Examples
    --------
    >>> stats = DisagreementStats(2)
    >>> stats.decisions, stats.queried = 3, [3, 1]
    >>> counts = {name: stats for name in ("pool", "snapshot", "foreign")}
    >>> pool = pool_document("USSKLUCB", 3, counts, LabelEvidence(2))
    >>> key = key_document(KeyRecord("a", stats, last_seen=3, last_depth=1))
    >>> merged = merge_documents(state_document(pool, [key]), state_document(pool, [key]))
    >>> merged["pool"]["pool"]["decisions"], merged["pool"]["foreign"]["decisions"]
    (6, 0)
    >>> merged["keys"][0]["stats"]["queried"]
    [6, 2]

    """
    pools = [read_state_document(document)[0] for document in (first, second)]
    names = [pool.get("policy") if isinstance(pool, dict) else None for pool in pools]
    if names[0] != names[1]:
        raise ValueError(f"cannot merge states of policies {show(names[0])} and {show(names[1])}")
    pool_counts = _merged_stats(pools[0]["pool"], pools[1]["pool"])
    foreign = DisagreementStats.from_dict(pools[0]["foreign"])
    empty = DisagreementStats(foreign.n_stages, discount=foreign.discount)
    pool = {
        **pools[0],
        "events": max(pools[0]["events"], pools[1]["events"]),
        "pool": pool_counts,
        "snapshot": pool_counts,
        "foreign": empty.to_dict(),
        "evidence": _merged_evidence(pools[0]["evidence"], pools[1]["evidence"]),
    }
    keys: dict[Hashable, dict[str, Any]] = {}
    for document in (first, second):
        for entry in read_state_document(document)[1]:
            known = keys.get(entry["key"])
            keys[entry["key"]] = entry if known is None else _merged_key(known, entry)
    ordered = sorted(keys.values(), key=lambda entry: entry["last_seen"])
    return state_document(pool, ordered)


def _merged_key(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    later = first if first["last_seen"] >= second["last_seen"] else second
    merged = {**later, "stats": _merged_stats(first["stats"], second["stats"])}
    evidence = [entry["evidence"] for entry in (first, second) if entry.get("evidence") is not None]
    if evidence:
        merged["evidence"] = evidence[0] if len(evidence) == 1 else _merged_evidence(*evidence)
    learners = [entry["learner"] for entry in (first, second) if entry.get("learner") is not None]
    if len(learners) == 2:
        merged["learner"] = _merged_learner(*learners)
    return merged


def _merged_learner(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """A learner's state documents merged field by field: counts, label evidence, requests, contexts."""
    merged = dict(first)
    if "stats" in first:
        merged["stats"] = _merged_stats(first["stats"], second["stats"])
    if "evidence" in first:
        merged["evidence"] = _merged_evidence(first["evidence"], second["evidence"])
    if "labels_requested" in first:
        merged["labels_requested"] = first["labels_requested"] + second["labels_requested"]
    if "contexts" in first:
        contexts = ContextStats.from_dict(first["contexts"]).merge(ContextStats.from_dict(second["contexts"]))
        merged["contexts"] = contexts.to_dict()
    return merged


def _merged_stats(first: Any, second: Any) -> dict[str, Any]:
    return DisagreementStats.from_dict(first).merge(DisagreementStats.from_dict(second)).to_dict()


def _merged_evidence(first: Any, second: Any) -> dict[str, Any]:
    return LabelEvidence.from_dict(first).merge(LabelEvidence.from_dict(second)).to_dict()


def _stats(document: Any, field: str, n_stages: int, discount: float | None) -> DisagreementStats:
    try:
        stats = DisagreementStats.from_dict(document)
    except ValueError as error:
        raise ValueError(f"state field '{field}': {error}") from None
    if stats.n_stages != n_stages:
        raise ValueError(f"state field '{field}' has {stats.n_stages} stages, the policy has {n_stages}")
    if stats.discount != discount:
        raise ValueError(
            f"state field '{field}' has discount {stats.discount!r}, the policy has {discount!r}"
        )
    return stats
