"""Bad cascade input raises a clear ValueError/TypeError naming the parameter."""

from __future__ import annotations

import pytest
from river import linear_model, preprocessing

from uss_stream import CascadeClassifier, Stage
from uss_stream.cascade.feature_costs import FeatureCosts
from uss_stream.policies import USSUCB, FixedDepth, SupervisedUCB


def lr_stage(**kwargs):
    kwargs.setdefault("cost", 0.0)
    return Stage(linear_model.LogisticRegression(), **kwargs)


def test_no_stages():
    with pytest.raises(ValueError, match="stages must hold at least one Stage"):
        CascadeClassifier(stages=[])
    with pytest.raises(TypeError, match="stages must be a list of Stage"):
        CascadeClassifier(stages=None)


def test_duplicate_stage_names():
    message = r"stages: duplicate stage name 'fast' \(stages\[0\] and stages\[2\]\)"
    with pytest.raises(ValueError, match=message):
        CascadeClassifier(stages=[lr_stage(name="fast"), lr_stage(), lr_stage(name="fast")])
    with pytest.raises(ValueError, match="duplicate stage name 'stage1'"):
        CascadeClassifier(stages=[lr_stage(), lr_stage(name="stage1")])


@pytest.mark.parametrize("cost", [-0.1, float("nan"), float("inf"), "0.1", True])
def test_bad_stage_cost(cost):
    with pytest.raises(ValueError, match="Stage cost must be a finite number >= 0"):
        Stage(linear_model.LogisticRegression(), cost=cost)


def test_a_stage_that_is_not_a_classifier():
    with pytest.raises(TypeError, match=r"Stage model must be a River classifier .* got StandardScaler"):
        Stage(preprocessing.StandardScaler(), cost=0.0)
    with pytest.raises(TypeError, match=r"stages\[1\] must be a Stage, got LogisticRegression; wrap it"):
        CascadeClassifier(stages=[lr_stage(), linear_model.LogisticRegression()])
    with pytest.raises(TypeError, match=r"stages\[0\] must be a Stage, got str"):
        CascadeClassifier(stages=["lr"])


def test_bad_stage_features_and_name():
    with pytest.raises(TypeError, match="Stage features must be a sequence"):
        Stage(linear_model.LogisticRegression(), features="abc")
    with pytest.raises(ValueError, match="Stage features lists 'a' more than once"):
        Stage(linear_model.LogisticRegression(), features=("a", "b", "a"))
    with pytest.raises(TypeError, match="Stage name must be a string"):
        Stage(linear_model.LogisticRegression(), name=3)


def test_missing_cost():
    message = r"stages\[1\] \(stage2\) has cost=None and the cascade has no feature_costs"
    with pytest.raises(ValueError, match=message):
        CascadeClassifier(stages=[lr_stage(), Stage(linear_model.LogisticRegression())])


def test_feature_without_a_price():
    table = FeatureCosts({"a": 1.0})
    message = r"stages\[0\] \(stage1\): features \['b'\] have no acquisition cost"
    with pytest.raises(ValueError, match=message):
        CascadeClassifier(
            stages=[Stage(linear_model.LogisticRegression(), features=("a", "b"))], feature_costs=table
        )
    with pytest.raises(TypeError, match="feature_costs must be a FeatureCosts table"):
        CascadeClassifier(stages=[lr_stage()], feature_costs={"a": 1.0})


def test_bad_policy():
    with pytest.raises(TypeError, match=r"policy must be a uss_stream\.policies\.Policy"):
        CascadeClassifier(stages=[lr_stage()], policy="ucb")
    with pytest.raises(TypeError, match="policy: SupervisedUCB learns from labels"):
        CascadeClassifier(stages=[lr_stage()], policy=SupervisedUCB([0.0]))
    message = r"policy has stage_costs=\[0.0, 0.5\] but the stages cost \[0.0, 0.2\]"
    with pytest.raises(ValueError, match=message):
        CascadeClassifier(stages=[lr_stage(), lr_stage(cost=0.2)], policy=USSUCB([0.0, 0.5]))
    with pytest.raises(ValueError, match="policy: depth must be <= the number of stages 2"):
        CascadeClassifier(stages=[lr_stage(), lr_stage(cost=0.2)], policy=FixedDepth(3))
    # Matching costs are fine, and the policy's other parameters are kept.
    cascade = CascadeClassifier(stages=[lr_stage(), lr_stage(cost=0.2)], policy=USSUCB([0.0, 0.2], alpha=2.0))
    assert cascade._policy.alpha == 2.0


@pytest.mark.parametrize("warm_up", [-1, 1.5, "10", True])
def test_bad_warm_up(warm_up):
    with pytest.raises(ValueError, match="warm_up must be an integer >= 0"):
        CascadeClassifier(stages=[lr_stage()], warm_up=warm_up)
