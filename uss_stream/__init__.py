"""uss-stream: decide per event how deep to query a cost-ordered cascade, without labels."""

from __future__ import annotations

__version__ = "0.1.0"
