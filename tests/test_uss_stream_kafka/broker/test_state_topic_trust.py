"""What the state topic may hold, and what the service makes of it: no event is left undecided.

Checkpoints forged or damaged by whoever can write to the state topic: an offset moved ahead of
the committed offset or given twice, counts the learner refuses, counts with no room left to
count on (shared learning's checkpoints of partitions the input lacks: ``test_shared.py``).
Every one is ignored with a warning; the learner is then rebuilt from the log, so every event
of the input gets its decision, with the depths of an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest
from conftest import (
    COSTS,
    decisions_of,
    new_app,
    read_all,
    run_app,
    send_keyed,
)
from restarts import first_run, processor

from uss_stream.core.schema import MAX_COUNT
from uss_stream.policies import USSUCB
from uss_stream_kafka import Checkpoint

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(180),
]

FIRST, TOTAL, BATCH = 100, 600, 50


def _forged(checkpoint: Checkpoint, forgery: str) -> bytes:
    if forgery == "offset moved ahead":
        return dataclasses.replace(checkpoint, offset=TOTAL).to_bytes()
    if forgery == "offset given twice":
        text = checkpoint.to_bytes().decode()
        return text.replace(f'"offset":{FIRST},', f'"offset":{FIRST},"offset":{TOTAL},').encode()
    if forgery == "counts refused":  # more queries of stage 1 than decisions
        state = json.loads(json.dumps(checkpoint.state))
        state["stats"]["queried"][0] = state["stats"]["decisions"] + 1
        return dataclasses.replace(checkpoint, state=state).to_bytes()
    if forgery == "no room to count on":  # 2**53: the first decision would pass the largest count
        state = json.loads(json.dumps(checkpoint.state))
        state["stats"]["decisions"] = MAX_COUNT
        state["stats"]["queried"][0] = MAX_COUNT
        return dataclasses.replace(checkpoint, state=state).to_bytes()
    assert forgery == "not JSON"
    return b"{" + checkpoint.to_bytes()


@pytest.mark.parametrize(
    "forgery",
    ["offset moved ahead", "offset given twice", "counts refused", "no room to count on", "not JSON"],
)
def test_a_forged_checkpoint_is_ignored_and_every_event_is_decided_as_without_it(
    forgery, bootstrap_servers, make_topics, caplog
):
    topics = make_topics()
    run = first_run(bootstrap_servers, topics, "kafka-python", TOTAL, FIRST)
    send_keyed(bootstrap_servers, topics.state, run.checkpoint.key, _forged(run.checkpoint, forgery))

    with caplog.at_level(logging.WARNING):
        summary = run_app(
            new_app(bootstrap_servers, topics, run.group, max_poll_records=BATCH), processor(), timeout=60
        )
    # Rebuilt from the log: events [0, 100) counted again without producing, the others decided.
    assert summary.restored == [
        f"{topics.input}/0: no checkpoint, committed @{FIRST}, start @0, replay to @{FIRST}"
    ]
    assert (summary.replayed, summary.decisions) == (FIRST, TOTAL - FIRST)
    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=TOTAL))
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(TOTAL)]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(run.outputs).tolist()
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "checkpoint" in warnings and ("invalid" in warnings or "not trusted" in warnings)


def _rerun_committed_at(bootstrap_servers, topics, group, client, committed):
    """Move the group's committed offset to ``committed`` (the checkpoint stays @FIRST) and run again."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    admin.alter_group_offsets(group, {TopicPartition(topics.input, 0): OffsetAndMetadata(committed, "", -1)})
    admin.close()
    app = new_app(bootstrap_servers, topics, group, max_poll_records=BATCH, client_library=client)
    return run_app(app, processor(), timeout=60)


def test_a_checkpoint_ahead_by_at_most_a_batch_is_trusted(
    kafka_client, bootstrap_servers, make_topics, caplog
):
    """A crash between a checkpoint and its commit: the records between were decided, not again."""
    topics = make_topics()
    run = first_run(bootstrap_servers, topics, kafka_client, TOTAL, FIRST)
    with caplog.at_level(logging.WARNING):
        summary = _rerun_committed_at(bootstrap_servers, topics, run.group, kafka_client, FIRST - BATCH)
    assert summary.restored == [
        f"{topics.input}/0: checkpoint @{FIRST}, committed @{FIRST - BATCH}, start @{FIRST}"
    ]
    assert summary.decisions == TOTAL - FIRST
    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=TOTAL))
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(run.outputs).tolist()
    assert not [r for r in caplog.records if "not trusted" in r.getMessage()]


def test_a_checkpoint_ahead_by_more_than_a_batch_is_not_trusted(
    kafka_client, bootstrap_servers, make_topics, caplog
):
    """One record more than a batch ahead: every record from the committed offset is decided again."""
    topics = make_topics()
    run = first_run(bootstrap_servers, topics, kafka_client, TOTAL, FIRST)
    committed = FIRST - BATCH - 1
    with caplog.at_level(logging.WARNING):
        summary = _rerun_committed_at(bootstrap_servers, topics, run.group, kafka_client, committed)
    assert summary.restored == [
        f"{topics.input}/0: no checkpoint, committed @{committed}, start @0, replay to @{committed}"
    ]
    assert (summary.replayed, summary.decisions) == (committed, TOTAL - committed)
    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=FIRST + TOTAL - committed))
    # [committed, FIRST) decided twice (at least once), with the same depths: the learner counts each once.
    depths = USSUCB(COSTS).run(run.outputs).tolist()
    assert [d["depth"] for d in decisions] == depths[:FIRST] + depths[committed:]
    assert [r for r in caplog.records if "not trusted" in r.getMessage() and str(BATCH) in r.getMessage()]
