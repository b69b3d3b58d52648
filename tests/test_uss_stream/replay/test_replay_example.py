"""``examples/replay_your_log.py`` replays a log in the user's currency; checked on its bundled sample."""

from __future__ import annotations

import runpy
from pathlib import Path

import pandas as pd
import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "replay_your_log.py"
SAMPLE = EXAMPLE.parent / "data" / "pima_cascade_log.csv"


def test_the_sample_is_replayed_in_its_currency_against_the_deepest_stage(capsys):
    main = runpy.run_path(str(EXAMPLE), run_name="example")["main"]
    # Each repetition walks through the 768 patients once: the fixed depths' error rates are the log's.
    rows = {
        row["policy"]: row for row in main(["--horizon", "768", "--reps", "2", "--sampling", "permutation"])
    }
    log = pd.read_csv(SAMPLE)
    fixed = [rows[f"always depth {d}"] for d in (1, 2, 3)]
    # Turney's CAD: 6, then + 17.61 (glucose), then + 20.68 (insulin at the group discount).
    assert [row["mean_cost"] for row in fixed] == pytest.approx([6.0, 23.61, 44.29])
    assert [row["cost_saved"] for row in fixed] == pytest.approx([1 - 6 / 44.29, 1 - 23.61 / 44.29, 0.0])
    accuracy = [(log[stage] == log["diabetes"]).mean() for stage in ("history", "glucose", "insulin")]
    assert [row["accuracy"] for row in fixed] == pytest.approx(accuracy)
    assert [row["accuracy_change"] for row in fixed] == pytest.approx(
        [100 * (a - accuracy[2]) for a in accuracy]
    )
    assert rows["always depth 1"]["labels"] == 0 and rows["audited"]["labels"] > 0
    assert "one error = 200" in capsys.readouterr().out


def test_a_log_of_their_own_needs_its_costs(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("a,b,y\n1,1,1\n0,1,1\n")
    main = runpy.run_path(str(EXAMPLE), run_name="example")["main"]
    with pytest.raises(SystemExit):
        main([str(log)])
