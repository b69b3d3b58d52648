"""Cleveland heart disease (297 complete rows) with Turney's test costs; see ``data/PROVENANCE.md``."""

from __future__ import annotations

from importlib import resources

import pandas as pd

__all__ = ["load_heart", "heart_feature_costs"]


def load_heart() -> tuple[pd.DataFrame, pd.Series]:
    """The 13 features of the complete rows and the binary target ``num > 0``.

    >>> X, y = load_heart()
    >>> X.shape, int(y.sum())
    ((297, 13), 137)

    """
    with resources.files(__package__).joinpath("data/heart_cleveland.csv").open() as handle:
        frame = pd.read_csv(handle, na_values=["?"])
    frame = frame.dropna().reset_index(drop=True)
    return frame.drop(columns="num"), (frame["num"] > 0).astype(int).rename("disease")


def heart_feature_costs() -> pd.DataFrame:
    """One row per feature: ``feature``, ``cost_cad``, ``discount_cost_cad``, ``group``, ``delay``."""
    with resources.files(__package__).joinpath("data/heart_feature_costs.csv").open() as handle:
        return pd.read_csv(handle, keep_default_na=False)
