"""River's estimator checks as pytest parameters, the way River's ``test_estimators.py`` runs them.

Every check that ``river.checks.yield_checks`` produces for an estimator, except those the
estimator's ``_unit_test_skips`` names, is one parameter ``(estimator, check)``; the test runs
``check(estimator.clone())``, so that each check starts from a fresh clone. The checks that hide
features from events on purpose expect the cascade's one warning per stage whose features are all
hidden (:class:`~uss_stream.cascade.querying.EmptyViewWarning`), and ignore it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from river import base, checks

#: River's checks that drop features from events (and so may empty a stage's view).
FEATURE_HIDING_CHECKS = frozenset(
    {"check_emerging_features", "check_disappearing_features", "check_radically_disappearing_features"}
)
_HIDDEN_FEATURES = pytest.mark.filterwarnings("ignore::uss_stream.cascade.querying.EmptyViewWarning")


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
        pytest.param(
            estimator,
            check,
            id=f"{position}:{check.__name__}",
            marks=[_HIDDEN_FEATURES] if check.__name__ in FEATURE_HIDING_CHECKS else [],
        )
        for position, estimator in enumerate(estimators)
        for check in checks.yield_checks(estimator)
        if check.__name__ not in estimator._unit_test_skips()
    ]
