"""The bundled PIMA demo: a three-stage diabetes-screening cascade and a producer of its events.

The stages read growing, cost-ordered feature subsets of the Pima Indians Diabetes data (costs
from Turney's table, in CAD, scaled by 0.01 to "error probability per CAD"):

1. the six cheap measurements (1 CAD each): pregnancies, blood pressure, skin thickness, BMI,
   diabetes pedigree, age — ``c_1 = 0.06``;
2. plus the glucose tolerance test (17.61 CAD) — ``c_2 = 0.1761``;
3. plus the serum insulin test, which shares the blood sample of the glucose test and so pays its
   discount cost (20.68 CAD) — ``c_3 = 0.2068``.

**Outputs mode** needs the stage outputs upstream. :func:`pima_stage_outputs` computes them once,
offline, with one scikit-learn logistic regression (standardised inputs) per stage; every row gets
the prediction of a model that did not see it in training (5-fold ``cross_val_predict``). The demo
producer streams these rows as ``{"id": "pima-<row>", "outputs": [s1, s2, s3]}``, cycling over a
seeded shuffle of the 768 rows.

**Features mode** runs the cascade in the service: :func:`pima_cascade` is a factory for
``--cascade-factory uss_stream_kafka.cli.demo:pima_cascade`` (River logistic regressions on the same
feature subsets, learning online from the labels topic).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from uss_stream.cascade.feature_costs import FeatureCosts
from uss_stream.datasets.pima import load_pima, pima_feature_costs

__all__ = [
    "PIMA_STAGE_FEATURES",
    "demo_records",
    "pima_cascade",
    "pima_stage_costs",
    "pima_stage_outputs",
    "produce_demo",
]

_CHEAP = ("pregnancies", "blood_pressure", "skin_thickness", "bmi", "diabetes_pedigree", "age")

#: The features each stage reads, cheapest stage first.
PIMA_STAGE_FEATURES: tuple[tuple[str, ...], ...] = (
    _CHEAP,
    (*_CHEAP, "glucose"),
    (*_CHEAP, "glucose", "insulin"),
)

_COST_SCALE = 0.01


def pima_stage_costs() -> list[float]:
    """``c_1..c_3`` of the PIMA cascade (Turney's CAD costs times 0.01).

    >>> [round(c, 4) for c in pima_stage_costs()]
    [0.06, 0.1761, 0.2068]

    """
    table = FeatureCosts.from_frame(pima_feature_costs()).scaled(_COST_SCALE)
    return table.stage_costs([list(features) for features in PIMA_STAGE_FEATURES])


def pima_stage_outputs(folds: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold predictions of the three stages for every PIMA row.

    Returns
    -------
    outputs, labels
        ``768 x 3`` int array (column ``j`` = stage ``j+1``) and the 768 true labels.

    Examples
    --------
    >>> outputs, labels = pima_stage_outputs()
    >>> outputs.shape
    (768, 3)
    >>> [round(float((outputs[:, j] == labels).mean()), 3) for j in range(3)]   # accuracy grows with cost
    [0.697, 0.771, 0.775]

    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    features, labels = load_pima()
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    columns = []
    for subset in PIMA_STAGE_FEATURES:
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        columns.append(cross_val_predict(model, features[list(subset)], labels, cv=splitter))
    return np.stack(columns, axis=1).astype(np.int64), labels.to_numpy()


def pima_cascade() -> Any:
    """A fresh, untrained PIMA ``CascadeClassifier`` for features mode (River logistic regressions).

    >>> cascade = pima_cascade()
    >>> [round(c, 4) for c in cascade.stage_costs]
    [0.06, 0.1761, 0.2068]

    """
    from river import linear_model, preprocessing

    from uss_stream import CascadeClassifier, Stage

    return CascadeClassifier(
        stages=[
            Stage(
                preprocessing.StandardScaler() | linear_model.LogisticRegression(), features=subset, cost=cost
            )
            for subset, cost in zip(PIMA_STAGE_FEATURES, pima_stage_costs())
        ],
        warm_up=50,
    )


def demo_records(mode: str, events: int, seed: int = 0) -> Iterator[tuple[bytes, bytes | None]]:
    """``(event value, labelled value or None)`` for ``events`` demo events.

    Rows are visited in a seeded random order, reshuffled after each pass over the 768 rows.

    >>> first = next(demo_records("outputs", 1))
    >>> json.loads(first[0])
    {'id': 'pima-1', 'outputs': [1, 1, 1]}
    >>> event, labelled = next(demo_records("features", 1))
    >>> sorted(json.loads(event)["features"])[:3], json.loads(labelled)["label"]
    (['age', 'blood_pressure', 'bmi'], 1)

    """
    if mode not in ("outputs", "features"):
        raise ValueError(f"mode must be 'outputs' or 'features', got {mode!r}")
    if isinstance(events, bool) or not isinstance(events, int) or events < 0:
        raise ValueError(f"events must be an integer >= 0, got {events!r}")
    features, labels = load_pima()
    rows = features.to_dict(orient="records")
    targets = labels.tolist()
    outputs = pima_stage_outputs()[0].tolist() if mode == "outputs" else None
    rng = np.random.default_rng(seed)
    order: list[int] = []
    for n in range(events):
        if not order:
            order = rng.permutation(len(rows)).tolist()[::-1]
        row = order.pop()
        event_id = f"pima-{n + 1}"
        if outputs is not None:
            yield json.dumps({"id": event_id, "outputs": outputs[row]}).encode(), None
        else:
            event = {"id": event_id, "features": rows[row]}
            labelled = {**event, "label": targets[row]}
            yield json.dumps(event).encode(), json.dumps(labelled).encode()


def produce_demo(
    producer: Any,
    topic: str,
    mode: str = "outputs",
    events: int = 10_000,
    rate: float = 0.0,
    labels_topic: str | None = None,
    seed: int = 0,
) -> int:
    """Send the demo events with the client seam's ``producer``; returns how many were sent.

    ``producer``: a :class:`~uss_stream_kafka.clients.Producer` of either library (what
    ``uss-stream kafka demo-producer --client`` uses). ``rate`` is in events per second (``0`` = as
    fast as possible). In features mode, labelled copies go to ``labels_topic`` if given (the label
    of an event is sent right after it). Raises the first delivery error, if any record failed.
    """
    if rate < 0:
        raise ValueError(f"rate must be >= 0 events/s, got {rate!r}")
    start = time.monotonic()
    sent = 0
    for value, labelled in demo_records(mode, events, seed):
        producer.send(topic, value)
        if labels_topic is not None and labelled is not None:
            producer.send(labels_topic, labelled)
        sent += 1
        if rate:
            ahead = start + sent / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    producer.flush()
    errors = producer.take_errors()
    if errors:
        raise errors[0]
    return sent
