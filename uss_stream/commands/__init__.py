"""Subcommands of the ``uss-stream`` command line, one module each."""

from __future__ import annotations
