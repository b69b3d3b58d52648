"""One cascade per key inside a River classifier: the key of an event, and the keyed policy seen as one.

A :class:`~uss_stream.CascadeClassifier` built with ``key=`` decides each event with the learner of
its key (:class:`~uss_stream.policies.KeyedPolicy`). :func:`key_function` reads the key of an event
(a feature, or a callable of the event); :class:`KeyCursor` is the keyed policy as the cascade
steps it: the policy protocol (``select``, ``update``, ``begin``, ``step``, ``learn_label``, ...)
for the key of the event being decided.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any

from uss_stream.policies import KeyedPolicy, Policy
from uss_stream.policies.keyed_store import as_key

__all__ = ["KeyCursor", "key_function", "keyed_policy"]


def key_function(
    key: str | Callable[[dict[Hashable, Any]], Any],
) -> Callable[[dict[Hashable, Any]], Hashable]:
    """The function that reads an event's key: the feature ``key``, or ``key(x)`` for a callable.

    The value becomes a key by :func:`~uss_stream.policies.keyed_store.as_key`; a missing one raises
    ``ValueError``. (A class, not a closure: a cascade keyed by a feature pickles.)

    >>> of = key_function("site")
    >>> of({"site": "north", "t": 1.0}), of({"site": 3.0})
    ('north', 3)
    >>> of({"t": 1.0})
    Traceback (most recent call last):
    ...
    ValueError: the event has no key: its feature 'site' is missing
    >>> key_function(lambda x: x["t"] > 0)({"t": 1.0})
    'True'

    """
    if not callable(key) and not isinstance(key, str):
        raise TypeError(
            f"key must be a feature name (str) or a callable of the event, got {type(key).__name__}"
        )
    return _KeyOf(key)


class _KeyOf:
    """An event's key: a feature's value or a callable's result (see :func:`key_function`)."""

    def __init__(self, key: str | Callable[[dict[Hashable, Any]], Any]) -> None:
        self.key = key

    def __call__(self, x: dict[Hashable, Any]) -> Hashable:
        if callable(self.key):
            return _present(self.key(x), "the key function returned no key (None or NaN)")
        return _present(x.get(self.key), f"the event has no key: its feature {self.key!r} is missing")


def _present(value: Any, message: str) -> Hashable:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise ValueError(message)
    return as_key(value)


def keyed_policy(
    policy: Policy | KeyedPolicy, stage_costs: list[float], build: Callable[..., Policy]
) -> KeyedPolicy:
    """The cascade's keyed policy: ``policy``'s parameters with the stages' costs (a plain policy
    gets the keyed defaults); ``build(policy, stage_costs)`` builds the base policy as the cascade does."""
    if isinstance(policy, KeyedPolicy):
        return policy.clone(build(policy.policy, stage_costs))
    return KeyedPolicy(build(policy, stage_costs))


class KeyCursor:
    """A keyed policy as one policy, for the key the cursor is :meth:`at` (the event being decided).

    Examples
    --------
    >>> from uss_stream.policies import USSKLUCB
    >>> cursor = KeyCursor(KeyedPolicy(USSKLUCB([0.0, 0.5])))
    >>> cursor.at("north").select()
    2
    >>> cursor.update([1, 1])
    >>> cursor.keyed.key_stats("north").decisions
    1
    """

    def __init__(self, keyed: KeyedPolicy) -> None:
        self.keyed = keyed
        self.key: Hashable | None = None

    def at(self, key: Hashable) -> KeyCursor:
        """Point at ``key`` (the next calls are for its event); returns the cursor."""
        self.key = key
        return self

    @property
    def sequential(self) -> bool:
        return self.keyed.sequential

    @property
    def asks_for_labels(self) -> bool:
        return self.keyed.asks_for_labels

    @property
    def label_request(self) -> int:
        return self.keyed.label_request

    @property
    def reason(self) -> str | None:
        """Why the key's last event stopped (a sequential base policy)."""
        learner = self.keyed.learner(self.key) if self.key in self.keyed else None
        return None if learner is None else learner.reason

    @property
    def labels_requested(self) -> int:
        """Labels the live keys' learners asked for."""
        return sum(
            self.keyed.learner(key).labels_requested for key in self.keyed.keys if self.keyed.learner(key)
        )

    @property
    def labels_received(self) -> int:
        """Labels the live keys' learners learned from."""
        return sum(
            self.keyed.learner(key).labels_received for key in self.keyed.keys if self.keyed.learner(key)
        )

    def select(self) -> int:
        return self.keyed.select(self.key)

    def update(self, outputs: Any) -> None:
        self.keyed.update(self.key, outputs)

    def cancel(self) -> None:
        self.keyed.cancel(self.key)

    def begin(self) -> None:
        self.keyed.begin(self.key)

    def step(self, output: Any, confidence: float | None) -> bool:
        return self.keyed.step(self.key, output, confidence)

    def learn_label(self, outputs: Any, label: Hashable, pairs: int) -> None:
        self.keyed.learn_label(self.key, outputs, label, pairs)

    def record_label(self, outputs: Any, label: Hashable) -> None:
        """A label of the key's last stepped event: its WD evidence and the pool's."""
        self.keyed.record_label(self.key, outputs, label)
