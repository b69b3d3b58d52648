"""Keyed batches against un-keyed ones: ``KeyedPolicy.decide_many`` and ``decide_batch`` on the same events.

Run: ``python -m benchmarks.bench_keyed [--events N] [--keys N] [--batch N] [--repeat R]``. The events
carry keys drawn from a Zipf(1.1) law over ``--keys`` keys (the heaviest key gets about a fifth of
them, most keys a few); both deciders get the same outputs in batches of ``--batch`` events, as the
Kafka service hands them over. It prints the CPU time per event of each (the fastest of ``--repeat``
runs; CPU time, which time spent waiting for a core on a shared machine does not inflate) and
their ratio, and the resident memory per live key of the keyed policy.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

from uss_stream.policies import USSKLUCB, KeyedPolicy
from uss_stream.policies.batch import decide_batch

COSTS = [0.0, 0.08, 0.1]


def keyed_events(n_events: int, n_keys: int, seed: int = 0) -> tuple[list[str], list[int]]:
    """``n_events`` keys (Zipf over ``n_keys``) and their flat K = 3 outputs."""
    rng = np.random.default_rng(seed)
    ranks = rng.zipf(1.1, size=4 * n_events)
    ranks = ranks[ranks <= n_keys][:n_events]
    truth = rng.integers(0, 2, n_events)
    outputs = np.stack([truth ^ (rng.random(n_events) < p) for p in (0.1, 0.05, 0.0)], axis=1)
    return [f"device-{rank}" for rank in ranks.tolist()], outputs.ravel().tolist()


def cpu_per_event(run, n_events: int) -> float:
    """CPU microseconds per event of ``run()``."""
    gc.collect()
    start = time.process_time()
    run()
    return (time.process_time() - start) / n_events * 1e6


def resident() -> int:
    """Resident memory of this process, in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    keys, flat = keyed_events(args.events, args.keys)
    batches = [(b, min(b + args.batch, args.events)) for b in range(0, args.events, args.batch)]

    def keyed_run() -> None:
        keyed = KeyedPolicy(USSKLUCB(COSTS))
        for a, b in batches:
            keyed.decide_many(keys[a:b], flat[3 * a : 3 * b])

    def plain_run() -> None:
        plain = USSKLUCB(COSTS)
        for a, b in batches:
            decide_batch(plain, flat[3 * a : 3 * b])

    keyed_cpu = min(cpu_per_event(keyed_run, args.events) for _ in range(args.repeat))
    plain_cpu = min(cpu_per_event(plain_run, args.events) for _ in range(args.repeat))
    gc.collect()
    before = resident()
    held = KeyedPolicy(USSKLUCB(COSTS))
    for a, b in batches:
        held.decide_many(keys[a:b], flat[3 * a : 3 * b])
    gc.collect()
    per_key = (resident() - before) / len(held)
    print(f"{args.events} events, {len(held)} live keys of {args.keys}, batches of {args.batch}, K = 3")
    print(f"keyed decide_many     {keyed_cpu:5.2f} us CPU per event")
    print(f"un-keyed decide_batch {plain_cpu:5.2f} us CPU per event")
    print(f"keyed / un-keyed      {keyed_cpu / plain_cpu:5.2f}")
    print(f"resident memory per live key: {per_key:.0f} bytes")


if __name__ == "__main__":
    main()
