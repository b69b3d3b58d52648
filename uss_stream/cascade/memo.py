"""One event, one policy step: the last decided event, which the prediction methods may reuse once.

River's progressive validation calls ``predict_one`` (or ``predict_proba_one``) and then
``learn_one`` on each event, a pipeline may call both prediction methods on the same event, and a
user may predict the same event again: :class:`EventMemo` lets these calls reuse the cascade's last
decision, so that the policy steps and the event's cost is spent once per event (see
:class:`~uss_stream.cascade.classifier.CascadeClassifier`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["EventMemo"]


class EventMemo:
    """The last decided event and its decision, and which prediction methods reused it.

    "The same event" is decided by identity first, then by value:

    * the very object that was decided, unchanged since (a plain ``dict`` is compared with a copy
      taken at the decision), is the same event for any number of prediction calls, whatever the
      method: ``predict_one(x)`` three times on one ``x`` is one event;
    * an equal but distinct plain ``dict`` is the same event once per method: a pipeline hands
      every call a fresh, equal dict, so its ``predict_one`` and ``predict_proba_one`` on one event
      share a decision, while a stream of equal events (repeated readings, or events an unfitted
      scaler maps to the same values) still counts one event per call;
    * anything else (another value, a mapping that is not a plain ``dict`` and not the same object,
      a dict changed in place) is a new event.

    The memo never reads a mapping beyond comparing it.

    Examples
    --------
    >>> memo = EventMemo()
    >>> x = {"a": 1.0}
    >>> memo.remember(x, "decision 1")
    >>> memo.take(x, "label"), memo.take(x, "label"), memo.take(x, "proba")  # the same object
    ('decision 1', 'decision 1', 'decision 1')
    >>> memo.take({"a": 1.0}, "label") is None     # an equal copy: "label" has been served
    True
    >>> memo.take({"a": 1.0}, "score")             # ... a method that has not: reused once
    'decision 1'
    >>> x["a"] = 2.0                               # changed in place: another event
    >>> memo.take(x, "proba") is None
    True
    >>> memo.same_keys({"a": 5.0}), memo.same_keys({"b": 1.0})
    (True, False)
    """

    __slots__ = ("_event", "_x", "decision", "served")

    def __init__(self) -> None:
        self._event: Any = None
        self._x: Any = None
        self.decision: Any = None
        self.served: set[str] = set()

    def remember(self, x: dict[Hashable, Any], decision: Any) -> None:
        """``decision`` is that of event ``x`` (a plain dict is also copied: the caller may change it)."""
        self._event = x
        self._x = x.copy() if type(x) is dict else x
        self.decision = decision
        self.served = set()

    def forget(self) -> None:
        """No decision awaits reuse (the event was learned)."""
        self._event = None
        self._x = None
        self.decision = None

    def take(self, x: dict[Hashable, Any], method: str) -> Any:
        """The last decision if ``x`` is its event (see the class docstring) for ``method``; else ``None``."""
        decision = self.decision
        if decision is None or not self._equal(x):
            return None
        if method in self.served and x is not self._event:
            return None
        self.served.add(method)
        return decision

    def same_keys(self, x: dict[Hashable, Any]) -> bool:
        """Whether ``x`` can be the last decided event (plain dicts: the same feature names)."""
        last = self._x
        if type(x) is dict and type(last) is dict:
            return x.keys() == last.keys()
        return True

    def _equal(self, x: dict[Hashable, Any]) -> bool:
        """Whether ``x`` holds the last decided event's values (a mapping other than a plain dict:
        whether it is that very object)."""
        if type(x) is not dict:
            return x is self._x
        try:
            return bool(x == self._x)
        except (TypeError, ValueError):  # values whose == is not a bool, e.g. arrays
            return False
