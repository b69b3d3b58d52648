"""``uss-stream demo``: USS-UCB on the paper's BSC stream, no setup and no Kafka needed."""

from __future__ import annotations

import argparse

import numpy as np

from uss_stream.datasets.bsc import BSC_CASES, bsc_instance, generate_bsc
from uss_stream.policies import USSUCB


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run USS-UCB on the synthetic BSC stream")
    parser.add_argument("--case", type=int, default=2, choices=sorted(BSC_CASES))
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    instance = bsc_instance(args.case)
    outputs, _ = generate_bsc(args.events, seed=args.seed)
    policy = USSUCB(stage_costs=instance.stage_costs.tolist(), alpha=0.51)
    depths = policy.run(outputs)
    counts = np.bincount(depths, minlength=instance.n_stages + 1)[1:]
    regret = float(instance.gaps[depths - 1].sum())
    print(f"BSC case {args.case}: {args.events} events, optimal depth {instance.optimal_depth}")
    for depth, count in enumerate(counts, start=1):
        print(f"  depth {depth}: {count:6d} events ({count / args.events:.1%})")
    print(f"  mean acquisition cost {instance.cumulative_costs[depths - 1].mean():.4f}")
    print(f"  cumulative pseudo-regret {regret:.2f}")
    return 0
