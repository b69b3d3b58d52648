"""Depth-selection policies for a cost-ordered cascade, one per module.

Every policy follows :class:`~uss_stream.policies.base.Policy`: ``select()`` returns a depth,
``update(outputs)`` learns from the outputs of the queried stages, ``run(outputs_2d)`` replays a
stream, ``decide_many`` evaluates the same rule on many states (used by the replay engine).

The paper's USS-UCB and Hanawal et al.'s Algorithm 2; beyond the paper, USS-TS (Thompson sampling,
counter-based randomness), USS-KL-UCB (KL confidence bounds, the River cascade's default) and the
sequential SequentialKLUCB (stop or continue after each stage, by context: ``policy.sequential``); the
practitioners' sequential early-exit rules ConfidenceThreshold, EntropyThreshold and ThresholdBandit
(a confidence threshold learned online without labels, as CeeBERT does). Every
learning policy takes ``discount=`` for drift-aware counts (:mod:`uss_stream.core.forgetting`).
Command lines name them by spec (``uss-kl-ucb``, ``uss-ucb:alpha=0.51``, ``fixed:depth=2``, ...):
:mod:`uss_stream.policies.specs`, one parser for ``uss-stream replay`` and the Kafka service.
"""

from __future__ import annotations

from uss_stream.policies.audited_uss import AuditedUSS
from uss_stream.policies.base import Policy
from uss_stream.policies.fixed_depth import FixedDepth
from uss_stream.policies.hanawal2017 import Hanawal2017WD
from uss_stream.policies.oracle import Oracle
from uss_stream.policies.sequential_kl_ucb import SequentialKLUCB
from uss_stream.policies.stagewise import SequentialPolicy
from uss_stream.policies.supervised_ucb import SupervisedUCB
from uss_stream.policies.thresholds import ConfidenceThreshold, EntropyThreshold, ThresholdBandit
from uss_stream.policies.uee_ucb import UEEUCB
from uss_stream.policies.uss_kl_ucb import USSKLUCB
from uss_stream.policies.uss_ts import USSTS
from uss_stream.policies.uss_ucb import USSUCB

__all__ = [
    "UEEUCB",
    "USSKLUCB",
    "USSTS",
    "USSUCB",
    "AuditedUSS",
    "ConfidenceThreshold",
    "EntropyThreshold",
    "FixedDepth",
    "Hanawal2017WD",
    "Oracle",
    "Policy",
    "SequentialKLUCB",
    "SequentialPolicy",
    "SupervisedUCB",
    "ThresholdBandit",
]
