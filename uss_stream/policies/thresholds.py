"""The practitioners' early-exit rules: stop at the first stage that is sure enough, by a threshold.

Three sequential policies (:class:`~uss_stream.policies.stagewise.SequentialPolicy`), none of which
reads a label:

* :class:`ConfidenceThreshold`: stop at the first stage whose top class probability reaches ``τ``
  (0.9 by default, the usual early-exit setting; BranchyNet, Teerapittayanon et al., ICPR 2016,
  exits on a threshold of the same kind);
* :class:`EntropyThreshold`: stop at the first stage whose class probabilities have an entropy
  below ``S`` (DeeBERT, Xin et al., ACL 2020);
* :class:`ThresholdBandit`: learn ``τ`` online among a few arms, without labels, as CeeBERT does
  (Bajpai and Hanawal, *CeeBERT: Cross-Domain Inference in Early Exit BERT*, Findings of ACL 2024,
  arXiv 2405.15039): each event plays one threshold chosen by UCB1 and the threshold earns the
  answering stage's confidence minus the cost of the stages asked.

They are decision rules, not estimates: a threshold says nothing about whether the stages are
calibrated, so a stage that is sure and wrong stops the event as well as one that is sure and
right. The value report (``docs/evidence/value.md``) compares them with the disagreement-based
policies on real cascades. Each learns the whole stream's disagreement counts as it goes (for the
cascade's summary and the WD monitor); the bandit also keeps, per arm, how often it was played
and the sum of its rewards. Every count is JSON and adds across workers.
"""

from __future__ import annotations

import abc
import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uss_stream.core.schema import MAX_COUNT
from uss_stream.core.validation import check_positive
from uss_stream.policies.stagewise import SequentialPolicy, checked_confidence, entropy_of

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_ARMS", "ConfidenceThreshold", "EntropyThreshold", "ThresholdBandit"]

#: The thresholds :class:`ThresholdBandit` chooses among by default.
DEFAULT_ARMS = (0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)


