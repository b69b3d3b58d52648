"""What the labels given to a cascade's ``learn_one`` tell its depth selection.

The stages learn from every label; the selection only from two kinds: the label of an event the
policy stepped on is evidence for the WD monitor (:mod:`uss_stream.labels.wd_monitor`), and the
label a label-asking policy (:class:`~uss_stream.policies.AuditedUSS`) requested goes to that policy.
The label of a decided event also scores the cascade's answer (its accuracy in the summary).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from uss_stream.labels.evidence import LabelEvidence
from uss_stream.labels.wd_monitor import WDMonitor
from uss_stream.policies import Policy
from uss_stream.policies.learning_state import learning_state

__all__ = ["LabelFeedback"]


class LabelFeedback:
    """The last stepped event's outputs and label request, and what the labels taught so far.

    Parameters
    ----------
    policy
        The cascade's own policy (it learns the requested labels).
    cumulative
        ``C_1..C_K``, the cumulative stage costs (for the WD monitor).

    Examples
    --------
    >>> from uss_stream.policies import AuditedUSS
    >>> policy = AuditedUSS(stage_costs=[0.0, 0.5])
    >>> feedback = LabelFeedback(policy, cumulative=(0.0, 0.5))
    >>> policy.select()
    2
    >>> policy.update(["cat", "dog"])           # the stages disagree: the policy asks
    >>> feedback.stepped(["cat", "dog"])
    >>> feedback.requested
    True
    >>> feedback.learn("dog", prediction="dog")  # the next label is that event's
    >>> feedback.requested, feedback.used, policy.evidence.deeper_right
    (False, 1, [1])
    >>> feedback.scored, feedback.correct
    (1, 1)
    """

    def __init__(self, policy: Policy, cumulative: Sequence[float]) -> None:
        self.policy = policy
        # The request of the last stepped decision (policy's view of its outputs, mask), and the
        # last stepped event's outputs, whose label the WD monitor counts.
        self._request: tuple[list[Any], int] | None = None
        self._stepped: list[Any] | None = None
        self.used = 0  # labels the policy learned from
        self.scored = 0  # decided events whose label came, and how many of them were answered right
        self.correct = 0
        self.evidence = LabelEvidence(len(cumulative))
        self.monitor = WDMonitor(tuple(cumulative), name="CascadeClassifier")

    @property
    def requested(self) -> bool:
        """Whether the last stepped event asked for its label (and has not had it yet)."""
        return self._request is not None

    def stepped(self, seen: list[Any]) -> None:
        """The policy stepped on an event whose outputs it saw as ``seen``; its label is awaited."""
        self._stepped = seen
        policy = self.policy
        self._request = (
            (seen, policy.label_request) if policy.asks_for_labels and policy.label_request else None
        )

    def forget(self) -> None:
        """No label is awaited (a warm-up event, or the label came)."""
        self._request = None
        self._stepped = None

    def learn(self, y: Any, prediction: Any) -> None:
        """``y`` is the label of the last decided event, answered ``prediction``: score the answer;
        if the policy stepped on it, count the label, and give it to the policy if it asked."""
        self.scored += 1
        self.correct += bool(prediction == y)
        if self._stepped is not None and len(self._stepped) > 1:
            self.evidence.record(self._stepped, y)
        if self._request is not None:
            outputs, mask = self._request
            self.policy.learn_label(outputs, y, mask)
            self.used += 1
        self.forget()

    def learning_state(self) -> dict[str, Any]:
        """:func:`~uss_stream.policies.learning_state.learning_state` with the WD evidence, and the
        label counts of a label-asking policy (an awaited label is not expired yet)."""
        state = learning_state(self.policy, self.evidence)
        policy = self.policy
        if policy.asks_for_labels:
            requested, answered = policy.labels_requested, policy.labels_received
            awaited = 1 if self._request is not None else 0
            state["labels_requested_total"] = requested
            state["labels_answered_total"] = answered
            state["labels_expired_total"] = requested - answered - awaited
        return state
