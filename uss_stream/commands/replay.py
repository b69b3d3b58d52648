"""``uss-stream replay``: offline regret replay of depth-selection policies on a logged cascade.

With ``--input`` it reads the user's log (CSV, TSV, space-separated, Parquet or JSON Lines, with or
without a header: :func:`uss_stream.replay.io.read_table`): ``--stages`` names the stage columns in cascade
order (default: every column but ``--label``), ``--costs`` (or ``--cumulative-costs``) their costs,
``--label`` the ground truth (or ``--error-rates`` the stages' error rates, if there are no labels).
With none of ``--stages``, ``--label`` and ``--error-rates`` the log is a prediction matrix: the stage
columns, then the label column. Costs are in units of one error (the objective is error rate + cost);
costs in another unit (a currency, milliseconds) need ``--price-of-error``, the price of one error in
that unit, which converts ``--costs``, ``--cumulative-costs`` and ``--label-cost``
(:func:`uss_stream.core.units.in_error_units`). A warning says when the costs make a depth
unreachable (more than one error above stage 1). Without ``--input`` it replays a bundled case of the paper
(``--case``, default ``pima-1``: the PIMA diabetes cascade). Policies are given as repeated
``--policy`` specs::

    uss-ucb[:alpha=0.51]  alg2  fixed:depth=2  supervised[:alpha=0.51]  oracle
    uss-ts[:seed=0]  uss-kl-ucb[:alpha=1]  uee-ucb[:alpha=1]  audited[:label_budget=2,alpha=1]

``audited`` (AuditedUSS) asks for a few labels, which arrive ``--label-delay`` rounds late;
``--label-cost`` adds a cost per label used to the regret. The summary shows the labels each policy
used and, for ``audited``, the WD monitor's verdict.

Every learning policy (all but ``fixed`` and ``oracle``) also takes ``discount=G`` (``0 < G < 1``):
discounted, drift-aware counts (:mod:`uss_stream.core.forgetting`), e.g. ``uss-kl-ucb:discount=0.999``.
``uss-ts`` without ``seed`` uses seed 0, so that replays are reproducible.

Before the run it refuses a log it would misread (stage columns of numbers next to columns read as
text, labels that share no value with the outputs), a run too large for the memory available and
an ``--out`` it cannot write into. It prints what the log's error rates say (its best fixed depth and
whether weak dominance holds, :func:`describe_instance`) and a summary table under 100 columns
(:func:`printed_table`), and writes every column (:meth:`~uss_stream.replay.result.ReplayResult.summary`)
to ``summary.csv``, then ``regret.png``, in ``--out``; each is written to a temporary folder first
and moved into place only when complete, so a failing plot loses no result.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from uss_stream.core.extras import require
from uss_stream.core.instances import Instance
from uss_stream.core.units import check_price_of_error, in_error_units
from uss_stream.datasets.paper import PAPER_CASES, paper_case
from uss_stream.policies import Policy
from uss_stream.policies.specs import DEFAULT_POLICY, parse_spec
from uss_stream.replay.engine import SAMPLING_MODES, encode_log, replay
from uss_stream.replay.io import matrix_layout, read_table
from uss_stream.replay.memory import check_replay_memory, replay_memory_estimate

__all__ = ["DEFAULT_CASE", "describe_instance", "parse_policy", "printed_table", "register", "run"]

DEFAULT_CASE = "pima-1"
#: The policies replayed when no ``--policy`` is given (``supervised`` only when labels exist): the
#: library's default (:data:`~uss_stream.policies.specs.DEFAULT_POLICY`) first, then the paper's.
DEFAULT_POLICIES = (DEFAULT_POLICY, "uss-ucb:alpha=0.51", "alg2", "fixed:depth=-1")
_SUPERVISED_DEFAULT = "supervised:alpha=0.51"
_OUTPUT_FILES = ("summary.csv", "regret.png")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="replay policies on a logged cascade (CSV/Parquet or a bundled paper case)",
        description=(
            "Offline regret replay: each repetition samples --horizon rows of the log and runs a fresh "
            "copy of each policy on them. Prints the summary; writes OUT/summary.csv and OUT/regret.png."
        ),
    )
    source = parser.add_argument_group("the log")
    source.add_argument(
        "--input",
        help="CSV/TSV/Parquet/JSON Lines log, one row per event (without --stages/--label: the stage "
        "columns, then the label column)",
    )
    source.add_argument("--stages", help="comma-separated stage columns, cheapest first")
    source.add_argument("--label", help="column of the ground-truth labels")
    source.add_argument(
        "--costs",
        help="comma-separated per-stage costs c_1..c_K, in units of one error (the objective is error "
        "rate + cost), or in any unit with --price-of-error",
    )
    source.add_argument("--cumulative-costs", help="comma-separated cumulative costs C_1..C_K (same unit)")
    source.add_argument(
        "--price-of-error",
        type=float,
        metavar="PRICE",
        help="the price of one error in the unit of the costs (e.g. 250 for costs in dollars where a "
        "wrong answer costs 250 dollars); converts --costs, --cumulative-costs and --label-cost",
    )
    source.add_argument("--error-rates", help="comma-separated error rates of the stages (without labels)")
    source.add_argument(
        "--case",
        help=f"bundled paper case to replay without --input (default {DEFAULT_CASE}; one of "
        f"{', '.join(PAPER_CASES)})",
    )
    run_group = parser.add_argument_group("the replay")
    run_group.add_argument(
        "--policy",
        action="append",
        dest="policies",
        metavar="SPEC",
        help="uss-ucb[:alpha=A] | alg2 | fixed:depth=D | supervised[:alpha=A] | oracle | uss-ts[:seed=S] | "
        "uss-kl-ucb[:alpha=A] | uee-ucb[:alpha=A] | audited[:label_budget=C,alpha=A]; learning policies "
        "but audited also take discount=G; repeatable "
        "(default: uss-kl-ucb, uss-ucb:alpha=0.51, alg2, fixed at the deepest stage, and "
        "supervised:alpha=0.51 when labels are given)",
    )
    run_group.add_argument("--horizon", type=int, default=10_000, help="rounds per repetition (10000)")
    run_group.add_argument("--reps", type=int, default=100, help="repetitions (100)")
    run_group.add_argument("--seed", type=int, default=0, help="seed of the row sampling (0)")
    run_group.add_argument("--sampling", choices=SAMPLING_MODES, default="uniform", help="row sampling")
    run_group.add_argument(
        "--label-delay", type=int, default=0, help="rounds between a label request and its label (0)"
    )
    run_group.add_argument(
        "--label-cost",
        type=float,
        default=0.0,
        help="cost added to the regret per label used, in the unit of the costs (0)",
    )
    run_group.add_argument("--out", default="out/replay", help="output folder (out/replay)")
    run_group.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    for name in ("horizon", "reps"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.label_delay < 0:
        raise ValueError(f"--label-delay must be >= 0, got {args.label_delay}")
    if not args.label_cost >= 0:
        raise ValueError(f"--label-cost must be >= 0, got {args.label_cost}")
    out = Path(args.out)
    _check_writable(out)
    require("matplotlib.figure", purpose="the replay's regret.png")  # before the replay, not after
    outputs, labels, stage_costs, source = _load(args)
    label_cost = args.label_cost
    if args.price_of_error is not None:
        label_cost = label_cost / check_price_of_error(args.price_of_error, "--price-of-error")
    _check_log(outputs, labels, args.input)
    error_rates = _numbers(args.error_rates, "--error-rates", outputs.shape[1])
    if labels is None and error_rates is None:
        raise ValueError("the regret needs the error rates: give --label (a label column) or --error-rates")
    if error_rates is None:
        codes, label_codes = encode_log(outputs, labels)
        error_rates = (codes != label_codes[:, None]).mean(axis=0).tolist()
    specs = args.policies or [
        *DEFAULT_POLICIES,
        *([_SUPERVISED_DEFAULT] if labels is not None else []),
    ]
    policies: dict[str, Policy] = {}
    for spec in specs:
        name, policy = parse_policy(spec, stage_costs, error_rates)
        if name in policies:
            raise ValueError(f"policy {name!r} is given twice")
        policies[name] = policy
    size = {
        "stages": outputs.shape[1],
        "rows": outputs.shape[0],
        "columns": 0 if args.input is None else outputs.shape[1] + (labels is not None),
    }
    check_replay_memory(args.horizon, args.reps, len(policies), **size, names=("--horizon", "--reps"))
    print(
        f"replaying {source}: {outputs.shape[0]} rows x {outputs.shape[1]} stages, "
        f"{args.reps} reps x {args.horizon} rounds ({args.sampling} sampling, seed {args.seed})"
    )
    if args.price_of_error is not None:
        print(f"costs in units of one error: the costs given / {args.price_of_error:g} per error")
    try:
        result = replay(
            outputs,
            labels,
            policies=policies,
            horizon=args.horizon,
            reps=args.reps,
            seed=args.seed,
            sampling=args.sampling,
            error_rates=error_rates if labels is None else None,
            stage_costs=stage_costs,
            progress=not args.no_progress,
            label_delay=args.label_delay,
            label_cost=label_cost,
        )
        summary = result.summary()
    except MemoryError:
        estimate = replay_memory_estimate(
            horizon=args.horizon, reps=args.reps, policies=len(policies), **size
        )
        raise ValueError(
            f"ran out of memory during the replay (--horizon {args.horizon} x --reps {args.reps}: "
            f"estimated {estimate / 1e9:.3g} GB, other processes took the rest); lower --horizon or --reps"
        ) from None
    print(describe_instance(result.instance))
    print(printed_table(summary))
    _write(out, "summary.csv", lambda path: summary.to_csv(path, index=False))
    print(f"wrote {out / 'summary.csv'}")
    try:
        figure = result.plot(title=f"{source}\nmean cumulative regret, 95% CI, {args.reps} repetitions")
        _write(out, "regret.png", lambda path: figure.savefig(path, dpi=100))
    except Exception as error:  # the results are written: report the plot's failure, whatever it is
        print(
            f"uss-stream replay: error: the plot failed ({type(error).__name__}: {error}); "
            f"the results are in {out / 'summary.csv'}",
            file=sys.stderr,
        )
        return 1
    print(f"wrote {out / 'regret.png'}")
    return 0


def parse_policy(spec: str, stage_costs: Sequence[float], error_rates: Sequence[float]) -> tuple[str, Policy]:
    """Build a policy from a ``--policy`` spec (:mod:`uss_stream.policies.specs`, the parser every
    command shares); returns its display name and the policy.

    ``fixed:depth=-1`` means the deepest stage; ``uss-ts`` without ``seed`` uses seed 0 (replays
    are reproducible). The display name is the spec with the parameters as given, plus ``alpha``
    for ``uss-ucb`` and ``supervised`` and ``seed`` for ``uss-ts``.

    >>> parse_policy("uss-ucb:alpha=1", [0.0, 0.1], [0.3, 0.2])
    ('uss-ucb:alpha=1', USSUCB(stage_costs=[0.0, 0.1], alpha=1.0, f=None, discount=None))
    >>> parse_policy("uss-kl-ucb:discount=0.999", [0.0, 0.1], [0.3, 0.2])
    ('uss-kl-ucb:discount=0.999', USSKLUCB(stage_costs=[0.0, 0.1], alpha=1.0, discount=0.999))
    >>> parse_policy("uss-ts", [0.0, 0.1], [0.3, 0.2])
    ('uss-ts:seed=0', USSTS(stage_costs=[0.0, 0.1], seed=0, discount=None))
    >>> parse_policy("uee-ucb:alpha=0.5", [0.0, 0.1], [0.3, 0.2])
    ('uee-ucb:alpha=0.5', UEEUCB(stage_costs=[0.0, 0.1], alpha=0.5, discount=None))
    >>> parse_policy("audited", [0.0, 0.1], [0.3, 0.2])[1].label_allotment
    300.0
    >>> parse_policy("fixed", [0.0, 0.1], [0.3, 0.2])
    Traceback (most recent call last):
    ...
    ValueError: --policy 'fixed': fixed needs depth=D

    """
    parsed = parse_spec(spec)
    return parsed.name(len(stage_costs)), parsed.build(stage_costs, error_rates)


def describe_instance(instance: Instance) -> str:
    """What the log's error rates say: its best fixed depth, its cost and error rate, the deepest
    stage's, and whether weak dominance holds (the condition of every label-free policy).

    >>> from uss_stream.core.instances import Instance
    >>> print(describe_instance(Instance([0.0, 0.1], error_rates=[0.3, 0.1],
    ...                                  disagreement=[[0.0, 0.25], [0.25, 0.0]])))
    best fixed depth 2 of 2: cost 0.1 + error rate 0.1 = 0.2 per event (deepest stage: 0.2)
    weak dominance holds: the deepest stage is best, nothing deeper to check
    >>> print(describe_instance(Instance([0.0, 0.1], error_rates=[0.12, 0.1],
    ...                                  disagreement=[[0.0, 0.25], [0.25, 0.0]])))
    best fixed depth 1 of 2: cost 0 + error rate 0.12 = 0.12 per event (deepest stage: 0.2)
    weak dominance violated (ξ = -0.15): label-free policies go too deep; audited checks with labels

    """
    if instance.error_rates is None:
        return "no error rates: give --label or --error-rates for the best fixed depth and weak dominance"
    best, k = instance.optimal_depth, instance.n_stages
    cost, gamma = instance.cumulative_costs[best - 1], instance.error_rates[best - 1]
    head = (
        f"best fixed depth {best} of {k}: cost {cost:.3g} + error rate {gamma:.3g} = "
        f"{cost + gamma:.3g} per event (deepest stage: {instance.total_costs[-1]:.3g})"
    )
    if instance.disagreement is None:
        return head
    if best == k:
        wd = "weak dominance holds: the deepest stage is best, nothing deeper to check"
    elif instance.satisfies_wd:
        wd = f"weak dominance holds (ξ = {instance.xi:.3g}): label-free policies find the best depth"
    else:
        wd = (
            f"weak dominance violated (ξ = {instance.xi:.3g}): label-free policies go too deep; audited "
            "checks with labels"
        )
    return f"{head}\n{wd}"


#: The printed table's width limit (the CSV holds every column).
TABLE_WIDTH = 100


def printed_table(summary: pd.DataFrame) -> str:
    """The replay's summary as printed: one line per policy, at most :data:`TABLE_WIDTH` characters.

    Columns: the policy (names beyond 22 characters are cut), final regret and its 95% half-width,
    mean cost per event, the share of the deepest stage's cost saved, accuracy and its change in
    points against always answering from the deepest stage, labels used per repetition, and the
    depth mix in percent (the mean depth instead when the mix would not fit).

    >>> import pandas as pd
    >>> row = dict(policy="uss-kl-ucb", regret_mean=41.72, regret_ci_low=34.4, regret_ci_high=49.0,
    ...            depth_1=0.9, depth_2=0.094, depth_3=0.006, mean_cost=0.0686, cost_saved=0.9006,
    ...            accuracy=0.698, accuracy_vs_deepest=-0.0762, labels_mean=0.0)
    >>> print(printed_table(pd.DataFrame([row])))
    policy      regret ± 95%  mean cost  saved  accuracy  vs deepest  labels  depth %
    uss-kl-ucb  41.72 ± 7.3      0.0686  90.1%    69.8%     -7.6 pt        0  90/9/1

    """
    depth_columns = [c for c in summary.columns if str(c).startswith("depth_") and str(c)[6:].isdigit()]
    rows = []
    for record in summary.to_dict("records"):
        name = str(record["policy"])
        fractions = [float(record[c]) for c in depth_columns]
        rows.append(
            [
                name if len(name) <= 22 else name[:21] + "…",
                _regret(record["regret_mean"], record["regret_ci_high"] - record["regret_mean"]),
                f"{record['mean_cost']:.4g}",
                _share(record.get("cost_saved", math.nan)),
                _share(record.get("accuracy", math.nan)),
                _points(record.get("accuracy_vs_deepest", math.nan)),
                f"{record['labels_mean']:.0f}",
                "/".join(f"{100 * f:.0f}" for f in fractions),
                f"{sum(d * f for d, f in enumerate(fractions, start=1)):.2f}",
            ]
        )
    header = ["policy", "regret ± 95%", "mean cost", "saved", "accuracy", "vs deepest", "labels", "depth %"]
    text = _aligned(header, [row[:8] for row in rows])
    if max(map(len, text.splitlines())) > TABLE_WIDTH:
        text = _aligned([*header[:7], "mean depth"], [[*row[:7], row[8]] for row in rows])
    return text


def _aligned(header: list[str], rows: list[list[str]]) -> str:
    """Columns two spaces apart: the first left-aligned, the others right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    lines = [
        "  ".join(
            cell.ljust(width) if j == 0 else cell.rjust(width)
            for j, (cell, width) in enumerate(zip(cells, widths))
        ).rstrip()
        for cells in (header, *rows)
    ]
    return "\n".join(lines)


