"""One event, one policy step: the last decided event, which the prediction methods may reuse once.

River's progressive validation calls ``predict_one`` (or ``predict_proba_one``) and then
``learn_one`` on each event, and a pipeline may call both prediction methods on the same event:
:class:`EventMemo` lets each of them reuse the cascade's last decision once, so that the policy
steps once per event (see :class:`~uss_stream.cascade.classifier.CascadeClassifier`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["EventMemo"]


class EventMemo:
    """The last decided event and its decision, and which prediction methods reused it.

    "The same event" is an equal plain ``dict`` (pipelines hand over fresh, equal dicts) or, for
    other mappings, the very same object: the memo never reads a mapping beyond comparing it.

    Examples
    --------
    >>> memo = EventMemo()
    >>> memo.remember({"a": 1.0}, "decision 1")
    >>> memo.take({"a": 1.0}, "label")          # an equal event: reused once per method
    'decision 1'
    >>> memo.take({"a": 1.0}, "label") is None, memo.take({"a": 1.0}, "proba")
    (True, 'decision 1')
    >>> memo.take({"a": 2.0}, "proba") is None  # another event
    True
    >>> memo.same_keys({"a": 5.0}), memo.same_keys({"b": 1.0})
    (True, False)
    """

    __slots__ = ("_x", "decision", "served")

    def __init__(self) -> None:
        self._x: Any = None
        self.decision: Any = None
        self.served: set[str] = set()

    def remember(self, x: dict[Hashable, Any], decision: Any) -> None:
        """``decision`` is that of event ``x`` (a plain dict is copied: the caller may change it)."""
        self._x = x.copy() if type(x) is dict else x
        self.decision = decision
        self.served = set()

    def forget(self) -> None:
        """No decision awaits reuse (the event was learned)."""
        self._x = None
        self.decision = None

    def take(self, x: dict[Hashable, Any], method: str) -> Any:
        """The last decision if ``x`` is its event and ``method`` has not taken it yet; else ``None``."""
        decision = self.decision
        if decision is None or method in self.served or not self._is_last_event(x):
            return None
        self.served.add(method)
        return decision

    def same_keys(self, x: dict[Hashable, Any]) -> bool:
        """Whether ``x`` can be the last decided event (plain dicts: the same feature names)."""
        last = self._x
        if type(x) is dict and type(last) is dict:
            return x.keys() == last.keys()
        return True

    def _is_last_event(self, x: dict[Hashable, Any]) -> bool:
        if type(x) is not dict:
            return x is self._x
        try:
            return bool(x == self._x)
        except (TypeError, ValueError):  # values whose == is not a bool, e.g. arrays
            return False
