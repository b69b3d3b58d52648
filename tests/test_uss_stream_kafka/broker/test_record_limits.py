"""The records the service writes fit their topics: oversize decisions dead-lettered, small topics refused.

A decision echoes the input's ``id`` (and, in orchestration, the request's ``context``), so a valid
input can yield a decision the output topic refuses; without a check the producer fails, the
offsets are never committed and every restart stops on the same record. Here the output topic's
``max.message.bytes`` is 20 000 (record limit 20 000 - 1 024 = 18 976 bytes, key and value): an
input whose decision is about 19 000 bytes is dead-lettered ``oversize``, one whose decision is
about 18 000 bytes is decided, and so are the others. A topic whose limit is below what the service
needs at all is refused at start: one line naming it, exit code 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable

import pytest
from conftest import COSTS, PROCESSES, new_app, produce, read_all, run_app, stream
from test_cli import topic_options
from test_orchestration import make_orchestration_topics, new_orchestrator  # noqa: F401 (fixture)

from uss_stream_kafka import OutputsProcessor
from uss_stream_kafka.clients.limits import MARGIN, MIN_RECORD_BYTES
from uss_stream_kafka.processing.deadletter import DeadLetter
from uss_stream_kafka.processing.orchestration import OrchestrationTopics

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

TOPIC_LIMIT = 20_000
RECORD_LIMIT = TOPIC_LIMIT - MARGIN  # the producer's default max_request_size (1 MiB) is larger


def limit_topic(admin, topic: str, max_message_bytes: int) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    configs = {"max.message.bytes": str(max_message_bytes)}
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])


def test_orchestrate_dead_letters_a_request_whose_decision_the_output_topic_refuses(
    kafka_client: str,
    bootstrap_servers: str,
    make_orchestration_topics: Callable[[], OrchestrationTopics],  # noqa: F811
    admin,
) -> None:
    topics = make_orchestration_topics()
    limit_topic(admin, topics.decisions, TOPIC_LIMIT)
    # The decision adds about 60 bytes to the request's id and context (depth, stages, cost).
    requests = [
        {"id": "r0"},
        {"id": "fits", "context": "x" * (RECORD_LIMIT - 1_000)},
        {"id": "big", "context": "x" * RECORD_LIMIT},
        {"id": "r3", "context": {"k": 1}},
    ]
    produce(bootstrap_servers, topics.requests, [json.dumps(r).encode() for r in requests])
    group = f"g-{uuid.uuid4().hex[:10]}"
    orchestrator = new_orchestrator(
        bootstrap_servers, topics, group, client_library=kafka_client, exit_when_idle=2
    )
    summary = orchestrator.run()

    decisions = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.decisions)]
    assert [d["id"] for d in decisions] == ["r0", "fits", "r3"]
    assert decisions[1]["context"] == requests[1]["context"] and decisions[2]["context"] == {"k": 1}
    (record,) = read_all(bootstrap_servers, topics.dead_letter)
    letter = DeadLetter.from_record(record.value)
    assert letter.reason == "oversize" and letter.offset == 2
    assert f"accepts {RECORD_LIMIT}" in letter.error and topics.decisions in letter.error
    assert summary.decisions == 3 and summary.pending == 3  # the oversize one is withdrawn


def test_run_dead_letters_an_event_whose_decision_the_output_topic_refuses(
    kafka_client: str, bootstrap_servers: str, make_topics, admin
) -> None:
    topics = make_topics()
    limit_topic(admin, topics.output, TOPIC_LIMIT)
    values, _ = stream(3)
    big = json.dumps({"id": "i" * RECORD_LIMIT, "outputs": [0, 1, 1]}).encode()
    fits = json.dumps({"id": "f" * (RECORD_LIMIT - 1_000), "outputs": [0, 1, 1]}).encode()
    produce(bootstrap_servers, topics.input, [values[0], big, fits, *values[1:]])
    app = new_app(bootstrap_servers, topics, client_library=kafka_client)
    summary = run_app(app, OutputsProcessor(COSTS, alpha=0.51))

    decisions = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.output)]
    assert [d["id"] for d in decisions] == ["e0", "f" * (RECORD_LIMIT - 1_000), "e1", "e2"]
    (record,) = read_all(bootstrap_servers, topics.dead_letter)
    letter = DeadLetter.from_record(record.value)
    assert letter.reason == "oversize" and letter.offset == 1 and topics.output in letter.error
    assert summary.dead_letters["oversize"] == 1


@pytest.mark.parametrize("role", ["output", "dead_letter", "state"])
def test_a_topic_whose_limit_is_too_small_for_the_service_is_refused_at_start(
    role: str, bootstrap_servers: str, make_topics, admin
) -> None:
    topics = make_topics()
    topic = getattr(topics, role)
    limit_topic(admin, topic, MIN_RECORD_BYTES + MARGIN - 1)  # one byte short of what the service needs
    # A record to dead-letter and one to decide: without the check, the service would write both.
    produce(bootstrap_servers, topics.input, [b"not json", *stream(1)[0]])
    command = [
        sys.executable, "-m", "uss_stream", "kafka", "run", "--bootstrap-servers", bootstrap_servers,
        *topic_options(topics), "--group-id", f"g-{uuid.uuid4().hex[:8]}", "--stage-costs", "0,0.15,0.2",
        "--metrics-port", "-1", "--exit-when-idle", "3",
    ]  # fmt: skip
    service = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    PROCESSES.append(service)
    _, log = service.communicate(timeout=120)

    lines = [line for line in log.splitlines() if line.startswith("uss-stream kafka run: error:")]
    assert service.returncode == 2, log[-3000:]
    assert len(lines) == 1 and f"topic {topic!r} accepts records of at most" in lines[0], log[-3000:]
    assert f"max.message.bytes to at least {MIN_RECORD_BYTES + MARGIN}" in lines[0]
    assert read_all(bootstrap_servers, topics.output) == []


def test_a_topic_at_the_smallest_limit_is_accepted(bootstrap_servers: str, make_topics, admin) -> None:
    topics = make_topics()
    for topic in (topics.output, topics.dead_letter, topics.state):
        limit_topic(admin, topic, MIN_RECORD_BYTES + MARGIN)
    produce(bootstrap_servers, topics.input, [b"not json", *stream(2)[0]])
    summary = run_app(new_app(bootstrap_servers, topics), OutputsProcessor(COSTS, alpha=0.51))

    assert summary.decisions == 2 and summary.dead_letters["invalid_json"] == 1
    (record,) = read_all(bootstrap_servers, topics.dead_letter)
    assert len(record.value) <= MIN_RECORD_BYTES
