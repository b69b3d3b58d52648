"""Benchmarks: run one with `python -m benchmarks.NAME`; figures are ratios against a baseline measured in the same run."""
