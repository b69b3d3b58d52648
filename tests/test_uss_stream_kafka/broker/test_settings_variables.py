"""Settings given by their variables only (``cli/test_kafka_settings.py`` has the rule), on the real broker:
a run and an orchestration configured that way decide every event, their zero checkpoints meaning off.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid

import pytest
from conftest import COSTS, produce, read_all, stream, wait_for_metadata

from uss_stream.policies import USSKLUCB


def service(arguments: list[str], environment: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``uss-stream kafka ARGUMENTS`` to its exit, with only ``environment``'s service variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("USS_KAFKA_")}
    try:
        return subprocess.run(
            [sys.executable, "-m", "uss_stream", "kafka", *arguments],
            env={**env, **environment}, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
    except subprocess.TimeoutExpired as timeout:  # run() has killed it
        pytest.fail(f"no exit in 150 s:\n{str(timeout.stderr or '')[-3000:]}")


@pytest.mark.timeout(200)
def test_run_configured_by_variables_only_decides_every_event(bootstrap_servers, make_topics):
    topics = make_topics()
    values, outputs = stream(300, seed=5)
    produce(bootstrap_servers, topics.input, values)
    variables = {
        "USS_KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers, "USS_KAFKA_INPUT_TOPIC": topics.input,
        "USS_KAFKA_OUTPUT_TOPIC": topics.output, "USS_KAFKA_DLQ_TOPIC": topics.dead_letter,
        "USS_KAFKA_STATE_TOPIC": topics.state, "USS_KAFKA_GROUP_ID": f"g-{uuid.uuid4().hex[:8]}",
        # COSTS in dollars at 200 dollars per error: the service decides on COSTS.
        "USS_KAFKA_STAGE_COSTS": ",".join(str(200 * c) for c in COSTS), "USS_KAFKA_PRICE_OF_ERROR": "200",
        "USS_KAFKA_POLICY": "uss-kl-ucb",
        "USS_KAFKA_EXIT_WHEN_IDLE": "1", "USS_KAFKA_METRICS_PORT": "-1",
        "USS_KAFKA_CHECKPOINT_EVERY": "0", "USS_KAFKA_CHECKPOINT_INTERVAL": "0",
        "USS_KAFKA_PRODUCER_OPTION": "linger_ms=5,batch_size=65536",
    }  # fmt: skip
    done = service(["run"], variables)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(record.value) for record in read_all(bootstrap_servers, topics.output)]
    decided = [record["depth"] for record in records]
    assert decided == USSKLUCB(COSTS).run(outputs).tolist()  # the default policy, in the order of the events
    cumulative = [sum(COSTS[: d + 1]) for d in range(len(COSTS))]
    assert [record["cost"] for record in records] == pytest.approx([cumulative[d - 1] for d in decided])
    # checkpoints off (0 and 0): the one checkpoint is the one at the stop
    assert len(read_all(bootstrap_servers, topics.state)) == 1


@pytest.mark.timeout(200)
def test_orchestrate_takes_zero_checkpoints_from_its_variables_as_off(bootstrap_servers, admin):
    from uss_stream_kafka.processing.orchestration import OrchestrationTopics, create_orchestration_topics

    run = uuid.uuid4().hex[:10]
    topics = OrchestrationTopics(*(f"s-{run}-{role}" for role in ("req", "rep", "dec", "dlq", "state")))
    create_orchestration_topics(admin, topics)
    wait_for_metadata(bootstrap_servers, dict.fromkeys(topics.all(), 1))
    try:
        produce(bootstrap_servers, topics.requests, [json.dumps({"id": i}).encode() for i in range(1_500)])
        variables = {
            "USS_KAFKA_CHECKPOINT_EVERY": "0", "USS_KAFKA_CHECKPOINT_INTERVAL": "0",
            "USS_KAFKA_EXIT_WHEN_IDLE": "1", "USS_KAFKA_STAGE_COSTS": ",".join(map(str, COSTS)),
            "USS_KAFKA_MAX_POLL_RECORDS": "200", "USS_KAFKA_METRICS_PORT": "-1",
        }  # fmt: skip
        done = service(
            ["orchestrate", "--bootstrap-servers", bootstrap_servers, "--input-topic", topics.requests,
             "--reports-topic", topics.reports, "--output-topic", topics.decisions, "--dlq-topic",
             topics.dead_letter, "--state-topic", topics.state, "--group-id", f"g-{run}"],
            variables,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert re.search(r"1500 requests, 1500 decisions", done.stderr), done.stderr[-3000:]
        assert len(read_all(bootstrap_servers, topics.decisions)) == 1_500
        assert len(read_all(bootstrap_servers, topics.state)) == 1  # only at the stop
    finally:
        admin.delete_topics(list(topics.all()))
