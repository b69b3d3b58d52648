"""Both decision paths in one test run: the pure Python/NumPy path and the compiled kernels.

``uss_stream.core.compiled`` reads ``USS_STREAM_PURE`` at every call, so a test switches paths
within the process: :func:`on_path` sets it for a block (usable inside Hypothesis tests, which
refuse function-scoped fixtures), and :data:`PATHS` parametrizes a test over both.

The compiled path needs ``uss_stream_kernels`` (``make setup`` builds it where cargo is on PATH).
Without it a test of that path is skipped with the reason, except in CI (``CI`` is ``true``, ``1``
or ``yes``; ``make test`` sets it), where it fails: a missing kernel never passes as a green run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from tests import needs
from uss_stream.core import compiled

#: The two paths, as test parameters.
PATHS = ("pure", "compiled")


def require_kernels() -> None:
    """Skip (outside CI) or fail (in CI) unless the compiled kernels are installed (:mod:`tests.needs`)."""
    if compiled._load() is None:
        needs.missing(
            f"uss_stream_kernels {compiled.INTERFACE} is not installed: `make setup` builds it where "
            "cargo is on PATH (pip install -e ./kernels)"
        )


@contextlib.contextmanager
def on_path(path: str) -> Iterator[None]:
    """Decide through ``path`` (``"pure"`` or ``"compiled"``) inside the block."""
    if path == "compiled":
        require_kernels()
    before = os.environ.get(compiled.PURE_VARIABLE)
    os.environ[compiled.PURE_VARIABLE] = "1" if path == "pure" else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ[compiled.PURE_VARIABLE]
        else:
            os.environ[compiled.PURE_VARIABLE] = before
