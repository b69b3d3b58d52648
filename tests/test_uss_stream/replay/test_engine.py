"""The offline replay engine: exact against the streaming loop, hand-checkable regret, bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from uss_stream.datasets.bsc import bsc_instance, generate_bsc
from uss_stream.datasets.paper import dataset_log, paper_case
from uss_stream.policies import (
    USSKLUCB,
    USSTS,
    USSUCB,
    FixedDepth,
    Hanawal2017WD,
    Oracle,
    Policy,
    SupervisedUCB,
)
from uss_stream.replay.engine import Z_95, encode_log, replay, replay_piecewise, sample_rows


def _streaming_depths(
    policy: Policy, outputs: np.ndarray, labels: np.ndarray, rows: np.ndarray, rep: int = 0
) -> np.ndarray:
    """The depths of the plain select/update loop of a fresh copy of ``policy`` on ``rows``.

    The copy is :meth:`~Policy.for_repetition` ``(rep)``: for a randomised policy, the stream of
    the replay's repetition ``rep``.
    """
    fresh = policy.for_repetition(rep)
    logged = outputs[:, : fresh.n_stages]
    if isinstance(fresh, SupervisedUCB):
        return fresh.run(logged[rows], labels[rows])
    return fresh.run(logged[rows])


def _random_log(n_rows: int, n_stages: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n_rows)
    flips = rng.random((n_rows, n_stages)) < np.linspace(0.35, 0.08, n_stages)
    return labels[:, None] ^ flips, labels


def _policies(stage_costs: list[float], error_rates: list[float]) -> dict[str, Policy]:
    depth = len(stage_costs)
    return {
        "uss-ucb": USSUCB(stage_costs, alpha=0.51),
        "uss-ucb-1.5": USSUCB(stage_costs, alpha=1.5),
        "uss-ucb-sqrt": USSUCB(stage_costs, alpha=1.0, f=lambda t: t + math.sqrt(t)),
        "alg2": Hanawal2017WD(stage_costs),
        "supervised": SupervisedUCB(stage_costs, alpha=0.51),
        "fixed": FixedDepth(max(1, depth - 1), stage_costs),
        "oracle": Oracle(stage_costs, error_rates),
        "uss-ts": USSTS(stage_costs, seed=3),
        "uss-kl-ucb": USSKLUCB(stage_costs),
        "uss-ucb-discounted": USSUCB(stage_costs, discount=0.95),
        "alg2-discounted": Hanawal2017WD(stage_costs, discount=0.99),
        "supervised-discounted": SupervisedUCB(stage_costs, discount=0.98),
        "uss-ts-discounted-unseeded": USSTS(stage_costs, discount=0.9),
        "uss-kl-ucb-discounted": USSKLUCB(stage_costs, alpha=0.7, discount=0.99),
    }


def _bsc(case: int) -> tuple[np.ndarray, np.ndarray, list[float]]:
    outputs, labels = generate_bsc(3000, seed=case)
    return outputs, labels, bsc_instance(case).stage_costs.tolist()


def _synthetic_strings() -> tuple[np.ndarray, np.ndarray, list[float]]:
    outputs, labels = _random_log(400, 4, seed=11)
    names = np.array(["benign", "malware"])
    return names[outputs], names[labels], [0.01, 0.05, 0.02, 0.1]


def _heart_case_2() -> tuple[np.ndarray, np.ndarray, list[float]]:
    outputs, labels = dataset_log("heart")
    return outputs, labels, paper_case("heart-2").stage_costs


def _five_stages() -> tuple[np.ndarray, np.ndarray, list[float]]:
    outputs, labels = _random_log(300, 5, seed=5)
    return outputs, labels, [0.0, 0.02, 0.03, 0.01, 0.05]


def _single_stage() -> tuple[np.ndarray, np.ndarray, list[float]]:
    outputs, labels = _random_log(50, 1, seed=1)
    return outputs, labels, [0.3]


INSTANCES = {
    "bsc-2": lambda: _bsc(2),
    "bsc-5 (no WD)": lambda: _bsc(5),
    "strings, K=4": _synthetic_strings,
    "heart-2": _heart_case_2,
    "K=5": _five_stages,
    "K=1": _single_stage,
}


@pytest.mark.parametrize("sampling", ["uniform", "permutation", "sequential"])
@pytest.mark.parametrize("instance", list(INSTANCES))
def test_replay_equals_the_streaming_loop_for_every_policy(instance: str, sampling: str) -> None:
    outputs, labels, costs = INSTANCES[instance]()
    gamma = (outputs != labels[:, None]).mean(axis=0).tolist()
    policies = _policies(costs, gamma)
    result = replay(outputs, labels, policies=policies, horizon=700, reps=3, seed=4, sampling=sampling)
    for name, policy in policies.items():
        for rep in range(3):
            expected = _streaming_depths(policy, outputs, labels, result.rows[rep], rep)
            np.testing.assert_array_equal(result.depths[name][rep], expected, err_msg=f"{name}, rep {rep}")


def test_long_replay_equals_the_streaming_loop() -> None:
    """Long enough for the speculation window to grow to its maximum and shrink again."""
    outputs, labels, costs = _bsc(1)
    policies = {
        "uss-ucb": USSUCB(costs),
        "supervised": SupervisedUCB(costs),
        "alg2": Hanawal2017WD(costs),
        "uss-ts": USSTS(costs, seed=1),
        "uss-kl-ucb": USSKLUCB(costs),
        "uss-kl-ucb-discounted": USSKLUCB(costs, discount=0.999),
    }
    result = replay(outputs, labels, policies=policies, horizon=12_000, reps=2, seed=9)
    for name, policy in policies.items():
        for rep in range(2):
            expected = _streaming_depths(policy, outputs, labels, result.rows[rep], rep)
            np.testing.assert_array_equal(result.depths[name][rep], expected, err_msg=name)


def test_randomised_repetitions_use_their_own_streams() -> None:
    outputs, labels, costs = _bsc(2)
    template = USSTS(costs, seed=8)
    result = replay(
        outputs, labels, policies={"ts": template}, horizon=400, reps=3, seed=0, sampling="sequential"
    )
    depths = result.depths["ts"]
    # Same rows in every repetition (sequential sampling), different streams: different depths.
    assert not np.array_equal(depths[0], depths[1]) and not np.array_equal(depths[1], depths[2])
    # Repetition 0 is the template's own stream; a second replay repeats every repetition exactly.
    np.testing.assert_array_equal(depths[0], USSTS(costs, seed=8).run(outputs[result.rows[0]]))
    again = replay(
        outputs, labels, policies={"ts": template}, horizon=400, reps=3, seed=0, sampling="sequential"
    )
    np.testing.assert_array_equal(again.depths["ts"], depths)


def _improved(outputs: np.ndarray) -> np.ndarray:
    """Stage 1 replaced by stage 2: the optimal depth of BSC case 2 moves from 2 to 1."""
    improved = outputs.copy()
    improved[:, 0] = outputs[:, 1]
    return improved


def test_piecewise_regret_is_measured_against_each_segments_optimum() -> None:
    outputs, labels, costs = _bsc(2)
    segments = [(outputs, labels), (_improved(outputs), labels)]
    policies = {f"d{d}": FixedDepth(d, costs) for d in (1, 2, 3)}
    result = replay_piecewise(segments, horizons=[30, 20], policies=policies, reps=2, seed=1)
    assert result.boundaries == [0, 30, 50] and result.horizon == 50
    assert [instance.optimal_depth for instance in result.instances] == [2, 1]
    cumulative = np.cumsum(costs)
    for d in (1, 2, 3):
        gaps = []
        for segment_outputs, length in ((outputs, 30), (_improved(outputs), 20)):
            total = cumulative + (segment_outputs != labels[:, None]).mean(axis=0)
            gaps += [total[d - 1] - total.min()] * length
        np.testing.assert_allclose(
            result.cumulative_regret[f"d{d}"], np.broadcast_to(np.cumsum(gaps), (2, 50))
        )
        first, _ = result.segment_regret(f"d{d}", 0)
        second, _ = result.segment_regret(f"d{d}", 1)
        assert first == pytest.approx(sum(gaps[:30])) and second == pytest.approx(sum(gaps[30:]))
    # The rows of segment 2 index the second log, stacked after the first.
    assert result.rows[:, :30].max() < len(outputs) <= result.rows[:, 30:].min()
    with pytest.raises(ValueError, match=r"segment must be in 0\.\.1, got 2"):
        result.segment_regret("d1", 2)


def test_piecewise_replay_equals_the_streaming_loop_across_the_change() -> None:
    outputs, labels, costs = _bsc(2)
    improved = _improved(outputs)
    stacked = np.concatenate([outputs, improved])
    stacked_labels = np.concatenate([labels, labels])
    policies = {
        "uss-ucb": USSUCB(costs),
        "uss-ts": USSTS(costs, seed=2, discount=0.99),
        "uss-kl-ucb": USSKLUCB(costs, discount=0.995),
    }
    result = replay_piecewise(
        [(outputs, labels), (improved, labels)], horizons=[700, 500], policies=policies, reps=2, seed=3
    )
    for name, policy in policies.items():
        for rep in range(2):
            expected = _streaming_depths(policy, stacked, stacked_labels, result.rows[rep], rep)
            np.testing.assert_array_equal(result.depths[name][rep], expected, err_msg=name)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"horizons": [10]}, "one horizon per segment"),
        ({"horizons": [10, 0]}, r"horizons\[1\] must be an integer >= 1"),
        ({"segments": []}, "non-empty sequence"),
        ({"segments": "log"}, "non-empty sequence"),
        (
            {"segments": [("a", "b", "c"), ("a", "b", "c")]},
            r"segments\[0\] must be an \(outputs, labels\) pair",
        ),
        ({"reps": 0}, "reps must be an integer >= 1"),
        ({"sampling": "bootstrap"}, "sampling must be one of"),
    ],
)
def test_piecewise_bad_parameters_are_rejected(kwargs: dict, message: str) -> None:
    outputs, labels, costs = _bsc(2)
    arguments = {
        "segments": [(outputs, labels), (outputs, labels)],
        "horizons": [10, 10],
        "policies": {"u": USSUCB(costs)},
        "reps": 2,
        **kwargs,
    }
    with pytest.raises(ValueError, match=message):
        replay_piecewise(**arguments)


def test_piecewise_segments_need_labels_and_the_same_stages() -> None:
    outputs, labels, costs = _bsc(2)
    with pytest.raises(ValueError, match=r"segments\[1\] must be an \(outputs, labels\) pair with labels"):
        replay_piecewise(
            [(outputs, labels), (outputs, None)], horizons=[5, 5], policies={"u": USSUCB(costs)}, reps=1
        )
    with pytest.raises(ValueError, match=r"segments\[1\] has 2 stage columns, segments\[0\] has 3"):
        replay_piecewise(
            [(outputs, labels), (outputs[:, :2], labels)],
            horizons=[5, 5],
            policies={"u": USSUCB(costs)},
            reps=1,
        )


def test_templates_are_not_modified_and_their_state_is_ignored() -> None:
    outputs, labels, costs = _bsc(2)
    template = USSUCB(costs)
    template.run(outputs[:50])  # a trained template: the replay must still start from scratch
    before = template.state_dict()
    result = replay(outputs, labels, policies={"u": template}, horizon=300, reps=2, seed=1)
    assert template.state_dict() == before
    expected = _streaming_depths(USSUCB(costs), outputs, labels, result.rows[0])
    np.testing.assert_array_equal(result.depths["u"][0], expected)


def test_fixed_depth_regret_is_horizon_times_gap() -> None:
    outputs, labels, costs = _bsc(2)
    policies = {f"d{d}": FixedDepth(d, costs) for d in (1, 2, 3)}
    result = replay(outputs, labels, policies=policies, horizon=250, reps=4, seed=0)
    gamma = (outputs != labels[:, None]).mean(axis=0)
    total = np.cumsum(costs) + gamma
    gaps = total - total.min()
    assert result.instance.optimal_depth == 2
    for d in (1, 2, 3):
        regret = result.cumulative_regret[f"d{d}"]
        np.testing.assert_allclose(regret, np.broadcast_to(np.arange(1, 251) * gaps[d - 1], (4, 250)))
        mean, half = result.final_regret(f"d{d}")
        assert mean == pytest.approx(250 * gaps[d - 1]) and half == pytest.approx(0.0, abs=1e-9)


def test_oracle_has_zero_regret() -> None:
    outputs, labels, costs = _bsc(4)
    gamma = (outputs != labels[:, None]).mean(axis=0).tolist()
    result = replay(outputs, labels, policies={"oracle": Oracle(costs, gamma)}, horizon=200, reps=3)
    assert np.all(result.cumulative_regret["oracle"] == 0.0)
    assert np.all(result.depths["oracle"] == result.instance.optimal_depth)


def test_uniform_sampling_is_reproducible_from_the_seed() -> None:
    outputs, labels, costs = _bsc(1)
    first = replay(outputs, labels, policies={"u": USSUCB(costs)}, horizon=300, reps=5, seed=123)
    again = replay(outputs, labels, policies={"u": USSUCB(costs)}, horizon=300, reps=5, seed=123)
    other = replay(outputs, labels, policies={"u": USSUCB(costs)}, horizon=300, reps=5, seed=124)
    expected = np.random.default_rng(123).integers(0, len(outputs), size=(5, 300))
    np.testing.assert_array_equal(first.rows, expected)
    np.testing.assert_array_equal(first.depths["u"], again.depths["u"])
    assert not np.array_equal(first.rows, other.rows)


def test_sampling_modes() -> None:
    permuted = sample_rows(5, horizon=12, reps=3, seed=0, sampling="permutation")
    for rep in permuted:
        assert sorted(rep[:5].tolist()) == list(range(5)) and sorted(rep[5:10].tolist()) == list(range(5))
    np.testing.assert_array_equal(
        sample_rows(4, horizon=6, reps=2, sampling="sequential"), [[0, 1, 2, 3, 0, 1], [0, 1, 2, 3, 0, 1]]
    )
    with pytest.raises(ValueError, match="sampling must be one of"):
        sample_rows(4, horizon=6, reps=2, sampling="bootstrap")


def test_summary_columns_and_confidence_interval() -> None:
    outputs, labels, costs = _bsc(2)
    result = replay(
        outputs,
        labels,
        policies={"u": USSUCB(costs), "d3": FixedDepth(3, costs)},
        horizon=400,
        reps=6,
        seed=2,
    )
    summary = result.summary()
    assert list(summary.columns) == [
        "policy",
        "regret_mean",
        "regret_ci_low",
        "regret_ci_high",
        "depth_1",
        "depth_2",
        "depth_3",
        "mean_cost",
        "cost_total",
        "full_cascade_cost_total",
        "error_rate",
        "labels_mean",
        "wd_verdict",
        "wd_best_depth",
        "cost_saved",
        "accuracy",
        "accuracy_vs_deepest",
        "accuracy_vs_best_fixed",
        "best_fixed_depth",
        "instance_wd_verdict",
    ]
    assert summary["policy"].tolist() == ["u", "d3"]
    assert summary["labels_mean"].tolist() == [0.0, 0.0]  # label-free policies use no labels
    row = summary.iloc[0]
    final = result.cumulative_regret["u"][:, -1]
    half = 1.959963984540054 * final.std(ddof=1) / math.sqrt(6)
    assert pytest.approx(1.959963984540054) == Z_95
    assert row["regret_mean"] == pytest.approx(final.mean())
    assert row["regret_ci_low"] == pytest.approx(final.mean() - half)
    assert row["regret_ci_high"] == pytest.approx(final.mean() + half)
    depths = result.depths["u"]
    for d in (1, 2, 3):
        assert row[f"depth_{d}"] == pytest.approx(np.mean(depths == d))
    assert row["mean_cost"] == pytest.approx(np.cumsum(costs)[depths - 1].mean())
    # the metrics' vocabulary: per repetition, the cost spent and the full cascade's
    assert row["cost_total"] == pytest.approx(np.cumsum(costs)[depths - 1].sum(axis=1).mean())
    assert row["full_cascade_cost_total"] == pytest.approx(result.horizon * sum(costs))
    chosen = outputs[result.rows, depths - 1]
    assert row["error_rate"] == pytest.approx(np.mean(chosen != labels[result.rows]))
    assert summary.iloc[1]["depth_3"] == 1.0


def test_single_repetition_has_no_confidence_interval() -> None:
    outputs, labels, costs = _bsc(2)
    summary = replay(outputs, labels, policies={"u": USSUCB(costs)}, horizon=50, reps=1).summary()
    assert math.isnan(summary.loc[0, "regret_ci_low"]) and not math.isnan(summary.loc[0, "regret_mean"])


def test_plot_draws_one_line_per_policy() -> None:
    outputs, labels, costs = _bsc(2)
    result = replay(
        outputs, labels, policies={"u": USSUCB(costs), "a": Hanawal2017WD(costs)}, horizon=100, reps=3
    )
    figure = result.plot(title="t")
    assert isinstance(figure, Figure)
    assert [line.get_label() for line in figure.axes[0].get_lines()] == ["u", "a"]


def test_error_rates_without_labels() -> None:
    outputs, _, costs = _bsc(2)
    gamma = [0.4, 0.1, 0.05]
    result = replay(outputs, policies={"d1": FixedDepth(1, costs)}, horizon=10, reps=2, error_rates=gamma)
    total = np.cumsum(costs) + gamma
    assert result.cumulative_regret["d1"][0, -1] == pytest.approx(10 * (total[0] - total.min()))
    assert math.isnan(result.summary().loc[0, "error_rate"])
    unlabelled = replay(outputs, policies={"d1": FixedDepth(1, costs)}, horizon=10, reps=2)
    assert not unlabelled.has_regret and math.isnan(unlabelled.summary().loc[0, "regret_mean"])
    with pytest.raises(ValueError, match="regret needs error rates"):
        unlabelled.cumulative_regret  # noqa: B018


def test_any_hashable_outputs_give_the_same_depths() -> None:
    outputs, labels = _random_log(200, 3, seed=3)
    costs = [0.0, 0.05, 0.05]
    as_ints = replay(outputs, labels, policies={"u": USSUCB(costs)}, horizon=300, reps=2, seed=1)
    words = np.array(["no", "yes"], dtype=object)
    frame = pd.DataFrame(words[outputs], columns=["a", "b", "c"])
    as_words = replay(
        frame, pd.Series(words[labels]), policies={"u": USSUCB(costs)}, horizon=300, reps=2, seed=1
    )
    np.testing.assert_array_equal(as_ints.depths["u"], as_words.depths["u"])
    np.testing.assert_allclose(as_ints.cumulative_regret["u"], as_words.cumulative_regret["u"])


def test_encoding_is_shared_across_columns_and_labels() -> None:
    codes, label_codes = encode_log([[1, 1.0, True], ["x", "y", "x"]], [1, "y"])
    assert codes.tolist() == [[0, 0, 0], [1, 2, 1]]
    assert label_codes.tolist() == [0, 2]


def test_fixed_depth_without_costs_in_a_deeper_log() -> None:
    outputs, labels, costs = _bsc(2)
    result = replay(outputs, labels, policies={"u": USSUCB(costs), "two": FixedDepth(2)}, horizon=20, reps=2)
    assert np.all(result.depths["two"] == 2)


@pytest.mark.parametrize(
    ("outputs", "labels", "message"),
    [
        (
            [[0, 1], [None, 1], [1, 1], [0, float("nan")]],
            None,
            r"outputs have missing values .* 2 row\(s\): 1, 3",
        ),
        ([[0, 1], [1, 1]], [0, None], r"labels have missing values .* 1 row\(s\): 1"),
        ([[0, 1], [1, 1]], [0, 1, 1], "labels must hold 2 entries"),
        ([], None, "non-empty N x K table"),
        ([[[0]]], None, "non-empty N x K table"),
    ],
)
def test_bad_logs_are_rejected(outputs: object, labels: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replay(outputs, labels, policies={"d": FixedDepth(1, [0.0, 0.1])}, horizon=5, reps=1)


def test_missing_outputs_report_many_rows_briefly() -> None:
    outputs = np.zeros((30, 2), dtype=object)
    outputs[::2, 1] = None
    with pytest.raises(ValueError, match=r"15 row\(s\): 0, 2, 4, 6, 8, 10, 12, 14, 16, 18 \(and 5 more\)"):
        replay(outputs, policies={"d": FixedDepth(1, [0.0, 0.1])}, horizon=5, reps=1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"horizon": 0}, "horizon must be an integer >= 1"),
        ({"reps": 0}, "reps must be an integer >= 1"),
        ({"reps": 2.5}, "reps must be an integer >= 1"),
        ({"horizon": True}, "horizon must be an integer >= 1"),
        ({"sampling": "bootstrap"}, "sampling must be one of"),
        ({"policies": {}}, "non-empty mapping"),
        ({"policies": {"x": "USS-UCB"}}, "must be a Policy"),
        ({"policies": {"u": USSUCB([0.0, 0.1])}}, "has 2 stage cost"),
        ({"policies": {"u": USSUCB([0.0, 0.1, 0.1, 0.1])}}, "has 4 stage cost"),
        ({"policies": {"a": USSUCB([0, 0.1, 0.2]), "b": USSUCB([0, 0.2, 0.2])}}, "different stage costs"),
        ({"policies": {"d": FixedDepth(2)}}, "no policy carries stage costs"),
        ({"stage_costs": [0.0, 0.1]}, "stage_costs must hold 3 costs"),
        ({"error_rates": [0.1, 0.2]}, "error_rates must hold 3 rates"),
        ({"labels": None, "policies": {"s": SupervisedUCB([0, 0.1, 0.2])}}, "learns from labels"),
    ],
)
def test_bad_parameters_are_rejected(kwargs: dict, message: str) -> None:
    outputs, labels, costs = _bsc(2)
    arguments = {"labels": labels, "policies": {"u": USSUCB(costs)}, "horizon": 10, "reps": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        replay(outputs, **arguments)


def test_numeric_logs_encode_like_object_logs() -> None:
    outputs, labels = _random_log(100, 3, seed=8)
    numeric_codes, numeric_labels = encode_log(outputs.astype(float), labels)
    object_codes, object_labels = encode_log(outputs.astype(object), labels.astype(object))
    np.testing.assert_array_equal(numeric_codes == numeric_codes[:, :1], object_codes == object_codes[:, :1])
    np.testing.assert_array_equal(
        numeric_codes == numeric_labels[:, None], object_codes == object_labels[:, None]
    )
    holes = outputs.astype(float)
    holes[[4, 7], 2] = np.nan
    with pytest.raises(ValueError, match=r"2 row\(s\): 4, 7"):
        encode_log(holes, labels)
