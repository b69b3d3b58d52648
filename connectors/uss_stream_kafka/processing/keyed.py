"""Keyed outputs mode (``--key-from``): one learner per key inside each input partition.

:class:`KeyedOutputsProcessor` builds, per input partition, a :class:`KeyedOutputsLearner`: a
:class:`uss_stream.policies.keyed.KeyedPolicy` (one learner per key, started from and leaning on
the pooled counts of the partition's keys) fed with the outputs carried by the events, each event
going to the learner of its key (:mod:`uss_stream_kafka.processing.keys`).

**Checkpoints.** What is not per key (the pool, its snapshot, the clock that orders the keys'
recency) is the partition's checkpoint (:meth:`KeyedOutputsLearner.state_dict`); each key's learner
is its own record of the state topic
(:class:`~uss_stream_kafka.runtime.checkpoint.KeyCheckpoint`), written only when it changed since
the last checkpoint; a key evicted since gets a tombstone (:meth:`KeyedOutputsLearner.changed_states`).

**Shared learning** shares the pool: a learner's :meth:`~KeyedOutputsLearner.own_stats` are its
pooled counts, and the other partitions' pools it is given (:meth:`~KeyedOutputsLearner.share`)
join the snapshot its keys' priors are drawn from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from uss_stream.core.compiled import kernels
from uss_stream.core.stats import DisagreementStats
from uss_stream.policies import Policy
from uss_stream.policies.keyed import KeyedPolicy
from uss_stream.policies.keyed_state import state_document
from uss_stream_kafka.processing.events import InvalidEvent, OutputsCodec
from uss_stream_kafka.processing.keys import KeySource
from uss_stream_kafka.processing.processors import BatchResult, OutputsProcessor, check_recorded

__all__ = ["SUMMARY_SECONDS", "KeyedOutputsLearner", "KeyedOutputsProcessor"]

#: A keyed learner's learning state (which visits every key) is read at most this often.
SUMMARY_SECONDS = 10.0

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class KeyedOutputsProcessor(OutputsProcessor):
    """Outputs mode with one learner per key (see the module docstring).

    An :class:`~uss_stream_kafka.processing.processors.OutputsProcessor` whose learners are keyed.

    Parameters
    ----------
    stage_costs, alpha, policy, codec
        As :class:`~uss_stream_kafka.processing.processors.OutputsProcessor`: every key's learner
        decides by this policy's rule.
    key_from
        ``"record-key"`` (the Kafka record key) or the name of a top-level field of the JSON events
        (a :class:`~uss_stream_kafka.processing.keys.KeySource`, or its ``--key-from`` text).
    max_keys
        Live keys per partition at most; a new key evicts the least recently used one
        (``None``: no bound).
    key_ttl
        A key with no event among the last ``key_ttl`` events of its partition is evicted
        (``None``: never). Both bounds count events, not seconds, so a restored partition evicts
        exactly the keys an uninterrupted one would.

    Examples
    --------
    >>> from uss_stream_kafka.clients.kafka_python import KafkaPythonRecords
    >>> processor = KeyedOutputsProcessor([0, 0.15, 0.2], policy="uss-ucb:alpha=0.51", key_from="site")
    >>> processor.describe()["key_from"]
    'site'
    >>> learner = processor.new_learner()
    >>> values = [b'{"id": 1, "site": "a", "outputs": [1, 0, 1]}', b'{"id": 2, "outputs": [1, 1, 1]}']
    >>> result = learner.process_values(values, [None, None], [0, 1], 1000)
    >>> result.depths, result.errors[1].reason            # the first event of a key queries every stage
    ([3, 0], 'missing_key')
    >>> learner.policy.keys
    ['a']

    """

    keyed = True

    def __init__(
        self,
        stage_costs: Sequence[float],
        alpha: float | None = None,
        policy: str | Policy | None = None,
        codec: Callable[[int, Sequence[float]], OutputsCodec] = OutputsCodec,
        *,
        key_from: str | KeySource,
        max_keys: int | None = None,
        key_ttl: int | None = None,
    ) -> None:
        super().__init__(stage_costs, alpha, policy, codec)
        self.key_source = key_from if isinstance(key_from, KeySource) else KeySource.parse(key_from)
        if self.key_source.field is not None and not hasattr(self._codec, "decode_keyed"):
            raise ValueError(
                f"--key-from {self.key_source.field}: a field of the event needs JSON events "
                "(--value-format json); key by the record key instead (--key-from record-key)"
            )
        self.max_keys = max_keys
        self.key_ttl = key_ttl
        self._keyed_policy()  # checks max_keys and key_ttl

    def _keyed_policy(self) -> KeyedPolicy:
        return KeyedPolicy(self._template, max_keys=self.max_keys, ttl=self.key_ttl)

    def new_learner(self) -> KeyedOutputsLearner:
        return KeyedOutputsLearner(self._keyed_policy(), self._codec, self.key_source)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "key_from": self.key_source.spec}

    def check_checkpoint(self, description: dict[str, Any]) -> None:
        """Raise ``ValueError`` if a checkpoint's processor ``description`` is not this one's:
        another policy or stage costs, or another ``--key-from`` (or none)."""
        check_recorded(description, self.stage_costs, self.policy, "a restart must keep --stage-costs")
        recorded = description.get("key_from")
        if recorded != self.key_source.spec:
            written = "without --key-from" if recorded is None else f"with --key-from {recorded}"
            raise ValueError(
                f"it was written {written}, this service runs --key-from {self.key_source.spec}: a "
                "restart must keep the keys (use a new state topic to change them)"
            )


class KeyedOutputsLearner:
    """The keyed learner of one input partition (see the module docstring).

    Besides the :class:`~uss_stream_kafka.processing.processors.Learner` protocol (events with
    their records: :meth:`process_records`), it says which keys changed since the last checkpoint
    (:meth:`changed_states`), loads keys' checkpoints (:meth:`load_keys`), and, in exactly-once
    mode (:attr:`transactional`), rewinds to the state of the last committed transaction
    (:meth:`committed`, :meth:`rewind`).
    """

    keyed = True

    def __init__(self, policy: KeyedPolicy, codec: Any, source: KeySource) -> None:
        self._policy = policy
        self._codec = codec
        self._source = source
        # At-least-once restore: keys whose checkpoint is ahead of the partition's -> its offset.
        self._ahead: dict[str, int] = {}
        self._stale: set[str] = set()  # keys whose record is deleted at the next checkpoint unless live
        # Exactly-once: the records written into the open transaction (None: a tombstone), and the
        # state of the last committed one (the pool, and each key's state as its record holds it).
        self._written: dict[str, bytes | None] | None = None
        self._base_pool: dict[str, Any] | None = None
        self._base_keys: dict[str, bytes] = {}
        self._summary: dict[str, Any] | None = None  # the last learning state read, and when
        self._summary_at = 0.0

    @property
    def policy(self) -> KeyedPolicy:
        """The partition's keyed policy."""
        return self._policy

    # -- deciding ---------------------------------------------------------------------------------
    def process_records(self, records: Any, values: Sequence[bytes | None], max_bytes: int) -> BatchResult:
        """Decide the events of ``records`` (a partition's :class:`~uss_stream_kafka.clients.Records`,
        ``values`` its values), each by its key's learner; exactly the per-event loop."""
        keys = records.keys if self._source.field is None else None
        if keys is not None and not self._ahead:
            compiled = self._compiled_batch(values, keys, max_bytes)
            if compiled is not None:
                return compiled
        return self.process_values(values, keys, records.offsets if self._ahead else None, max_bytes)

    def _compiled_batch(
        self, values: Sequence[bytes | None], record_keys: Sequence[bytes | None], max_bytes: int
    ) -> BatchResult | None:
        """The batch decoded and encoded by the compiled kernels (:mod:`uss_stream.core.compiled`)
        and decided by the keyed policy, exactly as :meth:`process_values`; ``None`` where they do
        not take it (not installed, a format other than JSON, a record key refused, a value other
        than a plain event: then :meth:`process_values` decides it)."""
        module = kernels()
        if module is None or type(self._codec) is not OutputsCodec or type(values) is not list or not values:
            return None
        keys = self._source.of_record_keys(record_keys)
        if keys is None:
            return None
        k = self._policy.n_stages
        decoded = module.decode_outputs(values, k, max_bytes)
        if decoded is None:
            return None
        outputs, ids = decoded
        decided = self._policy.decide_many(keys, list(outputs))
        payloads = module.encode_outputs(values, ids, outputs, decided, k, self._codec.encoded_costs)
        return BatchResult(payloads, decided, [None] * len(values))

    def process_values(
        self,
        values: Sequence[bytes | None],
        record_keys: Sequence[bytes | None] | None,
        offsets: Sequence[int] | None,
        max_bytes: int,
    ) -> BatchResult:
        """:meth:`process_records` on the columns: the values, their record keys (``--key-from
        record-key``) and offsets (needed only after a restore with keys ahead of the partition)."""
        source = self._source
        k = self._policy.n_stages
        if source.field is None:
            positions, ids, outputs, errors = self._codec.decode_many(values, max_bytes)
            keys: list[str] = []
            refused = False
            for position in positions:
                try:
                    keys.append(source.of_record_key(record_keys[position]))
                except InvalidEvent as error:
                    errors[position] = error
                    keys.append("")
                    refused = True
            if refused:
                positions, ids, keys, outputs = _kept(
                    positions, ids, keys, outputs, k, lambda i: bool(keys[i])
                )
        else:
            positions, ids, keys, outputs, errors = self._codec.decode_keyed(values, max_bytes, source)
        if self._ahead and offsets is not None:
            positions, ids, keys, outputs = self._past_ahead(positions, ids, keys, outputs, offsets)
        count = len(values)
        if not positions:
            return BatchResult([None] * count, [0] * count, errors)
        decided = self._policy.decide_many(keys, outputs)
        return BatchResult.spread(
            count, positions, self._codec.encode_many(ids, decided, outputs), decided, errors
        )

    def _past_ahead(
        self,
        positions: list[int],
        ids: list[Any],
        keys: list[str],
        outputs: list[Any],
        offsets: Sequence[int],
    ) -> tuple[list[int], list[Any], list[str], list[Any]]:
        """Drop the events a key's checkpoint already counted (below its offset): neither decided
        again nor learned twice. A key is no longer ahead once its events reach its offset."""
        ahead = self._ahead
        counted = [ahead.get(key, -1) > offsets[position] for key, position in zip(keys, positions)]
        for key, position in zip(keys, positions):
            if key in ahead and offsets[position] >= ahead[key]:
                del ahead[key]
        if not any(counted):
            return positions, ids, keys, outputs
        return _kept(positions, ids, keys, outputs, self._policy.n_stages, lambda i: not counted[i])

    def process_batch(self, values: Sequence[bytes | None], max_bytes: int) -> BatchResult:
        """Keyed events need their records (the key): see :meth:`process_records`."""
        raise TypeError("a keyed learner decides records (their keys): use process_records")

    def learn(self, value: bytes | None) -> None:
        raise InvalidEvent(
            "processing_error", "outputs mode learns from the stage outputs; it takes no labels"
        )

    # -- what it learned ---------------------------------------------------------------------------
    def learning_state(self) -> dict[str, Any]:
        """The pool's quantities under the metrics' names, and ``keys``: the keys' summary
        (active, created, evicted, the depth mix across keys, the keys whose WD verdict is violated).

        Reading them visits every key: they are read again at most every :data:`SUMMARY_SECONDS`
        (the keys' counters, which cost nothing, are always current).
        """
        policy = self._policy
        now = time.monotonic()
        if self._summary is None or now - self._summary_at >= SUMMARY_SECONDS:
            state = policy.learning_state()
            for name in ("keys_active", "keys_created_total", "keys_evicted_total"):
                del state[name]
            state["depth_mix_keys"] = state.pop("key_depths")
            state["wd_violated"] = _wd_violated(policy)
            self._summary, self._summary_at = state, now
        state = dict(self._summary)
        state["keys"] = {
            "active": len(policy),
            "created": policy.keys_created,
            "evicted": policy.keys_evicted,
            "depth_mix": state.pop("depth_mix_keys"),
            "wd_violated": state.pop("wd_violated"),
        }
        return state

    def key_learning_state(self, key: str) -> dict[str, Any]:
        """A live key's quantities (its own counts and labels; its chosen depth with the pool's prior)."""
        return self._policy.learning_state(key)

    def own_stats(self) -> DisagreementStats:
        """The partition's pooled counts (without what :meth:`share` added): what shared learning shares."""
        return self._policy.pool_stats()

    def share(self, foreign: DisagreementStats) -> None:
        """Draw the keys' priors from the pool plus ``foreign`` (the other partitions' pools)."""
        self._policy.share(foreign)

    # -- checkpoints -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The partition's checkpoint: the pool (``stats``: its own counts, for shared learning and
        ``uss-stream kafka status``) and the number of live keys; the keys are checkpoints of their own."""
        return {
            "policy": "KeyedPolicy",
            "keys": len(self._policy),
            "stats": self._policy.pool_stats().to_dict(),
            "pool": self._policy.pool_state(),
        }

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Load a partition's checkpoint (:meth:`state_dict`); ``ValueError`` if it does not fit."""
        pool = document.get("pool") if isinstance(document, dict) else None
        if not isinstance(pool, dict):
            raise ValueError("a keyed partition's checkpoint needs its 'pool' (a JSON object)")
        self._policy.load_pool_state(pool)

    def load_keys(self, saved: Mapping[str, tuple[dict[str, Any], int | None]]) -> dict[str, str]:
        """Load keys' checkpoints: key -> (its state, its offset if ahead of the partition's, else
        ``None``). Returns the keys refused, with why (their records are deleted at the next
        checkpoint unless the key is live again)."""
        refused: dict[str, str] = {}
        documents = []
        for key, (state, _) in saved.items():
            if state.get("key") != key:
                refused[key] = f"its state is for key {state.get('key')!r}"
            else:
                documents.append(state)
        try:
            self._policy.load_key_states(documents)
        except ValueError:  # one document is refused (all are checked first): find which, load the rest
            kept = []
            for state in documents:
                try:
                    self._policy.clone().load_key_states([state])
                    kept.append(state)
                except ValueError as error:
                    refused[state["key"]] = str(error)
            self._policy.load_key_states(kept)
        # Loaded keys equal their records: not changed. Keys beyond a lowered --max-keys were evicted.
        self._stale.update(self._policy.pop_changes()[1])
        self._ahead = {
            key: offset for key, (_, offset) in saved.items() if offset is not None and key not in refused
        }
        self.forget(refused)
        return refused

    def forget(self, keys: Any) -> None:
        """Delete these keys' records at the next checkpoint, unless they are live by then."""
        self._stale.update(keys)

    def changed_states(self) -> Iterator[tuple[str, dict[str, Any] | None]]:
        """``(key, state)`` of every key whose learner changed since the last checkpoint, and
        ``(key, None)`` for every key whose record is to be deleted (evicted since, or left over)."""
        changed, evicted = self._policy.pop_changes()
        policy = self._policy
        written = self._written
        for key, state in zip(changed, policy.key_states(changed)):
            if written is not None:
                written[key] = _encode(state)
            yield key, state
        gone = set(evicted)
        for key in (*evicted, *(key for key in self._stale if key not in policy and key not in gone)):
            if written is not None:
                written[key] = None
            yield key, None

    def checkpointed(self) -> None:
        """The records of :meth:`changed_states` were written (exactly-once: into the open transaction,
        see :meth:`committed`)."""
        if self._written is None:
            self._stale.clear()

    # -- exactly-once --------------------------------------------------------------------------------
    @property
    def transactional(self) -> bool:
        """Whether it keeps the state of the last committed transaction (exactly-once) to rewind to.

        That state is what the state topic holds: the pool and every key's last record. It is kept
        as those records (the keys' states, encoded), brought up to date at each commit with the
        records the transaction wrote, so that a commit costs nothing beyond its checkpoint.
        """
        return self._written is not None

    @transactional.setter
    def transactional(self, value: bool) -> None:
        policy = self._policy
        self._written = {} if value else None
        self._base_pool = policy.pool_state() if value else None
        self._base_keys = {key: _encode(policy.key_state(key)) for key in policy.keys} if value else {}

    def committed(self) -> None:
        """A transaction committed: its state is the one a later abort rewinds to."""
        if self._written is None:
            return
        base = self._base_keys
        for key, record in self._written.items():
            if record is None:
                base.pop(key, None)
            else:
                base[key] = record
        if self._written:
            self._stale.difference_update(key for key, record in self._written.items() if record is None)
            self._written.clear()
        self._base_pool = self._policy.pool_state()

    def rewind(self) -> None:
        """Back to the state of the last committed transaction (its changes undone, none pending)."""
        if self._written is None:
            raise RuntimeError("rewind() needs a transactional learner")
        keys = [_decode(record) for record in self._base_keys.values()]
        self._policy.load_state_dict(state_document(self._base_pool, keys))
        self._policy.pop_changes()
        self._written.clear()


def _kept(
    positions: list[int],
    ids: list[Any],
    keys: list[str],
    outputs: list[Any],
    k: int,
    keep: Callable[[int], bool],
) -> tuple[list[int], list[Any], list[str], list[Any]]:
    """The events ``i`` (of the valid ones) for which ``keep(i)``: positions, ids, keys, flat outputs."""
    chosen = [i for i in range(len(positions)) if keep(i)]
    flat = [value for i in chosen for value in outputs[i * k : (i + 1) * k]]
    return [positions[i] for i in chosen], [ids[i] for i in chosen], [keys[i] for i in chosen], flat


def _wd_violated(policy: KeyedPolicy) -> int:
    """The live keys whose labels say weak dominance is violated (none without labels: outputs mode)."""
    pooled = policy.label_evidence(None)
    if pooled is None or not pooled.labels:  # no key has a label: nothing to count, key by key
        return 0
    reports = (policy.wd_report(key) for key in policy.keys)
    return sum(1 for report in reports if report is not None and report.verdict == "violated")
