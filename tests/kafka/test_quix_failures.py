"""Issue 16 item 13: failures reported against Quix Streams, reproduced on a real broker.

* #1114: the committed input offset was deleted by retention: resume by the reset policy and say
  what was skipped;
* a state record that is corrupt and oversized (skipped, the previous checkpoint used) or of a newer
  format version (refused, not silently rolled back).
"""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import COSTS, Running, new_app, produce, read_all, run_app, stream

from uss_stream.policies import USSUCB
from uss_stream_kafka import OutputsProcessor
from uss_stream_kafka.checkpoint import CheckpointError, checkpoint_key

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
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
            new_app(bootstrap_servers, topics, group, auto_offset_reset=reset), OutputsProcessor(COSTS)
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


def test_a_corrupt_oversized_state_record_is_skipped_and_a_newer_format_refused(
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
    run_app(new_app(bootstrap_servers, topics, group), OutputsProcessor(COSTS))
    key = checkpoint_key(topics.input, 0)
    # 2.5 MB, larger than the reader's max_partition_fetch_bytes (1 MiB), and not JSON.
    _send(
        bootstrap_servers,
        topics.state,
        key,
        b'{"format": "uss-stream/kafka-checkpoint/v1", ' + b"x" * 2_500_000,
    )
    produce(bootstrap_servers, topics.input, values[20:])
    summary = run_app(new_app(bootstrap_servers, topics, group), OutputsProcessor(COSTS))
    assert summary.restored == [f"{topics.input}/0: checkpoint @20, committed @20, start @20"]
    depths = [json.loads(r.value)["depth"] for r in read_all(bootstrap_servers, topics.output)]
    assert depths == USSUCB(COSTS).run(outputs).tolist()

    newer = {"format": "uss-stream/kafka-checkpoint/v2", "topic": topics.input, "partition": 0, "offset": 40}
    _send(bootstrap_servers, topics.state, key, json.dumps(newer).encode())
    # Every input is committed already, so run_app would stop the service before its restore:
    # the service must stop by itself, on the refused checkpoint.
    running = Running(new_app(bootstrap_servers, topics, group), OutputsProcessor(COSTS))
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
    import time

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
        new_app(bootstrap_servers, topics, group, checkpoint_every=100, **settings), OutputsProcessor(COSTS)
    )
    # Roll segments and wait (observable) for the cleaner: fewer records than offsets.
    deadline = time.monotonic() + 200
    while True:
        records, end = state_records_and_end(bootstrap_servers, topics.state)
        if records < end / 4:
            break
        assert time.monotonic() < deadline, f"the cleaner did not compact the state topic ({records}/{end})"
        _send(bootstrap_servers, topics.state, b"roll", b"{}")  # appends roll the 100 ms segments
        time.sleep(1)

    produce(bootstrap_servers, topics.input, values[2_000:])
    summary = run_app(new_app(bootstrap_servers, topics, group, **settings), OutputsProcessor(COSTS))
    assert summary.restored == [f"{topics.input}/0: checkpoint @2000, committed @2000, start @2000"]
    decisions = read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    assert [json.loads(r.value)["depth"] for r in decisions] == USSUCB(COSTS).run(outputs).tolist()
