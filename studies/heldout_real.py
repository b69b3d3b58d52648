"""Real cascades for the held-out evaluation: River's bundled data sets, stages on growing feature sets.

Each data set ships inside the ``river`` package (nothing is downloaded). Its events are shuffled
once (seed 0) and split in half: four stages are fitted on the first half and their predictions on
the second half form the log that is replayed. Stage ``j`` (``j = 1..4``) is a decision tree of
depth ``2j`` on the first ``ceil(j·F/4)`` features (Bananas has two: its stages differ by depth
and, from stage 3, use both); its cost is ``λ·j/4`` cumulated (``c_j = λ/4``), for two cost scales
``λ`` (0.02 and 0.1): one cascade where depth is cheap, one where it is dear. The rule was fixed
before any policy was replayed on these logs, and the logs are held-out: no default is chosen on
them.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

__all__ = ["REAL_CASCADES", "real_cascade"]

DATASETS = ("Shuttle", "Phishing", "Bananas", "ImageSegments")
SCALES = (0.02, 0.1)
N_STAGES = 4
#: ``name -> (data set, λ)``.
REAL_CASCADES = {f"{d}-{s}": (d, s) for d in DATASETS for s in SCALES}


@cache
def _predictions(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    from river import datasets
    from sklearn.tree import DecisionTreeClassifier

    rows, targets = [], []
    for x, y in getattr(datasets, dataset)():
        rows.append([float(x[k]) for k in x])
        targets.append(str(y))
    features = np.asarray(rows)
    _, labels = np.unique(np.asarray(targets), return_inverse=True)
    order = np.random.default_rng(0).permutation(len(labels))
    features, labels = features[order], labels[order]
    half = len(labels) // 2
    n_features = features.shape[1]
    outputs = np.empty((len(labels) - half, N_STAGES), dtype=np.int64)
    for j in range(1, N_STAGES + 1):
        used = max(1, math.ceil(j * n_features / N_STAGES))
        model = DecisionTreeClassifier(max_depth=2 * j, random_state=0)
        model.fit(features[:half, :used], labels[:half])
        outputs[:, j - 1] = model.predict(features[half:, :used])
    return outputs, labels[half:]


def real_cascade(name: str) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """``(outputs, labels, stage costs)`` of a real cascade of :data:`REAL_CASCADES`.

    >>> outputs, labels, costs = real_cascade("Phishing-0.1")
    >>> outputs.shape, costs
    ((625, 4), [0.025, 0.025, 0.025, 0.025])

    """
    dataset, scale = REAL_CASCADES[name]
    outputs, labels = _predictions(dataset)
    return outputs, labels, [scale / N_STAGES] * N_STAGES
