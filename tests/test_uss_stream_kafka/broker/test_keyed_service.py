"""Keyed selection on a real broker (``--key-from``): what only the broker can show.

A keyed service, exactly-once, is SIGKILLed at a random point (its seed printed before the run) and
restarted: every key of both partitions gets the depths of an uninterrupted run, each event one
decision, and the state topic holds, as its last record per key, exactly the live keys (the evicted
ones deleted by tombstones). The logic of keys, their records and their restore is tested without
a broker in ``tests/test_uss_stream_kafka/processing/test_keyed_learner.py``.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections import Counter, defaultdict

import numpy as np
import pytest
from conftest import COSTS, committed_offsets, read_all
from kafka import TopicPartition
from test_cli import Service, output_count
from waiting import wait_until

from uss_stream.policies.keyed import KeyedPolicy
from uss_stream.policies.specs import serving_policy
from uss_stream_kafka.cli.status import group_status
from uss_stream_kafka.clients.config import ClientConfig
from uss_stream_kafka.runtime.checkpoint import split_record_key

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

N_EVENTS, N_KEYS, MAX_KEYS = 3000, 80, 20


def keyed_stream(seed: int) -> tuple[list[bytes], list[bytes]]:
    """Events of Zipf-distributed keys (their record keys); a key's stage 1 errs at its own rate."""
    rng = np.random.default_rng(seed)
    keys = np.minimum(rng.zipf(1.2, N_EVENTS), N_KEYS) - 1
    truth = rng.integers(0, 2, N_EVENTS)
    flip = rng.random(N_EVENTS) < (keys % 4) * 0.15
    outputs = np.stack([truth ^ flip, truth ^ (rng.random(N_EVENTS) < 0.05), truth], axis=1).tolist()
    values = [json.dumps({"id": f"e{i}", "outputs": row}).encode() for i, row in enumerate(outputs)]
    return [f"site-{k}".encode() for k in keys], values


def produce_keyed(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes]) -> None:
    """Send in order; the default partitioner puts every record of a key in one partition."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for key, value in zip(keys, values):
        producer.send(topic, value, key=key)
    producer.flush()
    producer.close()


def uninterrupted(bootstrap: str, topic: str) -> tuple[dict[str, int], dict[int, KeyedPolicy]]:
    """The depth of every event, and each partition's keyed policy, as one learner per partition
    deciding the partition's events in offset order would have them."""
    policies: dict[int, KeyedPolicy] = {}
    depths: dict[str, int] = {}
    for record in read_all(bootstrap, topic):
        policy = policies.get(record.partition)
        if policy is None:
            template = serving_policy("uss-ucb:alpha=0.51", COSTS, "test")[0]
            policy = policies[record.partition] = KeyedPolicy(template, max_keys=MAX_KEYS)
        event = json.loads(record.value)
        key = record.key.decode()
        depth = policy.select(key)
        policy.update(key, event["outputs"][:depth])
        depths[event["id"]] = depth
    return depths, policies


def test_a_keyed_service_killed_and_restarted_exactly_once_decides_every_key_as_an_uninterrupted_one(
    bootstrap_servers, admin, make_topics, kafka_client
):
    seed = int(os.environ.get("USS_KILL_SEED", random.randrange(1 << 30)))
    print(f"kill point seed {seed} (rerun with USS_KILL_SEED={seed})", flush=True)
    kill_at = random.Random(seed).randrange(N_EVENTS // 10, N_EVENTS * 9 // 10)
    topics = make_topics(partitions=2)
    keys, values = keyed_stream(seed=7)
    produce_keyed(bootstrap_servers, topics.input, keys, values)
    group = f"g-{uuid.uuid4().hex[:10]}"
    flags = [
        "--key-from", "record-key", "--max-keys", str(MAX_KEYS), "--guarantee", "exactly-once",
        "--group-instance-id", "w1", "--client", kafka_client, "--max-poll-records", "200",
        "--commit-interval", "0.2", "--checkpoint-interval", "0.2",
    ]  # fmt: skip
    first = Service(bootstrap_servers, topics, group, *flags)
    wait_until(
        lambda: output_count(bootstrap_servers, topics.output) >= kill_at,
        f"{kill_at} decisions written",
        alive=first.alive,
        every=0.01,
    )
    first.process.kill()
    first.process.wait(30)
    inputs = [TopicPartition(topics.input, p) for p in (0, 1)]
    committed = committed_offsets(admin, group, inputs)
    log = Service(bootstrap_servers, topics, group, *flags, "--exit-when-idle", "2").finish()
    for tp in inputs:  # each partition restarts from its last committed transaction's checkpoint
        restored = f"{tp.topic}/{tp.partition}: checkpoint @{committed[tp]}"
        assert committed[tp] <= 0 or restored in log, log[-3000:]

    decided = read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    depths = {json.loads(r.value)["id"]: json.loads(r.value)["depth"] for r in decided}
    assert Counter(json.loads(r.value)["id"] for r in decided).most_common(1)[0][1] == 1  # one decision each
    expected, policies = uninterrupted(bootstrap_servers, topics.input)
    assert depths == expected

    # The state topic, as compaction leaves it: the last record of every key.
    last: dict[bytes, bytes | None] = {}
    for record in read_all(bootstrap_servers, topics.state, isolation_level="read_committed"):
        last[record.key] = record.value
    live = defaultdict(set)
    for record_key, value in last.items():
        _, partition, key = split_record_key(record_key)
        if key is not None and value is not None:
            live[partition].add(key)
    assert {p: sorted(keys) for p, keys in live.items()} == {
        p: sorted(pol.keys) for p, pol in policies.items()
    }
    assert all(len(keys) <= MAX_KEYS for keys in live.values())
    tombstones = sum(1 for k, v in last.items() if v is None)
    assert tombstones > 0  # keys were evicted (80 keys, 20 per partition at most)

    # One key's learner, as `uss-stream kafka status --key` shows it.
    partition, policy = next(iter(policies.items()))
    key = policy.keys[-1]
    client = ClientConfig(bootstrap_servers)
    [row] = group_status(client, topics.state, group, key=key)
    assert (row["partition"], row["key"]) == (partition, key)
    assert row["policy_round"] == policy.key_stats(key).decisions
