"""How a cascade queries its stages on one event: each stage on its own view, cheapest first.

:func:`query` asks stages ``1..d`` for a depth decided beforehand; :func:`query_sequential` asks
one stage at a time and lets a sequential policy say whether the next one is worth its cost. The
per-event hot path of :class:`~uss_stream.cascade.classifier.CascadeClassifier`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from typing import Any

from river import base

from uss_stream.cascade.stage import Stage
from uss_stream.policies import Policy

__all__ = [
    "ABSTAINED",
    "EmptyViewWarning",
    "Plan",
    "StageView",
    "argmax",
    "both_classes",
    "for_policy",
    "learn",
    "make_plan",
    "query",
    "query_sequential",
]


class EmptyViewWarning(UserWarning):
    """A stage's ``features`` name nothing present in an event: it answers as a constant predictor."""


class StageView:
    """How one stage sees an event: its provider's answer (or the event), cut to its features.

    A view that comes out empty although the stage names features (none of them is in the event)
    makes the stage a constant predictor; the first such event of the stage issues an
    :class:`EmptyViewWarning`, the later ones do not.

    Parameters
    ----------
    features
        The stage's feature names (``None``: every feature of the event).
    provider
        The stage's feature provider (``None``: the event itself).
    name
        The stage's name, for the warning.

    Examples
    --------
    >>> import warnings
    >>> view = StageView(("age", "sex"), None, "history")
    >>> view({"age": 51, "chol": 230})
    {'age': 51}
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     view({"a": 1.0}), view({"b": 2.0})
    ({}, {})
    >>> len(caught), str(caught[0].message)[:61]
    (1, "stage 'history': none of its features ('age', 'sex') is in th")
    """

    __slots__ = ("features", "name", "provider", "warned")

    def __init__(self, features: tuple | None, provider: Any, name: str) -> None:
        self.features = features
        self.provider = provider
        self.name = name
        self.warned = False

    def __call__(self, x: dict[Hashable, Any]) -> dict[Hashable, Any]:
        source = x if self.provider is None else self.provider(x)
        features = self.features
        if features is None:
            return source
        view = {f: source[f] for f in features if f in source}
        if not view and features and not self.warned:
            self._warn(source)
        return view

    def _warn(self, source: dict[Hashable, Any]) -> None:
        self.warned = True
        keys = list(source)
        shown = ", ".join(map(repr, keys[:5])) + (", ..." if len(keys) > 5 else "")
        warnings.warn(
            f"stage {self.name!r}: none of its features {self.features!r} is in the event (whose "
            f"features are {shown or 'none'}), so it answers as a constant predictor. Check "
            "Stage(features=...) against the features the cascade receives (after a pipeline's "
            "transformers, which may rename them). Warned once per stage",
            EmptyViewWarning,
            stacklevel=2,
        )


#: Each stage's model and view.
Plan = tuple[tuple[base.Classifier, StageView], ...]


class _Abstained:
    """What the policy sees for a queried stage that gave no prediction (``None`` or NaN)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSTAINED"


#: Equal only to itself: an abstaining stage disagrees with every stage that answers.
ABSTAINED = _Abstained()


def make_plan(stages: Sequence[Stage], names: Sequence[str] | None = None) -> Plan:
    """Each stage's model and :class:`StageView`, as the per-event loop reads them (``names``: the
    stages' names, ``stage1..K`` by default)."""
    return tuple(
        (
            stage.model,
            StageView(
                None if stage.features is None else tuple(stage.features),
                stage.provider,
                f"stage{j + 1}" if names is None else names[j],
            ),
        )
        for j, stage in enumerate(stages)
    )


def query(plan: Plan, x: dict[Hashable, Any], depth: int) -> tuple[list[Any], Any, dict[Any, float], bool]:
    """Ask stages ``1..depth`` about ``x``.

    Returns their labels, the deepest one's label and probabilities, and whether a stage
    abstained (``None`` or NaN). A stage whose probabilities are not finite raises ``ValueError``.

    Examples
    --------
    An untrained naive Bayes abstains; an untrained logistic regression answers 50/50:

    >>> from river import linear_model, naive_bayes
    >>> from uss_stream import Stage
    >>> plan = make_plan([Stage(naive_bayes.GaussianNB(), cost=0.0, features=("a",)),
    ...                   Stage(linear_model.LogisticRegression(), cost=1.0)])
    >>> query(plan, {"a": 1.0, "b": 2.0}, 2)
    ([None, False], False, {False: 0.5, True: 0.5}, True)
    >>> query(plan, {"a": 1.0, "b": 2.0}, 1)
    ([None], None, {}, True)
    """
    labels = []
    abstained = False
    for model, view in plan[:depth]:
        label, proba = _ask(model, view(x))
        if label is None or label != label:
            abstained = True
        labels.append(label)
    return labels, label, proba, abstained


