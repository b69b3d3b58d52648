"""Every problem instance of the paper's experiments, by name: logs, costs and the paper's claims.

Five datasets, five cases (cost vectors) each, named ``"<dataset>-<case>"``:

* ``bsc``: the synthetic BSC cascade (:mod:`uss_stream.datasets.bsc`, Table 1), a log of
  :data:`BSC_LOG_ROWS` events drawn with seed :data:`BSC_SEED`;
* ``pima`` and ``heart``: the real datasets of Table 2. The cascade is the paper's: three
  scikit-learn logistic regressions on growing, cost-ordered feature subsets
  (:data:`REAL_STAGE_FEATURES`), PIMA: patient history/profile, then glucose, then all features
  (with insulin); Heart: the first 7 attributes (age..restecg), then thalach, exang and oldpeak,
  then all 13. The paper does not give the training protocol; we use scikit-learn's default
  logistic regression (L2, ``C = 1``, lbfgs, ``max_iter`` raised so it converges on the raw
  features) fitted on all rows, and the error rate on all rows (768 and 297). The stage costs
  are Table 2's scaled cumulative costs ``C_j = λ_j · Cost_j`` with ``Cost = (4, 29, 46)`` and
  ``(32, 397, 601)`` dollars;
* ``synthetic1`` and ``synthetic2``: the appendix's Tables 3 and 4
  (:mod:`uss_stream.datasets.synthetic`).

One entry of Table 2 cannot be used as printed: Heart case 5 has ``λ_1 · 32 = 0.1344`` above
``C_2 = 0.0397``, which no cascade can have (stage 2 would have a negative cost). We lower ``C_1``
to ``C_2`` (more generally, each ``C_j`` to ``min_{k >= j} C_k``); the optimal classifier (2) and
the weak-dominance verdict, which involve only ``j >= i*``, do not depend on ``C_1`` here.

Logs are built on first use and kept in memory for the process; nothing is written to disk.

Examples
--------
>>> from uss_stream.datasets.paper import paper_case
>>> case = paper_case("pima-2")
>>> case.cumulative_costs
(0.04, 0.116, 0.1748)
>>> outputs, labels = case.log()
>>> outputs.shape, case.paper_optimal_depth, case.instance().optimal_depth
((768, 3), 2, 2)

"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from uss_stream.core.extras import require
from uss_stream.core.instances import Instance
from uss_stream.datasets.bsc import BSC_CASES, TABLE1_OPTIMAL, TABLE1_WD, generate_bsc
from uss_stream.datasets.heart import load_heart
from uss_stream.datasets.pima import load_pima
from uss_stream.datasets.synthetic import (
    SYNTHETIC_CASES,
    SYNTHETIC_ERROR_RATES,
    TABLE_OPTIMAL,
    TABLE_WD,
    synthetic_cascade,
)

__all__ = [
    "BSC_LOG_ROWS",
    "BSC_SEED",
    "DATASETS",
    "PAPER_CASES",
    "PAPER_ERROR_RATES",
    "REAL_COSTS",
    "REAL_LAMBDAS",
    "REAL_STAGE_FEATURES",
    "PaperCase",
    "dataset_log",
    "paper_case",
    "real_cascade",
    "wd_case_names",
]

#: Dataset names, in the order the paper presents them.
DATASETS = ("bsc", "pima", "heart", "synthetic1", "synthetic2")
#: Size and seed of the bundled BSC log.
BSC_LOG_ROWS = 100_000
BSC_SEED = 0

_PIMA_PROFILE = ("pregnancies", "blood_pressure", "skin_thickness", "bmi", "diabetes_pedigree", "age")
_HEART_FIRST = ("age", "sex", "cp", "trestbps", "chol", "fbs", "restecg")
#: Features of each classifier of the real-data cascades (cheapest first).
REAL_STAGE_FEATURES: dict[str, tuple[tuple[str, ...], ...]] = {
    "pima": (
        _PIMA_PROFILE,
        (*_PIMA_PROFILE, "glucose"),
        (*_PIMA_PROFILE, "glucose", "insulin"),
    ),
    "heart": (
        _HEART_FIRST,
        (*_HEART_FIRST, "thalach", "exang", "oldpeak"),
        (*_HEART_FIRST, "thalach", "exang", "oldpeak", "slope", "ca", "thal"),
    ),
}
#: Table 2's cost (in dollars) of each classifier.
REAL_COSTS: dict[str, tuple[float, ...]] = {"pima": (4.0, 29.0, 46.0), "heart": (32.0, 397.0, 601.0)}
#: Table 2's trade-off ``λ_j`` per classifier, by dataset and case.
REAL_LAMBDAS: dict[str, dict[int, tuple[float, ...]]] = {
    "pima": {
        1: (0.01, 0.0106, 0.015),
        2: (0.01, 0.004, 0.0038),
        3: (0.01, 0.0113, 0.015),
        4: (0.0001, 0.0001, 0.0001),
        5: (0.01, 0.002, 0.0055),
    },
    "heart": {
        1: (0.0001, 0.0008, 0.001),
        2: (0.0001, 0.0001, 0.00035),
        3: (0.0001, 0.0009, 0.001),
        4: (0.00001, 0.00004, 0.0001),
        5: (0.0042, 0.0001, 0.00027),
    },
}
#: The error rates the paper reports for each dataset's classifiers (Tables 1-4).
PAPER_ERROR_RATES: dict[str, tuple[float, ...]] = {
    "bsc": (0.4, 0.1, 0.05),
    "pima": (0.3125, 0.2331, 0.2279),
    "heart": (0.29292, 0.20202, 0.14815),
    "synthetic1": SYNTHETIC_ERROR_RATES[1],
    "synthetic2": SYNTHETIC_ERROR_RATES[2],
}
_REAL_OPTIMAL = {
    "pima": {1: 1, 2: 2, 3: 1, 4: 3, 5: 2},
    "heart": {1: 1, 2: 2, 3: 1, 4: 3, 5: 2},
}


@dataclass(frozen=True)
class PaperCase:
    """One problem instance of the paper: a dataset's log with one case's costs.

    Attributes
    ----------
    dataset, case
        E.g. ``"heart"`` and ``3``; :attr:`name` is ``"heart-3"``.
    cumulative_costs
        ``C_1..C_K`` used here (see the module docstring for the one adjusted entry).
    table_costs
        The costs as the paper's table gives them (``λ_j · Cost_j`` for the real datasets).
    paper_optimal_depth, paper_wd
        What the paper's table claims: the optimal classifier and whether WD holds.

    """

    dataset: str
    case: int
    cumulative_costs: tuple[float, ...]
    table_costs: tuple[float, ...]
    paper_optimal_depth: int
    paper_wd: bool

    @property
    def name(self) -> str:
        return f"{self.dataset}-{self.case}"

    @property
    def stage_costs(self) -> list[float]:
        """Per-stage costs ``c_j = C_j - C_{j-1}`` (what the policies take)."""
        return np.diff(self.cumulative_costs, prepend=0.0).tolist()

    @property
    def paper_error_rates(self) -> tuple[float, ...]:
        return PAPER_ERROR_RATES[self.dataset]

    def log(self) -> tuple[np.ndarray, np.ndarray]:
        """The ``N x K`` logged outputs and the ``N`` labels (shared with the in-memory cache)."""
        return dataset_log(self.dataset)

    def disagreement_log(self) -> tuple[np.ndarray, np.ndarray]:
        """The replay engine's view of the log: ``N x K`` output codes and ``N x P`` disagreement indicators.

        >>> codes, pairs = paper_case("heart-1").disagreement_log()
        >>> codes.shape[1], pairs.shape[1]   # K = 3 stages, P = 3 pairs
        (3, 3)

        """
        from uss_stream.replay.engine import encode_log, pair_indicators

        outputs, labels = self.log()
        codes, _ = encode_log(outputs, labels)
        return codes, pair_indicators(codes)

    def instance(self) -> Instance:
        """Error rates, disagreements and SD violations measured on the whole log, with these costs."""
        outputs, labels = self.log()
        return Instance.from_log(outputs, labels, cumulative_costs=self.cumulative_costs, name=self.name)


def dataset_log(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    """The log of a dataset: ``N x K`` int outputs (cascade order) and ``N`` int labels.

    >>> outputs, labels = dataset_log("heart")
    >>> outputs.shape, labels.shape
    ((297, 3), (297,))

    """
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {', '.join(DATASETS)}, got {dataset!r}")
    return _log(dataset)


@cache
def _log(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    if dataset == "bsc":
        outputs, labels = generate_bsc(BSC_LOG_ROWS, seed=BSC_SEED)
    elif dataset in REAL_STAGE_FEATURES:
        outputs, labels = real_cascade(dataset)
    else:
        outputs, labels = synthetic_cascade(int(dataset.removeprefix("synthetic")))
    outputs.flags.writeable = False
    labels.flags.writeable = False
    return outputs, labels


def real_cascade(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    """Train the three logistic regressions of a real dataset; their predictions on all rows and the labels.

    >>> outputs, labels = real_cascade("pima")
    >>> (outputs != labels[:, None]).sum(axis=0).tolist()
    [231, 171, 168]

    """
    if dataset == "pima":
        features, target = load_pima()
    elif dataset == "heart":
        features, target = load_heart()
    else:
        raise ValueError(f"dataset must be 'pima' or 'heart', got {dataset!r}")
    predictions = []
    # scikit-learn is imported when a cascade is trained, not when the case list is read (the CLI).
    require("sklearn", purpose="training the paper's cascades")
    require("threadpoolctl", purpose="training the paper's cascades")
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # tiny problems: BLAS threads only add overhead
        for columns in REAL_STAGE_FEATURES[dataset]:
            model = LogisticRegression(max_iter=10_000).fit(features[list(columns)], target)
            predictions.append(model.predict(features[list(columns)]))
    return np.stack(predictions, axis=1).astype(np.int64), target.to_numpy(dtype=np.int64)


def _real_costs(dataset: str, case: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    table = tuple(
        round(lam * cost, 10) for lam, cost in zip(REAL_LAMBDAS[dataset][case], REAL_COSTS[dataset])
    )
    usable = tuple(np.minimum.accumulate(np.array(table)[::-1])[::-1].tolist())
    return usable, table


def _build_cases() -> dict[str, PaperCase]:
    cases: dict[str, PaperCase] = {}
    for case, costs in BSC_CASES.items():
        cases[f"bsc-{case}"] = PaperCase("bsc", case, costs, costs, TABLE1_OPTIMAL[case], TABLE1_WD[case])
    for dataset, optimal in _REAL_OPTIMAL.items():
        for case, depth in optimal.items():
            usable, table = _real_costs(dataset, case)
            cases[f"{dataset}-{case}"] = PaperCase(dataset, case, usable, table, depth, case != 5)
    for number, table_cases in SYNTHETIC_CASES.items():
        for case, costs in table_cases.items():
            cases[f"synthetic{number}-{case}"] = PaperCase(
                f"synthetic{number}", case, costs, costs, TABLE_OPTIMAL[number][case], TABLE_WD[number][case]
            )
    return cases


#: ``name -> PaperCase`` for all 25 instances; building this registry trains nothing.
PAPER_CASES: dict[str, PaperCase] = _build_cases()


def wd_case_names() -> list[str]:
    """The cases whose log satisfies weak dominance (with our data), in the suite's order."""
    return [name for name, case in PAPER_CASES.items() if case.instance().satisfies_wd]


def paper_case(name: str) -> PaperCase:
    """The instance called ``name`` (``"bsc-1"`` .. ``"synthetic2-5"``)."""
    if name not in PAPER_CASES:
        raise ValueError(f"unknown paper case {name!r}; known: {', '.join(PAPER_CASES)}")
    return PAPER_CASES[name]
