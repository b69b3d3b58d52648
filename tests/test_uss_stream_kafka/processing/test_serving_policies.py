"""Any policy in the service (issue 13 items 3 and 5): ``--policy`` specs, the batch decider on the
library's kernel for every vectorised policy (discounted ones included), and the policy recorded in
the checkpoints. ``broker/test_policies.py`` runs each family on the real broker.

The expectations are the policies' own ``select``/``update`` loop (:meth:`Policy.run`), built from
their classes, never from the spec parser or the service under test.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

from tests.test_uss_stream_kafka.helpers import COSTS, DISCOUNTED, FAMILIES, drifting
from uss_stream.policies import USSKLUCB, USSTS, AuditedUSS
from uss_stream.policies.batch import MIN_BATCH, decide_batch
from uss_stream.policies.specs import spec_of
from uss_stream_kafka import OutputsProcessor


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