def query_sequential(
    plan: Plan, x: dict[Hashable, Any], policy: Policy
) -> tuple[list[Any], Any, dict[Any, float]]:
    """Ask one stage at a time, while the sequential ``policy`` says the next one is worth its cost.

    Each stage's label (``ABSTAINED`` if it gave none), confidence (its largest class
    probability; ``None`` if it abstained) and class probabilities go to ``policy.step``. Returns
    the queried stages' labels and the deepest one's label and probabilities; if a stage raises,
    the policy's step is cancelled.

    Examples
    --------
    >>> from river import linear_model, naive_bayes
    >>> from uss_stream import Stage
    >>> from uss_stream.policies import SequentialKLUCB
    >>> plan = make_plan([Stage(naive_bayes.GaussianNB(), cost=0.0),
    ...                   Stage(linear_model.LogisticRegression(), cost=1.0)])
    >>> policy = SequentialKLUCB(stage_costs=[0.0, 1.0])
    >>> query_sequential(plan, {"a": 1.0}, policy), policy.reason   # stage 1 abstained: go on
    (([None, False], False, {False: 0.5, True: 0.5}), 'last stage')
    """
    policy.begin()
    labels = []
    going = True
    try:
        for model, view in plan:
            label, proba = _ask(model, view(x))
            labels.append(label)
            abstained = label is None or label != label
            confidence = None if abstained else min(1.0, max(0.0, float(proba[label])))
            going = policy.step(ABSTAINED if abstained else label, confidence, proba)
            if not going:
                break
    except BaseException:
        if going:
            policy.cancel()
        raise
    return labels, label, proba


def learn(plan: Plan, x: dict[Hashable, Any], y: Any, **kwargs: Any) -> None:
    """Train every stage on its view of ``x`` (``kwargs``, e.g. ``w``, go to each stage)."""
    for model, view in plan:
        model.learn_one(view(x), y, **kwargs)


def _ask(model: base.Classifier, view: dict[Hashable, Any]) -> tuple[Any, dict[Any, float]]:
    """A stage's label and probabilities on its view (a model without probabilities: ``{label: 1}``)."""
    try:
        proba = model.predict_proba_one(view)
    except NotImplementedError:
        label = model.predict_one(view)
        return label, ({} if label is None else {label: 1.0})
    if not all(map(math.isfinite, proba.values())):
        raise ValueError(f"a stage answered probabilities that are not finite: {proba!r}")
    return argmax(proba), proba


def argmax(proba: dict[Any, float]) -> Any:
    """The most probable label, the first one on ties (as River's ``predict_one``); ``None`` if empty.

    >>> argmax({"a": 0.4, "b": 0.6}), argmax({"a": 0.5, "b": 0.5}), argmax({})
    ('b', 'a', None)
    """
    n_labels = len(proba)
    if n_labels == 2:
        (first, p_first), (second, p_second) = proba.items()
        return second if p_second > p_first else first
    if n_labels == 1:
        return next(iter(proba))
    return max(proba, key=proba.get) if proba else None


def for_policy(label: Any) -> Any:
    """A stage's label as the policy sees it: ``ABSTAINED`` for ``None`` or NaN."""
    return ABSTAINED if label is None or label != label else label


def both_classes(proba: dict[Any, float]) -> dict[Any, float]:
    """Complete a binary distribution with the missing class(es), as River's binary models return.

    >>> both_classes({True: 0.8}), both_classes({})
    ({True: 0.8, False: 0.0}, {False: 0.5, True: 0.5})
    """
    if not proba:
        return {False: 0.5, True: 0.5}
    completed = dict(proba)
    for label in (False, True):
        completed.setdefault(label, 0.0)
    return completed
