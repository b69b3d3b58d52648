"""The keyed learner of a partition (``--key-from``), where its logic lives: which events reach which
key's learner, which keys a checkpoint writes or deletes, and what a restore or a rewind gives back.

The reference is the library's per-event loop (``KeyedPolicy.run``) on the valid events alone; the
state topic is simulated as compaction leaves it (the last record per key; a tombstone deletes).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from uss_stream.policies.keyed import KeyedPolicy
from uss_stream.policies.specs import serving_policy
from uss_stream_kafka.processing.keyed import KeyedOutputsProcessor
from uss_stream_kafka.processing.processors import OutputsProcessor

COSTS = [0.0, 0.15, 0.2]
POLICY = "uss-ucb:alpha=0.51"
LIMIT = 10_000


def stream(n: int, n_keys: int, seed: int) -> tuple[list[str], np.ndarray]:
    """``n`` events of Zipf-distributed keys ``k0..``; each key's stage 1 errs at its own rate."""
    rng = np.random.default_rng(seed)
    keys = np.minimum(rng.zipf(1.3, n), n_keys) - 1
    truth = rng.integers(0, 2, n)
    flip = rng.random(n) < (keys % 3) * 0.2
    outputs = np.stack([truth ^ flip, truth ^ (rng.random(n) < 0.05), truth], axis=1).astype(int)
    return [f"k{k}" for k in keys], outputs


def values_of(keys: list[str], outputs: np.ndarray, start: int = 0) -> list[bytes]:
    return [
        json.dumps({"id": start + i, "site": key, "outputs": row}).encode()
        for i, (key, row) in enumerate(zip(keys, outputs.tolist()))
    ]


def processor(**kwargs) -> KeyedOutputsProcessor:
    return KeyedOutputsProcessor(COSTS, policy=POLICY, key_from="site", **kwargs)


def reference(keys: list[str], outputs: np.ndarray, **kwargs) -> KeyedPolicy:
    return KeyedPolicy(serving_policy(POLICY, COSTS, "test")[0], **kwargs)


def decide(learner, values: list[bytes], start: int, batch: int) -> list[int]:
    """Feed ``values`` (offsets from ``start``) in batches; the depths (0: not decided)."""
    depths = []
    for s in range(0, len(values), batch):
        chunk = values[s : s + batch]
        depths += learner.process_values(
            chunk, None, list(range(start + s, start + s + len(chunk))), LIMIT
        ).depths
    return depths


class StateTopic:
    """A compacted state topic: the partition's last checkpoint, and the last record of each key."""

    def __init__(self) -> None:
        self.partition: dict | None = None
        self.keys: dict[str, dict] = {}

    def checkpoint(self, learner, offset: int) -> tuple[int, int]:
        """Write what a checkpoint writes; returns (records written, tombstones)."""
        written = deleted = 0
        for key, state in learner.changed_states():
            if state is None:
                self.keys.pop(key, None)
                deleted += 1
            else:
                self.keys[key] = (state, offset)
                written += 1
        learner.checkpointed()
        self.partition = (learner.state_dict(), offset)
        return written, deleted

    def restore(self, new) -> None:
        state, offset = self.partition
        new.load_state_dict(state)
        refused = new.load_keys({key: (s, o if o > offset else None) for key, (s, o) in self.keys.items()})
        assert refused == {}


@pytest.mark.parametrize("batch", [1, 7, 500])
def test_each_event_goes_to_its_keys_learner_as_in_the_per_event_loop(batch):
    keys, outputs = stream(1500, 40, seed=1)
    learner = processor().new_learner()
    depths = decide(learner, values_of(keys, outputs), 0, batch)
    expected = reference(keys, outputs)
    assert depths == expected.run(keys, outputs).tolist()
    assert learner.policy.state_dict() == expected.state_dict()


def test_events_without_a_valid_key_are_rejected_and_teach_nothing():
    keys, outputs = stream(300, 10, seed=2)
    values = values_of(keys, outputs)
    bad = {
        5: b'{"id": "x", "outputs": [1, 0, 1]}',  # no key
        17: b'{"id": "y", "site": 1.5, "outputs": [1, 0, 1]}',
        40: b'{"id": "z", "site": null, "outputs": [1, 0, 1]}',
    }
    mixed = [bad.get(i, value) for i, value in enumerate(values)]
    learner = processor().new_learner()
    result = learner.process_values(mixed, None, None, LIMIT)
    assert [e.reason for e in result.errors if e] == ["missing_key", "invalid_key", "missing_key"]
    assert [result.depths[i] for i in bad] == [0, 0, 0]
    good = [i for i in range(len(values)) if i not in bad]
    expected = reference(keys, outputs)
    assert [result.depths[i] for i in good] == expected.run([keys[i] for i in good], outputs[good]).tolist()


