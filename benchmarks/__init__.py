"""Benchmarks: `python -m benchmarks.NAME` runs one, `python -m benchmarks` all that need no broker.

Figures are ratios against a baseline measured in the same run.
"""
