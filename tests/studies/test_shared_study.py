"""The shared-learning study: its baselines, its columns, and the section it writes."""

from __future__ import annotations

import numpy as np
import pytest

from studies.shared_study import shared_figure, shared_markdown, shared_study
from uss_stream.datasets.paper import PAPER_CASES
from uss_stream.policies import USSUCB
from uss_stream.policies.kernel import speculate
from uss_stream.replay.engine import encode_log, pair_order, sample_rows


@pytest.fixture(scope="module")
def frame():
    return shared_study(workers=(1, 3), sync_every=(5, None), cases=["bsc-1", "bsc-4"], reps=4, horizon=300)


def test_rows_and_columns(frame):
    assert frame[frame["case"] == "bsc-1"][["workers", "setting"]].values.tolist() == [
        [1, "pooled"], [1, "S = 5"], [1, "isolated"], [3, "pooled"], [3, "S = 5"], [3, "isolated"],
    ]  # fmt: skip
    assert (frame["reps"] == 4).all() and (frame["horizon"] == 300).all()


def test_one_worker_is_the_same_learner_in_every_setting(frame):
    alone = frame[frame["workers"] == 1]
    assert alone["added"].to_numpy() == pytest.approx(0.0, abs=1e-9)
    for _, group in alone.groupby("case"):
        assert group["regret"].to_numpy() == pytest.approx(group["regret"].iloc[0])


def test_pooled_is_one_learner_over_the_interleaved_events(frame):
    case = PAPER_CASES["bsc-1"]
    codes, _ = encode_log(*case.log())
    upper_i, upper_j = pair_order(codes.shape[1])
    rows = sample_rows(len(codes), horizon=900, reps=4, seed=0).reshape(4, 3, 300)
    interleaved = rows.transpose(0, 2, 1).reshape(4, 900)
    assert interleaved[0, :3].tolist() == rows[0, :, 0].tolist()
    depths = speculate(USSUCB(case.stage_costs), interleaved, codes[:, upper_i] != codes[:, upper_j])
    want = case.instance().gaps[depths.astype(np.int64) - 1].sum(axis=1).mean()
    got = frame.query("case == 'bsc-1' and workers == 3 and setting == 'pooled'")["regret"].item()
    assert got == pytest.approx(want)


def test_isolation_costs_and_is_paid_before_a_sync(frame):
    three = frame[(frame["case"] == "bsc-1") & (frame["workers"] == 3)].set_index("setting")
    assert three.loc["isolated", "added"] > three.loc["isolated", "added_ci"] > 0
    assert three.loc["isolated", "before_sync"] == pytest.approx(three.loc["isolated", "added"])
    assert frame[frame["case"] == "bsc-4"]["regret"].eq(0).all()  # K is optimal: nothing to learn


def test_markdown_and_figure(frame):
    text = shared_markdown(frame, "figures/fig8_shared.png")
    assert text.startswith("## 11. Shared learning across workers")
    assert "**W = 3**" in text and "| bsc-1 |" in text and "![" in text
    assert "Cases where K is optimal (bsc-4) lose nothing" in text
    assert len(shared_figure(frame).axes) == 2


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"workers": (0,)}, "workers"), ({"workers": ()}, "workers"), ({"reps": 0}, "reps"),
     ({"horizon": 1.5}, "horizon"), ({"sync_every": (0,)}, "sync_every")],
)  # fmt: skip
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        shared_study(cases=["bsc-1"], **{"reps": 2, "horizon": 20, **kwargs})
