"""``python -m studies.reproduce``: rerun the paper's experiments; rewrite ``results.md`` and figures."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from studies.reproduce import reproduce

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m studies.reproduce",
        description=(
            "Rebuild every instance of Verma et al. (AISTATS 2019), replay the policies and write "
            "OUT/results.md and OUT/figures/*.png (staged, then moved into place)."
        ),
    )
    parser.add_argument("--out", default="docs/evidence", help="output folder (default: docs/evidence)")
    parser.add_argument("--reps", type=int, default=100, help="repetitions per replay (default: 100)")
    parser.add_argument("--horizon", type=int, default=10_000, help="rounds per repetition (default: 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the row sampling (default: 0)")
    parser.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the reproduction; returns the process exit code (2 on bad parameters, nothing written)."""
    args = build_parser().parse_args(argv)
    try:
        done = reproduce(
            args.out, reps=args.reps, horizon=args.horizon, seed=args.seed, progress=not args.no_progress
        )
    except (ValueError, FileNotFoundError) as error:
        print(f"reproduce: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {done.results} and {len(done.figures)} figures in {done.wall_time:.0f} s")
    return 0