class _StoppingRule(SequentialPolicy):
    """``begin``/``step``/``cancel`` of a rule that stops at the first stage :meth:`_stops` accepts.

    Stage ``K`` always ends the event (``reason`` ``"last stage"``); an earlier stage the rule
    accepts ends it with ``reason`` ``"threshold"``. A stage that abstained (confidence ``None``
    or NaN) is never accepted. The event's outputs are counted (disagreements) when it ends.
    """

    def __init__(self, stage_costs: Sequence[float]) -> None:
        super().__init__(stage_costs)
        self._outputs: list[Any] | None = None
        self._last = self.n_stages - 1

    def begin(self) -> None:
        """Start an event; then call :meth:`step` after each queried stage."""
        if self._outputs is not None:
            raise RuntimeError("begin() called again before the event ended: step() until it returns False")
        self._start()
        self._outputs = []

    def step(self, output: Any, confidence: float | None, proba: Any = None) -> bool:
        """Report the next stage's output, confidence and class probabilities; ``True``: ask the next.

        ``confidence`` is the stage's largest class probability in ``[0, 1]`` (``None`` or NaN if it
        abstained); ``proba`` its class probabilities (read by :class:`EntropyThreshold` only). A
        bad value raises ``ValueError`` before anything is counted.
        """
        outputs = self._outputs
        if outputs is None:
            raise RuntimeError("step() called without begin()")
        if not (type(confidence) is float and 0.0 <= confidence <= 1.0):
            confidence = checked_confidence(confidence)
        stage = len(outputs)
        if stage == self._last:
            outputs.append(output)
            return self._end("last stage", confidence)
        stops = self._stops(confidence, proba)
        outputs.append(output)
        return self._end("threshold", confidence) if stops else True

    def cancel(self) -> None:
        """Withdraw the event in progress (e.g. a stage failed): nothing is learned."""
        if self._outputs is None:
            raise RuntimeError("cancel() called without an event in progress")
        self._outputs = None

    def _start(self) -> None:
        """Prepare an event (the bandit chooses its threshold here)."""

    @abc.abstractmethod
    def _stops(self, confidence: float, proba: Any) -> bool:
        """Whether a stage before the last, with this confidence and these probabilities, answers."""

    def _learn(self, confidence: float, depth: int) -> None:
        """Learn from an event that ended at ``depth`` with the answering stage's ``confidence``."""

    def _end(self, reason: str, confidence: float) -> bool:
        outputs = self._outputs
        stats = self._stats
        stats.record(outputs)
        stats.decisions += 1
        self._learn(confidence, len(outputs))
        self._outputs = None
        self._reason = reason
        return False

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; all or nothing (a bad document raises ``ValueError``)."""
        stats = self._checked_stats(document)
        self._load_extra(document, stats.decisions)
        self._stats = stats
        self._outputs = None

    def _load_extra(self, document: dict[str, Any], decisions: int) -> None:
        """Check and take what :meth:`state_dict` adds to the counts (nothing for a fixed rule)."""


class ConfidenceThreshold(_StoppingRule):
    """Stop at the first stage whose top class probability is at least ``threshold``.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0`` (``K >= 2``); the rule does not read them.
    threshold
        ``τ`` in ``(0, 1]``: a stage with confidence ``>= τ`` answers.

    Examples
    --------
    >>> from uss_stream.policies import ConfidenceThreshold
    >>> policy = ConfidenceThreshold([0.0, 0.1, 0.3], threshold=0.9)
    >>> confidences = [[0.95, 0.6, 0.99], [0.89, 0.9, 0.7], [0.5, 0.8, 0.6]]
    >>> policy.run([[1, 1, 0], [0, 1, 1], [0, 0, 0]], confidences).tolist()
    [1, 2, 3]
    >>> policy.reason
    'last stage'

    """

    def __init__(self, stage_costs: Sequence[float], threshold: float = 0.9) -> None:
        super().__init__(stage_costs)
        _check_probability(threshold, "threshold")
        self.threshold = threshold

    def _stops(self, confidence: float, proba: Any) -> bool:
        return confidence >= self.threshold

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {"stage_costs": [0.0, 0.5], "threshold": 0.75}


class EntropyThreshold(_StoppingRule):
    """Stop at the first stage whose class probabilities have an entropy (nats) below ``threshold``.

    DeeBERT's exit rule. Given only a stage's top probability ``p`` (no ``proba``), the entropy is
    that of ``(p, 1 - p)``: exact for two classes (then the rule is a confidence threshold), and a
    lower bound with more classes, so the rule then stops at least as early as with the full
    probabilities.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0`` (``K >= 2``); the rule does not read them.
    threshold
        ``S > 0``: a stage whose entropy is ``< S`` answers (``ln 2 ≈ 0.693`` is a coin flip of two
        classes; ``0.325`` is ``(0.9, 0.1)``).

    Examples
    --------
    >>> from uss_stream.policies import EntropyThreshold
    >>> policy = EntropyThreshold([0.0, 0.1], threshold=0.4)
    >>> policy.begin()
    >>> policy.step("a", 0.9, {"a": 0.9, "b": 0.1})       # entropy 0.325: sure enough
    False
    >>> policy.begin()
    >>> policy.step("a", 0.9, {"a": 0.9, "b": 0.05, "c": 0.05})  # entropy 0.394: still below 0.4
    False
    >>> policy.begin()
    >>> policy.step("a", 0.8, [0.8, 0.1, 0.1])             # entropy 0.639: ask stage 2
    True

    """

    def __init__(self, stage_costs: Sequence[float], threshold: float = 0.3) -> None:
        super().__init__(stage_costs)
        check_positive(threshold, "threshold")
        if math.isinf(threshold):
            raise ValueError(f"threshold must be finite, got {threshold!r}")
        self.threshold = threshold

    def _stops(self, confidence: float, proba: Any) -> bool:
        return entropy_of(proba, confidence) < self.threshold

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {"stage_costs": [0.0, 0.5], "threshold": 0.6}


class ThresholdBandit(_StoppingRule):
    """Learn the top-probability threshold online, without labels, as CeeBERT does.

    Each threshold ``τ_a`` of ``thresholds`` is an arm. An event plays one arm: it stops at the
    first stage whose top probability reaches ``τ_a`` (or at stage ``K``), and the arm earns the
    reward ``r = q_d - C_d``, the answering stage's confidence ``q_d`` (0 if it abstained) minus the
    cumulative cost of the stages asked, both in units of one error (the confidence stands for
    the probability of being right, which no label checks). The arm is chosen by UCB1: every arm
    once, in order, then ``argmax_a  r̄_a + explore·w·sqrt(2·ln t / n_a)`` with ``t`` the event's
    round, ``n_a`` the arm's plays, ``r̄_a`` its mean reward and ``w = 1 + C_K`` the width of the
    reward's range (ties: the lower threshold).

    CeeBERT (Bajpai and Hanawal, Findings of ACL 2024) plays a UCB bandit over a set of thresholds
    with a reward of the same form, the exit's confidence less a cost per layer processed; this
    policy follows that rule on a cascade's stages and costs.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0`` (``K >= 2``), in units of one error.
    thresholds
        The arms: increasing thresholds in ``(0, 1]``.
    explore
        Scale ``> 0`` of the exploration bonus.

    Examples
    --------
    Stage 1 is sure (0.99) on 70% of the events and unsure (0.6) on the rest; stage 2 costs 0.05
    and is sure (0.95). Stopping where stage 1 is sure and asking stage 2 elsewhere earns most
    (mean reward 0.963, against 0.873 for always stopping and 0.9 for always asking), and UCB1's
    exploration keeps playing the others a logarithmic share of the rounds:

    >>> import numpy as np
    >>> from uss_stream.policies import ThresholdBandit
    >>> sure = np.random.default_rng(0).random(3000) < 0.7
    >>> confidences = np.stack([np.where(sure, 0.99, 0.6), np.full(3000, 0.95)], axis=1)
    >>> policy = ThresholdBandit([0.0, 0.05], thresholds=(0.5, 0.9, 1.0))
    >>> depths = policy.run(np.zeros((3000, 2), dtype=int), confidences)
    >>> policy.contexts()[["threshold", "plays"]]
       threshold  plays
    0        0.5    501
    1        0.9   1822
    2        1.0    677

    """

    def __init__(
        self, stage_costs: Sequence[float], thresholds: Sequence[float] = DEFAULT_ARMS, explore: float = 1.0
    ) -> None:
        super().__init__(stage_costs)
        if isinstance(thresholds, (str, bytes)) or not isinstance(thresholds, Sequence) or not thresholds:
            raise ValueError(f"thresholds must be a non-empty sequence in (0, 1], got {thresholds!r}")
        for tau in thresholds:
            _check_probability(tau, "thresholds")
        if any(b <= a for a, b in itertools.pairwise(thresholds)):
            raise ValueError(f"thresholds must increase, got {list(thresholds)}")
        check_positive(explore, "explore")
        self.thresholds = thresholds
        self.explore = explore
        self._arms = [float(tau) for tau in thresholds]
        self._plays = [0] * len(thresholds)
        self._rewards = [0.0] * len(thresholds)
        self._width = 1.0 + self.cumulative_costs[-1]
        self._arm = 0

    @property
    def arm(self) -> float:
        """The threshold of the event in progress (or of the last one)."""
        return self._arms[self._arm]

    def _start(self) -> None:
        plays = self._plays
        if 0 in plays:
            self._arm = plays.index(0)
            return
        scale = self.explore * self._width * math.sqrt(2.0 * math.log(self._stats.decisions + 1))
        rewards = self._rewards
        indices = [rewards[a] / n + scale / math.sqrt(n) for a, n in enumerate(plays)]
        self._arm = indices.index(max(indices))

    def _stops(self, confidence: float, proba: Any) -> bool:
        return confidence >= self._arms[self._arm]

    def _learn(self, confidence: float, depth: int) -> None:
        sure = confidence if confidence == confidence else 0.0
        self._plays[self._arm] += 1
        self._rewards[self._arm] += sure - self._costs[depth - 1]

    def contexts(self) -> pd.DataFrame:
        """One row per arm: ``threshold``, ``plays``, ``mean_reward`` (NaN before its first play)."""
        import pandas as pd  # here, not at import: a policy decides without pandas (e.g. the service)

        return pd.DataFrame(
            {
                "threshold": self._arms,
                "plays": self._plays,
                "mean_reward": [r / n if n else math.nan for r, n in zip(self._rewards, self._plays)],
            }
        )

    def state_dict(self) -> dict[str, Any]:
        """The whole stream's disagreement counts and, per arm, its plays and summed rewards (JSON)."""
        return {**super().state_dict(), "arms": {"plays": list(self._plays), "rewards": list(self._rewards)}}

    def _load_extra(self, document: dict[str, Any], decisions: int) -> None:
        arms = document.get("arms")
        n = len(self._arms)
        if not isinstance(arms, dict) or set(arms) != {"plays", "rewards"}:
            raise ValueError("state document: arms must be an object with plays and rewards")
        plays, rewards = arms["plays"], arms["rewards"]
        if not (isinstance(plays, list) and isinstance(rewards, list) and len(plays) == len(rewards) == n):
            raise ValueError(f"state document: arms.plays and arms.rewards must hold {n} values each")
        if any(type(p) is not int or not 0 <= p <= MAX_COUNT for p in plays) or sum(plays) != decisions:
            raise ValueError(f"state document: arms.plays must be counts summing to the {decisions} events")
        low = -self.cumulative_costs[-1]
        for p, r in zip(plays, rewards):
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not low * p - 1e-9 <= r <= p + 1e-9:
                raise ValueError(f"state document: arms.rewards must sum rewards in [{low}, 1], got {r!r}")
        self._plays = list(plays)
        self._rewards = [float(r) for r in rewards]

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {"stage_costs": [0.0, 0.5], "thresholds": (0.8, 0.95), "explore": 0.5}


def _check_probability(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
