"""FeatureCosts: Turney's group discounts and the incremental stage costs of a cascade, by hand."""

from __future__ import annotations

import math
from importlib import resources

import pandas as pd
import pytest

from uss_stream import CascadeClassifier, Stage
from uss_stream.cascade.feature_costs import FeatureCosts
from uss_stream.datasets.heart import heart_feature_costs
from uss_stream.datasets.pima import pima_feature_costs


@pytest.fixture
def heart():
    return FeatureCosts.from_frame(heart_feature_costs())


def test_from_csv_reads_the_bundled_heart_costs(heart):
    path = resources.files("uss_stream.datasets").joinpath("data/heart_feature_costs.csv")
    assert FeatureCosts.from_csv(path) == heart
    assert heart.features[:3] == ("age", "sex", "cp")
    assert len(heart.features) == 13


def test_ungrouped_features_pay_full_price(heart):
    assert heart.cost_of(["age", "sex", "restecg"]) == pytest.approx(1 + 1 + 15.50)
    assert heart.cost_of(["ca"]) == pytest.approx(100.90)


def test_first_member_of_a_group_pays_full_price_later_ones_the_discount(heart):
    # Group C: exang, oldpeak, slope at 87.30 each, 1.00 after the first.
    assert heart.cost_of(["exang"]) == pytest.approx(87.30)
    assert heart.cost_of(["exang", "oldpeak", "slope"]) == pytest.approx(87.30 + 1.00 + 1.00)
    # Group A: chol 7.27 / 5.17 and fbs 5.20 / 3.10 share the 2.10 overhead, in either order.
    assert heart.cost_of(["chol", "fbs"]) == pytest.approx(7.27 + 3.10)
    assert heart.cost_of(["fbs", "chol"]) == pytest.approx(5.20 + 5.17)


def test_features_bought_earlier_are_free_and_open_their_group(heart):
    assert heart.cost_of(["age", "thal"], already_bought=["age"]) == pytest.approx(102.90)
    assert heart.cost_of(["thal"], already_bought=["thalach"]) == pytest.approx(1.00)
    assert heart.cost_of(["fbs"], already_bought=["chol"]) == pytest.approx(3.10)
    assert heart.cost_of(["age"], already_bought=["age"]) == 0.0
    # A name the table does not price opens no group and is otherwise ignored.
    assert heart.cost_of(["chol"], already_bought=["not-a-test"]) == pytest.approx(7.27)


def test_duplicates_are_bought_once(heart):
    assert heart.cost_of(["exang", "exang"]) == pytest.approx(87.30)


def test_stage_costs_are_incremental(heart):
    stages = [
        ("age", "sex", "cp", "trestbps"),  # 4 x 1.00
        ("age", "sex", "cp", "trestbps", "chol", "thalach"),  # chol 7.27 (A) + thalach 102.90 (B)
        ("chol", "fbs", "thal", "exang"),  # fbs 3.10 (A open) + thal 1.00 (B open) + exang 87.30
    ]
    assert heart.stage_costs(stages) == pytest.approx([4.0, 110.17, 91.40])


def test_none_stands_for_every_feature(heart):
    everything = 4 * 1.00 + 7.27 + 3.10 + 15.50 + (102.90 + 1.00) + (87.30 + 1.00 + 1.00) + 100.90
    assert heart.stage_costs([None]) == pytest.approx([everything])
    assert heart.stage_costs([("age",), None]) == pytest.approx([1.0, everything - 1.0])


def test_pima_glucose_then_insulin_gets_the_group_discount():
    pima = FeatureCosts.from_frame(pima_feature_costs())
    cheap = ("pregnancies", "blood_pressure", "skin_thickness", "bmi", "diabetes_pedigree", "age")
    costs = pima.stage_costs([cheap, (*cheap, "glucose"), (*cheap, "glucose", "insulin")])
    assert costs == pytest.approx([6.0, 17.61, 20.68])


def test_unequal_overheads_charge_the_cheapest_order():
    table = FeatureCosts(
        costs={"a": 10.0, "b": 4.0},
        discount_costs={"a": 1.0, "b": 3.0},
        groups={"a": "g", "b": "g"},
    )
    # b first (overhead 1): 4 + 1 = 5; a first (overhead 9): 10 + 3 = 13.
    assert table.cost_of(["a", "b"]) == pytest.approx(5.0)


def test_groups_may_be_blank_or_nan():
    frame = pd.DataFrame(
        {
            "feature": ["a", "b", "c"],
            "cost_cad": [2.0, 2.0, 2.0],
            "discount_cost_cad": [1.0, 1.0, 1.0],
            "group": ["", math.nan, None],
        }
    )
    assert FeatureCosts.from_frame(frame).cost_of(["a", "b", "c"]) == pytest.approx(6.0)


def test_scaled_multiplies_every_cost(heart):
    scaled = heart.scaled(0.01)
    assert scaled.cost_of(["chol", "fbs"]) == pytest.approx(0.01 * (7.27 + 3.10))
    assert scaled.stage_costs([("exang",), ("oldpeak",)]) == pytest.approx([0.873, 0.01])


def test_cascade_derives_incremental_stage_costs(heart):
    from river import linear_model

    cascade = CascadeClassifier(
        stages=[
            Stage(linear_model.LogisticRegression(), features=("age", "chol")),
            Stage(linear_model.LogisticRegression(), features=("age", "chol", "fbs"), cost=0.5),
            Stage(linear_model.LogisticRegression(), features=("fbs", "thal")),
        ],
        feature_costs=heart,
        price_of_error=200,
    )
    # Stage 2's cost is given; its features still count as bought for stage 3. Every cost, given or
    # derived, is in CAD and an error costs 200 CAD.
    assert cascade.stage_costs == pytest.approx((8.27 / 200, 0.5 / 200, 102.90 / 200))
    assert cascade._policy.stage_costs == pytest.approx([8.27 / 200, 0.5 / 200, 102.90 / 200])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"costs": {}}, "non-empty mapping"),
        ({"costs": {"a": -1.0}}, r"costs\['a'\] must be a finite number >= 0"),
        ({"costs": {"a": math.inf}}, r"costs\['a'\] must be a finite number >= 0"),
        ({"costs": {"a": "1"}}, r"costs\['a'\] must be a number"),
        ({"costs": {"a": 1.0}, "discount_costs": {"a": 2.0}}, "exceeds"),
        ({"costs": {"a": 1.0}, "discount_costs": {"b": 0.5}}, "without a cost"),
        ({"costs": {"a": 1.0}, "groups": {"b": "g"}}, "without a cost"),
        ({"costs": {"a": 1.0}, "groups": ["g"]}, "groups must be a mapping"),
    ],
)
def test_bad_tables(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FeatureCosts(**kwargs)


def test_bad_queries(heart):
    with pytest.raises(ValueError, match=r"\['glucose'\] have no acquisition cost"):
        heart.cost_of(["age", "glucose"])
    with pytest.raises(ValueError, match="string"):
        heart.cost_of("age")
    with pytest.raises(ValueError, match="lacks column"):
        FeatureCosts.from_frame(heart_feature_costs(), cost="price")
    with pytest.raises(ValueError, match="factor"):
        heart.scaled(-1.0)


def test_repr_is_deterministic_and_eval_friendly():
    table = FeatureCosts({"a": 1.0}, {"a": 0.5}, {"a": "g"})
    assert repr(table) == "FeatureCosts(costs={'a': 1.0}, discount_costs={'a': 0.5}, groups={'a': 'g'})"
    assert eval(repr(table)) == table
