"""Per-event cost of the River cascade wrapper, and its throughput against always running the deepest stage.

Run: ``python -m benchmarks.bench_cascade``. Two measurements, each against a baseline timed in the
same run:

1. **Wrapper overhead** (target <= 5 µs per event). Trivial stages that echo one feature drive a
   USS-UCB cascade over a noisy stream; the same stages are then called directly, on views built
   beforehand, for the same depths. The overhead is the difference per event: the policy's
   select/update, the feature views, the output bookkeeping and, for ``predict_one``, recognising
   the event. The policy's own select/update time is reported separately.
2. **Throughput** (target: faster than always-deepest when depth 1 is optimal). A stream where a
   logistic regression on three features is nearly as good as a 10-tree adaptive random forest on
   all 20: the cascade (LR on 3 features, LR on all, forest) against the forest alone, on the same
   events. Inference only (stages trained on a prefix first), and progressive validation
   (predict, then learn every stage).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from river import base, forest, linear_model

from uss_stream import CascadeClassifier, Stage
from uss_stream.policies import USSUCB, FixedDepth

N_FEATURES = 20
NAMES = [f"x{i}" for i in range(N_FEATURES)]


class Echo(base.Classifier):
    """A trivial stage: answers the value of the one feature it sees."""

    _multiclass = True

    def learn_one(self, x, y, **kwargs):
        pass

    def predict_proba_one(self, x):
        for value in x.values():
            return {value: 1.0}
        return {}


def echo_stream(n_events: int, seed: int) -> list[dict[str, int]]:
    """Stage 1 is the truth with 10% of labels flipped, stages 2-3 are the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_events)
    flipped = truth ^ (rng.random(n_events) < 0.1)
    rows = np.stack([flipped, truth, truth], axis=1).tolist()
    return [{"s1": a, "s2": b, "s3": c, "extra": 0.5} for a, b, c in rows]


#: Stage costs under which USS-UCB settles on depth 1 (stage 1's 10% disagreement is not worth
#: 0.2 or more) or on depth 3 (every stage is nearly free).
SCENARIOS = {"shallow": [0.0, 0.3, 0.2], "deep": [0.0, 0.01, 0.01]}


def echo_cascade(costs: list[float]) -> CascadeClassifier:
    stages = [Stage(Echo(), features=(f"s{j + 1}",), cost=c) for j, c in enumerate(costs)]
    return CascadeClassifier(stages=stages, warm_up=0)


def measure_overhead(costs: list[float], n_events: int, repeats: int, seed: int = 0) -> dict[str, float]:
    events = echo_stream(n_events, seed)
    best: dict[str, float] = {}

    def keep(name: str, seconds: float) -> None:
        best[name] = min(best.get(name, np.inf), seconds)

    for _ in range(repeats):
        cascade = echo_cascade(costs)
        decide = cascade.decide_one
        start = time.perf_counter()
        depths = [decide(x).depth for x in events]
        keep("decide_one", time.perf_counter() - start)

        cascade = echo_cascade(costs)
        predict = cascade.predict_one
        start = time.perf_counter()
        for x in events:
            predict(x)
        keep("predict_one", time.perf_counter() - start)

        # The same stages called directly, on prebuilt views, for the same depths.
        models = [stage.model for stage in cascade.stages]
        calls = [
            [(models[j], {f"s{j + 1}": x[f"s{j + 1}"]}) for j in range(depth)]
            for x, depth in zip(events, depths)
        ]
        start = time.perf_counter()
        for event_calls in calls:
            for model, view in event_calls:
                model.predict_proba_one(view)
        keep("stages", time.perf_counter() - start)

        # The policy alone on the same outputs.
        rows = [[x["s1"], x["s2"], x["s3"]] for x in events]
        policy = USSUCB(stage_costs=costs)
        select, update = policy.select, policy.update
        start = time.perf_counter()
        for row in rows:
            update(row[: select()])
        keep("policy", time.perf_counter() - start)

    per_event = {name: seconds / n_events * 1e6 for name, seconds in best.items()}
    return {
        "events": n_events,
        "mean_depth": float(np.mean(depths)),
        "decide_one_us": per_event["decide_one"],
        "predict_one_us": per_event["predict_one"],
        "stages_us": per_event["stages"],
        "policy_us": per_event["policy"],
        "overhead_decide_us": per_event["decide_one"] - per_event["stages"],
        "overhead_predict_us": per_event["predict_one"] - per_event["stages"],
    }


