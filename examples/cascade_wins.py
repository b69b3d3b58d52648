"""A River cascade that pays for its deep stages only when they are worth it: Phishing, three stages.

Stage 1 is a logistic regression on three of the stream's nine features (cost 0), stage 2 one on all
nine (0.2), stage 3 a Hoeffding tree on all nine (0.3 more); costs are in units of one error (see
docs/how-to/costs.md). Every model learns online, under progressive validation (predict, then
learn). The cascade, with the library's default policy and no label reaching the policy, is
compared with always querying each fixed depth on the same stream: it answers most events at
stage 1, because the deeper stages disagree with it less often than they cost, and it is no less
accurate than the deepest stage, which is the slowest to learn.

Run: ``python examples/cascade_wins.py``.
"""

from __future__ import annotations

import argparse

from river import datasets, evaluate, linear_model, metrics, preprocessing, tree

from uss_stream import CascadeClassifier, Stage
from uss_stream.policies import FixedDepth, Policy

COSTS = (0.0, 0.2, 0.3)
FIRST_FEATURES = ("empty_server_form_handler", "popup_window", "https")


def make_cascade(policy: Policy | None = None, warm_up: int = 50) -> CascadeClassifier:
    return CascadeClassifier(
        stages=[
            Stage(
                linear_model.LogisticRegression(), cost=COSTS[0], features=FIRST_FEATURES, name="3 features"
            ),
            Stage(linear_model.LogisticRegression(), cost=COSTS[1], name="all features"),
            Stage(tree.HoeffdingTreeClassifier(), cost=COSTS[2], name="tree"),
        ],
        policy=policy,
        warm_up=warm_up,
    )


def evaluate_on_phishing(cascade: CascadeClassifier) -> dict:
    """Progressive validation on Phishing: accuracy, mean cost per event and the depth histogram."""
    accuracy = evaluate.progressive_val_score(
        datasets.Phishing(), preprocessing.StandardScaler() | cascade, metrics.Accuracy()
    )
    summary = cascade.summary()
    return {
        "accuracy": accuracy.get(),
        "mean_cost": summary.mean_cost,
        "depths": summary.stages["answered"].tolist(),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    candidates = [("cascade (default policy)", None, 50)]
    candidates += [(f"always depth {d}", FixedDepth(d), 0) for d in (1, 2, 3)]
    rows = [
        {"policy": name, **evaluate_on_phishing(make_cascade(policy, warm_up))}
        for name, policy, warm_up in candidates
    ]
    deepest = rows[-1]
    print(
        f"{'':<26}{'accuracy':>9} {'mean cost':>10} {'cost saved':>11} {'accuracy change':>16} "
        f"{'loss':>6}  depths 1/2/3"
    )
    for row in rows:
        row["cost_saved"] = 1 - row["mean_cost"] / deepest["mean_cost"]
        row["accuracy_change"] = 100 * (row["accuracy"] - deepest["accuracy"])
        row["loss"] = row["mean_cost"] + 1 - row["accuracy"]  # cost + error rate, in errors
        print(
            f"{row['policy']:<26}{row['accuracy']:>9.2%} {row['mean_cost']:>10.3f} "
            f"{row['cost_saved']:>11.0%} {row['accuracy_change']:>+13.2f} pt {row['loss']:>6.3f}  "
            f"{row['depths']}"
        )
    cascade, best = rows[0], min(rows[1:], key=lambda row: row["loss"])
    print(
        f"\nThe cascade costs {1 - cascade['cost_saved']:.0%} of always querying every stage "
        f"({cascade['mean_cost']:.3f} against {deepest['mean_cost']:.3f} per event), with an accuracy "
        f"{cascade['accuracy_change']:+.2f} points from the deepest stage's. The best fixed depth in "
        f"hindsight ({best['policy']}) has a loss of {best['loss']:.3f} per event against the "
        f"cascade's {cascade['loss']:.3f}: the price of learning it without labels (and of the warm-up)."
    )
    return rows


if __name__ == "__main__":
    main()
