"""Issue 16 item 13: failures reported against Quix Streams, reproduced on a real broker.

* #1114: the committed input offset was deleted by retention: resume by the reset policy and say
  what was skipped;
* #1146: a rebalance landing in the middle of a restore: never restored into a revoked partition,
  one decision per event;
* a state record that is corrupt and oversized (ignored: the learner rebuilt from the log) or of a newer
  format version (refused, not silently rolled back).
"""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import (
    COSTS,
    Running,
    checkpoints_of,
    committed_offsets,
    new_app,
    produce,
    read_all,
    run_app,
    stream,
)
from waiting import wait_until

from uss_stream.policies import USSUCB
from uss_stream_kafka import OutputsProcessor
from uss_stream_kafka.exceptions import CheckpointError
from uss_stream_kafka.runtime.checkpoint import checkpoint_key

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(180),
]


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
    consumer.close()


def delete_below(admin, topic: str, offset: int) -> None:
    """What retention does: the partition's log now starts at ``offset``."""
    from kafka import TopicPartition

    admin.delete_records({TopicPartition(topic, 0): offset})


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_a_committed_offset_deleted_by_retention_resumes_by_the_reset_policy(
    bootstrap_servers, make_topics, admin, caplog, reset
):
    topics = make_topics()
    values, outputs = stream(100)
    produce(bootstrap_servers, topics.input, values)
    group = f"g-{uuid.uuid4().hex[:10]}"
    commit(bootstrap_servers, group, topics.input, 10)  # decided up to 10, then the service was down
    delete_below(admin, topics.input, 60)

    with caplog.at_level("WARNING", logger="uss_stream_kafka"):
        summary = run_app(
            new_app(bootstrap_servers, topics, group, auto_offset_reset=reset),
            OutputsProcessor(COSTS, alpha=0.51),
        )

    warnings = " ".join(r.getMessage() for r in caplog.records)
    assert (
        "committed offset 10 was deleted by retention: records [10, 60) (50) were never decided" in warnings
    )
    decisions = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.output)]
    if reset == "earliest":
        assert [d["id"] for d in decisions] == [f"e{i}" for i in range(60, 100)]
        assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs[60:]).tolist()
    else:
        assert "and [60, 100) (40) too; resuming at 100" in warnings
        assert decisions == [] and summary.events == 0


def _send(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20)
    producer.send(topic, value, key=key, partition=0).get(30)
    producer.close()


def test_a_corrupt_oversized_state_record_is_ignored_and_a_newer_format_refused(
    bootstrap_servers, make_topics, admin
):
    from kafka.admin import ConfigResource, ConfigResourceType

    topics = make_topics()
    admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topics.state, configs={"max.message.bytes": "4000000"})]
    )
    values, outputs = stream(40)
    produce(bootstrap_servers, topics.input, values[:20])
    group = f"g-{uuid.uuid4().hex[:10]}"
    run_app(new_app(bootstrap_servers, topics, group), OutputsProcessor(COSTS, alpha=0.51))
    key = checkpoint_key(topics.input, 0)
    # 2.5 MB, larger than the reader's max_partition_fetch_bytes (1 MiB), and not JSON.
    _send(
        bootstrap_servers,
        topics.state,
        key,
        b'{"format": "uss-stream/kafka-checkpoint/v1", ' + b"x" * 2_500_000,
    )
    produce(bootstrap_servers, topics.input, values[20:])
    summary = run_app(new_app(bootstrap_servers, topics, group), OutputsProcessor(COSTS, alpha=0.51))
    assert summary.restored == [f"{topics.input}/0: no checkpoint, committed @20, start @0, replay to @20"]
    depths = [json.loads(r.value)["depth"] for r in read_all(bootstrap_servers, topics.output)]
    assert depths == USSUCB(COSTS).run(outputs).tolist()

    newer = {"format": "uss-stream/kafka-checkpoint/v2", "topic": topics.input, "partition": 0, "offset": 40}
    _send(bootstrap_servers, topics.state, key, json.dumps(newer).encode())
    # Every input is committed already, so run_app would stop the service before its restore:
    # the service must stop by itself, on the refused checkpoint.
    running = Running(new_app(bootstrap_servers, topics, group), OutputsProcessor(COSTS, alpha=0.51))
    with pytest.raises(CheckpointError, match="newer uss-stream"):
        running.join(timeout=120)


