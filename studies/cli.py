"""``uss-stream reproduce``: rerun the paper's experiments and rewrite ``results.md`` and its figures."""

from __future__ import annotations

import argparse

from uss_stream.reproduce import reproduce


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="rerun the paper's experiments (Tables 1-4, Figs. 2-4); write results.md and figures/",
        description=(
            "Rebuild every instance of Verma et al. (AISTATS 2019), replay the policies and write "
            "OUT/results.md and OUT/figures/*.png (staged, then moved into place)."
        ),
    )
    parser.add_argument("--out", default="docs", help="output folder (default: docs)")
    parser.add_argument("--reps", type=int, default=100, help="repetitions per replay (default: 100)")
    parser.add_argument("--horizon", type=int, default=10_000, help="rounds per repetition (default: 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the row sampling (default: 0)")
    parser.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    done = reproduce(
        args.out, reps=args.reps, horizon=args.horizon, seed=args.seed, progress=not args.no_progress
    )
    print(f"wrote {done.results} and {len(done.figures)} figures in {done.wall_time:.0f} s")
    return 0
