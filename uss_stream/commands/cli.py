"""The ``uss-stream`` command line: one subcommand per use of the product.

Each subcommand lives in its own module and exposes ``register(subparsers)``, which adds its
parser and sets ``handler`` (a function ``args -> exit code``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from uss_stream.core.extras import missing_extra
from uss_stream.core.units import CostScaleWarning

__all__ = ["main", "build_parser"]

#: Modules that contribute subcommands, in the order ``--help`` lists them.
COMMAND_MODULES = (
    "uss_stream.commands.replay",
    "uss_stream_kafka.cli.commands",
)

#: Subcommands that need an extra, by module: the name they are listed under when it is missing.
OPTIONAL_COMMANDS = {"uss_stream_kafka.cli.commands": "kafka"}

#: A module of each optional subcommand's extra, imported first: the subcommand's own module
#: imports its dependencies lazily, so that it would load without them (the service decodes
#: every record with ``msgspec``).
EXTRA_MODULES = {"uss_stream_kafka.cli.commands": "msgspec"}

#: Subcommands whose command line needs only their own module, by name: ``uss-stream kafka ...``
#: starts without importing the other subcommands' modules (``replay``'s imports pandas).
ALONE = {"kafka": "uss_stream_kafka.cli.commands"}


def build_parser(modules: Sequence[str] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """The parser of the subcommands of ``modules`` (every subcommand by default)."""
    parser = argparse.ArgumentParser(
        prog="uss-stream",
        description="Decide per event how deep to query a cost-ordered cascade, without labels.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in modules:
        try:
            if name in EXTRA_MODULES:
                importlib.import_module(EXTRA_MODULES[name])
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if missing_extra(error) is None:
                raise
            _register_unavailable(subparsers, OPTIONAL_COMMANDS[name], error)
        else:
            module.register(subparsers)
    return parser


def _register_unavailable(
    subparsers: argparse._SubParsersAction, command: str, error: ModuleNotFoundError
) -> None:
    """A subcommand whose extra is not installed: listed, and says which extra to install when run."""
    parser = subparsers.add_parser(command, help=f"(not installed) {missing_extra(error)}", add_help=False)
    parser.add_argument("rest", nargs=argparse.REMAINDER)

    def unavailable(args: argparse.Namespace) -> int:
        raise error

    parser.set_defaults(handler=unavailable)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    alone = ALONE.get(words[0]) if words else None
    parser = build_parser(COMMAND_MODULES if alone is None else (alone,))
    args = parser.parse_args(words)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings(args.command, warnings.showwarning)
            return int(args.handler(args) or 0)
    except (ValueError, FileNotFoundError) as error:
        print(f"uss-stream {args.command}: error: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        message = missing_extra(error)
        if message is None:
            raise
        print(f"uss-stream {args.command}: error: {message}", file=sys.stderr)
        return 2


def _one_line_warnings(command: str, show: Callable[..., Any]) -> Callable[..., Any]:
    """``warnings.showwarning`` that prints a :class:`~uss_stream.core.units.CostScaleWarning` as
    one line, ``uss-stream COMMAND: warning: ...``, and hands any other warning to ``show``."""

    def show_warning(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, CostScaleWarning):
            print(f"uss-stream {command}: warning: {message}", file=sys.stderr)
        else:
            show(message, category, *args, **kwargs)

    return show_warning
