"""Counts and checks: disagreement statistics, forgetting, instances, argument validation."""
