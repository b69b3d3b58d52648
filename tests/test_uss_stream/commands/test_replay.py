"""``uss-stream replay`` end to end, including bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from uss_stream.commands.cli import main
from uss_stream.commands.replay import parse_policy
from uss_stream.datasets.bsc import generate_bsc
from uss_stream.datasets.paper import paper_case
from uss_stream.policies import USSUCB, FixedDepth, Hanawal2017WD, Oracle, SupervisedUCB
from uss_stream.replay.engine import replay

SMALL = ["--horizon", "120", "--reps", "3", "--no-progress"]


@pytest.fixture
def log_csv(tmp_path: Path) -> Path:
    outputs, labels = generate_bsc(500, seed=3)
    frame = pd.DataFrame(outputs, columns=["cheap", "mid", "dear"]).assign(truth=labels, note="x")
    path = tmp_path / "log.csv"
    frame.to_csv(path, index=False)
    return path


def _replay(*args: str) -> int:
    return main(["replay", *SMALL, *args])


def test_replay_on_a_csv_writes_summary_and_plot(log_csv: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "result"
    code = _replay(
        "--input", str(log_csv), "--stages", "cheap,mid,dear", "--label", "truth",
        "--costs", "0,0.15,0.2", "--policy", "uss-ucb:alpha=0.51", "--policy", "alg2",
        "--policy", "fixed:depth=2", "--policy", "supervised", "--policy", "oracle", "--out", str(out),
    )  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["regret.png", "summary.csv"]
    summary = pd.read_csv(out / "summary.csv")
    assert summary["policy"].tolist() == [
        "uss-ucb:alpha=0.51",
        "alg2",
        "fixed:depth=2",
        "supervised:alpha=0.51",
        "oracle",
    ]
    assert summary.loc[summary.policy == "oracle", "regret_mean"].item() == 0.0
    assert (out / "regret.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "regret ± 95%" in printed and "uss-ucb:alpha=0.51" in printed and "wrote" in printed
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no staging folder left"


def test_replay_on_parquet_with_cumulative_costs(tmp_path: Path) -> None:
    outputs, labels = generate_bsc(300, seed=1)
    path = tmp_path / "log.parquet"
    pd.DataFrame({"s1": outputs[:, 0], "s2": outputs[:, 1], "y": labels}).to_parquet(path)
    out = tmp_path / "out"
    assert (
        _replay("--input", str(path), "--label", "y", "--cumulative-costs", "0,0.3", "--out", str(out)) == 0
    )
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns[4:6]) == ["depth_1", "depth_2"]
    assert "supervised:alpha=0.51" in summary["policy"].tolist()


def test_replay_without_labels_uses_error_rates(log_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = _replay(
        "--input", str(log_csv), "--stages", "cheap,mid,dear", "--costs", "0,0.15,0.2",
        "--error-rates", "0.4,0.1,0.05", "--out", str(out),
    )  # fmt: skip
    assert code == 0
    assert "supervised:alpha=0.51" not in pd.read_csv(out / "summary.csv")["policy"].tolist()


def test_replay_default_is_a_bundled_case(tmp_path: Path, capsys) -> None:
    out = tmp_path / "quick"
    assert _replay("--out", str(out)) == 0
    assert "bundled case pima-1" in capsys.readouterr().out
    summary = pd.read_csv(out / "summary.csv")
    assert summary["policy"].tolist() == [
        "uss-kl-ucb",
        "uss-ucb:alpha=0.51",
        "alg2",
        "fixed:depth=3",
        "supervised:alpha=0.51",
    ]
    assert _replay("--case", "heart-2", "--out", str(out)) == 0


def test_replay_into_an_existing_folder_keeps_other_files(log_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "existing"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "summary.csv").write_text("old")
    args = ["--input", str(log_csv), "--stages", "cheap,mid,dear", "--label", "truth", "--costs", "0,0.1,0.1"]
    assert _replay(*args, "--out", str(out)) == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "summary.csv").read_text().startswith("policy,")


STAGES = ["--stages", "cheap,mid,dear"]
LABEL = ["--label", "truth"]
COSTS = ["--costs", "0,0.15,0.2"]
BAD_INPUT = {
    "missing stage column": (["--stages", "cheap,nope,dear", *LABEL, *COSTS], "no column(s) 'nope'"),
    "missing label column": ([*STAGES, "--label", "y", *COSTS], "no column(s) 'y'"),
    "costs do not match": ([*STAGES, *LABEL, "--costs", "0,0.1"], "--costs has 2 value(s) but there are 3"),
    "horizon 0": ([*STAGES, *LABEL, *COSTS, "--horizon", "0"], "--horizon must be >= 1"),
    "reps negative": ([*STAGES, *LABEL, *COSTS, "--reps", "-2"], "--reps must be >= 1"),
    "no costs": ([*STAGES, *LABEL], "give the costs of the 3 stage(s)"),
    "both costs": ([*STAGES, *LABEL, *COSTS, "--cumulative-costs", "0,1,2"], "not both"),
    "no label nor rates": ([*STAGES, *COSTS], "give --label"),
    "unknown policy": ([*STAGES, *LABEL, *COSTS, "--policy", "ucb"], "unknown policy 'ucb'"),
    "bad parameter": ([*STAGES, *LABEL, *COSTS, "--policy", "fixed:depth=x"], "not a valid int"),
    "depth too deep": ([*STAGES, *LABEL, *COSTS, "--policy", "fixed:depth=4"], "depth must be <="),
    "duplicate policy": ([*STAGES, *LABEL, *COSTS, "--policy", "alg2", "--policy", "alg2"], "twice"),
    "decreasing cumulative": ([*STAGES, *LABEL, "--cumulative-costs", "0,0.2,0.1"], "non-decreasing"),
    "case with input": ([*STAGES, *LABEL, *COSTS, "--case", "bsc-1"], "cannot be combined"),
    "text costs": ([*STAGES, *LABEL, "--costs", "a,b,c"], "comma-separated numbers"),
    "wrong error rates": ([*STAGES, *COSTS, "--error-rates", "0.1"], "--error-rates has 1 value(s)"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_exits_non_zero_and_writes_nothing(
    case: str, log_csv: Path, tmp_path: Path, capsys
) -> None:
    args, message = BAD_INPUT[case]
    out = tmp_path / "out"
    assert _replay("--input", str(log_csv), *args, "--out", str(out)) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.csv"]


def test_missing_outputs_name_their_rows(tmp_path: Path, capsys) -> None:
    path = tmp_path / "holes.csv"
    pd.DataFrame({"a": [0, 1, 1, 0], "b": [1, None, 1, None], "y": [0, 1, 1, 0]}).to_csv(path, index=False)
    out = tmp_path / "out"
    assert _replay("--input", str(path), "--label", "y", "--costs", "0,0.1", "--out", str(out)) == 2
    assert "outputs have missing values (None/NaN) in 2 row(s): 1, 3" in capsys.readouterr().err
    assert not out.exists()


def test_missing_file_and_unreadable_out(tmp_path: Path, capsys) -> None:
    assert _replay("--input", str(tmp_path / "none.csv"), "--costs", "0", "--out", str(tmp_path / "o")) == 2
    assert "no such file" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert _replay("--out", str(blocker)) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_parse_policy_builds_each_policy() -> None:
    costs, gamma = [0.0, 0.1, 0.2], [0.3, 0.2, 0.1]
    assert isinstance(parse_policy("uss-ucb", costs, gamma)[1], USSUCB)
    assert isinstance(parse_policy("alg2", costs, gamma)[1], Hanawal2017WD)
    assert isinstance(parse_policy("supervised:alpha=1.5", costs, gamma)[1], SupervisedUCB)
    assert parse_policy("oracle", costs, gamma)[1].select() == 2
    name, fixed = parse_policy("fixed:depth=-1", costs, gamma)
    assert name == "fixed:depth=3" and isinstance(fixed, FixedDepth) and fixed.depth == 3
    assert isinstance(parse_policy(" oracle ", costs, gamma)[1], Oracle)
    with pytest.raises(ValueError, match="unknown parameter"):
        parse_policy("alg2:alpha=1", costs, gamma)
    with pytest.raises(ValueError, match="key=value"):
        parse_policy("uss-ucb:0.5", costs, gamma)


def test_bundled_replay_matches_library_call(tmp_path: Path) -> None:
    """The CLI's numbers are the library's: same seed, same rows, same regret."""
    out = tmp_path / "cli"
    assert _replay("--case", "bsc-2", "--policy", "uss-ucb", "--seed", "7", "--out", str(out)) == 0
    case = paper_case("bsc-2")
    outputs, labels = case.log()
    result = replay(outputs, labels, policies={"u": USSUCB(case.stage_costs)}, horizon=120, reps=3, seed=7)
    cli = pd.read_csv(out / "summary.csv")
    assert cli.loc[0, "regret_mean"] == pytest.approx(result.final_regret("u")[0])
    assert np.isclose(cli.loc[0, "depth_1"], result.summary().loc[0, "depth_1"])


def test_costs_in_a_currency_without_their_price_warn_and_with_it_convert(tmp_path: Path, capsys) -> None:
    # PIMA's three stages at 5, 10 and 20 (dollars, say): read as errors, depths 2 and 3 are
    # unreachable, and the run says so on stderr before it starts.
    out = tmp_path / "out"
    assert _replay("--costs", "5,10,20", "--policy", "uss-kl-ucb", "--out", str(out)) == 0
    captured = capsys.readouterr()
    assert "uss-stream replay: warning: depths 2..3 can never be the best depth" in captured.err
    assert "--price-of-error" in captured.err
    # With an error priced at 250 they are 0.02, 0.04 and 0.08 errors: the same run as those costs.
    args = ["--policy", "uss-kl-ucb", "--policy", "audited", "--label-cost", "2.5"]
    assert _replay("--costs", "5,10,20", "--price-of-error", "250", *args, "--out", str(out)) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and "the costs given / 250 per error" in captured.out
    priced = pd.read_csv(out / "summary.csv")
    assert _replay("--costs", "0.02,0.04,0.08", "--policy", "uss-kl-ucb", "--policy", "audited",
                   "--label-cost", "0.01", "--out", str(out)) == 0  # fmt: skip
    pd.testing.assert_frame_equal(priced, pd.read_csv(out / "summary.csv"))


def test_a_price_of_error_needs_costs_to_convert(tmp_path: Path, capsys) -> None:
    assert _replay("--price-of-error", "100", "--out", str(tmp_path / "out")) == 2
    assert "--price-of-error converts the costs you give" in capsys.readouterr().err
    assert _replay("--costs", "1,2,3", "--price-of-error", "0", "--out", str(tmp_path / "out")) == 2
    assert "--price-of-error must be a finite number > 0" in capsys.readouterr().err


def test_the_printed_summary_states_the_logs_verdict_and_fits_100_columns(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert _replay("--policy", "uss-kl-ucb", "--policy", "audited:label_budget=2,alpha=1",
                   "--policy", "fixed:depth=-1", "--out", str(out)) == 0  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    # pima-1 (paper_case): C + γ = (0.341, 0.530, 0.909) and ξ = 0.072 (docs/results.md's table).
    assert (
        lines[1]
        == "best fixed depth 1 of 3: cost 0.04 + error rate 0.301 = 0.341 per event (deepest stage: 0.909)"
    )
    assert lines[2].startswith("weak dominance holds (ξ = 0.0721)")
    assert all(len(line) <= 100 for line in lines if not line.startswith(("replaying", "wrote")))
    summary = pd.read_csv(out / "summary.csv").set_index("policy")
    deepest = summary.loc["fixed:depth=3"]
    assert deepest["cost_saved"] == 0.0 and deepest["accuracy_vs_deepest"] == 0.0
    row = summary.loc["uss-kl-ucb"]
    assert row["cost_saved"] == pytest.approx(1 - row["mean_cost"] / 0.69)
    assert row["accuracy_vs_deepest"] == pytest.approx(deepest["error_rate"] - row["error_rate"])
