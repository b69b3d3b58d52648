"""What the learning metrics add to the service's work, against the decisions themselves (no broker).

Run: ``python -m benchmarks.bench_learning_metrics``.

The service pays for the learning metrics in two places (:mod:`uss_stream_kafka.operations.learning_metrics`):
per partition batch, the cost accounting (:meth:`LearningMetrics.add_costs` on the batch's depth
counts), and once a second at most, :meth:`LearningMetrics.refresh` (every assigned learner's
quantities). Measured in the same run, on learners that decided a K = 3 stream (USS-UCB, outputs
mode, batches of ``--batch`` events): the time to decide a batch (:meth:`process_batch`: decode,
select/update, encode, the least a batch costs the service), the accounting of a batch, and a
refresh of ``--partitions`` learners. Reported: the accounting as a share of the batch, and the
throughput ratio with/without the metrics they imply for a service deciding ``--rate`` events a
second (``1 / (1 + accounting share + refresh seconds per second)``; target >= 0.95). The Kafka
benchmark measures the same ratio end to end (``bench_kafka --learning-off``), with more noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from uss_stream_kafka.operations.learning_metrics import REFRESH_SECONDS, LearningMetrics
from uss_stream_kafka.processing.processors import OutputsProcessor

STAGE_COSTS = [0.0, 0.15, 0.2]


def _values(n: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    rows = np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1)
    return [json.dumps({"id": i, "outputs": row}).encode() for i, row in enumerate(rows.tolist())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--rate", type=float, default=100_000, help="events per second of the service")
    args = parser.parse_args()
    processor = OutputsProcessor(STAGE_COSTS, policy="uss-ucb:alpha=0.51")
    learners = {p: processor.new_learner() for p in range(args.partitions)}
    metrics = LearningMetrics(STAGE_COSTS)
    batches = [_values(args.batch, seed) for seed in range(4)]
    decide, account = [], []
    for b in range(args.batches):
        learner = learners[b % args.partitions]
        started = time.perf_counter()
        result = learner.process_batch(batches[b % len(batches)], 1 << 20)
        decided = time.perf_counter()
        depths = result.depths
        mix = [0] + [depths.count(depth) for depth in range(1, len(STAGE_COSTS) + 1)]
        metrics.add_costs(b % args.partitions, mix)
        account.append(time.perf_counter() - decided)
        decide.append(decided - started)
    refresh = []
    for _ in range(20):
        started = time.perf_counter()
        metrics.refresh(learners)
        refresh.append(time.perf_counter() - started)
    per_batch, per_account, per_refresh = (statistics.median(x) for x in (decide, account, refresh))
    share = per_account / per_batch
    refresh_share = per_refresh / REFRESH_SECONDS  # at most one refresh per REFRESH_SECONDS
    ratio = 1 / (1 + share + refresh_share)
    print(
        f"decide a batch of {args.batch}: {per_batch * 1e3:.2f} ms "
        f"({per_batch / args.batch * 1e6:.2f} us/event); cost accounting: {per_account * 1e6:.1f} us "
        f"per batch ({100 * share:.3f}% of the batch)"
    )
    print(
        f"refresh of {args.partitions} learners: {per_refresh * 1e3:.2f} ms, at most once a second "
        f"({100 * refresh_share:.2f}% of a core)"
    )
    print(f"implied throughput with / without the learning metrics: {ratio:.3f}x   (target >= 0.95)")


if __name__ == "__main__":
    main()
