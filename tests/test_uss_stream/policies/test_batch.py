"""The speculation's first window only changes speed: every window gives the loop's depths and counts.

The expectations are the policies' own ``select``/``update`` loop (``Policy.run``), never the batch
decider; the windows include the degenerate (1), the kernel's default (8), one longer than the
batch, and the ones :func:`next_window` derives batch after batch in the service's learner.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uss_stream.policies import USSKLUCB, USSTS, USSUCB
from uss_stream.policies.batch import decide_batch, next_window
from uss_stream.policies.kernel import FIRST_WINDOW, MAX_WINDOW
from uss_stream_kafka import OutputsProcessor

COSTS = [0.0, 0.15, 0.2]
POLICIES = {
    "uss-ucb": lambda: USSUCB(COSTS, alpha=0.51),
    "uss-kl-ucb": lambda: USSKLUCB(COSTS),
    "uss-ts": lambda: USSTS(COSTS, seed=2),
}


def bsc(n: int, seed: int) -> np.ndarray:
    """Stage ``k < K`` errs with probability 0.2 / k; the last stage is the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    return np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1)


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("window", [1, 2, 8, 100, 4096, 10**6])
def test_every_first_window_decides_as_the_loop(name, window):
    outputs = bsc(2_500, seed=1)
    policy, depths, steps = POLICIES[name](), [], []
    for start in range(0, len(outputs), 500):
        batch = outputs[start : start + 500].ravel().tolist()
        depths += decide_batch(policy, batch, guess=2, window=window, on_step=steps.append)
    reference = POLICIES[name]()
    assert depths == reference.run(outputs).tolist()
    assert policy.state_dict() == reference.state_dict()
    assert sum(steps) == len(outputs)  # every event decided by exactly one step


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 700), min_size=1, max_size=6),
    seed=st.integers(0, 10**6),
    name=st.sampled_from(sorted(POLICIES)),
)
def test_the_learner_carries_its_window_across_batches_exactly(sizes, seed, name):
    """The service's learner: batches of any sizes, each starting from the window the last one left."""
    outputs = bsc(sum(sizes), seed)
    spec = {"uss-ucb": "uss-ucb:alpha=0.51", "uss-kl-ucb": "uss-kl-ucb", "uss-ts": "uss-ts:seed=2"}[name]
    learner = OutputsProcessor(COSTS, policy=spec).new_learner()
    values = [json.dumps({"id": i, "outputs": row}).encode() for i, row in enumerate(outputs.tolist())]
    depths, start = [], 0
    for size in sizes:
        depths += learner.process_batch(values[start : start + size], max_bytes=1 << 20).depths
        start += size
    reference = POLICIES[name]()
    assert depths == reference.run(outputs).tolist()
    assert learner.state_dict() == reference.state_dict()


def test_next_window_is_twice_the_events_per_step_within_the_kernels_bounds():
    assert next_window(1000, 10) == 200
    assert next_window(1000, 1000) == FIRST_WINDOW
    assert next_window(10**7, 1) == MAX_WINDOW
    assert next_window(0, 0) is None
