"""One stage of a cascade: an incremental River classifier, the features it reads and their cost."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from river import base

__all__ = ["Stage"]


class Stage(base.Base):
    """A River classifier that sees only its own view of each event, at a known cost.

    Parameters
    ----------
    model
        Any River classifier (a pipeline ending in one is fine). It is trained and queried on the
        view ``{f: x[f] for f in features if f in x}``: features missing from an event are left
        out, as River models expect. Prefer ``features`` to a ``compose.Select`` step, which
        raises ``KeyError`` when an event lacks a selected feature.
    features
        Names of the features the stage reads; ``None`` means every feature of the event. The first
        event that has none of them (the stage then answers as a constant predictor: a misspelt
        name, or a pipeline's transformer that renamed the features) issues an
        :class:`~uss_stream.cascade.querying.EmptyViewWarning`, once per stage.
    cost
        The stage's cost ``c_j >= 0``: what querying this stage adds to querying the stages before
        it. ``None`` derives it from the cascade's ``feature_costs`` as the incremental cost of the
        features this stage adds (see :class:`~uss_stream.cascade.feature_costs.FeatureCosts`).
    name
        A label for reports; ``None`` gives ``"stage<j>"`` (1-based position) in the cascade.
    provider
        Lazy feature acquisition: a callable ``provider(x) -> dict`` that fetches the stage's
        features for event ``x`` (e.g. from a feature store, or by running a sensor). It is
        called only when the stage is queried by a decision, so a deployment pays only for the
        stages it queries, and by :meth:`~uss_stream.CascadeClassifier.learn_one`, which trains
        every stage. Its answer replaces the event as the source of the stage's view (cut to
        ``features`` if given). Code, never a pickle: it is not part of any saved state.

    Examples
    --------
    >>> from river import linear_model
    >>> Stage(linear_model.LogisticRegression(), features=("a", "b"), cost=0.1)
    Stage (
      model=LogisticRegression (
        optimizer=SGD (
          lr=Constant (
            learning_rate=0.01
          )
        )
        loss=Log (
          weight_pos=1.
          weight_neg=1.
        )
        l2=0.
        l1=0.
        intercept_init=0.
        intercept_lr=Constant (
          learning_rate=0.01
        )
        clip_gradient=1e+12
        initializer=Zeros ()
      )
      features=('a', 'b')
      cost=0.1
      name=None
      provider=None
    )

    """

    def __init__(
        self,
        model: base.Classifier,
        features: Sequence[Hashable] | None = None,
        cost: float | None = None,
        name: str | None = None,
        provider: Callable[[dict[Hashable, Any]], dict[Hashable, Any]] | None = None,
    ) -> None:
        if not isinstance(model, base.Classifier):
            raise TypeError(
                f"Stage model must be a River classifier (river.base.Classifier), got {type(model).__name__}"
            )
        if features is not None:
            if isinstance(features, (str, bytes)) or not isinstance(features, Sequence):
                raise TypeError(
                    f"Stage features must be a sequence of feature names or None, got {features!r}"
                )
            duplicated = sorted({repr(f) for f in features if list(features).count(f) > 1})
            if duplicated:
                raise ValueError(f"Stage features lists {', '.join(duplicated)} more than once")
        if cost is not None and (
            isinstance(cost, bool)
            or not isinstance(cost, numbers.Real)
            or not math.isfinite(cost)
            or cost < 0
        ):
            raise ValueError(f"Stage cost must be a finite number >= 0 or None, got {cost!r}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"Stage name must be a string or None, got {name!r}")
        if provider is not None and not callable(provider):
            raise TypeError(
                f"Stage provider must be a callable x -> dict of features or None, got {provider!r}"
            )
        self.model = model
        self.features = features
        self.cost = cost
        self.name = name
        self.provider = provider

    def __str__(self) -> str:
        return f"Stage({self.model})"
