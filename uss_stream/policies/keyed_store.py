"""The keys of a keyed policy: one row of counts per key, least-recently-used eviction, an idle TTL.

:class:`KeyStore` holds the counts of every live key in one ``(capacity, width)`` array, a row per
key (the layout of :class:`~uss_stream.policies.keyed_prior.CountLayout`), found through a
``key -> row`` dictionary kept in recency order (least recently used first). A key is live from
its first event until it is evicted:

* **capacity**: when a new key arrives and ``max_keys`` keys are live, the least recently used one
  is evicted first;
* **idle TTL**: a key whose last event is more than ``ttl`` events (of all keys) old is expired. An
  expired key is evicted when it is next seen (its event then starts a new key) or by
  :meth:`KeyStore.expire`, whichever comes first; either way its next event starts afresh, so the
  decisions do not depend on when :meth:`KeyStore.expire` runs.

An evicted key's row is freed (its counts remain in the pool, which the store does not hold) and
``on_evict(key)`` is called. The store also records which keys changed and which were evicted since
the last :meth:`KeyStore.pop_changes`, what a checkpoint writes (a record per changed key, a
tombstone per evicted one).

Examples
--------
>>> evicted = []
>>> store = KeyStore(width=2, dtype=np.int64, max_keys=2, ttl=None, on_evict=evicted.append)
>>> [store.touch(key, event)[1] for event, key in enumerate(["a", "b", "a", "c"], start=1)]
[True, True, False, True]
>>> evicted, list(store)                  # "b" was the least recently used when "c" arrived
(['b'], ['a', 'c'])
>>> store.pop_changes()
(['a', 'c'], ['b'])

"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np

__all__ = ["KeyStore", "as_key", "check_key"]

_FIRST_CAPACITY = 64


def check_key(key: Any) -> Hashable:
    """A key is a ``str`` or an ``int`` (not a ``bool``): JSON keeps both as they are.

    >>> check_key("site-3"), check_key(7)
    ('site-3', 7)
    >>> check_key(b"site-3")
    Traceback (most recent call last):
    ...
    TypeError: key must be a str or an int, got bytes (decode bytes keys first)

    """
    kind = type(key)
    if kind is str or kind is int:
        return key
    if isinstance(key, (str, int)) and not isinstance(key, bool):
        return key
    hint = " (decode bytes keys first)" if isinstance(key, (bytes, bytearray)) else ""
    raise TypeError(f"key must be a str or an int, got {kind.__name__}{hint}")


def as_key(value: Any) -> Hashable:
    """A value of a key column or feature as a key: an integer (or a float with an integral value,
    as tables and River features often hold them) is an ``int``, anything else its ``str``.

    >>> as_key(3), as_key(3.0), as_key(np.int64(3)), as_key("north"), as_key(2.5)
    (3, 3, 3, 'north', '2.5')
    """
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    return str(value)


class KeyStore:
    """Rows of counts per key; see the module docstring.

    Parameters
    ----------
    width
        Columns of a row.
    dtype
        ``int64`` (plain counts) or ``float64`` (discounted counts).
    max_keys
        Live keys at most (``None``: no bound).
    ttl
        Idle events after which a key expires (``None``: never).
    on_evict
        Called with each evicted key.
    """

    def __init__(
        self,
        width: int,
        dtype: Any,
        max_keys: int | None,
        ttl: int | None,
        on_evict: Callable[[Hashable], Any] | None = None,
    ) -> None:
        self.width = width
        self.max_keys = max_keys
        self.ttl = ttl
        self.on_evict = on_evict
        self.counts = np.zeros((_FIRST_CAPACITY, width), dtype=dtype)
        self.last_seen = np.zeros(_FIRST_CAPACITY, dtype=np.int64)
        #: Per row: the depth of the key's last event (0 before it is decided).
        self.last_depth = np.zeros(_FIRST_CAPACITY, dtype=np.int16)
        #: Per row: the key's learner object (policies that are not count-vectorised), else ``None``.
        self.learners: list[Any] = [None] * _FIRST_CAPACITY
        #: Per key with labels: its :class:`~uss_stream.labels.evidence.LabelEvidence`.
        self.evidence: dict[Hashable, Any] = {}
        self._rows: OrderedDict[Hashable, int] = OrderedDict()
        self._free = list(range(_FIRST_CAPACITY - 1, -1, -1))
        self._changed: set[Hashable] = set()
        self._evicted: set[Hashable] = set()
        #: The rows freed since the last :meth:`touch_many` began.
        self.freed: list[int] = []
        #: Keys created and evicted so far.
        self.created = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def __iter__(self) -> Iterator[Hashable]:
        """The live keys, least recently used first."""
        return iter(list(self._rows))

    def row(self, key: Hashable) -> int | None:
        """The row of a live key, ``None`` for another."""
        return self._rows.get(key)

    def expired(self, row: int, event: int) -> bool:
        """Whether the key of ``row`` is idle for more than ``ttl`` events at event ``event``."""
        return self.ttl is not None and event - int(self.last_seen[row]) > self.ttl

    def touch(self, key: Hashable, event: int) -> tuple[int, bool]:
        """The row of ``key``'s event number ``event`` and whether the key was created for it.

        An expired key is evicted and created anew; a new key first evicts the least recently
        used one if ``max_keys`` keys are live.
        """
        rows = self._rows
        row = rows.get(key)
        if row is not None and self.ttl is not None and event - int(self.last_seen[row]) > self.ttl:
            self.evict(key)
            row = None
        created = row is None
        if created:
            if self.max_keys is not None and len(rows) >= self.max_keys:
                self.evict(next(iter(rows)))
            row = self._allocate(key)
            self.created += 1
        else:
            rows.move_to_end(key)
        self.last_seen[row] = event
        self._changed.add(key)
        return row, created

    def touch_many(self, keys: list[Hashable], first_event: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`touch` for events ``first_event, first_event + 1, ...`` of ``keys``: their rows and
        whether each created its key.

        The keys are resolved as by :meth:`touch`, one after the other, except that the rows
        created are not cleared: the caller writes their counts (a created row's old values are
        garbage).
        """
        self.freed = []
        rows, ttl = self._rows, self.ttl
        full = self.max_keys if self.max_keys is not None else -1
        get, move, allocate = rows.get, rows.move_to_end, self._allocate
        recent: dict[Hashable, int] = {}  # the events of this batch, before they reach last_seen
        where: list[int] = []
        created: list[int] = []
        event = first_event
        for key in keys:
            row = get(key)
            if ttl is not None:
                if row is not None:
                    last = recent.get(key)
                    if event - (int(self.last_seen[row]) if last is None else last) > ttl:
                        self.evict(key)
                        row = None
                recent[key] = event
            if row is None:
                if len(rows) == full:
                    self.evict(next(iter(rows)))
                row = allocate(key, clear=False)
                created.append(event - first_event)
            else:
                move(key)
            where.append(row)
            event += 1
        mask = np.zeros(len(keys), dtype=bool)
        mask[created] = True
        return self._touched(keys, np.array(where, dtype=np.int64), mask, first_event)

    def _touched(
        self, keys: list[Hashable], where: np.ndarray, created: np.ndarray, first_event: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Record the events of :meth:`touch_many` (last seen, keys created and changed)."""
        np.maximum.at(self.last_seen, where, np.arange(first_event, first_event + len(keys), dtype=np.int64))
        self.created += int(created.sum())
        self._changed.update(self._rows.keys() & set(keys))
        return where, created

    def insert(self, key: Hashable, counts: np.ndarray, last_seen: int) -> int:
        """Add a key with its counts (a loaded state); it becomes the most recently used."""
        if key in self._rows:
            raise ValueError(f"key {key!r} is already live")
        row = self._allocate(key)
        self.counts[row] = counts
        self.last_seen[row] = last_seen
        return row

    def _allocate(self, key: Hashable, clear: bool = True) -> int:
        if not self._free:
            self._grow()
        row = self._free.pop()
        if clear:
            self.counts[row] = 0
            self.last_depth[row] = 0
            self.last_seen[row] = 0
        self.learners[row] = None
        self._rows[key] = row
        self._changed.add(key)
        self._evicted.discard(key)
        return row

    def _grow(self) -> None:
        capacity = self.counts.shape[0]
        self.counts = np.concatenate([self.counts, np.zeros_like(self.counts)])
        self.last_seen = np.concatenate([self.last_seen, np.zeros_like(self.last_seen)])
        self.last_depth = np.concatenate([self.last_depth, np.zeros_like(self.last_depth)])
        self.learners.extend([None] * capacity)
        self._free.extend(range(2 * capacity - 1, capacity - 1, -1))

    def evict(self, key: Hashable) -> None:
        """Drop a live key (its row is freed) and call ``on_evict(key)``."""
        self.drop(key)
        self._changed.discard(key)
        self._evicted.add(key)
        self.evicted += 1
        if self.on_evict is not None:
            self.on_evict(key)

    def drop(self, key: Hashable) -> None:
        """Free a live key's row, nothing else (a loaded state replaces it)."""
        row = self._rows.pop(key)
        self.learners[row] = None
        self._free.append(row)
        self.freed.append(row)
        self.evidence.pop(key, None)

    def clear(self) -> None:
        """Drop every key (a whole state is loaded next); nothing is evicted."""
        for key in list(self._rows):
            self.drop(key)
        self._changed.clear()
        self._evicted.clear()

    def sort_by_recency(self) -> None:
        """Order the keys by their last event (after loading keys in any order)."""
        seen = self.last_seen
        ordered = sorted(self._rows.items(), key=lambda item: int(seen[item[1]]))
        self._rows = OrderedDict(ordered)

    def expire(self, event: int) -> list[Hashable]:
        """Evict every key idle for more than ``ttl`` events at event ``event``; returns them."""
        if self.ttl is None:
            return []
        gone = []
        for key, row in self._rows.items():  # least recently used first: stop at the first live one
            if event - int(self.last_seen[row]) <= self.ttl:
                break
            gone.append(key)
        for key in gone:
            self.evict(key)
        return gone

    def mark_changed(self, key: Hashable) -> None:
        """Record that a live key's state changed (e.g. it learned a label)."""
        self._changed.add(key)

    def pop_changes(self) -> tuple[list[Hashable], list[Hashable]]:
        """The live keys changed and the keys evicted (and not live again) since the last call."""
        rows, seen = self._rows, self.last_seen
        changed = sorted((key for key in self._changed if key in rows), key=lambda key: int(seen[rows[key]]))
        evicted = sorted(self._evicted, key=repr)
        self._changed.clear()
        self._evicted.clear()
        return changed, evicted