def state_records_and_end(bootstrap: str, topic: str) -> tuple[int, int]:
    from conftest import end_offsets

    return len(read_all(bootstrap, topic)), end_offsets(bootstrap, topic)[0]


@pytest.mark.timeout(300)
def test_a_state_topic_whose_transaction_markers_were_compacted_away_restores(
    bootstrap_servers, make_topics, admin
):
    """Quix Streams #1017: exactly-once checkpoints, then the cleaner removes the superseded
    checkpoints and their transaction markers; the restore must read the state topic to its end
    (no hang on the offset gaps) and resume from the last checkpoint."""

    from kafka.admin import ConfigResource, ConfigResourceType

    topics = make_topics()
    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                topics.state,
                configs={
                    "segment.ms": "100",
                    "min.cleanable.dirty.ratio": "0.001",
                    "delete.retention.ms": "0",
                    "min.compaction.lag.ms": "0",
                },
            )
        ]
    )
    values, outputs = stream(3_000)
    produce(bootstrap_servers, topics.input, values[:2_000])
    group = f"g-{uuid.uuid4().hex[:10]}"
    settings = {"guarantee": "exactly-once", "group_instance_id": f"q-{group}", "max_poll_records": 100}
    run_app(
        new_app(bootstrap_servers, topics, group, checkpoint_every=100, **settings),
        OutputsProcessor(COSTS, alpha=0.51),
    )
    # Roll segments and wait (observable) for the cleaner: fewer records than offsets.
    seen: list[tuple[int, int]] = []

    def compacted() -> bool:
        records, end = state_records_and_end(bootstrap_servers, topics.state)
        seen.append((records, end))
        if records < end / 4:
            return True
        _send(bootstrap_servers, topics.state, b"roll", b"{}")  # appends roll the 100 ms segments
        return False

    wait_until(compacted, lambda: f"the compaction of the state topic (records/end {seen[-1]})", timeout=200,
               every=1.0)  # fmt: skip

    produce(bootstrap_servers, topics.input, values[2_000:])
    summary = run_app(
        new_app(bootstrap_servers, topics, group, **settings), OutputsProcessor(COSTS, alpha=0.51)
    )
    assert summary.restored == [f"{topics.input}/0: checkpoint @2000, committed @2000, start @2000"]
    decisions = read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    assert [json.loads(r.value)["depth"] for r in decisions] == USSUCB(COSTS).run(outputs).tolist()


REBALANCE_PARTITIONS = 4
REBALANCE_PER_PARTITION = 300


def group_state(admin, group: str) -> str:
    """The broker's state of ``group`` (``Stable``, ``PreparingRebalance``, ...)."""
    return str(admin.describe_groups([group])[group]["group_state"])


def wait(condition, what: str, services: list[Running], timeout: float = 120.0) -> None:
    """Wait for ``condition()``; fail if a service stopped or ``timeout`` passed."""

    def alive() -> None:
        for service in services:
            assert service.alive(), f"a service stopped early: {service.error!r}"

    wait_until(condition, what, timeout=timeout, alive=alive, every=0.02)


