"""The service's costs in the user's units: ``--stage-costs`` with ``--price-of-error``.

The settings table carries the price like any setting; the service's policy, decisions, metrics and
checkpoints work with the costs in error units, converted once by the library
(:func:`uss_stream.core.units.in_error_units`).
"""

from __future__ import annotations

import warnings

import pytest

from uss_stream.commands.cli import build_parser
from uss_stream.core.units import CostScaleWarning
from uss_stream_kafka.cli.settings import KafkaSettings

RUN = {"bootstrap_servers": "b:9092", "input_topic": "i", "output_topic": "o", "dlq_topic": "d",
       "state_topic": "s", "group_id": "g"}  # fmt: skip
ORCHESTRATE = {**RUN, "reports_topic": "r"}


def _settings(command="run", **given):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = KafkaSettings(command, **(ORCHESTRATE if command == "orchestrate" else RUN), **given)
    return settings, [w for w in caught if issubclass(w.category, CostScaleWarning)]


@pytest.mark.parametrize("command", ["run", "orchestrate"])
def test_costs_in_dollars_are_divided_by_the_price_of_an_error(command):
    settings, caught = _settings(command, stage_costs="0,30,20", price_of_error="100")
    assert settings.stage_costs == [0.0, 30.0, 20.0]  # as given
    assert settings.error_unit_costs() == pytest.approx([0.0, 0.3, 0.2])
    assert settings.policy_template()[0].stage_costs == pytest.approx([0.0, 0.3, 0.2])
    assert not caught


def test_the_flag_and_the_variable(monkeypatch):
    arguments = ["kafka", "run", *[p for k, v in RUN.items() for p in (f"--{k.replace('_', '-')}", v)]]
    args = build_parser().parse_args([*arguments, "--stage-costs", "5,10", "--price-of-error", "250"])
    assert KafkaSettings.from_args(args).error_unit_costs() == pytest.approx([0.02, 0.04])
    monkeypatch.setenv("USS_KAFKA_PRICE_OF_ERROR", "50")
    args = build_parser().parse_args([*arguments, "--stage-costs", "5,10"])
    assert KafkaSettings.from_args(args).error_unit_costs() == pytest.approx([0.1, 0.2])


@pytest.mark.parametrize(
    ("costs", "price", "warns"),
    [("5,10,20", None, True), ("5,10,20", "250", False), ("0,1,0", None, False), ("0,1.001", None, True)],
)
def test_costs_that_leave_a_depth_unreachable_warn_once(costs, price, warns):
    # C_j - C_1 > 1 error: 10 (no price), 0.04 (price 250), exactly 1, 1.001.
    settings, caught = _settings(stage_costs=costs, price_of_error=price)
    settings.policy_template()
    settings.error_unit_costs()
    assert len(caught) == (1 if warns else 0)


@pytest.mark.parametrize("price", ["0", "-1", "inf", "nan", "dollars"])
def test_a_bad_price_is_refused_naming_the_flag_and_the_variable(price):
    with pytest.raises(ValueError, match=r"--price-of-error \(env USS_KAFKA_PRICE_OF_ERROR\): must be"):
        _settings(stage_costs="0,1", price_of_error=price)


def test_features_mode_takes_its_price_from_the_cascade_factory():
    with pytest.raises(ValueError, match=r"--price-of-error .* is for outputs mode"):
        _settings(mode="features", cascade_factory="m:f", price_of_error="100")
