"""The compiled kernels (``uss-stream[fast]``) decide exactly as the pure path, on the same seeds.

Every expectation is the pure Python/NumPy path's (``USS_STREAM_PURE=1``), itself tested against
the policies' ``select``/``update`` loop; the kernels' logarithm is compared with the package's
portable logarithm bit for bit. In CI a missing kernel fails these tests (``tests/decision_paths.py``).
"""

from __future__ import annotations

import math
import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.decision_paths import on_path, require_kernels
from uss_stream.core import compiled
from uss_stream.datasets.bsc import generate_bsc
from uss_stream.policies import USSKLUCB, USSUCB, FixedDepth, Hanawal2017WD
from uss_stream.policies.kernel import Counts, pair_order, speculate
from uss_stream.replay.engine import replay
from uss_stream.rules.confidence import portable_log

BUILD = {
    "uss-ucb": lambda costs: USSUCB(costs, alpha=0.51),
    "uss-ucb alpha 2": lambda costs: USSUCB(costs, alpha=2.0),
    "uss-kl-ucb": lambda costs: USSKLUCB(costs),
    "uss-kl-ucb alpha 0.3": lambda costs: USSKLUCB(costs, alpha=0.3),
    "hanawal": lambda costs: Hanawal2017WD(costs),
    "fixed": lambda costs: FixedDepth(len(costs) - 1, costs),
}


@pytest.fixture
def kernels():
    require_kernels()
    return compiled._load()


def test_the_variable_forces_the_pure_path_and_status_says_which_path_decides(monkeypatch):
    monkeypatch.setenv(compiled.PURE_VARIABLE, "1")
    assert compiled.kernels() is None
    assert compiled.status() == "pure Python/NumPy: USS_STREAM_PURE=1"
    monkeypatch.setenv(compiled.PURE_VARIABLE, "0")
    if compiled._load() is None:
        assert compiled.kernels() is None
        assert "is not installed" in compiled.status()
    else:
        assert compiled.kernels() is compiled._load()
        assert compiled.status() == f"compiled kernels: uss_stream_kernels {compiled.INTERFACE}"


def _doubles(bits: np.ndarray) -> list[float]:
    return [struct.unpack("<d", struct.pack("<Q", int(b)))[0] for b in bits]


def test_the_kernels_portable_logarithm_is_the_packages_to_the_bit(kernels):
    rng = np.random.default_rng(7)
    # Positive finite doubles of every exponent (subnormals included), and the round numbers.
    bits = rng.integers(1, 0x7FEF_FFFF_FFFF_FFFF, size=20_000, dtype=np.uint64)
    values = [*_doubles(bits), *map(float, range(1, 5_000)), 0.5, 2.0**-1074, 1.7976931348623157e308]
    values += [math.nextafter(1.0, 0.0), math.nextafter(1.0, 2.0), 0.7071067811865476]
    mismatches = [x for x in values if kernels.portable_log(x) != portable_log(x)]
    assert mismatches == []


def _log(n_stages: int, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, rows)
    errors = np.sort(rng.random(n_stages) * 0.4)[::-1]
    codes = np.stack([truth ^ (rng.random(rows) < e) for e in errors], axis=1)
    upper_i, upper_j = pair_order(n_stages)
    return codes, codes[:, upper_i] != codes[:, upper_j]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_stages=st.integers(2, 6),
    costs=st.lists(st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.2, 0.5]), min_size=6, max_size=6),
    reps=st.integers(1, 6),
    horizon=st.integers(1, 3_000),
    start=st.integers(0, 3),
    name=st.sampled_from(sorted(BUILD)),
    seed=st.integers(0, 10**6),
)
def test_speculate_gives_the_pure_paths_depths_and_counts(n_stages, costs, reps, horizon, start, name, seed):
    """Many repetitions of random rows, from zero counts or from the counts of earlier rounds."""
    require_kernels()
    policy = BUILD[name](costs[:n_stages])
    codes, pairs = _log(n_stages, 500, seed)
    rng = np.random.default_rng(seed + 1)
    rows = rng.integers(0, len(codes), (reps, horizon))
    warm = rng.integers(0, len(codes), (reps, 300 * start))
    results = {}
    for path in ("pure", "compiled"):
        with on_path(path):
            counts = Counts.zeros(n_stages, reps, discount=None)
            if start:
                speculate(policy.clone(), warm, pairs, counts_of=counts)
            depths = speculate(policy.clone(), rows, pairs, counts_of=counts)
        results[path] = (depths.tolist(), counts.values.tolist(), counts.rounds.tolist())
    assert results["compiled"] == results["pure"]


