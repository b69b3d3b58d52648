"""Connectors that run uss-stream's depth-selection policies on streaming platforms.

One sub-package per platform; :mod:`connectors.kafka` is the Kafka service.
"""

from __future__ import annotations
