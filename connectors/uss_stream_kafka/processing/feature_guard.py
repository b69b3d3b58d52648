"""The feature-range guard of features mode: values outside declared ranges, or far outside those seen.

A finite number within the ±1e100 bound (:data:`~uss_stream_kafka.processing.events.MAX_FEATURE`) can
still ruin a stage model: one label with a feature of ``1e10`` on a feature otherwise within 0..1
moves a River ``LogisticRegression``'s weight by about ``lr * 1e10`` and leaves it predicting one
class, and the re-learn of the labels log after a restart repeats it. The guard checks every numeric
feature (``int`` or ``float``, not ``bool``) of an event (the decision path) and of a label (the
learning path) before the cascade sees it:

- **declared** ranges (``--feature-range NAME=LO:HI``): a value outside ``[LO, HI]`` is refused
  (reason ``out_of_range``);
- **learned** ranges: once a feature has :data:`MIN_SEEN` accepted values, a value outside
  ``[lo - MARGIN * s, hi + MARGIN * s]`` is refused (reason ``outlier``), where ``[lo, hi]`` is the
  range of the accepted values so far and ``s = max(hi - lo, |lo|, |hi|)`` (``1`` if that is 0: a
  feature that was always 0). A declared range replaces the learned one of its feature.

A refused record changes nothing (the values of an accepted one widen the learned ranges) and is
dead-lettered with the reason and the value (:class:`OutOfRange`). The learned ranges are plain
numbers, ``{name: [lo, hi, n]}``, part of the learner's checkpoint: they survive a restart, and two
of them merge by ``min``, ``max`` and ``+``. Seeing a value twice (the re-learn of labels the
checkpoint already covers) changes no range. At most :data:`MAX_FEATURES` features are learned.

What the learned guard does not do: catch a value within the first :data:`MIN_SEEN`, or a drift
built of values each within the margin of the ranges the previous ones made; declared ranges do.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Any

from uss_stream_kafka.processing.events import InvalidEvent

__all__ = ["MARGIN", "MAX_FEATURES", "MIN_SEEN", "FeatureGuard", "OutOfRange", "allowed", "parse_range"]

log = logging.getLogger("uss_stream_kafka")

#: A feature's learned range guards once this many of its values were accepted.
MIN_SEEN = 50
#: How far outside its learned range a value is refused, in multiples of the range's scale.
MARGIN = 10.0
#: Features whose ranges are learned (the first seen); the others are checked against declared ranges only.
MAX_FEATURES = 256
#: Seconds between two log lines about the refused values of one feature.
LOG_EVERY = 60.0


class OutOfRange(InvalidEvent):
    """A record refused by the guard: ``reason`` ``out_of_range`` (declared) or ``outlier`` (learned)."""

    def __init__(self, reason: str, feature: str, value: float, low: float, high: float) -> None:
        what = "declared" if reason == "out_of_range" else "learned"
        super().__init__(
            reason, f"feature {feature!r} = {value!r} is outside its {what} range [{low:.6g}, {high:.6g}]"
        )
        self.feature = feature


def parse_range(text: str) -> tuple[str, tuple[float, float]]:
    """``"NAME=LO:HI"`` -> ``(NAME, (LO, HI))``; an empty bound is unbounded.

    >>> parse_range("glucose=0:400"), parse_range("age=0:")
    (('glucose', (0.0, 400.0)), ('age', (0.0, inf)))
    >>> parse_range("bmi=40:10")
    Traceback (most recent call last):
    ...
    ValueError: feature range 'bmi=40:10' must be NAME=LO:HI with LO <= HI (numbers; one may be empty)
    """
    name, _, bounds = str(text).rpartition("=")
    low, colon, high = bounds.partition(":")
    try:
        pair = (float(low) if low.strip() else -math.inf, float(high) if high.strip() else math.inf)
    except ValueError:
        pair = (math.nan, math.nan)
    if not name.strip() or not colon or not pair[0] <= pair[1] or pair == (-math.inf, math.inf):
        raise ValueError(
            f"feature range {text!r} must be NAME=LO:HI with LO <= HI (numbers; one may be empty)"
        )
    return name.strip(), pair


class FeatureGuard:
    """Check features against declared and learned ranges (see the module's docstring).

    Parameters
    ----------
    declared
        ``{name: (low, high)}``: the accepted values of each named feature.
    learned
        Guard the other features by the ranges learned from the accepted values.

    Examples
    --------
    >>> guard = FeatureGuard({"glucose": (0, 400)})
    >>> for i in range(MIN_SEEN):
    ...     guard.accept({"glucose": 100, "x": i / MIN_SEEN})
    >>> guard.accept({"glucose": 148, "x": 0.5})
    >>> guard.accept({"glucose": 900, "x": 0.5})
    Traceback (most recent call last):
    ...
    uss_stream_kafka.processing.feature_guard.OutOfRange: out_of_range: feature 'glucose' = 900 is outside ...
    >>> guard.accept({"x": 1e10})
    Traceback (most recent call last):
    ...
    uss_stream_kafka.processing.feature_guard.OutOfRange: outlier: feature 'x' = 10000000000.0 is outside ...
    >>> [round(bound, 6) for bound in allowed(0.0, 0.98)]   # the range it is outside of
    [-9.8, 10.78]
    >>> guard.state_dict()["x"]                         # [lo, hi, accepted values]
    [0.0, 0.98, 51]
    """

    __slots__ = ("_declared", "_learned", "_logged", "_ranges")

    def __init__(self, declared: Mapping[str, Any] | None = None, learned: bool = True) -> None:
        self._declared: dict[str, tuple[float, float]] = {}
        for name, bounds in (declared or {}).items():
            try:
                low, high = (float(bound) for bound in bounds)
            except (TypeError, ValueError):
                low = high = math.nan
            if not low <= high:
                raise ValueError(
                    f"the range of feature {name!r} must be (low, high), low <= high, got {bounds!r}"
                )
            self._declared[str(name)] = (low, high)
        self._learned = bool(learned)
        self._ranges: dict[str, list[float]] = {}  # name -> [lo, hi, n]
        self._logged: dict[
            tuple[str, str], list[float]
        ] = {}  # (feature, reason) -> [logged at, refused since]

    @property
    def declared(self) -> dict[str, tuple[float, float]]:
        """The declared ranges, ``{name: (low, high)}``."""
        return dict(self._declared)

    def new(self) -> FeatureGuard:
        """A guard with the same declared ranges and nothing learned (one per learner)."""
        return FeatureGuard(self._declared, self._learned)

    def accept(self, features: Mapping[str, Any]) -> None:
        """Raise :class:`OutOfRange` if a value is refused; else learn the values' ranges."""
        self.check(features)
        self.observe(features)

    def check(self, features: Mapping[str, Any]) -> None:
        """Raise :class:`OutOfRange` for the first value refused (nothing is learned)."""
        declared, ranges = self._declared, self._ranges
        for name, value in features.items():
            kind = type(value)
            if kind is not float and kind is not int:
                continue
            bounds = declared.get(name)
            if bounds is not None:
                if not bounds[0] <= value <= bounds[1]:
                    self._refused(OutOfRange("out_of_range", name, value, *bounds))
                continue
            seen = ranges.get(name) if self._learned else None
            if seen is not None and seen[2] >= MIN_SEEN:
                low, high = allowed(seen[0], seen[1])
                if not low <= value <= high:
                    self._refused(OutOfRange("outlier", name, value, low, high))

    def observe(self, features: Mapping[str, Any]) -> None:
        """Widen the learned ranges by the values of an accepted record (checked before)."""
        if not self._learned:
            return
        ranges, declared = self._ranges, self._declared
        for name, value in features.items():
            kind = type(value)
            if (kind is not float and kind is not int) or name in declared:
                continue
            seen = ranges.get(name)
            if seen is None:
                if len(ranges) >= MAX_FEATURES:
                    continue
                ranges[name] = [float(value), float(value), 1]
                continue
            if value < seen[0]:
                seen[0] = float(value)
            elif value > seen[1]:
                seen[1] = float(value)
            seen[2] += 1

    def _refused(self, error: OutOfRange) -> None:
        """Log the first refusal of a feature, then one line per :data:`LOG_EVERY` seconds; raise it."""
        now = time.monotonic()
        entry = self._logged.setdefault((error.feature, error.reason), [-math.inf, 0])
        entry[1] += 1
        if now - entry[0] >= LOG_EVERY:
            more = f" ({entry[1] - 1} more refused since the last line)" if entry[1] > 1 else ""
            log.warning("feature guard: dead-lettered %s: %s%s", error.reason, error.detail, more)
            entry[0], entry[1] = now, 0
        raise error

    def state_dict(self) -> dict[str, list[float]]:
        """The learned ranges, ``{name: [lo, hi, n]}`` (JSON)."""
        return {name: [low, high, int(n)] for name, (low, high, n) in self._ranges.items()}

    def load_state_dict(self, document: Any) -> None:
        """Restore :meth:`state_dict`; ``ValueError`` (nothing replaced) if it is not one."""
        if not isinstance(document, dict) or len(document) > MAX_FEATURES:
            raise ValueError(f"feature ranges must be an object of at most {MAX_FEATURES} features")
        ranges = {}
        for name, item in document.items():
            if (
                not isinstance(item, list)
                or len(item) != 3
                or not all(type(v) in (int, float) and math.isfinite(v) for v in item)
                or not item[0] <= item[1]
                or type(item[2]) is not int
                or item[2] < 1
            ):
                raise ValueError(
                    f"feature range of {name!r} must be [lo, hi, n], lo <= hi, n >= 1, got {item!r}"
                )
            ranges[name] = [float(item[0]), float(item[1]), item[2]]
        self._ranges = ranges


def allowed(low: float, high: float) -> tuple[float, float]:
    """The values a learned range ``[low, high]`` accepts: :data:`MARGIN` scales beyond either end.

    >>> allowed(0.0, 1.0), allowed(0.0, 0.0), allowed(100.0, 200.0)
    ((-10.0, 11.0), (-10.0, 10.0), (-1900.0, 2200.0))
    """
    scale = max(high - low, abs(low), abs(high)) or 1.0
    return low - MARGIN * scale, high + MARGIN * scale
