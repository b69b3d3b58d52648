"""Any policy in the service (issue 13 items 3 and 5), on the real broker: each family decides exactly
what an in-process policy fed the same partition sequence decides, and a restart keeps the policy
recorded in the checkpoints (``processing/test_serving_policies.py`` has the batch decider and the
checks without a broker).

The expectations are the policies' own ``select``/``update`` loop (:meth:`Policy.run`), built from
their classes, never from the spec parser or the service under test.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, Running, checkpoints_of, new_app, produce, read_all, run_app, stream

from tests.test_uss_stream_kafka.helpers import DISCOUNTED, FAMILIES, drifting
from uss_stream.commands.cli import main
from uss_stream.policies import USSKLUCB
from uss_stream.policies.specs import spec_of
from uss_stream_kafka import CheckpointError, OutputsProcessor


def by_partition(records: list[Any]) -> dict[int, list[int]]:
    """The decided depths of each output partition, in offset order, each event once.

    At-least-once: a consumer that loses its partitions on a loaded machine decides the events
    after the last commit again, from the restored checkpoint; the repeated decisions must be the
    same (checked), and each event counts once.
    """
    depths: dict[int, list[int]] = {}
    first: dict[str, int] = {}
    for record in records:
        decision = json.loads(record.value)
        if decision["id"] in first:
            assert first[decision["id"]] == decision["depth"], decision
            continue
        first[decision["id"]] = decision["depth"]
        depths.setdefault(record.partition, []).append(decision["depth"])
    return depths


def produce_partitions(bootstrap: str, topic: str, outputs: dict[int, np.ndarray]) -> None:
    for partition, rows in outputs.items():
        values = [
            json.dumps({"id": f"p{partition}-{i}", "outputs": row}).encode()
            for i, row in enumerate(rows.tolist())
        ]
        produce(bootstrap, topic, values, partition=partition)


@pytest.mark.kafka
@pytest.mark.timeout(300)
@pytest.mark.parametrize("spec", [*FAMILIES, "uss-kl-ucb:discount=0.99", "uss-ts:seed=1,discount=0.995"])
def test_each_policy_family_decides_on_the_broker_as_in_process(spec, bootstrap_servers, make_topics):
    """Two partitions, one learner each: every partition's depths are those of a fresh policy of
    the spec's class fed that partition's events (batches of up to 700 records: the kernel path)."""
    build = {**FAMILIES, **DISCOUNTED}[spec]
    topics = make_topics(partitions=2)
    outputs = {0: drifting(3_000, seed=10), 1: drifting(2_000, seed=11)}
    produce_partitions(bootstrap_servers, topics.input, outputs)
    app = new_app(bootstrap_servers, topics, max_poll_records=700)
    summary = run_app(app, OutputsProcessor(COSTS, policy=spec))
    assert summary.events == 5_000
    decided = by_partition(read_all(bootstrap_servers, topics.output, expected=5_000))
    assert sorted(map(len, decided.values())) == [2_000, 3_000]
    for partition, rows in outputs.items():
        assert decided[partition] == build().run(rows).tolist(), f"partition {partition}"
    assert read_all(bootstrap_servers, topics.dead_letter) == []
    checkpoints = {c.partition: c for c in checkpoints_of(bootstrap_servers, topics.state)}
    for partition, rows in outputs.items():
        reference = build()
        reference.run(rows)
        assert checkpoints[partition].state == reference.state_dict()
        assert checkpoints[partition].processor["policy"] == OutputsProcessor(COSTS, policy=spec).policy


@pytest.mark.kafka
@pytest.mark.timeout(300)
def test_a_discounted_policy_continues_across_a_restart_and_another_spec_is_refused(
    bootstrap_servers, make_topics
):
    """The discounted counts survive the checkpoint (JSON floats) to the bit: the restarted
    service decides as one uninterrupted ``policy.run``. A restart with another spec fails."""
    spec = "uss-kl-ucb:discount=0.99"
    topics = make_topics()
    outputs = drifting(4_000, seed=5)
    first, second = outputs[:2_500], outputs[2_500:]
    group = f"g-{uuid.uuid4().hex[:10]}"
    produce_partitions(bootstrap_servers, topics.input, {0: first})
    run_app(
        new_app(bootstrap_servers, topics, group, max_poll_records=900), OutputsProcessor(COSTS, policy=spec)
    )
    with pytest.raises(
        CheckpointError, match=re.escape("--policy uss-kl-ucb:alpha=1.0,discount=0.99, this service runs")
    ):
        # It stops by itself when the partition is assigned and restored (nothing is left to commit).
        other = OutputsProcessor(COSTS, policy="uss-kl-ucb")
        Running(new_app(bootstrap_servers, topics, group), other).join(90)
    values = [
        json.dumps({"id": f"late-{i}", "outputs": row}).encode() for i, row in enumerate(second.tolist())
    ]
    produce(bootstrap_servers, topics.input, values)
    run_app(
        new_app(bootstrap_servers, topics, group, max_poll_records=900), OutputsProcessor(COSTS, policy=spec)
    )
    depths = [
        json.loads(r.value)["depth"] for r in read_all(bootstrap_servers, topics.output, expected=4_000)
    ]
    assert depths == USSKLUCB(COSTS, discount=0.99).run(outputs).tolist()


@pytest.mark.kafka
@pytest.mark.timeout(300)
def test_the_cli_runs_the_librarys_default_policy_and_records_it(
    bootstrap_servers, make_topics, capsys, monkeypatch
):
    """No --policy, no --alpha: USS-KL-UCB, the cascade's default. A restart with --alpha 0.51
    (USS-UCB) on the same state topic exits 5 (checkpoint), naming both policies."""
    for name in ("USS_KAFKA_POLICY", "USS_KAFKA_ALPHA"):
        monkeypatch.delenv(name, raising=False)
    topics = make_topics()
    values, outputs = stream(3_000)
    produce(bootstrap_servers, topics.input, values)
    group = f"g-{uuid.uuid4().hex[:10]}"
    command = ["kafka", "run", "--bootstrap-servers", bootstrap_servers, "--input-topic", topics.input,
               "--output-topic", topics.output, "--dlq-topic", topics.dead_letter,
               "--state-topic", topics.state, "--group-id", group, "--stage-costs", ",".join(map(str, COSTS)),
               "--metrics-port", "-1", "--exit-when-idle", "1"]  # fmt: skip
    assert main(command) == 0
    depths = [
        json.loads(r.value)["depth"] for r in read_all(bootstrap_servers, topics.output, expected=3_000)
    ]
    assert depths == USSKLUCB(COSTS).run(outputs).tolist()
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].processor["policy"] == "uss-kl-ucb:alpha=1.0"
    capsys.readouterr()
    assert main([*command, "--alpha", "0.51"]) == 5
    err = capsys.readouterr().err
    assert "written with --policy uss-kl-ucb:alpha=1.0, this service runs --policy uss-ucb:alpha=0.51" in err


@pytest.mark.kafka
@pytest.mark.timeout(300)
@pytest.mark.parametrize("spec", ["uss-kl-ucb:discount=0.99", "uss-ts:seed=3", "fixed:depth=2"])
def test_orchestrate_decides_with_its_policy_as_in_process(spec, bootstrap_servers, admin):
    """Requests, then their reports, then more requests: the orchestrator's decisions are those of
    the spec's policy stepped in process on the same rounds and the same reports, in order."""
    from orchestrated import Serving
    from orchestrated import orchestrator as orchestration_service

    from uss_stream_kafka.processing.orchestration import OrchestrationTopics, create_orchestration_topics

    run = uuid.uuid4().hex[:10]
    topics = OrchestrationTopics(*(f"o-{run}-{role}" for role in ("req", "rep", "dec", "dlq", "state")))
    create_orchestration_topics(admin, topics)
    orchestrator = orchestration_service(bootstrap_servers, topics, f"g-{run}", COSTS, policy=spec)
    serving = Serving(orchestrator)
    try:
        serving.wait_ready(60)
        outputs = drifting(600, seed=8)
        reference = {**FAMILIES, **DISCOUNTED}[spec]()
        expected: dict[str, int] = {}

        def decide(ids: range) -> None:
            for i in ids:
                t = reference.stats.decisions + 1
                expected[f"r{i}"] = reference._decide(t)
                reference.stats.decisions = t

        def requests(ids: range) -> None:
            produce(bootstrap_servers, topics.requests, [json.dumps({"id": f"r{i}"}).encode() for i in ids])
            serving.wait_for(lambda s: s.decisions == ids.stop, timeout=90)

        requests(range(300))
        decide(range(300))
        reports = [
            json.dumps({"id": f"r{i}", "outputs": outputs[i, : expected[f"r{i}"]].tolist()}).encode()
            for i in range(300)
        ]
        for i in range(300):
            reference.stats.record(outputs[i, : expected[f"r{i}"]].tolist())
        produce(bootstrap_servers, topics.reports, reports)
        serving.wait_for(lambda s: s.applied == 300, timeout=90)
        requests(range(300, 600))
        decide(range(300, 600))
        serving.stop()
        records = read_all(bootstrap_servers, topics.decisions)
        decided = {d["id"]: d["depth"] for d in (json.loads(r.value) for r in records)}
        assert decided == expected
        assert len(set(expected.values())) > 1 or spec.startswith("fixed")  # the reports changed decisions
        last = json.loads(read_all(bootstrap_servers, topics.state)[-1].value)
        assert last["processor"]["policy"] == spec_of(reference)
    finally:
        orchestrator.stop()
        admin.delete_topics(list(topics.all()))
