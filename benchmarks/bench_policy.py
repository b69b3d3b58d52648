"""Streaming select+update throughput of USS-UCB against a naive per-step numpy implementation.

Run: ``python -m benchmarks.bench_policy``. Both implementations see the same stream and must
choose the same depths (checked); the figure of merit is the ratio of their steps per second,
measured in the same run, for K = 3 and K = 8 on a stream where depth 1 is optimal, and with
``--hard`` on streams converged to every depth of a K = 3 and a K = 5 cascade (issue 15's target:
>= 8x on each).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from uss_stream.policies import USSUCB


class NaiveUSSUCB:
    """USS-UCB recomputing every p̂, Ψ and both sets with numpy at each step (the baseline)."""

    def __init__(self, stage_costs: list[float], alpha: float = 0.51) -> None:
        self.costs = np.cumsum(np.asarray(stage_costs, dtype=float))
        self.alpha = alpha
        k = len(stage_costs)
        self.queried = np.zeros(k)
        self.disagreements = np.zeros((k, k))
        self.t = 0
        self.upper_mask = np.triu(np.ones((k, k), dtype=bool), k=1)

    def select(self) -> int:
        self.t += 1
        k = self.costs.size
        if self.t == 1:
            return k
        with np.errstate(divide="ignore", invalid="ignore"):
            p_hat = self.disagreements / self.queried[None, :]
            psi = np.sqrt(self.alpha * np.log(self.t) / self.queried)[None, :]
        upper = np.where(self.queried[None, :] > 0, p_hat + psi, np.inf)
        gaps = self.costs[None, :] - self.costs[:, None]
        beats = (gaps > upper) | ~self.upper_mask
        in_high = beats.all(axis=1)
        in_low = ((gaps <= upper) | ~self.upper_mask).all(axis=0)
        admissible = np.flatnonzero(in_high & in_low)
        return int(admissible[0]) + 1 if admissible.size else k

    def update(self, outputs: np.ndarray) -> None:
        depth = len(outputs)
        self.queried[:depth] += 1
        differ = outputs[:, None] != outputs[None, :]
        self.disagreements[:depth, :depth] += np.triu(differ, k=1)


def make_stream(n_stages: int, n_events: int, seed: int, depth: int = 1) -> tuple[np.ndarray, list[float]]:
    """Binary outputs with error rates falling along the cascade; costs make ``depth`` optimal.

    Stages up to ``depth`` cost 0.01 each (less than the disagreements they remove), the later
    ones 0.5 (more than any disagreement), so the policy converges to ``depth``.
    """
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_events)
    error_rates = np.linspace(0.3, 0.05, n_stages)
    wrong = rng.random((n_events, n_stages)) < error_rates
    costs = [0.0] + [0.01] * (depth - 1) + [0.5] * (n_stages - depth)
    return truth[:, None] ^ wrong, costs


def measure(n_stages: int, n_events: int, seed: int = 0, depth: int = 1) -> dict[str, float]:
    outputs, costs = make_stream(n_stages, n_events, seed, depth)
    rows = outputs.tolist()

    fast = USSUCB(stage_costs=costs)
    start = time.perf_counter()
    fast_depths = []
    for row in rows:
        depth = fast.select()
        fast.update(row[:depth])
        fast_depths.append(depth)
    fast_seconds = time.perf_counter() - start

    naive = NaiveUSSUCB(costs)
    start = time.perf_counter()
    naive_depths = []
    for row in outputs:
        depth = naive.select()
        naive.update(row[:depth])
        naive_depths.append(depth)
    naive_seconds = time.perf_counter() - start

    if fast_depths != naive_depths:
        raise AssertionError(
            "the naive baseline and USSUCB disagree: the benchmark compares different things"
        )
    return {
        "K": n_stages,
        "events": n_events,
        "uss_stream_steps_per_s": n_events / fast_seconds,
        "naive_steps_per_s": n_events / naive_seconds,
        "ratio": naive_seconds / fast_seconds,
        "mean_depth": float(np.mean(fast_depths)),
        "final_depth": float(np.mean(fast_depths[-n_events // 10 :])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--hard", action="store_true", help="streams converged to every depth, K = 3 and 5")
    args = parser.parse_args()
    cases = [(k, d) for k in (3, 5) for d in range(1, k + 1)] if args.hard else [(3, 1), (8, 1)]
    print(
        "| K | optimal depth | events | uss-stream steps/s | naive steps/s | ratio | mean depth | last 10% |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n_stages, depth in cases:
        r = measure(n_stages, args.events, depth=depth)
        print(
            f"| {r['K']} | {depth} | {r['events']} | {r['uss_stream_steps_per_s']:,.0f} | "
            f"{r['naive_steps_per_s']:,.0f} | {r['ratio']:.1f}x | {r['mean_depth']:.2f} | "
            f"{r['final_depth']:.2f} |"
        )


if __name__ == "__main__":
    main()
