"""Replay your own cascade log: what each policy would have cost, and how accurate it would have been.

The log has one row per event and one column per stage (its output), cheapest stage first, and a
label column; CSV, TSV, Parquet or JSON Lines (:func:`uss_stream.replay.io.read_table`). The stage
costs are given in your currency with the price of one error in the same currency, and converted
to the policies' unit (errors) by dividing by that price (docs/how-to/costs.md). Each policy is
replayed on the same sampled events; the table gives its mean cost per event in your currency,
the share saved against always querying every stage, its accuracy and the change in points
against the deepest stage, the labels it used, and its regret against the best fixed depth.

Without arguments it replays the bundled sample ``examples/data/pima_cascade_log.csv``: the stage
outputs of the PIMA diabetes cascade (history and cheap measurements, + glucose test, + insulin
test; ``uss_stream.datasets.paper``, one row per patient), with Turney's test prices in CAD and
an error priced at 200 CAD.

Run: ``python examples/replay_your_log.py [LOG] [--stages A,B,C --label Y --costs 1,5,20
--price-of-error 100]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from uss_stream.core.units import in_error_units
from uss_stream.policies import USSKLUCB, AuditedUSS, FixedDepth, Policy
from uss_stream.replay import replay
from uss_stream.replay.io import matrix_layout, read_table
from uss_stream.replay.log import SAMPLING_MODES

SAMPLE = Path(__file__).resolve().parent / "data" / "pima_cascade_log.csv"
#: The sample's columns and its stages' prices (CAD): history, then the glucose and insulin tests.
SAMPLE_SETTINGS = {"stages": "history,glucose,insulin", "label": "diabetes", "costs": "6,17.61,20.68"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", nargs="?", default=str(SAMPLE), help="the log (default: the bundled sample)")
    parser.add_argument("--stages", help="stage columns, cheapest first (default: all but the label)")
    parser.add_argument("--label", help="label column (default: the last column)")
    parser.add_argument("--costs", help="comma-separated cost of each stage, in your currency")
    parser.add_argument("--price-of-error", type=float, default=200.0, help="what one error costs (200)")
    parser.add_argument("--horizon", type=int, default=10_000, help="events per repetition (10000)")
    parser.add_argument("--reps", type=int, default=20, help="repetitions (20)")
    parser.add_argument("--label-delay", type=int, default=100, help="events before a label arrives (100)")
    parser.add_argument(
        "--sampling", choices=SAMPLING_MODES, default="uniform", help="how a repetition draws the log's rows"
    )
    args = parser.parse_args(argv)
    if Path(args.log).resolve() == SAMPLE:
        for name, value in SAMPLE_SETTINGS.items():
            setattr(args, name, getattr(args, name) or value)
    if args.costs is None:
        parser.error("--costs is required for your own log")
    if not args.price_of_error > 0:
        parser.error("--price-of-error must be > 0")
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    table = read_table(args.log)
    if args.stages is None and args.label is None:
        stages, label = matrix_layout(list(table.columns))
    else:
        label = args.label or table.columns[-1]
        stages = args.stages.split(",") if args.stages else [c for c in table.columns if c != label]
    money = [float(cost) for cost in args.costs.split(",")]
    if len(money) != len(stages):
        raise SystemExit(f"--costs has {len(money)} values for {len(stages)} stages")
    costs = in_error_units(money, args.price_of_error)  # in errors, the policies' unit (with its warning)
    policies: dict[str, Policy] = {"uss-kl-ucb (default)": USSKLUCB(costs), "audited": AuditedUSS(costs)}
    policies.update({f"always depth {d}": FixedDepth(d, stage_costs=costs) for d in range(1, len(costs) + 1)})
    result = replay(
        table[stages].to_numpy(),
        table[label].to_numpy(),
        policies=policies,
        horizon=args.horizon,
        reps=args.reps,
        seed=0,
        sampling=args.sampling,
        label_delay=args.label_delay,
    )
    summary = result.summary().set_index("policy")
    deepest = summary.loc[f"always depth {len(costs)}"]
    print(f"{args.log}: stages {', '.join(stages)}; label {label}; one error = {args.price_of_error:g}")
    print(
        f"{'policy':<22}{'cost/event':>11}{'saved':>7}{'accuracy':>9}{'change':>9}{'labels':>8}{'regret':>9}"
    )
    rows = []
    for name, row in summary.iterrows():
        rows.append(
            {
                "policy": name,
                "mean_cost": row["mean_cost"] * args.price_of_error,
                "cost_saved": 1 - row["mean_cost"] / deepest["mean_cost"],
                "accuracy": 1 - row["error_rate"],
                "accuracy_change": 100 * (deepest["error_rate"] - row["error_rate"]),
                "labels": row["labels_mean"],
                "regret": row["regret_mean"],
            }
        )
        r = rows[-1]
        print(
            f"{name:<22}{r['mean_cost']:>11.2f}{r['cost_saved']:>7.0%}{r['accuracy']:>9.2%}"
            f"{r['accuracy_change']:>+7.2f}pt{r['labels']:>8.0f}{r['regret']:>9.1f}"
        )
    return rows


if __name__ == "__main__":
    main()
