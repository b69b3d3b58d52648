"""Any policy in the service (issue 13 items 3 and 5): ``--policy`` specs, the batch decider on the
library's kernel for every vectorised policy (discounted ones included), the policy recorded in the
checkpoints, and each family deciding on the real broker exactly what an in-process policy fed the
same partition sequence decides.

The expectations are the policies' own ``select``/``update`` loop (:meth:`Policy.run`), built from
their classes, never from the spec parser or the service under test.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, Running, checkpoints_of, new_app, produce, read_all, run_app, stream

from uss_stream.commands.cli import main
from uss_stream.policies import UEEUCB, USSKLUCB, USSTS, USSUCB, AuditedUSS, FixedDepth, Hanawal2017WD, Policy
from uss_stream.policies.batch import MIN_BATCH, decide_batch
from uss_stream.policies.specs import spec_of
from uss_stream_kafka import CheckpointError, OutputsProcessor

#: One spec per family, and the policy its class builds (the in-process reference).
FAMILIES: dict[str, Callable[[], Policy]] = {
    "uss-ucb:alpha=0.8": lambda: USSUCB(COSTS, alpha=0.8),
    "uss-kl-ucb": lambda: USSKLUCB(COSTS),
    "uss-ts:seed=3": lambda: USSTS(COSTS, seed=3),
    "fixed:depth=2": lambda: FixedDepth(2, COSTS),
    "uee-ucb": lambda: UEEUCB(COSTS),
    "alg2": lambda: Hanawal2017WD(COSTS),
}
DISCOUNTED: dict[str, Callable[[], Policy]] = {
    "uss-kl-ucb:discount=0.99": lambda: USSKLUCB(COSTS, discount=0.99),
    "uss-ts:seed=1,discount=0.995": lambda: USSTS(COSTS, seed=1, discount=0.995),
    "uss-ucb:discount=0.98": lambda: USSUCB(COSTS, discount=0.98),
}


def drifting(n: int, seed: int = 0) -> np.ndarray:
    """Outputs whose stage error rates change halfway: a discount makes a difference."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    first = np.where(np.arange(n) < n // 2, 0.05, 0.4)
    return np.stack([truth ^ (rng.random(n) < first), truth ^ (rng.random(n) < 0.1), truth], axis=1)


# -- the batch decider, without a broker ----------------------------------------------------------
@pytest.mark.parametrize("spec", [*FAMILIES, *DISCOUNTED])
def test_batches_decide_as_the_select_update_loop_for_every_policy(spec):
    """Batches of every size (below and above MIN_BATCH) through the service's learner."""
    build = {**FAMILIES, **DISCOUNTED}[spec]
    outputs = drifting(6_000)
    expected = build().run(outputs).tolist()
    learner = OutputsProcessor(COSTS, policy=spec).new_learner()
    assert learner.policy.vectorised
    values = [json.dumps({"id": i, "outputs": row}).encode() for i, row in enumerate(outputs.tolist())]
    depths: list[int] = []
    rng = np.random.default_rng(1)
    start = 0
    while start < len(values):
        size = int(rng.choice([1, 5, MIN_BATCH - 1, MIN_BATCH, 700, 2_500]))
        depths.extend(learner.process_batch(values[start : start + size], max_bytes=1 << 20).depths)
        start += size
    assert depths == expected
    reference = build()
    reference.run(outputs)
    assert learner.state_dict() == reference.state_dict()  # the counts, discounted ones to the bit


def test_a_policy_without_a_vectorised_path_is_stepped_event_by_event():
    """AuditedUSS says it has none (its decisions read label evidence): the select/update loop."""
    policy, reference = AuditedUSS(COSTS), AuditedUSS(COSTS)
    assert not policy.vectorised and USSKLUCB(COSTS).vectorised
    outputs = drifting(500)
    assert decide_batch(policy, outputs.ravel().tolist()) == reference.run(outputs).tolist()
    assert policy.stats == reference.stats


def test_label_asking_and_supervised_policies_are_refused_in_outputs_mode():
    """Outputs mode has no feedback topic: no label can come, so neither kind of policy runs."""
    for spec, needs in (
        ("audited", "asks for labels"),
        ("audited-uss", "asks"),
        ("supervised", "learns from"),
    ):
        with pytest.raises(ValueError, match=f"--policy '{spec}': .*{needs}.*outputs mode has none"):
            OutputsProcessor(COSTS, policy=spec)


def test_orchestration_takes_a_label_asking_policy_but_refuses_the_supervised_one():
    """Orchestration's reports topic brings the labels a label-asking policy asks for, not every label."""
    from uss_stream_kafka.processing.orchestration import OrchestrationProcessor

    for spec, policy in (
        ("audited", AuditedUSS(COSTS)),
        ("audited-uss:label_budget=1.5", AuditedUSS(COSTS, 1.0, 1.5)),
    ):
        processor = OrchestrationProcessor(COSTS, policy=spec)
        assert isinstance(processor.new_learner().book.policy, AuditedUSS)
        assert processor.policy == spec_of(policy)
    with pytest.raises(
        ValueError, match=r"--policy 'supervised': SupervisedUCB learns from every event's label"
    ):
        OrchestrationProcessor(COSTS, policy="supervised")


