"""River's estimator checks as pytest parameters, the way River's ``test_estimators.py`` runs them.

Every check that ``river.checks.yield_checks`` produces for an estimator, except those the
estimator's ``_unit_test_skips`` names, is one parameter ``(estimator, check)``; the test runs
``check(estimator.clone())``, so that each check starts from a fresh clone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from river import base, checks


def river_check_params(estimators: Iterable[base.Estimator]) -> list[Any]:
    """One ``pytest.param(estimator, check)`` per River check of each estimator, id ``position:check``.

    Examples
    --------
    >>> from river import linear_model
    >>> params = river_check_params([linear_model.LogisticRegression()])
    >>> ids = [param.id for param in params]
    >>> "0:check_learn_one" in ids and all(i.startswith("0:check_") for i in ids)
    True
    """
    return [
        pytest.param(estimator, check, id=f"{position}:{check.__name__}")
        for position, estimator in enumerate(estimators)
        for check in checks.yield_checks(estimator)
        if check.__name__ not in estimator._unit_test_skips()
    ]
