"""Per-event overhead of a sequential (stop-or-continue) policy in the cascade against today's default.

Run: ``python -m benchmarks.bench_adaptive``. Target: the cascade's decide overhead with
:class:`~uss_stream.policies.SequentialKLUCB` at most 2x its overhead with the default
:class:`~uss_stream.policies.USSKLUCB`, both measured in the same run on the same events.

Trivial stages answer a label and a confidence read from the event (stage 1 flips 10% of the labels
and is unsure on those and on as many others; stages 2-3 are right), so the time is the cascade's
own: the policy, the feature views, the bookkeeping. The *overhead* is ``decide_one`` minus the same
stages called directly, on prebuilt views, for the same depths. The policies alone (select/update
against begin/step on the same outputs) are reported too.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from river import base

from uss_stream import CascadeClassifier, Stage
from uss_stream.policies import USSKLUCB, SequentialKLUCB

COSTS = [0.0, 0.3, 0.2]


class EchoConfidence(base.Classifier):
    """A trivial stage: the label in feature ``y`` with the probability in feature ``p``."""

    def learn_one(self, x, y, **kwargs):
        pass

    def predict_proba_one(self, x):
        label, confidence = x["y"], x["p"]
        return {label: confidence, not label: 1.0 - confidence}


def stream(n_events: int, seed: int) -> list[list[dict[str, object]]]:
    """Each event as the three stages' views ``{"y": label, "p": confidence}``."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n_events) < 0.5
    flipped = rng.random(n_events) < 0.1
    unsure = flipped | (rng.random(n_events) < 0.1 / 0.9)
    first = (truth ^ flipped).tolist()
    confidence = np.where(unsure, 0.6, 0.99).tolist()
    return [
        [{"y": a, "p": c}, {"y": b, "p": 0.9}, {"y": b, "p": 0.95}]
        for a, b, c in zip(first, truth.tolist(), confidence)
    ]


def cascade(policy) -> CascadeClassifier:
    stages = [
        Stage(EchoConfidence(), cost=c, name=f"s{j + 1}", provider=_provider(j)) for j, c in enumerate(COSTS)
    ]
    return CascadeClassifier(stages=stages, policy=policy, warm_up=0)


def _provider(j: int):
    return lambda x: x[j]


def measure(n_events: int, repeats: int, seed: int = 0) -> dict[str, float]:
    events = stream(n_events, seed)
    best: dict[str, float] = {}
    depths: dict[str, list[int]] = {}

    def keep(name: str, seconds: float) -> None:
        best[name] = min(best.get(name, np.inf), seconds)

    contenders = {"USS-KL-UCB": USSKLUCB(COSTS), "SequentialKLUCB": SequentialKLUCB(COSTS)}
    for _ in range(repeats):
        for name, policy in contenders.items():
            model = cascade(policy)
            decide = model.decide_one
            start = time.perf_counter()
            chosen = [decide(x).depth for x in events]
            keep(f"{name} decide_one", time.perf_counter() - start)
            depths[name] = chosen
            stages = [stage.model for stage in model.stages]
            calls = [[(stages[j], x[j]) for j in range(d)] for x, d in zip(events, chosen)]
            start = time.perf_counter()
            for event_calls in calls:
                for stage, view in event_calls:
                    stage.predict_proba_one(view)
            keep(f"{name} stages", time.perf_counter() - start)
        rows = [[view["y"] for view in x] for x in events]
        confidences = [[view["p"] for view in x] for x in events]
        fixed = USSKLUCB(COSTS)
        select, update = fixed.select, fixed.update
        start = time.perf_counter()
        for row in rows:
            update(row[: select()])
        keep("USS-KL-UCB policy", time.perf_counter() - start)
        sequential = SequentialKLUCB(COSTS)
        begin, step = sequential.begin, sequential.step
        start = time.perf_counter()
        for row, conf in zip(rows, confidences):
            begin()
            j = 0
            while step(row[j], conf[j]):
                j += 1
        keep("SequentialKLUCB policy", time.perf_counter() - start)
    us = {name: seconds / n_events * 1e6 for name, seconds in best.items()}
    result = {"events": n_events}
    for name in contenders:
        result[f"{name} mean depth"] = float(np.mean(depths[name]))
        result[f"{name} decide_one us"] = us[f"{name} decide_one"]
        result[f"{name} overhead us"] = us[f"{name} decide_one"] - us[f"{name} stages"]
        result[f"{name} policy us"] = us[f"{name} policy"]
    result["overhead ratio"] = result["SequentialKLUCB overhead us"] / result["USS-KL-UCB overhead us"]
    result["decide_one ratio"] = result["SequentialKLUCB decide_one us"] / result["USS-KL-UCB decide_one us"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--repeats", type=int, default=7, help="best of this many interleaved runs")
    args = parser.parse_args()
    result = measure(args.events, args.repeats)
    for name, value in result.items():
        print(f"{name:36s} {value:10.3f}" if isinstance(value, float) else f"{name:36s} {value:10d}")
    verdict = "met" if result["overhead ratio"] <= 2.0 else "missed"
    print(f"target: sequential overhead <= 2x USS-KL-UCB's: {verdict} ({result['overhead ratio']:.2f}x)")


if __name__ == "__main__":
    main()