def test_record_keys_are_the_keys_with_record_key():
    learner = KeyedOutputsProcessor(COSTS, policy=POLICY, key_from="record-key").new_learner()
    values = [b'{"id": 1, "outputs": [1, 1, 1]}'] * 3
    result = learner.process_values(values, [b"a", None, b"\xff"], None, LIMIT)
    assert result.depths[0] == 3 and [e and e.reason for e in result.errors] == [
        None,
        "missing_key",
        "invalid_key",
    ]
    assert learner.policy.keys == ["a"]


def test_a_checkpoint_writes_only_the_keys_that_changed_since_the_last_one():
    learner = processor().new_learner()
    topic = StateTopic()
    decide(learner, values_of(["a", "b", "c", "a"], np.ones((4, 3), dtype=int)), 0, 10)
    assert topic.checkpoint(learner, 4) == (3, 0)
    decide(learner, values_of(["b"], np.ones((1, 3), dtype=int), 4), 4, 10)
    assert [key for key, _ in learner.changed_states()] == ["b"]
    learner.checkpointed()
    assert list(learner.changed_states()) == []  # nothing since


def test_an_evicted_key_gets_a_tombstone_and_a_key_back_since_gets_its_record():
    learner = processor(max_keys=2).new_learner()
    topic = StateTopic()
    decide(learner, values_of(["a", "b"], np.ones((2, 3), dtype=int)), 0, 10)
    topic.checkpoint(learner, 2)
    decide(learner, values_of(["c"], np.ones((1, 3), dtype=int), 2), 2, 10)  # evicts a (least recent)
    assert dict(learner.changed_states()).get("a", "absent") is None  # a tombstone
    learner.checkpointed()
    decide(
        learner, values_of(["a", "d"], np.ones((2, 3), dtype=int), 3), 3, 10
    )  # a back (evicts b), d evicts c
    changes = dict(learner.changed_states())
    assert changes["a"] is not None and changes["d"] is not None
    assert changes["b"] is None and changes["c"] is None


def test_the_state_topic_holds_one_record_per_live_key():
    keys, outputs = stream(3000, 200, seed=3)
    learner = processor(max_keys=25, key_ttl=400).new_learner()
    topic = StateTopic()
    values = values_of(keys, outputs)
    for start in range(0, 3000, 250):
        decide(learner, values[start : start + 250], start, 100)
        topic.checkpoint(learner, start + 250)
        assert sorted(topic.keys) == sorted(learner.policy.keys)  # evicted keys' records deleted


@pytest.mark.parametrize("bounds", [{}, {"max_keys": 15}, {"max_keys": 30, "key_ttl": 300}])
def test_a_restored_partition_decides_every_key_as_an_uninterrupted_one(bounds):
    keys, outputs = stream(4000, 120, seed=4)
    values = values_of(keys, outputs)
    uninterrupted = processor(**bounds).new_learner()
    expected = decide(uninterrupted, values, 0, 300)

    first = processor(**bounds).new_learner()
    topic = StateTopic()
    for start in (0, 600, 1200):  # three checkpoints, the last at 1800
        decide(first, values[start : start + 600], start, 300)
        topic.checkpoint(first, start + 600)
    decide(first, values[1800:2100], 1800, 300)  # decided after the last checkpoint: lost with the crash
    restored = processor(**bounds).new_learner()
    topic.restore(restored)
    assert decide(restored, values[1800:], 1800, 300) == expected[1800:]
    assert restored.policy.state_dict() == uninterrupted.policy.state_dict()


