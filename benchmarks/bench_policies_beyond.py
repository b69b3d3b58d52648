"""Speed of the policies beyond the paper: streaming select+update and vectorised replay.

Run: ``python -m benchmarks.bench_policies_beyond``. The streaming part times ``select`` +
``update`` per event on a stream where depth 1 is optimal (the state most events of a long stream
are decided in), after a warm-up that imports scipy; the replay part times
:func:`uss_stream.replay.engine.replay` (100 repetitions of 10 000 rounds, the paper's protocol) on
paper cases. USS-UCB is the reference for both.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from uss_stream.datasets.paper import paper_case
from uss_stream.policies import USSKLUCB, USSTS, USSUCB, Policy
from uss_stream.replay.engine import replay

#: The policies compared, built for given per-stage costs.
POLICIES = {
    "USS-UCB": lambda costs: USSUCB(costs),
    "USS-TS": lambda costs: USSTS(costs, seed=0),
    "USS-KL-UCB": lambda costs: USSKLUCB(costs),
    "USS-UCB (γ=0.999)": lambda costs: USSUCB(costs, discount=0.999),
    "USS-TS (γ=0.999)": lambda costs: USSTS(costs, seed=0, discount=0.999),
    "USS-KL-UCB (γ=0.999)": lambda costs: USSKLUCB(costs, discount=0.999),
}
REPLAY_CASES = ("bsc-1", "pima-2", "synthetic1-2")


def stream(n_stages: int, n_events: int, seed: int = 0) -> tuple[list[list[int]], list[float]]:
    """Stage 1 wrong 10% of the time, the others right; deeper stages cost more than that buys."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_events)
    outputs = np.stack([truth ^ (rng.random(n_events) < 0.1)] + [truth] * (n_stages - 1), axis=1)
    return outputs.tolist(), [0.0] + [0.5] * (n_stages - 1)


def streaming_microseconds(policy: Policy, rows: list[list[int]]) -> float:
    """Mean time of one select + update, in microseconds (after 1000 untimed events)."""
    for row in rows[:1000]:
        policy.update(row[: policy.select()])
    start = time.perf_counter()
    for row in rows[1000:]:
        policy.update(row[: policy.select()])
    return (time.perf_counter() - start) / (len(rows) - 1000) * 1e6


def replay_seconds(name: str, case: str) -> tuple[float, float]:
    """Wall time of a 100 x 10 000 replay of one policy on a paper case, and its mean final regret."""
    instance = paper_case(case)
    outputs, labels = instance.log()
    start = time.perf_counter()
    result = replay(outputs, labels, policies={name: POLICIES[name](instance.stage_costs)}, reps=100)
    return time.perf_counter() - start, result.final_regret(name)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    args = parser.parse_args()
    print("**Streaming select+update** (µs per event; depth 1 optimal)\n")
    print("| policy | K = 3 | K = 8 |")
    print("|---|---|---|")
    for name, build in POLICIES.items():
        cells = []
        for n_stages in (3, 8):
            rows, costs = stream(n_stages, args.events)
            cells.append(f"{streaming_microseconds(build(costs), rows):.2f}")
        print(f"| {name} | {' | '.join(cells)} |")
    print("\n**Replay** (100 repetitions x 10 000 rounds; seconds, final regret)\n")
    print("| policy | " + " | ".join(REPLAY_CASES) + " |")
    print("|---|" + "---|" * len(REPLAY_CASES))
    for name in POLICIES:
        cells = [
            f"{seconds:.2f} s ({regret:.1f})"
            for seconds, regret in (replay_seconds(name, c) for c in REPLAY_CASES)
        ]
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
