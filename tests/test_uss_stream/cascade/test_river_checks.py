"""River's own estimator checks, run the way River's ``test_estimators.py`` runs them.

Every ``_unit_test_params`` configuration of :class:`CascadeClassifier` (binary stages with a
pipeline stage, mixed binary/multiclass stages with feature-derived costs and no warm-up,
multiclass stages, one learner per key, a fixed-depth policy) and a few pipelines are checked
against every check ``river.checks.yield_checks`` produces, each on a fresh clone.
"""

from __future__ import annotations

import pytest
from estimator_checks import river_check_params
from river import checks, linear_model, preprocessing

from uss_stream import CascadeClassifier, Stage


def _estimators():
    for params in CascadeClassifier._unit_test_params():
        yield CascadeClassifier(**params)
    yield preprocessing.StandardScaler() | CascadeClassifier(
        stages=[
            Stage(linear_model.LogisticRegression(), features=("https", "long_url"), cost=0.0),
            Stage(linear_model.LogisticRegression(), cost=0.05),
        ],
        warm_up=3,
    )


@pytest.mark.parametrize(("estimator", "check"), river_check_params(_estimators()))
def test_check_estimator(estimator, check):
    check(estimator.clone())


def test_the_suite_covers_every_configuration_and_the_binary_check():
    names = {
        (position, check.__name__)
        for position, estimator in enumerate(_estimators())
        for check in checks.yield_checks(estimator)
    }
    configurations = {position for position, _ in names}
    assert configurations == set(range(6))
    # The mixed binary/multiclass configuration is binary, so River asks for {False, True} keys.
    assert (1, "check_predict_proba_one_binary") in names
    # The multiclass configuration is also checked on ImageSegments (7 classes).
    multiclass = CascadeClassifier(**list(CascadeClassifier._unit_test_params())[2])
    assert multiclass._multiclass
