"""``python -m studies.reproduce`` end to end, including bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from studies.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_reproduce_writes_results_and_figures(tmp_path: Path, capsys) -> None:
    out = tmp_path / "docs"
    out.mkdir()
    (out / "other.md").write_text("kept")
    assert main(["--out", str(out), "--reps", "2", "--horizon", "60", "--no-progress"]) == 0
    text = (out / "results.md").read_text()
    for heading in ("Tables 1–4", "Fig. 2", "Fig. 3", "Fig. 4a", "Fig. 4b", "Fig. 4c", "Where we match"):
        assert heading in text
    assert "Beyond the paper" in text
    assert "Feedback delay" in text
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert len(figures) == 11 and all(name.endswith(".png") for name in figures)
    for name in figures:
        assert f"figures/{name}" in text
    assert (out / "other.md").read_text() == "kept"
    assert sorted(p.name for p in out.iterdir()) == ["figures", "other.md", "results.md"]
    assert "wrote" in capsys.readouterr().out


def test_reproduce_rejects_bad_parameters_and_writes_nothing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "docs"
    assert main(["--out", str(out), "--reps", "0", "--no-progress"]) == 2
    assert "reps must be an integer >= 1" in capsys.readouterr().err
    assert main(["--out", str(out), "--horizon", "1", "--no-progress"]) == 2
    assert "horizon must be an integer >= 2" in capsys.readouterr().err
    assert not out.exists()


def test_reproduce_runs_as_a_module_from_the_repository(tmp_path: Path) -> None:
    """``python -m studies.reproduce`` is the command ``make reproduce`` runs; bad input exits 2."""
    out = tmp_path / "docs"
    done = subprocess.run(
        [sys.executable, "-m", "studies.reproduce", "--out", str(out), "--reps", "0", "--no-progress"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "reps must be an integer >= 1" in done.stderr
    assert not out.exists()
