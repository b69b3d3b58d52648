"""A three-stage cascade on PIMA diabetes with Turney's test costs, in a River pipeline.

Stage 1 reads the patient's history and the cheap measurements (6 CAD), stage 2 adds the glucose
tolerance test (17.61 CAD), stage 3 adds the insulin test (20.68 CAD: the glucose test already
paid the blood draw shared by both tests, Turney's group discount). A wrong diagnosis is priced
with ``--price-of-error`` (CAD per error; 200 by default, the paper's lambda = 1/200 error per CAD):
the cascade minimises the error rate plus the costs divided by that price. The cascade is
evaluated with progressive validation (predict, then learn, event by event) and compared with
always querying a fixed depth on the same stream.

USS-UCB never sees a label: it can only stop at stage ``i`` once the extra cost of every deeper
stage exceeds how often that stage disagrees with stage ``i`` (the paper's weak dominance). At the
default price the history-only stage disagrees with the glucose stage on about 18% of patients,
more than the glucose test's cost in errors (17.61 / 200 = 0.088), so the cascade settles on depth 2
although depth 1 has the lowest ``cost/price + error`` in hindsight; the disagreement rates are
printed last.

Run: ``python examples/river_pipeline.py [--price-of-error 200] [--passes 3] [--delay N]``.
"""

from __future__ import annotations

import argparse

from river import evaluate, linear_model, metrics, preprocessing, stream

from uss_stream import CascadeClassifier, Stage
from uss_stream.cascade.feature_costs import FeatureCosts
from uss_stream.datasets.pima import load_pima, pima_feature_costs
from uss_stream.policies import USSUCB, FixedDepth, Policy

HISTORY = ("pregnancies", "blood_pressure", "skin_thickness", "bmi", "diabetes_pedigree", "age")
FEATURES = (HISTORY, (*HISTORY, "glucose"), (*HISTORY, "glucose", "insulin"))


def make_cascade(price_of_error: float, policy: Policy | None = None, warm_up: int = 50):
    stages = [
        Stage(linear_model.LogisticRegression(), features=features, name=name)
        for name, features in zip(("history", "+glucose", "+insulin"), FEATURES)
    ]
    cad = FeatureCosts.from_frame(pima_feature_costs())
    return CascadeClassifier(
        stages=stages, policy=policy, feature_costs=cad, price_of_error=price_of_error, warm_up=warm_up
    )


def evaluate_cascade(cascade: CascadeClassifier, passes: int, delay: int | None) -> dict:
    X, y = load_pima()
    events = [(x, bool(label)) for _ in range(passes) for x, label in stream.iter_frame(X, y)]
    model = preprocessing.StandardScaler() | cascade
    accuracy = evaluate.progressive_val_score(events, model, metrics.Accuracy(), delay=delay)
    summary = cascade.summary()
    return {"accuracy": accuracy.get(), "mean_cost": summary.mean_cost, "summary": summary}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--price-of-error", type=float, default=200.0, help="CAD per wrong diagnosis")
    parser.add_argument("--passes", type=int, default=3, help="passes over the 768 patients")
    parser.add_argument("--delay", type=int, default=None, help="labels arrive this many events later")
    args = parser.parse_args(argv)

    price = args.price_of_error
    cad = FeatureCosts.from_frame(pima_feature_costs())
    print(f"stage costs (CAD): {[round(c, 2) for c in cad.stage_costs(FEATURES)]}")

    rows = []
    summaries = []
    costs = list(make_cascade(price).stage_costs)  # in errors: CAD / price
    candidates = [("USS-UCB", USSUCB(costs), 50), ("USS-KL-UCB (default)", None, 50)]
    candidates += [(f"fixed depth {d}", FixedDepth(d), 0) for d in (1, 2, 3)]
    for label, policy, warm_up in candidates:
        result = evaluate_cascade(make_cascade(price, policy, warm_up), args.passes, args.delay)
        mean_cad = result["mean_cost"] * price
        summaries.append(result["summary"])
        rows.append(
            {
                "policy": label,
                "accuracy": result["accuracy"],
                "mean_cost_cad": mean_cad,
                "objective": mean_cad / price + 1 - result["accuracy"],
                "depths": result["summary"].stages["answered"].tolist(),
            }
        )

    deepest = rows[-1]
    print(
        f"{'policy':<21} {'accuracy':>9} {'mean cost (CAD)':>16} {'cost vs depth 3':>16} "
        f"{'cost/price+error':>17}  depth histogram"
    )
    for row in rows:
        print(
            f"{row['policy']:<21} {row['accuracy']:>9.2%} {row['mean_cost_cad']:>16.2f} "
            f"{row['mean_cost_cad'] / deepest['mean_cost_cad']:>16.2f} {row['objective']:>17.4f}  "
            f"{row['depths']}"
        )
    print(f"USS-UCB's disagreement rates:\n{summaries[0].disagreement.round(3).to_string()}")
    return rows


if __name__ == "__main__":
    main()
