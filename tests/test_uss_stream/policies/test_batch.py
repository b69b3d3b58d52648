"""The speculation's first window only changes speed: every window gives the loop's depths and counts.

The expectations are the policies' own ``select``/``update`` loop (``Policy.run``), never the batch
decider; the windows include the degenerate (1), the kernel's default (8), one longer than the
batch, and the ones :func:`next_window` derives batch after batch in the service's learner. Every
test runs on both decision paths, the pure Python/NumPy one and the compiled kernels
(``tests/decision_paths.py``), on the same seeds.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.decision_paths import PATHS, on_path
from uss_stream.policies import UEEUCB, USSKLUCB, USSTS, USSUCB, FixedDepth, Hanawal2017WD
from uss_stream.policies.batch import decide_batch, next_window
from uss_stream.policies.kernel import FIRST_WINDOW, MAX_WINDOW
from uss_stream_kafka import OutputsProcessor

COSTS = [0.0, 0.15, 0.2]
POLICIES = {
    "uss-ucb": lambda: USSUCB(COSTS, alpha=0.51),
    "uss-kl-ucb": lambda: USSKLUCB(COSTS),
    "uss-ts": lambda: USSTS(COSTS, seed=2),
    "hanawal": lambda: Hanawal2017WD(COSTS),
    "uee-ucb": lambda: UEEUCB(COSTS),
    "fixed": lambda: FixedDepth(2, COSTS),
}
SPECS = {
    "uss-ucb": "uss-ucb:alpha=0.51",
    "uss-kl-ucb": "uss-kl-ucb",
    "uss-ts": "uss-ts:seed=2",
    "hanawal": "alg2",
    "uee-ucb": "uee-ucb",
    "fixed": "fixed:depth=2",
}


def bsc(n: int, seed: int) -> np.ndarray:
    """Stage ``k < K`` errs with probability 0.2 / k; the last stage is the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    return np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1)


#: The pure path at every first window; the compiled one (which has no window) once.
WINDOWS = [*((window, "pure") for window in (1, 2, 8, 100, 4096, 10**6)), (8, "compiled")]


@pytest.mark.parametrize(("window", "path"), WINDOWS)
@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_first_window_decides_as_the_loop(name, window, path):
    outputs = bsc(2_500, seed=1)
    policy, depths, steps = POLICIES[name](), [], []
    with on_path(path):
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
    path=st.sampled_from(PATHS),
)
def test_the_learner_carries_its_window_across_batches_exactly(sizes, seed, name, path):
    """The service's learner: batches of any sizes, each starting from the window the last one left."""
    outputs = bsc(sum(sizes), seed)
    learner = OutputsProcessor(COSTS, policy=SPECS[name]).new_learner()
    values = [json.dumps({"id": i, "outputs": row}).encode() for i, row in enumerate(outputs.tolist())]
    depths, start = [], 0
    with on_path(path):
        for size in sizes:
            depths += learner.process_batch(values[start : start + size], max_bytes=1 << 20).depths
            start += size
    reference = POLICIES[name]()
    assert depths == reference.run(outputs).tolist()
    assert learner.state_dict() == reference.state_dict()


@settings(max_examples=40, deadline=None)
@given(
    n_stages=st.integers(2, 5),
    costs=st.lists(st.sampled_from([0.0, 0.02, 0.05, 0.1, 0.2, 0.4]), min_size=5, max_size=5),
    errors=st.lists(st.floats(0.0, 0.5), min_size=5, max_size=5),
    batches=st.lists(st.integers(1, 3_000), min_size=1, max_size=4),
    seed=st.integers(0, 10**6),
    name=st.sampled_from(["uss-ucb", "uss-kl-ucb", "hanawal", "uee-ucb"]),
)
def test_random_cascades_decide_as_the_loop_on_both_paths(n_stages, costs, errors, batches, seed, name):
    """Random costs and stage error rates, K = 2..5, batches of random sizes: the pure and the
    compiled batch deciders each give the loop's depths and counts."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, sum(batches))
    outputs = np.stack([truth ^ (rng.random(truth.size) < e) for e in errors[:n_stages]], axis=1)
    build = {
        "uss-ucb": lambda: USSUCB(costs[:n_stages], alpha=0.51),
        "uss-kl-ucb": lambda: USSKLUCB(costs[:n_stages]),
        "hanawal": lambda: Hanawal2017WD(costs[:n_stages]),
        "uee-ucb": lambda: UEEUCB(costs[:n_stages]),
    }[name]
    reference = build()
    expected = reference.run(outputs).tolist()
    for path in PATHS:
        policy, depths, start = build(), [], 0
        with on_path(path):
            for size in batches:
                depths += decide_batch(policy, outputs[start : start + size].ravel().tolist(), guess=n_stages)
                start += size
        assert depths == expected, path
        assert policy.state_dict() == reference.state_dict(), path


def test_next_window_is_twice_the_events_per_step_within_the_kernels_bounds():
    assert next_window(1000, 10) == 200
    assert next_window(1000, 1000) == FIRST_WINDOW
    assert next_window(10**7, 1) == MAX_WINDOW
    assert next_window(0, 0) is None
