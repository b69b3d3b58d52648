"""Pima Indians Diabetes (768 rows) with Turney's feature costs; provenance in ``data/PROVENANCE.md``."""

from __future__ import annotations

from importlib import resources

import pandas as pd

__all__ = ["load_pima", "pima_feature_costs", "TARGET"]

TARGET = "outcome"


def load_pima() -> tuple[pd.DataFrame, pd.Series]:
    """The features (8 columns) and the binary target ``outcome`` (1 = diabetic).

    >>> X, y = load_pima()
    >>> X.shape, int(y.sum())
    ((768, 8), 268)

    """
    with resources.files(__package__).joinpath("data/pima_indians_diabetes.csv").open() as handle:
        frame = pd.read_csv(handle)
    return frame.drop(columns=TARGET), frame[TARGET].astype(int)


def pima_feature_costs() -> pd.DataFrame:
    """One row per feature: ``feature``, ``cost_cad``, ``discount_cost_cad``, ``group``, ``delay``.

    >>> pima_feature_costs()["feature"].tolist()
    ['pregnancies', 'glucose', 'blood_pressure', 'skin_thickness', 'insulin', 'bmi',
     'diabetes_pedigree', 'age']

    """
    with resources.files(__package__).joinpath("data/pima_feature_costs.csv").open() as handle:
        costs = pd.read_csv(handle, keep_default_na=False)
    costs["feature"] = costs["feature"].map(_PIMA_COLUMNS)
    return costs.drop(columns="uci_name")


# Turney's short names -> the column names of the bundled data set, in the same order.
_PIMA_COLUMNS = {
    "preg": "pregnancies",
    "plas": "glucose",
    "pres": "blood_pressure",
    "skin": "skin_thickness",
    "insu": "insulin",
    "mass": "bmi",
    "pedi": "diabetes_pedigree",
    "age": "age",
}