def forest_stream(n_events: int, seed: int) -> list[tuple[dict[str, float], bool]]:
    """20 Gaussian features; the label depends almost only on x0, x1, x2."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_events, N_FEATURES))
    y = X[:, 0] + X[:, 1] + 0.3 * X[:, 2] + 0.1 * rng.normal(size=n_events) > 0
    return [(dict(zip(NAMES, row)), bool(label)) for row, label in zip(X.tolist(), y.tolist())]


def forest_cascade(policy=None) -> CascadeClassifier:
    return CascadeClassifier(
        stages=[
            Stage(linear_model.LogisticRegression(), features=("x0", "x1", "x2"), cost=0.0),
            Stage(linear_model.LogisticRegression(), cost=0.2),
            Stage(forest.ARFClassifier(n_models=10, seed=1), cost=0.3),
        ],
        policy=policy,
    )


def measure_throughput(n_train: int, n_test: int, repeats: int, seed: int = 1) -> dict[str, float]:
    events = forest_stream(n_train + n_test, seed)
    train, test = events[:n_train], events[n_train:]
    results: dict[str, float] = {}

    # Inference only: every model learns the same prefix (the cascade also decides on it, so its
    # policy has settled), then predicts the rest; best of `repeats` passes, the contenders
    # interleaved so that they share the machine's state.
    cascade = forest_cascade()
    deepest_cascade = forest_cascade(policy=FixedDepth(3))
    deepest = forest.ARFClassifier(n_models=10, seed=1)
    for x, y in train:
        cascade.predict_one(x)
        cascade.learn_one(x, y)
        deepest_cascade.learn_one(x, y)
        deepest.learn_one(x, y)
    test_x = [x for x, _ in test]
    answered_before = cascade.summary().stages["answered"].to_numpy()
    contenders = {
        "cascade": cascade.predict_one,
        "deepest_via_cascade": deepest_cascade.predict_one,
        "deepest": deepest.predict_one,
    }
    for repeat in range(repeats):
        for name, predict in contenders.items():
            start = time.perf_counter()
            predictions = [predict(x) for x in test_x]
            seconds = time.perf_counter() - start
            results[f"{name}_infer_eps"] = max(results.get(f"{name}_infer_eps", 0.0), n_test / seconds)
            if repeat == 0:
                hits = [p == y for p, (_, y) in zip(predictions, test)]
                results[f"{name}_accuracy"] = float(np.mean(hits))
        if repeat == 0:
            answered = cascade.summary().stages["answered"].to_numpy() - answered_before
            results["cascade_depth1_share"] = float(answered[0] / answered.sum())

    # Progressive validation from scratch: predict, then learn (every stage learns every label).
    for _ in range(repeats):
        for name, model in (
            ("cascade", forest_cascade()),
            ("deepest", forest.ARFClassifier(n_models=10, seed=1)),
        ):
            start = time.perf_counter()
            for x, y in events:
                model.predict_one(x)
                model.learn_one(x, y)
            eps = len(events) / (time.perf_counter() - start)
            results[f"{name}_progressive_eps"] = max(results.get(f"{name}_progressive_eps", 0.0), eps)
    results["infer_ratio"] = results["cascade_infer_eps"] / results["deepest_infer_eps"]
    results["progressive_ratio"] = results["cascade_progressive_eps"] / results["deepest_progressive_eps"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events of the overhead stream")
    parser.add_argument("--repeats", type=int, default=5, help="best of this many overhead runs")
    parser.add_argument("--train", type=int, default=2_000, help="training prefix of the throughput stream")
    parser.add_argument("--test", type=int, default=3_000, help="measured events of the throughput stream")
    parser.add_argument("--passes", type=int, default=3, help="best of this many throughput runs")
    args = parser.parse_args()

    print(f"Wrapper overhead, USS-UCB over K = 3 trivial stages, {args.events:,} events")
    print("| stream | mean depth | path | µs/event | stages alone | overhead | of which policy |")
    print("|---|---|---|---|---|---|---|")
    for scenario, costs in SCENARIOS.items():
        o = measure_overhead(costs, args.events, args.repeats)
        for path in ("decide", "predict"):
            print(
                f"| {scenario} | {o['mean_depth']:.2f} | {path}_one | {o[f'{path}_one_us']:.2f} | "
                f"{o['stages_us']:.2f} | {o[f'overhead_{path}_us']:.2f} | {o['policy_us']:.2f} |"
            )

    t = measure_throughput(args.train, args.test, args.passes)
    print()
    print(
        f"Throughput, LR(3 features) -> LR(20) -> ARF(10 trees), {args.test:,} events after "
        f"{args.train:,}; the cascade answered {t['cascade_depth1_share']:.1%} of them at depth 1"
    )
    print("| mode | cascade events/s | always-deepest events/s | ratio |")
    print("|---|---|---|---|")
    print(
        f"| inference | {t['cascade_infer_eps']:,.0f} | {t['deepest_infer_eps']:,.0f} | "
        f"{t['infer_ratio']:.1f}x |"
    )
    print(
        f"| progressive (predict + learn) | {t['cascade_progressive_eps']:,.0f} | "
        f"{t['deepest_progressive_eps']:,.0f} | {t['progressive_ratio']:.2f}x |"
    )
    print(
        f"Accuracy on the measured events: cascade {t['cascade_accuracy']:.2%}, "
        f"always-deepest {t['deepest_accuracy']:.2%} (through the wrapper: "
        f"{t['deepest_via_cascade_infer_eps']:,.0f} events/s, {t['deepest_via_cascade_accuracy']:.2%})"
    )


if __name__ == "__main__":
    main()
