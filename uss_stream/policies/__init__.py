"""Depth-selection policies for a cost-ordered cascade, one per module.

Every policy follows :class:`~uss_stream.policies.base.Policy`: ``select()`` returns a depth,
``update(outputs)`` learns from the outputs of the queried stages, ``run(outputs_2d)`` replays a
stream, ``decide_many`` evaluates the same rule on many states (used by the replay engine).
"""

from __future__ import annotations

from uss_stream.policies.base import Policy
from uss_stream.policies.fixed_depth import FixedDepth
from uss_stream.policies.hanawal2017 import Hanawal2017WD
from uss_stream.policies.oracle import Oracle
from uss_stream.policies.supervised_ucb import SupervisedUCB
from uss_stream.policies.uss_ucb import USSUCB

__all__ = ["USSUCB", "FixedDepth", "Hanawal2017WD", "Oracle", "Policy", "SupervisedUCB"]
