"""``uss-stream kafka status`` on a real broker: a running group, the same group stopped, no checkpoint.

The expectations come from an in-process USS-UCB run over the outputs each checkpoint covers (its
scalar ``select`` for the chosen depth, the depth mix from its depths, the rates counted from the
outputs the depths revealed), never from the command under test. The speed target (16 partitions in
under 2 s) is measured by ``benchmarks/bench_status.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import COSTS, Running, checkpoints_of, new_app, produce, stream
from test_learning_metrics import revealed_rates

from uss_stream.commands.cli import main
from uss_stream.policies import USSUCB
from uss_stream_kafka import OutputsProcessor

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

PARTITIONS, EVENTS = 3, 1500


def status(bootstrap: str, state: str, group: str, capsys: pytest.CaptureFixture, *extra: str) -> tuple:
    """``(exit code, stdout, stderr)`` of the command, run in-process."""
    code = main(
        [
            "kafka",
            "status",
            "--bootstrap-servers",
            bootstrap,
            "--state-topic",
            state,
            "--group-id",
            group,
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def expected_row(outputs: np.ndarray, offset: int) -> dict:
    """What a learner that decided the first ``offset`` events knows, by an in-process policy."""
    policy = USSUCB(COSTS, alpha=0.51)
    depths = policy.run(outputs[:offset])
    return {
        "policy_round": offset,
        "depth_mix": np.bincount(depths, minlength=4)[1:].tolist(),
        "chosen_depth": policy.select(),
        "disagreement_ratio": revealed_rates(outputs[:offset], depths),
    }


def assert_row(row: dict, expected: dict) -> None:
    rates = expected.pop("disagreement_ratio")
    assert {key: row[key] for key in expected} == expected
    assert row["disagreement_ratio"] == pytest.approx(rates, rel=1e-12)


def test_status_of_a_running_then_stopped_group_equals_an_in_process_policy(
    kafka_client, bootstrap_servers, make_topics, capsys
):
    topics = make_topics(partitions=PARTITIONS)
    streams = {p: stream(EVENTS, seed=10 + p, start=p * EVENTS) for p in range(PARTITIONS)}
    for partition, (values, _) in streams.items():
        produce(bootstrap_servers, topics.input, values, partition=partition)
    app = new_app(bootstrap_servers, topics, checkpoint_every=500, client_library=kafka_client)
    running = Running(app, OutputsProcessor(COSTS, alpha=0.51))
    running.wait_for(
        lambda a: len({c.partition for c in checkpoints_of(bootstrap_servers, topics.state)}) == PARTITIONS
    )

    # While it runs: every partition's latest checkpoint, whatever offset it covers.
    code, out, err = status(
        bootstrap_servers, topics.state, app.group_id, capsys, "--json", "--client", kafka_client
    )
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert (document["group_id"], document["state_topic"]) == (app.group_id, topics.state)
    rows = document["partitions"]
    assert [(r["topic"], r["partition"]) for r in rows] == [(topics.input, p) for p in range(PARTITIONS)]
    for row in rows:
        assert row["offset"] > 0 and row["checkpoint_age_seconds"] >= 0
        assert (row["mode"], row["policy"]) == ("outputs", "uss-ucb:alpha=0.51")
        expected = expected_row(streams[row["partition"]][1], row["offset"])
        assert_row(row, expected)
        assert row["wd_verdict"] is None and "labels_requested_total" not in row

    running.wait_for(lambda a: a.summary.events == PARTITIONS * EVENTS)
    app.stop()
    running.join()
    # Stopped: the checkpoints of the stop cover every event; the table shows them.
    code, out, _ = status(bootstrap_servers, topics.state, app.group_id, capsys, "--json")
    assert code == 0
    for row in json.loads(out)["partitions"]:
        assert row["offset"] == EVENTS
        expected = expected_row(streams[row["partition"]][1], EVENTS)
        assert_row(row, expected)
    code, table, _ = status(bootstrap_servers, topics.state, app.group_id, capsys)
    lines = table.splitlines()
    assert code == 0 and lines[0].split()[:4] == ["partition", "offset", "round", "depth"]
    assert [line.split()[:3] for line in lines[1:]] == [
        [f"{topics.input}/{p}", str(EVENTS), str(EVENTS)] for p in range(PARTITIONS)
    ]


def test_a_group_without_checkpoint_gets_a_clear_message_and_exit_5(bootstrap_servers, make_topics, capsys):
    topics = make_topics()
    produce(bootstrap_servers, topics.input, stream(50)[0])
    app = new_app(bootstrap_servers, topics)
    running = Running(app, OutputsProcessor(COSTS))
    running.wait_for(lambda a: a.summary.events == 50)
    app.stop()
    running.join()  # the stop checkpoints: the state topic holds this group's checkpoint

    code, out, err = status(bootstrap_servers, topics.state, "another-group", capsys)
    assert (code, out) == (5, "")
    assert "group 'another-group' has no checkpoint in state topic" in err
    code, out, err = status(bootstrap_servers, topics.state, "another-group", capsys, "--json")
    assert code == 5 and json.loads(out) == {
        "group_id": "another-group",
        "state_topic": topics.state,
        "partitions": [],
    }
    code, _, err = status(bootstrap_servers, "no-such-state-topic", "g", capsys)
    assert code == 2 and "state topic 'no-such-state-topic' does not exist" in err
