"""The River pipeline example runs and accounts Turney's PIMA costs as computed by hand."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "river_pipeline.py"


def test_pima_example(capsys):
    main = runpy.run_path(str(EXAMPLE), run_name="example")["main"]
    rows = main(["--passes", "1"])
    printed = capsys.readouterr().out
    assert "stage costs (CAD): [6.0, 17.61, 20.68]" in printed
    assert [row["policy"] for row in rows] == [
        "USS-UCB",
        "USS-KL-UCB (default)",
        "fixed depth 1",
        "fixed depth 2",
        "fixed depth 3",
    ]
    # Fixed depths pay C_d on every event: 6 CAD; 6 + 17.61; 6 + 17.61 + 20.68 (insulin at the
    # discount, the glucose test having opened their group).
    assert [row["mean_cost_cad"] for row in rows[2:]] == pytest.approx([6.0, 23.61, 44.29])
    assert [row["depths"] for row in rows[2:]] == [[768, 0, 0], [0, 768, 0], [0, 0, 768]]
    for adaptive in rows[:2]:
        assert sum(adaptive["depths"]) == 768
        assert 6.0 <= adaptive["mean_cost_cad"] <= 44.29
    assert all(0.6 < row["accuracy"] < 0.85 for row in rows)


CASCADE_WINS = EXAMPLE.parent / "cascade_wins.py"


def test_the_cascade_wins_example_saves_most_of_the_cost_without_losing_accuracy(capsys):
    rows = runpy.run_path(str(CASCADE_WINS), run_name="example")["main"]([])
    assert [row["policy"] for row in rows] == [
        "cascade (default policy)",
        "always depth 1",
        "always depth 2",
        "always depth 3",
    ]
    # Always depth d pays C_d = 0, 0 + 0.2, 0 + 0.2 + 0.3 on each of Phishing's 1250 events.
    assert [row["mean_cost"] for row in rows[1:]] == pytest.approx([0.0, 0.2, 0.5])
    assert [row["depths"] for row in rows[1:]] == [[1250, 0, 0], [0, 1250, 0], [0, 0, 1250]]
    cascade = rows[0]
    assert sum(cascade["depths"]) == 1250
    by_hand = sum(n * c for n, c in zip(cascade["depths"], [0.0, 0.2, 0.5])) / 1250
    assert cascade["mean_cost"] == pytest.approx(by_hand)
    assert cascade["cost_saved"] == pytest.approx(1 - by_hand / 0.5)
    # The example's claim: most of the cost saved, no accuracy lost against the deepest stage.
    assert cascade["cost_saved"] >= 0.8 and cascade["accuracy_change"] >= 0.0
    assert "The cascade costs" in capsys.readouterr().out
