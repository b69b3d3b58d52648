"""Data for the paper's experiments: generators and bundled datasets, each with its provenance."""

from __future__ import annotations