def _regret(mean: float, half: float) -> str:
    """``mean ± half`` without exponents (4 significant digits, 2 for the half-width)."""
    if math.isnan(mean):
        return "-"
    text = f"{mean:.4g}" if abs(mean) < 1e4 else f"{mean:.0f}"
    if math.isnan(half):
        return text
    return f"{text} ± {half:.2g}" if half < 10 else f"{text} ± {half:.0f}"


def _share(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.1f}%"


def _points(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:+.1f} pt"


def _numbers(text: str | None, option: str, count: int) -> list[float] | None:
    if text is None:
        return None
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{option} must be comma-separated numbers, got {text!r}") from None
    if len(values) != count:
        raise ValueError(f"{option} has {len(values)} value(s) but there are {count} stages")
    return values


def _load(args: argparse.Namespace) -> tuple[Any, Any, list[float], str]:
    """The outputs, labels (or None), per-stage costs and a description of the source."""
    if args.costs is not None and args.cumulative_costs is not None:
        raise ValueError("give --costs or --cumulative-costs, not both")
    if args.input is None:
        if args.stages is not None or args.label is not None:
            raise ValueError("--stages and --label describe an --input file")
        case = paper_case(args.case or DEFAULT_CASE)
        outputs, labels = case.log()
        costs = _stage_costs(args, outputs.shape[1])
        if costs is None and args.price_of_error is not None:
            raise ValueError(
                f"--price-of-error converts the costs you give; case {case.name}'s own costs are in "
                "error units already: give --costs or --cumulative-costs, or no --price-of-error"
            )
        return outputs, labels, costs or case.stage_costs, f"bundled case {case.name}"
    if args.case is not None:
        raise ValueError("--case selects a bundled log; it cannot be combined with --input")
    table = read_table(args.input)
    if args.stages is None and args.label is None and args.error_rates is None:
        stage_names, args.label = matrix_layout(table.columns)  # stage columns, then the label column
        print(f"{args.input}: stages {', '.join(stage_names)}, label {args.label} (its last column)")
    stages = (
        [c.strip() for c in args.stages.split(",")]
        if args.stages
        else [c for c in table.columns if c != args.label]
    )
    missing = [c for c in [*stages, *([args.label] if args.label else [])] if c not in table.columns]
    if missing:
        raise ValueError(
            f"{args.input} has no column(s) {', '.join(map(repr, missing))}; "
            f"its columns are {', '.join(map(str, table.columns))}"
        )
    if not stages:
        raise ValueError("no stage columns: give --stages")
    costs = _stage_costs(args, len(stages))
    if costs is None:
        raise ValueError(f"give the costs of the {len(stages)} stage(s) with --costs or --cumulative-costs")
    labels = table[args.label] if args.label else None
    return table[stages], labels, costs, args.input


