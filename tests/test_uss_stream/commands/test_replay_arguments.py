"""``uss-stream replay`` refuses a negative seed and a directory given as the log: one line, exit 2,
before anything is read or replayed."""

from __future__ import annotations

import pandas as pd

from uss_stream.commands.cli import main


def test_a_negative_seed_is_refused_naming_the_option(tmp_path, capsys):
    log = tmp_path / "log.csv"
    pd.DataFrame({"s1": [1, 0] * 5, "s2": [1, 1] * 5, "y": [1, 0] * 5}).to_csv(log, index=False)
    arguments = ["replay", "--input", str(log), "--costs", "0,0.1", "--seed", "-1", "--no-progress",
                 "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(arguments) == 2
    captured = capsys.readouterr()
    assert (
        captured.err.strip()
        == "uss-stream replay: error: --seed must be >= 0 (a seed of the row sampling), got -1"
    )
    assert not (tmp_path / "out").exists() and "replaying" not in captured.out


def test_a_directory_given_as_the_log_is_named_as_a_directory(tmp_path, capsys):
    arguments = ["replay", "--input", str(tmp_path), "--costs", "0,0.1", "--no-progress",
                 "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(arguments) == 2
    assert capsys.readouterr().err.strip() == (
        f"uss-stream replay: error: {tmp_path} is a directory: give the log file itself "
        "(CSV, JSON lines or Parquet)"
    )
