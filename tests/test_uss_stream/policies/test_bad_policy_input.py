"""Policies given NumPy numbers, a malformed cost array, a call out of turn or a refused row in ``run()``.

A NumPy scalar is accepted wherever the Python number is, and saved as that number (plain JSON);
``cancel()`` out of turn names ``cancel()``; ``run()`` is all or nothing: a refused row (a NaN
output) raises naming the row, and the policy keeps the state it had, with no decision pending.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from uss_stream.pending import PendingDecisions
from uss_stream.policies import USSKLUCB, USSTS, USSUCB, AuditedUSS, SequentialKLUCB, SupervisedUCB
from uss_stream.policies.specs import spec_of

COSTS = [0.0, 0.15, 0.2]


def test_cancel_without_a_decision_names_cancel():
    with pytest.raises(RuntimeError, match=r"^cancel\(\) called without a preceding select\(\)$"):
        USSUCB(COSTS).cancel()
    with pytest.raises(RuntimeError, match=r"^update\(\) called without a preceding select\(\)$"):
        USSUCB(COSTS).update([1])


@pytest.mark.parametrize(
    ("build", "python"),
    [
        (lambda: USSUCB(COSTS, alpha=np.int64(1)), lambda: USSUCB(COSTS, alpha=1)),
        (lambda: USSKLUCB(COSTS, alpha=np.float32(0.5)), lambda: USSKLUCB(COSTS, alpha=0.5)),
        (lambda: USSUCB(COSTS, discount=np.float64(0.99)), lambda: USSUCB(COSTS, discount=0.99)),
        (
            lambda: AuditedUSS(COSTS, label_budget=np.float64(1.5), label_allotment=np.int64(20)),
            lambda: AuditedUSS(COSTS, label_budget=1.5, label_allotment=20),
        ),
        (lambda: USSTS(COSTS, seed=np.int64(3)), lambda: USSTS(COSTS, seed=3)),
    ],
)
def test_numpy_scalars_are_accepted_as_the_numbers_they_hold(build, python):
    policy, reference = build(), python()
    assert spec_of(policy) == spec_of(reference)
    outputs = np.random.default_rng(0).integers(0, 2, (200, 3))
    assert policy.run(outputs).tolist() == reference.run(outputs).tolist()
    assert json.dumps(policy.state_dict()) == json.dumps(reference.state_dict())


def test_numpy_scalars_are_accepted_by_the_pending_book():
    book = PendingDecisions(USSUCB(COSTS), max_age_seconds=np.float64(2.5), remember_reported=np.int64(10))
    assert (book.max_age_seconds, book.remember_reported) == (2.5, 10)
    assert type(book.remember_reported) is int


@pytest.mark.parametrize("costs", [np.array(0.1), np.array([[0.0, 0.1]]), "0,0.1"])
def test_stage_costs_that_are_not_a_flat_sequence_are_refused_in_one_line(costs):
    with pytest.raises(ValueError, match="stage_costs must be a sequence of per-stage costs, got "):
        USSUCB(costs)


def nan_at(row: int, rows: int = 80) -> list[list[float]]:
    outputs = np.random.default_rng(1).integers(0, 2, (rows, 3)).astype(float)
    outputs[row, :] = np.nan  # whatever the depth, the revealed outputs hold a NaN
    return outputs.tolist()


@pytest.mark.parametrize(
    ("build", "run"),
    [
        (lambda: USSUCB(COSTS), lambda policy, outputs: policy.run(outputs)),
        (lambda: USSKLUCB(COSTS, discount=0.99), lambda policy, outputs: policy.run(outputs)),
        (lambda: AuditedUSS(COSTS), lambda policy, outputs: policy.run(outputs, labels=[1] * len(outputs))),
        (
            lambda: SupervisedUCB(COSTS),
            lambda policy, outputs: policy.run(outputs, labels=[1] * len(outputs)),
        ),
    ],
)
def test_run_is_all_or_nothing_and_names_the_refused_row(build, run):
    policy, reference = build(), build()
    warm = nan_at(0)[1:]
    run(policy, warm)
    run(reference, warm)
    before = json.dumps(policy.state_dict())
    with pytest.raises(ValueError, match=r"row 50: outputs\[0\] is NaN|outputs\[0\] is NaN"):
        run(policy, nan_at(50))
    assert json.dumps(policy.state_dict()) == before
    clean = nan_at(0)[1:]
    assert run(policy, clean).tolist() == run(reference, clean).tolist()  # nothing pending, nothing learned


def test_a_sequential_run_is_all_or_nothing_too():
    policy = SequentialKLUCB(COSTS)
    outputs = np.random.default_rng(2).integers(0, 2, (60, 3))
    confidences = np.full((60, 3), 0.9)
    confidences[40, 0] = 1.5
    before = json.dumps(policy.state_dict())
    with pytest.raises(ValueError, match=r"confidence must be a number in \[0, 1\]"):
        policy.run(outputs, confidences)
    assert json.dumps(policy.state_dict()) == before
    confidences[40, 0] = 0.9
    assert (
        policy.run(outputs, confidences).tolist() == SequentialKLUCB(COSTS).run(outputs, confidences).tolist()
    )
