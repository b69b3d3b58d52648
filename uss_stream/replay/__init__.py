"""Offline evaluation: the regret replay and its siblings, the log, input and memory checks."""
