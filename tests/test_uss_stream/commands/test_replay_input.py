"""``uss-stream replay --input`` on prediction matrices as early-exit research publishes them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from uss_stream.commands.cli import main
from uss_stream.datasets.bsc import generate_bsc
from uss_stream.policies import USSUCB
from uss_stream.replay.engine import replay

SMALL = ["--horizon", "150", "--reps", "3", "--seed", "4", "--no-progress"]
COSTS = [0.0, 0.15, 0.2]


@pytest.fixture
def log() -> tuple[np.ndarray, np.ndarray]:
    return generate_bsc(400, seed=9)


def _library_regret(outputs: np.ndarray, labels: np.ndarray) -> float:
    """The regret the CLI must report, computed by the library on the arrays themselves."""
    result = replay(outputs, labels, policies={"u": USSUCB(COSTS)}, horizon=150, reps=3, seed=4)
    return float(result.final_regret("u")[0])


def _cli_regret(path: Path, out: Path, *flags: str) -> float:
    costs = ",".join(map(str, COSTS))
    policy = ["--policy", "uss-ucb", "--out", str(out)]
    code = main(["replay", *SMALL, "--input", str(path), "--costs", costs, *policy, *flags])
    assert code == 0
    return float(pd.read_csv(out / "summary.csv").loc[0, "regret_mean"])


def test_headerless_tab_separated_matrix_needs_no_column_flags(log, tmp_path: Path, capsys) -> None:
    outputs, labels = log
    path = tmp_path / "preds.tsv"
    np.savetxt(path, np.column_stack([outputs, labels]), fmt="%d", delimiter="\t")
    regret = _cli_regret(path, tmp_path / "out")
    assert "stages 0, 1, 2, label 3 (its last column)" in capsys.readouterr().out
    assert regret == pytest.approx(_library_regret(outputs, labels))


@pytest.mark.parametrize("name", ["preds.csv", "preds.jsonl", "preds.parquet", "preds.txt"])
def test_named_matrix_in_every_format(name: str, log, tmp_path: Path, capsys) -> None:
    outputs, labels = log
    frame = pd.DataFrame(outputs, columns=["exit1", "exit2", "exit3"]).assign(target=labels)
    path = tmp_path / name
    if name.endswith(".parquet"):
        frame.to_parquet(path)
    elif name.endswith(".jsonl"):
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_csv(path, sep="," if name.endswith(".csv") else " ", index=False)
    regret = _cli_regret(path, tmp_path / "out")
    assert "stages exit1, exit2, exit3, label target" in capsys.readouterr().out
    assert regret == pytest.approx(_library_regret(outputs, labels))


def test_explicit_flags_still_choose_the_columns(log, tmp_path: Path) -> None:
    """With --label, the other columns are the stages, whatever their position."""
    outputs, labels = log
    frame = pd.DataFrame({"y": labels, "a": outputs[:, 0], "b": outputs[:, 1], "c": outputs[:, 2]})
    path = tmp_path / "log.tsv"
    frame.to_csv(path, sep="\t", index=False)
    regret = _cli_regret(path, tmp_path / "out", "--label", "y")
    assert regret == pytest.approx(_library_regret(outputs, labels))


def test_a_one_column_file_says_what_to_give(tmp_path: Path, capsys) -> None:
    path = tmp_path / "one.csv"
    path.write_text("a\n0\n1\n")
    assert main(["replay", *SMALL, "--input", str(path), "--costs", "0", "--out", str(tmp_path / "o")]) == 2
    assert "give --stages" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
