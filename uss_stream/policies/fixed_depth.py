"""Always query the same number of stages: the baseline every adaptive policy is measured against."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from uss_stream.policies.base import CountStates, Policy

__all__ = ["FixedDepth"]


class FixedDepth(Policy):
    """Query stages ``1..depth`` for every event.

    Parameters
    ----------
    depth
        The depth, ``1 <= depth <= K``.
    stage_costs
        Per-stage costs; ``None`` means a cascade of exactly ``depth`` free stages.

    Examples
    --------
    >>> from uss_stream.policies import FixedDepth
    >>> policy = FixedDepth(2, stage_costs=[0.0, 0.1, 0.3])
    >>> policy.run([[1, 0, 1], [0, 0, 1]]).tolist()
    [2, 2]

    """

    def __init__(self, depth: int, stage_costs: Sequence[float] | None = None) -> None:
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
            raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
        super().__init__([0.0] * int(depth) if stage_costs is None else stage_costs)
        if depth > self.n_stages:
            raise ValueError(f"depth must be <= the number of stages {self.n_stages}, got {depth}")
        self.depth = int(depth)
        self.stage_costs = stage_costs

    def _decide(self, t: int) -> int:
        return self.depth

    def _decide_many(self, states: CountStates) -> np.ndarray:
        rounds = states.rounds
        return np.full(len(rounds), self.depth, dtype=np.int64)

    def _certify_many(self, states: CountStates, depths: np.ndarray, widths: np.ndarray) -> np.ndarray:
        return np.broadcast_to((depths == self.depth)[:, None], widths.shape)

    def _compiled_rule(self) -> tuple[str, tuple[float, bool, bool]] | None:
        return ("fixed", (float(self.depth), False, False))

    @classmethod
    def _unit_test_params(cls):
        yield {"depth": 1, "stage_costs": [0.0, 0.2]}
