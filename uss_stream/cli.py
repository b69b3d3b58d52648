"""The ``uss-stream`` command line: one subcommand per use of the product.

Each subcommand lives in its own module and exposes ``register(subparsers)``, which adds its
parser and sets ``handler`` (a function ``args -> exit code``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser"]

#: Modules that contribute subcommands, in the order ``--help`` lists them.
COMMAND_MODULES = (
    "uss_stream.commands.replay",
    "connectors.kafka.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uss-stream",
        description="Decide per event how deep to query a cost-ordered cascade, without labels.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (ValueError, FileNotFoundError) as error:
        print(f"uss-stream {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
