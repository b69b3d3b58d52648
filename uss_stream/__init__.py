"""uss-stream: decide per event how deep to query a cost-ordered cascade, without labels."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uss_stream.cascade.active import ActiveCascadeClassifier
    from uss_stream.cascade.classifier import CascadeClassifier
    from uss_stream.cascade.stage import Stage

__version__ = "0.1.0"

__all__ = ["ActiveCascadeClassifier", "CascadeClassifier", "Stage", "__version__"]

# The River estimators are imported on first use, so that `import uss_stream.policies` (the Kafka
# service, the replay CLI) does not pay for importing River's model modules.
_LAZY = {
    "ActiveCascadeClassifier": "uss_stream.cascade.active",
    "CascadeClassifier": "uss_stream.cascade.classifier",
    "Stage": "uss_stream.cascade.stage",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'uss_stream' has no attribute {name!r}")