def test_keys_ahead_of_their_partitions_checkpoint_do_not_count_their_events_twice():
    # At-least-once: a crash after some keys' records of a checkpoint were written, before the
    # partition's record; the restore replays from the partition's last checkpoint.
    keys, outputs = stream(1200, 30, seed=5)
    values = values_of(keys, outputs)
    first = processor().new_learner()
    topic = StateTopic()
    decide(first, values[:600], 0, 200)
    topic.checkpoint(first, 600)
    decide(first, values[600:900], 600, 200)
    written = dict(first.changed_states())
    ahead = sorted(written)[: len(written) // 2]
    for key in ahead:
        topic.keys[key] = (written[key], 900)
    restored = processor().new_learner()
    topic.restore(restored)
    depths = decide(restored, values[600:], 600, 200)
    assert all(depths[i] == 0 for i in range(300) if keys[600 + i] in ahead)  # counted, not decided again
    for key in ahead:  # each key's own counts: every event once
        assert restored.policy.key_stats(key).decisions == keys.count(key)
    # (Its later depths may differ from an uninterrupted run's: under at-least-once the restored pool
    # lacks the ahead keys' events between the two checkpoints, and a key's prior is drawn from it.)


def test_invalid_or_left_over_key_records_are_deleted_at_the_next_checkpoint():
    learner = processor().new_learner()
    topic = StateTopic()
    decide(learner, values_of(["a", "b"], np.ones((2, 3), dtype=int)), 0, 10)
    topic.checkpoint(learner, 2)
    state_a = topic.keys["a"][0]
    restored = processor().new_learner()
    restored.load_state_dict(topic.partition[0])
    refused = restored.load_keys({"a": (state_a, None), "b": ({**state_a, "key": "b", "stats": {}}, None)})
    assert list(refused) == ["b"]
    restored.forget(["gone"])  # e.g. a partition rebuilt from the log: its old keys' records go
    assert dict(restored.changed_states()) == {"b": None, "gone": None}


def test_a_rewind_returns_to_the_last_committed_transaction():
    keys, outputs = stream(900, 40, seed=6)
    values = values_of(keys, outputs)
    learner = processor(max_keys=10).new_learner()
    learner.transactional = True
    decide(learner, values[:300], 0, 100)
    list(learner.changed_states())
    learner.checkpointed()
    learner.committed()
    committed = learner.policy.state_dict()
    decide(learner, values[300:600], 300, 100)  # an aborted transaction, with evictions
    learner.rewind()
    assert learner.policy.state_dict() == committed
    assert list(learner.changed_states()) == []
    again = decide(learner, values[300:], 300, 100)
    uninterrupted = processor(max_keys=10).new_learner()
    assert again == decide(uninterrupted, values, 0, 100)[300:]


def test_a_checkpoint_with_or_without_keys_is_refused_by_the_other_kind_of_service():
    keyed, plain = processor(), OutputsProcessor(COSTS, policy=POLICY)
    with pytest.raises(ValueError, match="--key-from site"):
        plain.check_checkpoint(keyed.describe())
    with pytest.raises(ValueError, match="without --key-from"):
        keyed.check_checkpoint(plain.describe())
    with pytest.raises(ValueError, match="--key-from record-key"):
        KeyedOutputsProcessor(COSTS, policy=POLICY, key_from="record-key").check_checkpoint(keyed.describe())
    keyed.check_checkpoint(processor(max_keys=5).describe())  # the bounds may change


def test_shared_learning_shares_the_pools_of_the_partitions():
    # Partition 1's keys found stage 1 always right; a new key of partition 0 starts from that pool.
    alone, shared, other = (processor().new_learner() for _ in range(3))
    ones = np.ones((3000, 3), dtype=int)
    decide(other, values_of([f"x{i % 30}" for i in range(3000)], ones), 0, 1000)
    assert other.own_stats().decisions == 3000 and other.state_dict()["stats"] == other.own_stats().to_dict()
    shared.share(other.own_stats())
    first = values_of(["new"], np.ones((1, 3), dtype=int))
    assert decide(alone, first, 0, 1) == [3]  # a cold start queries every stage
    # Not a cold start: the new key decides as a keyed policy whose pool holds partition 1's events.
    pooled = reference([], np.ones((0, 3), dtype=int))
    pooled.decide_many([f"x{i % 30}" for i in range(3000)], ones)
    assert decide(shared, first, 0, 1) == pooled.decide_many(["new"], np.ones((1, 3), dtype=int)) != [3]
    assert shared.own_stats().decisions == 1  # its own pool: what it checkpoints and shares


def test_the_keys_metrics_have_one_series_per_partition_and_depth_never_per_key():
    from prometheus_client import CollectorRegistry, generate_latest

    from uss_stream_kafka.operations.learning_metrics import LearningMetrics

    learner = processor(max_keys=2).new_learner()
    decide(learner, values_of(["a", "b", "c"], np.ones((3, 3), dtype=int)), 0, 10)  # c evicts a
    metrics = LearningMetrics(COSTS)
    registry = CollectorRegistry()
    registry.register(metrics)
    metrics.refresh({4: learner})
    sample = registry.get_sample_value
    assert sample("uss_kafka_keys_active", {"partition": "4"}) == 2
    assert sample("uss_kafka_keys_created_total", {"partition": "4"}) == 3
    assert sample("uss_kafka_keys_evicted_total", {"partition": "4"}) == 1
    by_depth = [sample("uss_kafka_keys_by_depth", {"partition": "4", "depth": str(d)}) for d in (1, 2, 3)]
    assert by_depth == [0, 0, 2]  # each key's only event: a cold start queries every stage
    assert sample("uss_kafka_keys_wd_violated", {"partition": "4"}) == 0  # outputs mode: no labels
    assert '"a"' not in generate_latest(registry).decode() and '"b"' not in generate_latest(registry).decode()
