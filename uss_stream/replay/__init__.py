"""Offline evaluation: the regret replay and its siblings, the log, input and memory checks.

:func:`replay` runs policies on a logged matrix of stage outputs and returns a
:class:`ReplayResult` (regret against the best fixed depth, depths, labels used);
:func:`replay_piecewise` does the same on a stream whose log changes mid-way.
"""

from __future__ import annotations

from uss_stream.replay.engine import replay, replay_piecewise
from uss_stream.replay.result import PiecewiseReplayResult, ReplayResult

__all__ = ["PiecewiseReplayResult", "ReplayResult", "replay", "replay_piecewise"]
