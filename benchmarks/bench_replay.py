"""Replay throughput against a straightforward vectorised baseline, with and without the compiled
kernels, and the paper reproduction's wall time.

Run with ``.venv/bin/python -m benchmarks.bench_replay`` (``--help`` for the options). Figures are
ratios against a baseline measured in the same run, so they carry over between machines better
than absolute numbers; times are CPU seconds of the process (best of ``--repeats``), which a loaded
machine inflates less than wall time:

* **baseline**: the straightforward vectorised implementation of each policy, a numpy loop over
  rounds with arrays over repetitions that recomputes every bound and both sets each round by
  broadcasting ``reps x K x K`` arrays (:func:`straightforward_ucb`, :func:`straightforward_kl`)
  and updates the counts;
* **engine, pure**: :func:`uss_stream.policies.kernel.speculate`, the engine behind ``replay``,
  on the pure Python/NumPy path (``USS_STREAM_PURE=1``): certified windows and speculation;
* **engine, compiled**: the same call with the compiled kernels (``uss-stream[fast]``);
* **replay(), compiled**: the whole public call (sampling, encoding, engine, regret).

The pure and compiled runs alternate (``--repeats`` rounds of both). All must return the depths
of the baseline (checked). The targets (issue 37, on instances that switch depth 80-260 times per
repetition): the pure engine at least 5x the baseline, the compiled one at least 20x. The
reproduction is ``studies.reproduce.reproduce`` with the paper's settings, written to a temporary
folder.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from studies.reproduce import reproduce
from uss_stream.core.compiled import PURE_VARIABLE, kernels, status
from uss_stream.datasets.paper import paper_case
from uss_stream.policies import USSKLUCB, USSUCB, Policy
from uss_stream.policies.kernel import speculate
from uss_stream.replay.engine import encode_log, pair_order, replay, sample_rows
from uss_stream.rules.confidence import kl_beats_many, portable_log_many

#: Targets: the engine's decisions/s over the baseline's, on the pure path and with the kernels.
TARGET_PURE = 5.0
TARGET_COMPILED = 20.0
#: The target wall time of the whole reproduction, in seconds.
TARGET_REPRODUCTION = 300.0


def _set_test(beats: np.ndarray) -> np.ndarray:
    """The depths of ``reps x K x K`` outcomes "stage i beats stage j" (``i < j``), by broadcasting."""
    n_stages = beats.shape[-1]
    above = np.triu(np.ones((n_stages, n_stages), dtype=bool), k=1)
    in_high = np.all(beats | ~above, axis=-1)
    in_low = np.all(~beats | ~above, axis=-2)
    admissible = in_high & in_low
    admissible[:, -1] = True
    return np.argmax(admissible, axis=-1) + 1


def straightforward_ucb(policy: USSUCB, t: int, queried: np.ndarray, disagreements: np.ndarray) -> np.ndarray:
    """USS-UCB's depths for all repetitions at round ``t``, by broadcasting."""
    costs = np.asarray(policy.cumulative_costs)
    n = queried.astype(np.float64)[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = disagreements / n + np.sqrt(policy.alpha * math.log(t) / n)
    upper = np.where(n == 0, np.inf, upper)
    return _set_test(costs[None, :] - costs[:, None] > upper)


def straightforward_kl(
    policy: USSKLUCB, t: int, queried: np.ndarray, disagreements: np.ndarray
) -> np.ndarray:
    """USS-KL-UCB's depths for all repetitions at round ``t``: its KL test on every ``reps x K x K``
    entry (the library's :func:`~uss_stream.rules.confidence.kl_beats_many`, whose portable
    logarithms the policy's decisions are defined by), then the sets by broadcasting."""
    costs = np.asarray(policy.cumulative_costs)
    n_stages = costs.size
    gap = costs[None, :] - costs[:, None]
    inside = (gap > 0.0) & (gap < 1.0)
    log_gap = np.where(inside, portable_log_many(np.where(inside, gap, 1.0)), 0.0)
    log_rest = np.where(inside, portable_log_many(np.where(inside, 1.0 - gap, 1.0)), 0.0)
    n = queried.astype(np.float64)
    log_count = portable_log_many(n_stages * np.where(n > 0.0, n, 1.0))
    level = policy.alpha * np.maximum(portable_log_many(np.array([float(t)])) - log_count, 0.0)
    shape = disagreements.shape
    beats = kl_beats_many(
        disagreements.astype(np.float64),
        np.broadcast_to(n[:, None, :], shape),
        gap,
        log_gap,
        log_rest,
        np.broadcast_to(level[:, None, :], shape),
    )
    return _set_test(beats)


def baseline(policy: Policy, rows: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Depths of ``policy`` on ``rows``: every set recomputed for all repetitions each round."""
    decide = straightforward_kl if isinstance(policy, USSKLUCB) else straightforward_ucb
    reps, horizon = rows.shape
    n_stages = policy.n_stages
    upper_i, upper_j = pair_order(n_stages)
    pairs = pairs.astype(np.int64)
    stage = np.arange(n_stages)
    queried = np.zeros((reps, n_stages), dtype=np.int64)
    disagreements = np.zeros((reps, n_stages, n_stages), dtype=np.int64)
    depths = np.empty((reps, horizon), dtype=np.int64)
    for t in range(1, horizon + 1):
        depth = decide(policy, t, queried, disagreements)
        depths[:, t - 1] = depth
        queried += stage < depth[:, None]
        disagreements[:, upper_i, upper_j] += pairs[rows[:, t - 1]] * (upper_j < depth[:, None])
    return depths


def _cpu(work: Callable[[], Any]) -> tuple[float, Any]:
    started = time.process_time()
    value = work()
    return time.process_time() - started, value


def _on_path(pure: bool, work: Callable[[], Any]) -> tuple[float, Any]:
    before = os.environ.get(PURE_VARIABLE)
    os.environ[PURE_VARIABLE] = "1" if pure else "0"
    try:
        return _cpu(work)
    finally:
        if before is None:
            del os.environ[PURE_VARIABLE]
        else:
            os.environ[PURE_VARIABLE] = before


def _throughput(case_name: str, policy: Policy, reps: int, horizon: int, repeats: int) -> dict[str, Any]:
    """Seconds of each implementation for ``policy`` on a paper case, and the switches per repetition."""
    case = paper_case(case_name)
    outputs, labels = case.log()
    codes, _ = encode_log(outputs)
    upper_i, upper_j = pair_order(codes.shape[1])
    pairs = codes[:, upper_i] != codes[:, upper_j]
    rows = sample_rows(len(codes), horizon=horizon, reps=reps, seed=0)
    seconds: dict[str, float] = {}
    seconds["baseline"], reference = _cpu(lambda: baseline(policy.clone(), rows, pairs))
    compiled = kernels() is not None
    for _ in range(repeats):
        for name, pure in [("engine, pure", True)] + [("engine, compiled", False)] * compiled:
            spent, depths = _on_path(pure, lambda: speculate(policy.clone(), rows, pairs))
            if not np.array_equal(depths, reference):
                raise AssertionError(f"{name} and the baseline disagree on {case_name}")
            seconds[name] = min(spent, seconds.get(name, np.inf))
    if compiled:
        seconds["replay(), compiled"] = min(
            _on_path(
                False, lambda: replay(outputs, labels, policies={"p": policy}, horizon=horizon, reps=reps)
            )[0]
            for _ in range(repeats)
        )
    switches = float((np.diff(reference, axis=1) != 0).sum(axis=1).mean())
    return {"seconds": seconds, "switches": switches, "decisions": reps * horizon}


def _report(case_name: str, label: str, figures: dict[str, Any]) -> None:
    seconds, decisions = figures["seconds"], figures["decisions"]
    base = seconds["baseline"]
    print(f"\n{case_name}, {label}: {figures['switches']:.0f} depth switches per repetition on average")
    print(f"  {'implementation':22} {'CPU s':>8} {'decisions/s':>13} {'vs baseline':>12}")
    for name, spent in seconds.items():
        print(f"  {name:22} {spent:8.3f} {decisions / spent:13,.0f} {base / spent:11.1f}x")
    for name, target in (("engine, pure", TARGET_PURE), ("engine, compiled", TARGET_COMPILED)):
        if name in seconds:
            ratio = base / seconds[name]
            verdict = "meets" if ratio >= target else "MISSES"
            print(f"  {name} / baseline = {ratio:.1f}x ({verdict} the {target:.0f}x target)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_replay", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--horizon", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs of each path")
    parser.add_argument(
        "--cases",
        default="heart-1,pima-3,bsc-2,synthetic1-2",
        help="paper cases to time: heart-1, pima-3 and bsc-2 (K = 3) switch depth about 80, 110 and 120 "
        "times per repetition under USS-UCB, synthetic1-2 (K = 5, small gaps) about 260",
    )
    parser.add_argument("--skip-reproduction", action="store_true")
    args = parser.parse_args(argv)

    print(f"{args.reps} repetitions x {args.horizon} rounds, best of {args.repeats}; {status()}")
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    for case_name in args.cases.split(","):
        costs = paper_case(case_name).stage_costs
        for label, policy in (("USS-UCB (α = 0.51)", USSUCB(costs)), ("USS-KL-UCB (α = 1)", USSKLUCB(costs))):
            _report(case_name, label, _throughput(case_name, policy, args.reps, args.horizon, args.repeats))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")

    if not args.skip_reproduction:
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            reproduce(folder)
            wall = time.perf_counter() - started
        verdict = "meets" if wall <= TARGET_REPRODUCTION else "MISSES"
        print(
            f"\npaper reproduction (100 reps x 10000 rounds, all figures): {wall:.1f} s wall time "
            f"({verdict} the {TARGET_REPRODUCTION:.0f} s target, {wall / TARGET_REPRODUCTION:.2f} of it)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