def test_replay_is_the_same_on_both_paths():
    outputs, labels = generate_bsc(3_000, seed=3)
    costs = [0.0, 0.15, 0.2]
    policies = {
        "u": USSUCB(costs),
        "k": USSKLUCB(costs),
        "h": Hanawal2017WD(costs),
        "f": FixedDepth(2, costs),
    }
    results = {}
    for path in ("pure", "compiled"):
        with on_path(path):
            result = replay(outputs, labels, policies=policies, horizon=4_000, reps=7, seed=1)
        results[path] = {name: depths.tolist() for name, depths in result.depths.items()}
    assert results["compiled"] == results["pure"]


def test_the_kernel_refuses_arrays_that_do_not_describe_streams(kernels):
    counts, rounds = np.zeros((3, 1), dtype=np.int64), np.zeros(1, dtype=np.int64)
    pairs, depths = np.zeros((10, 1), dtype=np.uint8), np.zeros((1, 10), dtype=np.int8)
    args = ("hoeffding", (0.51, True, True), [0.0, 0.1])
    kernels.run_streams(*args, np.empty(0, dtype=np.int64), pairs, 1, counts, rounds, depths)
    assert rounds.tolist() == [10] and counts[:2, 0].sum() > 0
    with pytest.raises(ValueError, match="rows must be"):
        kernels.run_streams(*args, np.full((1, 10), 10, dtype=np.int64), pairs, 1, counts, rounds, depths)
    with pytest.raises(ValueError, match="0/1 indicators"):
        kernels.run_streams(*args, np.empty(0, dtype=np.int64), pairs + 2, 1, counts, rounds, depths)
    with pytest.raises(ValueError, match="do not describe a cascade"):
        kernels.run_streams(*args, np.empty(0, dtype=np.int64), pairs, 2, counts, rounds, depths)
    with pytest.raises(ValueError, match="unknown rule"):
        kernels.run_streams("nope", *args[1:], np.empty(0, dtype=np.int64), pairs, 1, counts, rounds, depths)
    strided = np.zeros((3, 2), dtype=np.int64)[:, ::2]
    with pytest.raises(ValueError, match="counts must be C-contiguous and writable"):
        kernels.run_streams(*args, np.empty(0, dtype=np.int64), pairs, 1, strided, rounds, depths)
    counts.setflags(write=False)
    with pytest.raises((ValueError, BufferError)):
        kernels.run_streams(*args, np.empty(0, dtype=np.int64), pairs, 1, counts, rounds, depths)


def test_the_pure_path_is_what_runs_without_the_kernels(monkeypatch):
    """As on a machine without them (the module absent): the same depths, from the pure path."""
    monkeypatch.setattr(compiled, "_loaded", [None])
    monkeypatch.delenv(compiled.PURE_VARIABLE, raising=False)
    assert compiled.kernels() is None
    outputs, labels = generate_bsc(1_000, seed=2)
    result = replay(outputs, labels, policies={"u": USSUCB([0.0, 0.15, 0.2])}, horizon=500, reps=2)
    loop = [USSUCB([0.0, 0.15, 0.2]).run(outputs[result.rows[r]]).tolist() for r in range(2)]
    assert result.depths["u"].tolist() == loop
    assert os.environ.get(compiled.PURE_VARIABLE) is None