def test_checkpoints_record_the_canonical_spec_and_refuse_another():
    processor = OutputsProcessor(COSTS, policy="uss-kl-ucb:discount=0.99")
    assert processor.describe() == {
        "mode": "outputs",
        "stage_costs": COSTS,
        "policy": "uss-kl-ucb:alpha=1.0,discount=0.99",
    }
    processor.check_checkpoint({"policy": "uss-kl-ucb:alpha=1.0,discount=0.99"})
    processor.check_checkpoint({"mode": "outputs"})  # nothing recorded: the counts are checked on load
    with pytest.raises(ValueError, match=re.escape("with --policy uss-kl-ucb:alpha=1.0, this service runs")):
        processor.check_checkpoint({"policy": "uss-kl-ucb:alpha=1.0"})
    # Checkpoints written before the policy was recorded: USS-UCB with their alpha.
    OutputsProcessor(COSTS, alpha=0.51).check_checkpoint({"mode": "outputs", "alpha": 0.51})
    OutputsProcessor(COSTS, policy="uss-ucb").check_checkpoint({"mode": "outputs", "alpha": 0.51})
    with pytest.raises(
        ValueError, match=re.escape("uss-ucb:alpha=0.51, this service runs --policy uss-ucb:alpha=2.0")
    ):
        OutputsProcessor(COSTS, policy="uss-ucb:alpha=2").check_checkpoint({"alpha": 0.51})


RUN = ["kafka", "run", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "i", "--output-topic", "o",
       "--dlq-topic", "d", "--state-topic", "s", "--group-id", "g", "--stage-costs", "0,0.15,0.2",
       "--metrics-port", "-1"]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "ucb"], "unknown policy 'ucb'"),
        (["--policy", "uss-ucb:beta=2"], "unknown parameter(s) beta"),
        (["--policy", "fixed:depth=4"], "--policy 'fixed:depth=4': depth must be <= the number of stages 3"),
        (["--policy", "audited-uss"], "--policy 'audited-uss': AuditedUSS asks for labels"),
        (["--policy", "uss-kl-ucb", "--alpha", "0.5"], "give --policy or --alpha"),
        (["--policy", "uss-kl-ucb:discount=0.9", "--shared-learning"], "--shared-learning pools plain"),
        (["--mode", "features", "--cascade-factory", "uss_stream_kafka.cli.demo:pima_cascade",
          "--policy", "uss-ts"], "--policy and --alpha are for outputs mode"),
    ],
)  # fmt: skip
def test_a_bad_policy_is_a_configuration_error_exit_2(extra, message, capsys, monkeypatch):
    """Refused before any connection (the bootstrap address is unreachable): exit code 2."""
    monkeypatch.delenv("USS_KAFKA_POLICY", raising=False)
    monkeypatch.delenv("USS_KAFKA_ALPHA", raising=False)
    try:
        code = main([*RUN, *extra])
    except SystemExit as exit:  # argparse refuses the spec's syntax (usage error)
        code = exit.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "--policy" in err, err


def test_orchestrate_takes_the_same_policy_option(capsys):
    args = ["kafka", "orchestrate", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "q",
            "--reports-topic", "r", "--output-topic", "d", "--dlq-topic", "x", "--state-topic", "s",
            "--group-id", "g", "--stage-costs", "0,0.1,0.2"]  # fmt: skip
    assert main([*args, "--policy", "supervised"]) == 2
    err = capsys.readouterr().err
    assert (
        "--policy 'supervised': SupervisedUCB learns from every event's label; orchestration has only" in err
    )
    with pytest.raises(SystemExit) as exit:
        main([*args, "--policy", "uss-ts:seed=x"])
    assert exit.value.code == 2 and "argument --policy" in capsys.readouterr().err


def test_the_orchestrator_records_its_policy_and_refuses_another_on_restore():
    from uss_stream_kafka.processing.orchestration import OrchestrationProcessor

    def orchestrator(**settings: Any) -> OrchestrationProcessor:
        return OrchestrationProcessor(COSTS, **settings)

    processor = orchestrator(policy="uss-ts:seed=2")
    first = processor.new_learner()
    reference = USSTS(COSTS, seed=2)
    for i in range(50):  # decide and report at once: the loop of the reference policy
        depth = first.book.decide(i)
        assert depth == reference.select()
        first.book.report(i, drifting(50)[i, :depth].tolist())
        reference.update(drifting(50)[i, :depth])
    # What a checkpoint holds: the processor's description and the learner's state.
    description = json.loads(json.dumps(processor.describe()))
    state = json.loads(json.dumps(first.state_dict()))
    assert description["policy"] == "uss-ts:seed=2"
    restarted = orchestrator(policy="uss-ts:seed=2")
    restarted.check_checkpoint(description)
    second = restarted.new_learner()
    second.load_state_dict(state)
    assert second.book.decide("next") == reference.select()
    with pytest.raises(
        ValueError, match="written with --policy uss-ts:seed=2, the service runs --policy uss-ucb"
    ):
        orchestrator(alpha=0.51).check_checkpoint(description)
    legacy = {key: value for key, value in description.items() if key != "policy"}
    with pytest.raises(ValueError, match=re.escape("written with --policy uss-ucb:alpha=0.51")):
        orchestrator(policy="uss-ts:seed=2").check_checkpoint({**legacy, "alpha": 0.51})


# -- on the real broker -----------------------------------------------------------------------------
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


@pytest.mark.parametrize("spec", [*FAMILIES, *DISCOUNTED])
def test_the_kernel_path_decides_every_vectorised_policy_exactly(spec):
    """The kernel on one stream from a live policy's counts (what decide_batch runs for plain
    counts), for discounted counts too: the loop's depths and counts, to the bit."""
    from uss_stream.policies.batch import _speculate, pair_disagreements

    build = {**FAMILIES, **DISCOUNTED}[spec]
    outputs = drifting(3_000, seed=4)
    policy, depths = build(), []
    for start in range(0, 3_000, 600):
        batch = outputs[start : start + 600].ravel().tolist()
        depths.extend(_speculate(policy, pair_disagreements(batch, 3), 3))
    reference = build()
    assert depths == reference.run(outputs).tolist()
    assert policy.state_dict() == reference.state_dict()


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