def _stage_costs(args: argparse.Namespace, count: int) -> list[float] | None:
    """``--costs`` or ``--cumulative-costs`` as per-stage costs in error units (``None``: neither)."""
    per_stage = _numbers(args.costs, "--costs", count)
    option = "--costs"
    if per_stage is None:
        option = "--cumulative-costs"
        cumulative = _numbers(args.cumulative_costs, "--cumulative-costs", count)
        if cumulative is None:
            return None
        per_stage = np.diff(cumulative, prepend=0.0).tolist()
        if any(step < 0 for step in per_stage):
            raise ValueError(f"--cumulative-costs must be >= 0 and non-decreasing, got {cumulative}")
    price = check_price_of_error(args.price_of_error, "--price-of-error")
    try:
        return in_error_units(per_stage, price, stacklevel=3)
    except ValueError as error:
        raise ValueError(f"{option}: {error}") from None


def _write(out: Path, name: str, save: Callable[[Path], Any]) -> None:
    """``save`` the file ``name`` into a temporary sibling folder, then move it into ``out``."""
    parent = out.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=parent))
    try:
        save(staging / name)
        if out.exists():
            os.replace(staging / name, out / name)
        else:
            os.rename(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _check_writable(out: Path) -> None:
    """Refuse, before the run, an ``--out`` the results could not be written into."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    existing = out.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"--out {out}: cannot write there, {existing} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise ValueError(f"--out {out}: cannot write in {existing}: {error.strerror or error}") from None


def _check_log(outputs: pd.DataFrame, labels: pd.Series | None, source: str | None) -> None:
    """Refuse an ``--input`` log that would be misread: a stage or label column read as text next
    to stage columns of numbers (``'1' != 1``), or labels sharing no value with the outputs."""
    if source is None:
        return
    twice = outputs.columns[outputs.columns.duplicated()].unique().tolist()
    if twice:
        raise ValueError(f"--stages names the column(s) {', '.join(map(repr, twice))} more than once")
    numeric = [c for c in outputs.columns if pd.api.types.is_numeric_dtype(outputs[c])]
    columns = [("stage", outputs[c]) for c in outputs.columns if c not in numeric]
    if labels is not None and not pd.api.types.is_numeric_dtype(labels):
        columns.append(("label", labels))  # only if partly numbers: 'neg'/'pos' labels are checked below
    for role, values in columns if numeric else []:
        not_numbers = values.notna() & pd.to_numeric(values, errors="coerce").isna()
        if not not_numbers.any() or (role == "label" and not_numbers.sum() == values.notna().sum()):
            continue
        row = int(np.flatnonzero(not_numbers.to_numpy())[0])
        line = f", line {row + 2}" if Path(source).suffix.lower() in (".csv", ".tsv", ".txt") else ""
        raise ValueError(
            f"--input {source}: {role} column {values.name!r} was read as text, while the stage "
            f"column(s) {', '.join(map(repr, numeric))} hold numbers ('1' != 1: they would never "
            f"agree); its first cell that is not a number is in data row {row + 1}{line}: "
            f"{values.iloc[row]!r}. Fix or remove such cells"
        )
    if labels is None:
        return
    label_values = pd.unique(labels.dropna()).tolist()
    output_values = pd.unique(outputs.to_numpy().ravel()).tolist()
    if not set(label_values) & set(output_values):
        raise ValueError(
            f"--input {source}: the labels of {labels.name!r} share no value with the stage outputs "
            f"(labels {_examples(label_values)}, outputs {_examples(output_values)}): every stage "
            "would be wrong on every row"
        )


def _examples(values: list[Any]) -> str:
    return ", ".join(map(repr, values[:3])) + (", ..." if len(values) > 3 else "")
