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
