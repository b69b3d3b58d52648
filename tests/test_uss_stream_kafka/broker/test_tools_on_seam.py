"""``uss-stream kafka create-topics`` and ``demo-producer`` on either client library (``--client``).

Each runs against the real broker; a spy on the client seam's factories records which library the
command asked for (the clients it gets are the real ones), and the broker shows what they did.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from conftest import read_all

from uss_stream.commands.cli import main
from uss_stream_kafka import Topics, clients

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(240),
]


@pytest.fixture
def libraries(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """``(kind, library)`` of every client the seam made during the test."""
    made: list[tuple[str, str]] = []
    for kind in ("admin", "producer", "consumer"):
        real = getattr(clients, kind)

        def spy(library: str, _real: Any = real, _kind: str = kind, **settings: Any) -> Any:
            made.append((_kind, library))
            return _real(library, **settings)

        monkeypatch.setattr(clients, kind, spy)
    return made


def fresh_topics() -> Topics:
    run = uuid.uuid4().hex[:10]
    return Topics(f"seam-{run}-in", f"seam-{run}-out", f"seam-{run}-dlq", f"seam-{run}-st", f"seam-{run}-lab")


def topic_options(topics: Topics) -> list[str]:
    return [
        "--input-topic", topics.input, "--output-topic", topics.output, "--dlq-topic", topics.dead_letter,
        "--state-topic", topics.state, "--labels-topic", str(topics.labels),
    ]  # fmt: skip


def test_create_topics_on_either_client(kafka_client, bootstrap_servers, admin, libraries, capsys):
    from kafka.admin import ConfigResource, ConfigResourceType

    topics = fresh_topics()
    command = [
        "kafka", "create-topics", "--bootstrap-servers", bootstrap_servers, *topic_options(topics),
        "--client", kafka_client,
    ]  # fmt: skip
    try:
        assert main([*command, "--partitions", "2"]) == 0
        assert capsys.readouterr().out.split("\n")[:5] == [f"{name}: created" for name in topics.all()]
        assert libraries == [("admin", kafka_client)]
        described = {t["name"]: len(t["partitions"]) for t in admin.describe_topics(list(topics.all()))}
        assert described == {
            topics.input: 2, topics.output: 2, topics.dead_letter: 2, topics.state: 1, topics.labels: 2
        }  # fmt: skip
        configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in (topics.state, topics.labels)]
        )
        assert configs["topic"][topics.state]["cleanup.policy"]["value"] == "compact"
        assert configs["topic"][topics.labels]["retention.ms"]["value"] == "-1"
        # Again: every topic exists, and the existing state topic is checked through the same client.
        assert main(command) == 0  # without --partitions: 1 asked for, and existing topics are kept
        kept = (
            "exists with 2 partitions, not the 1 asked for "
            "(the partitions of an existing topic are not changed)"
        )
        assert capsys.readouterr().out.split("\n")[:5] == [
            f"{name}: {'exists' if name == topics.state else kept}" for name in topics.all()
        ]
        assert libraries == [("admin", kafka_client)] * 2
    finally:
        admin.delete_topics(list(topics.all()))


def test_create_topics_refuses_a_state_topic_that_is_not_compacted(
    kafka_client, bootstrap_servers, admin, libraries, capsys
):
    topics = fresh_topics()
    plain = {"num_partitions": 1, "replication_factor": 1}  # cleanup.policy=delete, the default
    admin.create_topics({topics.state: plain}, wait_for_metadata=True)
    command = [
        "kafka", "create-topics", "--bootstrap-servers", bootstrap_servers, *topic_options(topics),
        "--client", kafka_client,
    ]  # fmt: skip
    try:
        assert main(command) == 2  # a configuration error
        error = capsys.readouterr().err
        assert f"state topic {topics.state!r} has cleanup.policy='delete'" in error
        assert libraries == [("admin", kafka_client)]
    finally:
        admin.delete_topics(list(topics.all()))


@pytest.mark.parametrize("mode", ["outputs", "features"])
def test_demo_producer_on_either_client(kafka_client, mode, bootstrap_servers, admin, libraries):
    topics = fresh_topics()
    admin.create_topics(
        {name: {"num_partitions": 1, "replication_factor": 1} for name in (topics.input, topics.labels)},
        wait_for_metadata=True,
    )
    command = [
        "kafka", "demo-producer", "--bootstrap-servers", bootstrap_servers, "--input-topic", topics.input,
        "--events", "500", "--mode", mode, "--client", kafka_client,
    ]  # fmt: skip
    if mode == "features":
        command += ["--labels-topic", str(topics.labels)]
    try:
        assert main(command) == 0
        assert libraries == [("producer", kafka_client)]
        events = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.input, expected=500)]
        assert [e["id"] for e in events] == [f"pima-{i}" for i in range(1, 501)]  # in order, once each
        if mode == "outputs":
            assert all(len(e["outputs"]) == 3 for e in events)
        else:
            labelled = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.labels, expected=500)]
            assert [e["id"] for e in labelled] == [e["id"] for e in events]
            assert all(e["features"] == x["features"] and "label" in x for e, x in zip(events, labelled))
    finally:
        admin.delete_topics([topics.input, str(topics.labels)])
