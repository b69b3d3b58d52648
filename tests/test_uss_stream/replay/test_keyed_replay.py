"""The keyed replay and ``uss-stream replay --key``: each key's regret against its own best depth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from uss_stream.commands.cli import main
from uss_stream.policies import USSKLUCB, FixedDepth, KeyedPolicy
from uss_stream.replay.keyed import keyed_policies, replay_keyed

COSTS = [0.0, 0.1]


def two_sites(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    keys = rng.choice(["north", "south"], size=n, p=[0.6, 0.4])
    labels = rng.integers(0, 2, size=n)
    first = labels ^ (rng.random(n) < np.where(keys == "north", 0.02, 0.4))
    return np.stack([first, labels ^ (rng.random(n) < 0.01)], axis=1), keys, labels


def test_each_keys_regret_is_against_its_own_best_depth():
    outputs, keys, labels = two_sites()
    result = replay_keyed(
        outputs, keys, labels, policies={"d1": FixedDepth(1, COSTS), "d2": FixedDepth(2, COSTS)}
    )
    for name, depth in (("d1", 1), ("d2", 2)):
        for k, key in enumerate(result.keys):
            mine = keys == key
            total = [np.cumsum(COSTS)[j] + np.mean(outputs[mine, j] != labels[mine]) for j in range(2)]
            expected = mine.sum() * (total[depth - 1] - min(total))
            assert result.key_regret(name)[0, k] == pytest.approx(expected)
    best = result.key_summary().set_index("key")["best_depth"].to_dict()
    assert best == {"north": 1, "south": 2}


def test_the_learners_decide_as_they_do_on_their_own():
    outputs, keys, labels = two_sites(1500, seed=1)
    result = replay_keyed(outputs, keys, labels, policies=keyed_policies(USSKLUCB(COSTS)))
    assert result.depths["one learner"][0].tolist() == USSKLUCB(COSTS).run(outputs).tolist()
    assert (
        result.depths["keyed"][0].tolist()
        == KeyedPolicy(USSKLUCB(COSTS)).run(keys.tolist(), outputs).tolist()
    )
    alone = KeyedPolicy(USSKLUCB(COSTS), prior_strength=0).run(keys.tolist(), outputs).tolist()
    assert result.depths["independent"][0].tolist() == alone
    assert list(result.summary()["policy"]) == ["keyed", "one learner", "independent"]


def test_given_error_rates_and_bad_keys():
    outputs, keys, _ = two_sites(200)
    rates = {"north": [0.0, 0.0], "south": [0.5, 0.0]}  # south: depth 2 (0.1) beats depth 1 (0.5)
    result = replay_keyed(outputs, keys, policies={"d1": FixedDepth(1, COSTS)}, key_error_rates=rates)
    south = result.keys.index("south")
    assert result.key_regret("d1")[0, south] == pytest.approx((keys == "south").sum() * 0.4)
    with pytest.raises(ValueError, match="no rates for key"):
        replay_keyed(outputs, keys, policies={"d1": FixedDepth(1, COSTS)}, key_error_rates={"north": [0, 0]})
    with pytest.raises(ValueError, match="give the same key"):
        replay_keyed(
            outputs[:2], np.array([True, "True"], dtype=object), [0, 0], policies={"d1": FixedDepth(1, COSTS)}
        )
    with pytest.raises(ValueError, match="give labels or key_error_rates"):
        replay_keyed(outputs, keys, policies={"d1": FixedDepth(1, COSTS)})


def test_the_command_replays_a_keyed_log(tmp_path, capsys):
    outputs, keys, labels = two_sites(1200, seed=2)
    log = tmp_path / "log.csv"
    frame = pd.DataFrame({"site": keys, "s1": outputs[:, 0], "s2": outputs[:, 1], "y": labels})
    frame.to_csv(log, index=False)
    out = tmp_path / "out"
    assert main(["replay", "--input", str(log), "--key", "site", "--costs", "0,0.1", "--out", str(out)]) == 0
    summary = pd.read_csv(out / "summary.csv")
    per_key = pd.read_csv(out / "keys.csv")
    assert summary["policy"].tolist() == ["keyed", "one learner", "independent"]
    assert per_key.set_index("key")["events"].to_dict() == frame["site"].value_counts().to_dict()
    expected = replay_keyed(outputs, keys, labels, policies=keyed_policies(USSKLUCB(COSTS))).summary()
    assert summary["regret_mean"].tolist() == pytest.approx(expected["regret_mean"].tolist())
    assert "2 keys" in capsys.readouterr().out
    assert main(["replay", "--input", str(log), "--key", "place", "--costs", "0,0.1", "--out", str(out)]) == 2
    assert "has no column 'place'" in capsys.readouterr().err
    bad = ["replay", "--input", str(log), "--key", "site", "--costs", "0,0.1", "--policy", "audited"]
    assert main([*bad, "--out", str(out)]) == 2
    assert "label-free policies" in capsys.readouterr().err
