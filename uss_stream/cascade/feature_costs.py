"""Per-feature acquisition costs, with Turney-style group discounts, and the stage costs they imply.

Turney's cost-sensitive data sets (UCI ``costs/``) price each test (feature) and put some tests in
groups: the tests of a group share an overhead (one blood sample serves several blood tests), so
the first test bought from a group pays its full cost and later tests of the same group pay their
discount cost. When a cascade buys features in stages, stage ``j`` pays only for the features it
adds over stages ``1..j-1``: a feature bought earlier is free, and a group opened earlier gives the
discount. These incremental costs are the stage costs ``c_j`` the selection policy needs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

__all__ = ["FeatureCosts"]


class FeatureCosts:
    """A table of feature acquisition costs with optional group discounts.

    Buying a set of new features costs the sum of their full costs, except within a group: if an
    earlier purchase already opened the group, every new member pays its discount cost; otherwise
    one new member pays its full cost and the others their discount cost. Which member pays full is
    immaterial when all members of a group have the same overhead ``cost - discount_cost`` (as in
    Turney's tables); otherwise the cheapest ordering is charged, i.e. the member with the smallest
    overhead pays full.

    Parameters
    ----------
    costs
        Full cost of each feature, ``>= 0``.
    discount_costs
        Cost of a feature whose group was already opened, ``0 <= discount <= cost``. Features not
        listed (or without a group) always pay their full cost.
    groups
        Group of each feature; ``None``, ``""`` and NaN mean "no group".

    Examples
    --------
    Turney's heart-disease costs: ``chol`` and ``fbs`` share group A (overhead 2.10 CAD).

    >>> from uss_stream.datasets.heart import heart_feature_costs
    >>> table = FeatureCosts.from_frame(heart_feature_costs())
    >>> table.cost_of(["age", "sex"])
    2.0
    >>> round(table.cost_of(["chol", "fbs"]), 2)  # 7.27 + 3.10: the second pays the discount
    10.37
    >>> round(table.cost_of(["fbs"], already_bought=["chol"]), 2)  # group A opened earlier
    3.1
    >>> [round(c, 2) for c in table.stage_costs([("age", "sex"), ("age", "sex", "chol"), None])]
    [2.0, 7.27, 314.7]

    """

    def __init__(
        self,
        costs: Mapping[Hashable, float],
        discount_costs: Mapping[Hashable, float] | None = None,
        groups: Mapping[Hashable, Any] | None = None,
    ) -> None:
        if not isinstance(costs, Mapping) or not costs:
            raise ValueError("costs must be a non-empty mapping feature -> cost")
        self._cost = {f: _check_cost(c, f"costs[{f!r}]") for f, c in costs.items()}
        self._discount = dict(self._cost)
        for name, table in (("discount_costs", discount_costs), ("groups", groups)):
            if table is not None and not isinstance(table, Mapping):
                raise ValueError(f"{name} must be a mapping feature -> value or None")
            unknown = [f for f in table or () if f not in self._cost]
            if unknown:
                raise ValueError(f"{name} lists feature(s) without a cost: {unknown}")
        for feature, discount in (discount_costs or {}).items():
            value = _check_cost(discount, f"discount_costs[{feature!r}]")
            if value > self._cost[feature]:
                raise ValueError(
                    f"discount_costs[{feature!r}]={value} exceeds costs[{feature!r}]={self._cost[feature]}"
                )
            self._discount[feature] = value
        self._group = {f: g for f, g in (groups or {}).items() if not _is_blank(g)}
        self.costs = dict(costs)
        self.discount_costs = None if discount_costs is None else dict(discount_costs)
        self.groups = None if groups is None else dict(groups)

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        feature: str = "feature",
        cost: str = "cost_cad",
        discount_cost: str | None = "discount_cost_cad",
        group: str | None = "group",
    ) -> FeatureCosts:
        """Build the table from a frame with one row per feature (column names as in Turney's files).

        ``discount_cost`` and ``group`` may be ``None`` for a table without discounts.
        """
        wanted = [c for c in (feature, cost, discount_cost, group) if c is not None]
        missing = [c for c in wanted if c not in frame.columns]
        if missing:
            raise ValueError(f"frame lacks column(s) {missing}; it has {list(frame.columns)}")
        if frame[feature].duplicated().any():
            duplicated = frame.loc[frame[feature].duplicated(), feature].tolist()
            raise ValueError(f"frame lists feature(s) more than once: {duplicated}")
        names = frame[feature].tolist()
        return cls(
            costs=dict(zip(names, frame[cost].tolist())),
            discount_costs=None if discount_cost is None else dict(zip(names, frame[discount_cost].tolist())),
            groups=None if group is None else dict(zip(names, frame[group].tolist())),
        )

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str], **columns: Any) -> FeatureCosts:
        """Read a CSV file with one row per feature; ``columns`` as in :meth:`from_frame`."""
        return cls.from_frame(pd.read_csv(path, keep_default_na=False), **columns)

    @property
    def features(self) -> tuple[Hashable, ...]:
        """The priced features, in table order."""
        return tuple(self._cost)

    def scaled(self, factor: float) -> FeatureCosts:
        """The same table with every cost multiplied by ``factor >= 0`` (e.g. a price per CAD).

        >>> FeatureCosts({"a": 10.0, "b": 4.0}).scaled(0.01).cost_of(["a", "b"])
        0.14

        """
        factor = _check_cost(factor, "factor")
        return FeatureCosts(
            costs={f: c * factor for f, c in self._cost.items()},
            discount_costs={f: c * factor for f, c in self._discount.items()},
            groups=self._group,
        )

    def cost_of(self, features: Iterable[Hashable], already_bought: Iterable[Hashable] = ()) -> float:
        """The cost of buying ``features`` after ``already_bought``.

        Features in ``already_bought`` are free; a group with a member in ``already_bought`` gives
        every new member its discount. Names in ``already_bought`` that the table does not price
        are ignored (they open no group).

        Raises
        ------
        ValueError
            If a feature in ``features`` has no cost in the table.
        """
        if isinstance(features, (str, bytes)):
            raise ValueError(f"features must be an iterable of feature names, got the string {features!r}")
        bought = set(already_bought)
        new = [f for f in dict.fromkeys(features) if f not in bought]
        unknown = [f for f in new if f not in self._cost]
        if unknown:
            raise ValueError(f"features {unknown} have no acquisition cost in the table")
        opened = {self._group[f] for f in bought if f in self._group}
        total = 0.0
        overhead: dict[Any, float] = {}
        for feature in new:
            group = self._group.get(feature)
            if group is None:
                total += self._cost[feature]
                continue
            total += self._discount[feature]
            if group not in opened:
                extra = self._cost[feature] - self._discount[feature]
                overhead[group] = min(extra, overhead.get(group, math.inf))
        return total + sum(overhead.values())

    def stage_costs(self, feature_sets: Sequence[Iterable[Hashable] | None]) -> list[float]:
        """Incremental cost of each stage of a cascade, stage ``j`` after stages ``1..j-1``.

        ``None`` stands for every feature of the table.
        """
        bought: set[Hashable] = set()
        costs = []
        for features in feature_sets:
            names = self.features if features is None else tuple(features)
            costs.append(self.cost_of(names, already_bought=bought))
            bought.update(names)
        return costs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FeatureCosts):
            return NotImplemented
        return (self._cost, self._discount, self._group) == (other._cost, other._discount, other._group)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"FeatureCosts(costs={self.costs!r}, discount_costs={self.discount_costs!r}, "
            f"groups={self.groups!r})"
        )


def _check_cost(value: Any, name: str) -> float:
    if isinstance(value, bool) or (not isinstance(value, (int, float)) and not hasattr(value, "__float__")):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def _is_blank(group: Any) -> bool:
    return group is None or group == "" or (isinstance(group, float) and math.isnan(group))
