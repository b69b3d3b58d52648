"""``uss-stream replay``: offline regret replay of depth-selection policies on a logged cascade.

With ``--input`` it reads the user's log (CSV, TSV, space-separated, Parquet or JSON Lines, with or
without a header: :func:`uss_stream.replay.io.read_table`): ``--stages`` names the stage columns in cascade
order (default: every column but ``--label``), ``--costs`` (or ``--cumulative-costs``) their costs,
``--label`` the ground truth (or ``--error-rates`` the stages' error rates, if there are no labels).
With none of ``--stages``, ``--label`` and ``--error-rates`` the log is a prediction matrix: the stage
columns, then the label column. Without ``--input`` it replays a bundled case of the paper
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
an ``--out`` it cannot write into. It prints the summary table and writes ``summary.csv``, then
``regret.png``, to ``--out``; each is written to a temporary folder first and moved into place only
when complete, so a failing plot loses no result.
"""

from __future__ import annotations

import argparse
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
from uss_stream.datasets.paper import PAPER_CASES, paper_case
from uss_stream.policies import Policy
from uss_stream.policies.specs import DEFAULT_POLICY, parse_spec
from uss_stream.replay.engine import SAMPLING_MODES, encode_log, replay
from uss_stream.replay.io import matrix_layout, read_table
from uss_stream.replay.memory import check_replay_memory, replay_memory_estimate

__all__ = ["DEFAULT_CASE", "parse_policy", "register", "run"]

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
    source.add_argument("--costs", help="comma-separated per-stage costs c_1..c_K")
    source.add_argument("--cumulative-costs", help="comma-separated cumulative costs C_1..C_K")
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
        "--label-cost", type=float, default=0.0, help="cost added to the regret per label used (0)"
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
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0 (a seed of the row sampling), got {args.seed}")
    if not args.label_cost >= 0:
        raise ValueError(f"--label-cost must be >= 0, got {args.label_cost}")
    out = Path(args.out)
    _check_writable(out)
    require("matplotlib.figure", purpose="the replay's regret.png")  # before the replay, not after
    outputs, labels, stage_costs, source = _load(args)
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
        f"{args.reps} repetitions x {args.horizon} rounds ({args.sampling} sampling, seed {args.seed})"
    )
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
            label_cost=args.label_cost,
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
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
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
        costs = _stage_costs(args, outputs.shape[1]) or case.stage_costs
        return outputs, labels, costs, f"bundled case {case.name}"
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
    per_stage = _numbers(args.costs, "--costs", count)
    if per_stage is not None:
        return per_stage
    cumulative = _numbers(args.cumulative_costs, "--cumulative-costs", count)
    if cumulative is None:
        return None
    steps = np.diff(cumulative, prepend=0.0)
    if np.any(steps < 0):
        raise ValueError(f"--cumulative-costs must be >= 0 and non-decreasing, got {cumulative}")
    return steps.tolist()


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
