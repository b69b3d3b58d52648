"""The keyed study: a run's record, and the targets' figures computed by hand from records."""

from __future__ import annotations

import pytest

from studies.keyed_instances import generate
from studies.keyed_report import target_figures
from studies.keyed_study import SMALL_KEY, run_variant


def test_a_run_records_its_regret_by_rare_and_wd_keys():
    instance = generate(0)
    record = run_variant(instance, "one", {"horizon": 3000, "reps": 1, "seed": 0})
    (rep,) = record["reps"]
    assert 0 <= rep["small_regret"] <= rep["regret"] and 0 <= rep["wd_regret"] <= rep["regret"]
    assert rep["wd_small_regret"] <= min(rep["small_regret"], rep["wd_regret"])
    assert rep["small_events"] <= 3000 and rep["small_keys"] <= rep["keys"] <= len(instance.key_names)
    assert SMALL_KEY == 1000 and record["policy"].startswith("USSKLUCB")


def _record(family, xi, regret, small, wd, wd_small):
    rep = {
        "regret": regret,
        "small_regret": small,
        "wd_regret": wd,
        "wd_small_regret": wd_small,
        "wd_events": 1,
    }
    return {"family": family, "details": {"xi": xi}, "reps": [rep]}


def test_the_figures_from_records():
    runs = {
        # Mixed, every type satisfies WD: keyed 20 against one 100 (0.2); rare 5 against 10.
        "a": {
            "keyed": _record("different", [0.1, 0.2], 20, 5, 20, 5),
            "one": _record("different", [0.1, 0.2], 100, 50, 100, 50),
            "independent": _record("different", [0.1, 0.2], 30, 10, 30, 10),
        },
        # Mixed, a type fails WD: keyed 90 against 100; on the WD keys 9 against 10.
        "b": {
            "keyed": _record("different", [-0.1, 0.2], 90, 30, 9, 3),
            "one": _record("different", [-0.1, 0.2], 100, 30, 10, 3),
            "independent": _record("different", [-0.1, 0.2], 95, 20, 12, 2),
        },
        # Shared: keyed 6 against one 5.
        "c": {
            "keyed": _record("shared", [0.3], 6, 1, 6, 1),
            "one": _record("shared", [0.3], 5, 1, 5, 1),
            "independent": _record("shared", [0.3], 50, 40, 50, 40),
        },
    }
    figures = target_figures(runs, "keyed")
    assert figures["mixed"] == pytest.approx({"a": 0.2, "b": 0.9})
    assert figures["mixed_wd"] == pytest.approx({"a": 0.2, "b": 0.9})
    assert figures["mixed_all_wd"] == pytest.approx({"a": 0.2})
    assert figures["shared"] == pytest.approx({"c": 1.2})
    assert figures["rare_total"] == pytest.approx((5 + 30 + 1) / (10 + 20 + 40))
    assert figures["rare_sums"]["wd different"] == pytest.approx((5 + 3) / (10 + 2))
    assert figures["rare_sums"]["wd shared"] == pytest.approx(1 / 40)
