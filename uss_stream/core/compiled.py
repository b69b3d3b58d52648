"""The optional compiled kernels: ``uss-stream[fast]`` installs ``uss_stream_kernels`` (Rust).

The package is complete without them: every kernel has a pure Python/NumPy counterpart that makes
the same decisions to the bit (the tests run both on the same seeds), and that counterpart runs
when the module is not installed, was built for another interface version, or when the
environment variable ``USS_STREAM_PURE`` is set to ``1`` (read at every call, so a test or a
benchmark can switch paths within one process). What the kernels do:

* the batch decide-and-update loop of the label-free policies with plain counts (USS-UCB,
  USS-KL-UCB, Hanawal et al.'s Algorithm 2, a fixed depth): the replay's repetitions and the
  service's batches (:func:`uss_stream.policies.kernel.speculate`);
* the outputs-mode codec of the Kafka service (decoding the events and encoding the decisions),
  un-keyed and keyed (``--key-from record-key``: the keyed policy decides between the two).

Examples
--------
>>> import os
>>> os.environ["USS_STREAM_PURE"] = "1"
>>> kernels() is None
True
>>> del os.environ["USS_STREAM_PURE"]
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["INTERFACE", "PURE_VARIABLE", "kernels", "status"]

#: The environment variable that forces the pure Python/NumPy path when set to ``1``.
PURE_VARIABLE = "USS_STREAM_PURE"
#: The version of ``uss_stream_kernels`` whose functions this package calls (the kernels/ crate's).
INTERFACE = "0.2.0"

_loaded: list[ModuleType | None] = []


def _load() -> ModuleType | None:
    if not _loaded:
        try:
            module = importlib.import_module("uss_stream_kernels")
        except ImportError:
            module = None
        if module is not None and getattr(module, "__version__", None) != INTERFACE:
            module = None
        _loaded.append(module)
    return _loaded[0]


def kernels() -> ModuleType | None:
    """The ``uss_stream_kernels`` module if it is installed, of :data:`INTERFACE`, and not switched
    off by :data:`PURE_VARIABLE`; else ``None`` (the pure path decides)."""
    if os.environ.get(PURE_VARIABLE, "") == "1":
        return None
    return _load()


def status() -> str:
    """One line saying which path decides, and why (for logs and benchmarks).

    >>> status().split(":")[0] in {"compiled kernels", "pure Python/NumPy"}
    True
    """
    if os.environ.get(PURE_VARIABLE, "") == "1":
        return f"pure Python/NumPy: {PURE_VARIABLE}=1"
    module = _load()
    if module is None:
        return (
            f"pure Python/NumPy: uss_stream_kernels {INTERFACE} is not installed "
            "(pip install 'uss-stream[fast]')"
        )
    return f"compiled kernels: uss_stream_kernels {module.__version__}"
