"""Reproduce the experiments of Verma et al. (AISTATS 2019) and rewrite ``docs/results.md``.

The same as ``uss-stream reproduce``: every instance of Tables 1-4 is rebuilt, the policies are
replayed (100 repetitions of 10 000 rounds, as in the paper) and the results and figures are written
to ``docs/results.md`` and ``docs/figures/``. Takes well under a minute on two cores.

Run from the repository root::

    .venv/bin/python examples/reproduce_paper.py            # the paper's settings
    .venv/bin/python examples/reproduce_paper.py --reps 10  # a quicker look
"""

from __future__ import annotations

import argparse
from pathlib import Path

from uss_stream.reproduce import reproduce


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs"))
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--horizon", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    done = reproduce(args.out, reps=args.reps, horizon=args.horizon, seed=args.seed, progress=True)
    print(f"wrote {done.results} and {len(done.figures)} figures in {done.wall_time:.0f} s")


if __name__ == "__main__":
    main()