@pytest.mark.parametrize("revoked_inside", [False, True], ids=["rebalance-at-next-poll", "revoked-inside"])
def test_a_rebalance_landing_during_a_restore_keeps_one_decision_per_event(
    bootstrap_servers, make_topics, admin, monkeypatch, caplog, revoked_inside
):
    """Quix Streams #1146: a second service joins while the first is in the middle of its restore.

    Service A (4 partitions, checkpoints and commits at half of each) is held inside its restore,
    before partition 2's seek (partitions 0 and 1 already restored and resumed), until the broker
    says B's join started a rebalance. The range assignor then gives A partitions 0 and 1 and B 2
    and 3 (static members sorted: ``a-`` before ``b-``) whenever both are members.

    * ``rebalance-at-next-poll``: as the service runs. kafka-python calls the rebalance listener only
      inside ``poll()``, so A finishes its restore of all four, then revokes them at its next poll
      and restores 0 and 1 again;
    * ``revoked-inside``: the window a client whose listener runs concurrently would open: the held
      restore drives A's group protocol (the real listener, the real broker) until A's listener has
      recorded the revocation and the new assignment. The restore must stop at partition 2 (now
      B's: never restored, sought or resumed by A) and restore again what A now holds.

    Either way every event is decided exactly once, with the depth of an uninterrupted run of its
    partition, and the final learners are those of uninterrupted runs.
    """
    import threading
    import time

    from kafka import TopicPartition

    from uss_stream_kafka.runtime.recovery import Recovery

    topics = make_topics(partitions=REBALANCE_PARTITIONS)
    streams = {
        p: stream(REBALANCE_PER_PARTITION, seed=p, start=100_000 * p) for p in range(REBALANCE_PARTITIONS)
    }
    half = REBALANCE_PER_PARTITION // 2
    for p, (values, _) in streams.items():
        produce(bootstrap_servers, topics.input, values[:half], partition=p)
    group = f"g-{uuid.uuid4().hex[:10]}"
    run_app(new_app(bootstrap_servers, topics, group), OutputsProcessor(COSTS, alpha=0.51))
    for p, (values, _) in streams.items():
        produce(bootstrap_servers, topics.input, values[half:], partition=p)

    held, release = threading.Event(), threading.Event()
    revocations: list[int] = []
    restore_models = Recovery._restore_models

    def hold_at_partition_2(recovery, learner, tp, checkpoint):
        if tp.partition == 2 and not held.is_set():
            revocations.append(recovery._revocations)
            held.set()
            assert release.wait(120), "the test never released the restore"
            deadline = time.monotonic() + 120
            while revoked_inside and (recovery._revocations == revocations[0] or recovery.rebalancing):
                assert time.monotonic() < deadline, "no revocation and new assignment within 120s"
                recovery.context.consumer._consumer._coordinator.poll(timeout_ms=100)  # kafka-python's
            revocations.append(recovery._revocations)
        return restore_models(recovery, learner, tp, checkpoint)

    monkeypatch.setattr(Recovery, "_restore_models", hold_at_partition_2)
    services: list[Running] = []
    with caplog.at_level("WARNING", logger="uss_stream_kafka"):
        for name in ("a", "b"):
            app = new_app(bootstrap_servers, topics, group, group_instance_id=f"{name}-{group}")
            services.append(Running(app, OutputsProcessor(COSTS, alpha=0.51)))
            if name == "a":
                wait(held.is_set, "service A's restore of partition 2", services)
        wait(lambda: group_state(admin, group) == "PreparingRebalance", "service B's join", services)
        release.set()

        input_partitions = [TopicPartition(topics.input, p) for p in streams]

        def owned(service: Running) -> set[int]:
            with service.app._context.lock:  # the rebalance listener changes them
                return {tp.partition for tp in service.app._partitions}

        def settled() -> bool:
            owned_now = [owned(service) for service in services]
            committed = committed_offsets(admin, group, input_partitions)
            return owned_now == [{0, 1}, {2, 3}] and set(committed.values()) == {REBALANCE_PER_PARTITION}

        wait(settled, "2+2 partitions, every event committed", services)
        for service in services:
            service.app.stop()
        first, second = (service.join() for service in services)

    def restored(summary) -> list[int]:
        """The input partitions a service restored, in order, each from its checkpoint."""
        assert all(": checkpoint @" in line for line in summary.restored), summary.restored
        return [int(line.split(":")[0].rsplit("/", 1)[1]) for line in summary.restored]

    # The broker may add rebalances of its own (e.g. a leader's metadata refresh): any later
    # restore of A (B) is of partitions 0 and 1 (2 and 3), the assignment whenever both are members.
    a, b = restored(first), restored(second)
    warned = "a rebalance revoked partitions during the restore" in caplog.text
    if revoked_inside:
        assert revocations[1] > revocations[0]
        assert warned, "the interrupted restore did not say it restores again"
        assert a[:2] == [0, 1] and set(a) == {0, 1}  # partition 2, B's meanwhile, never restored by A
    else:
        assert revocations[1] == revocations[0]
        assert not warned
        assert a[:4] == [0, 1, 2, 3] and set(a[4:]) == {0, 1}
    assert set(b) == {2, 3}

    records = read_all(bootstrap_servers, topics.output)
    last = {c.partition: c.state for c in checkpoints_of(bootstrap_servers, topics.state)}
    for p, (_, outputs) in streams.items():
        decisions = [json.loads(r.value) for r in records if r.partition == p]
        ids = [int(d["id"][1:]) - 100_000 * p for d in decisions]
        assert ids == list(range(REBALANCE_PER_PARTITION)), f"partition {p}: not one decision per event"
        reference = USSUCB(COSTS)
        assert [d["depth"] for d in decisions] == reference.run(outputs).tolist(), f"partition {p}"
        assert last[p] == reference.state_dict(), f"partition {p}: final learner"
