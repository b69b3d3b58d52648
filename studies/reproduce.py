"""Reproduce the experiments of Verma et al. (AISTATS 2019), Section 5 and appendix, in one call.

:func:`reproduce` rebuilds every problem instance of the paper (:mod:`uss_stream.datasets.paper`),
recomputes Tables 1-4 (optimal classifier, weak dominance) from our data, replays the policies with
:func:`uss_stream.replay.engine.replay` (uniform sampling with replacement, as in the paper) and writes
``results.md`` and ``figures/*.png`` into the output folder:

* Fig. 2: cumulative regret of USS-UCB (``α = 0.51``) for every case of every dataset;
* Fig. 3: Algorithm 2 of Hanawal et al. (2017) against USS-UCB with ``α ∈ {1.5, 1, 0.51}``
  (cases 1-3, the paper's Fig. 3 and appendix);
* Fig. 4a: supervised against unsupervised (PIMA and Heart, cases 1 and 3);
* Fig. 4b: final regret against ``ξ`` on BSC with ``i* = 2``, ``C_3`` varied so that
  ``ξ = C_3 - C_2 - p_23`` crosses 0;
* Fig. 4c: the last two stages swapped, costs kept in place (BSC, as in the paper, and the other
  datasets, as in the appendix);
* "Beyond the paper": USS-TS, USS-KL-UCB and the drift-aware (discounted) USS-KL-UCB against
  USS-UCB and Algorithm 2 on every instance, and on a piecewise-stationary BSC stream whose optimal
  depth changes at ``T/2`` (:func:`uss_stream.replay.engine.replay_piecewise`), in both directions.

The text of ``results.md`` states what matches the paper and what does not from the numbers of the
run itself. Files are staged in a temporary folder and moved into place at the end, so a failed
run leaves the previous results untouched; only ``results.md`` and the ``figures/fig*.png`` it
names are replaced.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from tqdm.auto import tqdm

from studies.delay_study import delay_figure, delay_markdown, delay_study
from studies.shared_study import shared_figure, shared_markdown, shared_study
from uss_stream import __version__
from uss_stream.core.forgetting import DRIFT_DISCOUNT
from uss_stream.core.instances import Instance
from uss_stream.datasets.heart import heart_feature_costs
from uss_stream.datasets.paper import (
    BSC_LOG_ROWS,
    BSC_SEED,
    DATASETS,
    PAPER_CASES,
    PAPER_ERROR_RATES,
    REAL_COSTS,
    REAL_STAGE_FEATURES,
    PaperCase,
    dataset_log,
)
from uss_stream.datasets.pima import pima_feature_costs
from uss_stream.policies import USSKLUCB, USSTS, USSUCB, FixedDepth, Hanawal2017WD, Policy, SupervisedUCB
from uss_stream.replay.engine import Z_95, ReplayResult, replay, replay_piecewise

__all__ = ["Reproduction", "reproduce"]

_T = TypeVar("_T")

USS_UCB = "USS-UCB (α=0.51)"
USS_UCB_1 = "USS-UCB (α=1)"
USS_UCB_15 = "USS-UCB (α=1.5)"
ALG2 = "Alg. 2 (Hanawal et al.)"
SUPERVISED = "Supervised UCB (α=0.51)"
USS_TS = "USS-TS"
USS_KL = "USS-KL-UCB"
DRIFT_AWARE = f"USS-KL-UCB (γ={DRIFT_DISCOUNT})"
USS_UCB_DISCOUNTED = f"USS-UCB (γ={DRIFT_DISCOUNT})"
USS_TS_DISCOUNTED = f"USS-TS (γ={DRIFT_DISCOUNT})"
#: The policies of the "Beyond the paper" comparison, in table order.
BEYOND = (USS_UCB, ALG2, USS_TS, USS_KL, DRIFT_AWARE)
#: Seed of USS-TS in every replay (repetition r uses the stream of `USSTS(seed=TS_SEED).for_repetition(r)`).
TS_SEED = 0
#: The targets of the comparison: a policy "halves" USS-UCB's regret where USS-UCB's exceeds this.
TARGET_FLOOR = 10.0
#: Extra errors of the improved first stage of the drift stream (it copies stage 2, flipped this often).
DRIFT_FLIP = 0.03
DRIFT_SEED = 1
#: Cases of the Alg. 2 comparison (Fig. 3 for case 1, the appendix for cases 2 and 3).
COMPARISON_CASES = (1, 2, 3)
#: Cases of the supervised comparison (Fig. 4a for case 1, the appendix for case 3).
SUPERVISED_CASES = (1, 3)
#: Values of ξ of the Fig. 4b sweep (kept only where stage 2 stays optimal).
XI_GRID = (-0.06, -0.05, -0.04, -0.03, -0.02, -0.01, -0.005, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15)
#: R_T / R_{T/2} above this counts as "still growing linearly" in the discussion (2 = linear).
LINEAR_GROWTH = 1.6
DATASET_TITLES = {
    "bsc": "Synthetic BSC",
    "pima": "PIMA Indians Diabetes",
    "heart": "Heart Disease (Cleveland)",
    "synthetic1": "Synthetic Dataset 1",
    "synthetic2": "Synthetic Dataset 2",
}
_DPI = 100


@dataclass
class _Curve:
    """Mean cumulative regret over the repetitions and its 95% half-width, for each round."""

    mean: np.ndarray
    half: np.ndarray

    @property
    def final(self) -> float:
        return float(self.mean[-1])

    @property
    def final_half(self) -> float:
        return float(self.half[-1])

    @property
    def growth(self) -> float:
        """``R_T / R_{T/2}``: 2 for linear regret, close to 1 for logarithmic; NaN if ``R_{T/2} = 0``."""
        middle = float(self.mean[len(self.mean) // 2 - 1]) if len(self.mean) > 1 else 0.0
        return self.final / middle if middle > 0 else math.nan

    def text(self) -> str:
        return (
            f"{self.final:.1f} ± {self.final_half:.1f}"
            if math.isfinite(self.final_half)
            else f"{self.final:.1f}"
        )


@dataclass
class _Run:
    """What the report keeps of one replay (the full result is dropped to save memory)."""

    label: str
    instance: Instance
    curves: dict[str, _Curve]
    optimal_share: dict[str, float]
    identical: set[frozenset[str]]


@dataclass
class Reproduction:
    """Where :func:`reproduce` wrote its results, and how long it took."""

    results: Path
    figures: list[Path]
    wall_time: float


def reproduce(
    out: str | os.PathLike[str] = "docs/evidence",
    *,
    reps: int = 100,
    horizon: int = 10_000,
    seed: int = 0,
    progress: bool = False,
) -> Reproduction:
    """Run all experiments and write ``results.md`` and ``figures/*.png`` under ``out``.

    Parameters
    ----------
    out
        Output folder (created if needed).
    reps, horizon, seed
        Repetitions, rounds per repetition and seed of every replay (the paper: 100 and 10 000).
    progress
        Show a progress bar over the replays (on stderr).

    Examples
    --------
    ``reproduce("docs/evidence")`` is what ``make reproduce`` runs (about half an hour); a tiny run such as
    ``reproduce(folder, reps=2, horizon=50)`` writes the same ``results.md`` and 11 figures
    (``tests/studies/test_reproduce.py`` runs it). Parameters are checked before anything runs or
    is written:

    >>> reproduce("out/never-written", reps=0)
    Traceback (most recent call last):
        ...
    ValueError: reps must be an integer >= 1, got 0

    """
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise ValueError(f"reps must be an integer >= 1, got {reps!r}")
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 2:
        raise ValueError(f"horizon must be an integer >= 2, got {horizon!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"output folder {out} exists and is not a folder")
    started = time.perf_counter()
    xi_costs = _xi_costs()
    n_jobs = len(PAPER_CASES) * 2 + len(xi_costs) + len(DRIFT_DIRECTIONS) + 3
    with tqdm(total=n_jobs, unit="replay", disable=not progress) as bar:
        settings = {"reps": reps, "horizon": horizon, "seed": seed}
        main = {name: _run_case(case, settings) for name, case in _tick(PAPER_CASES.items(), bar)}
        swapped = {name: _run_swapped(case, settings) for name, case in _tick(PAPER_CASES.items(), bar)}
        sweep = [(xi, _run_xi(costs, settings)) for xi, costs in _tick(xi_costs, bar)]
        drift = {name: _run_drift(name, settings) for name in _tick(DRIFT_DIRECTIONS, bar)}
        river = next(_tick([_run_river(2 * horizon)], bar))
        wd_cases = [name for name, run in main.items() if run.instance.satisfies_wd]
        delays = next(_tick([delay_study(cases=wd_cases, reps=reps, horizon=horizon, seed=seed)], bar))
        # Half the repetitions, and T/2 events per worker: two workers see T events in all.
        shared_settings = {"reps": max(1, reps // 2), "horizon": horizon // 2, "seed": seed}
        shared = next(_tick([shared_study(cases=wd_cases, **shared_settings)], bar))
    figures = {
        "fig2_regret.png": _figure_cases(main),
        **{f"fig3_alg2_vs_ussucb_case{case}.png": _figure_policies(main, case) for case in COMPARISON_CASES},
        "fig4a_supervised.png": _figure_supervised(main),
        "fig4b_regret_vs_xi.png": _figure_xi(sweep),
        "fig4c_swapped.png": _figure_cases(swapped, " (last two stages swapped)"),
        "fig5_beyond_regret.png": _figure_beyond(main),
        "fig6_drift.png": _figure_drift(drift),
        "fig7_delay.png": delay_figure(delays),
        "fig8_shared.png": shared_figure(shared),
    }
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".reproduce-", dir=out))
    try:
        for name, figure in figures.items():
            figure.savefig(staging / name, dpi=_DPI)
        elapsed = time.perf_counter() - started
        text = _markdown(main, swapped, sweep, (drift, river), figures, settings, elapsed)
        text += "\n" + delay_markdown(delays, "figures/fig7_delay.png")
        text += "\n" + shared_markdown(shared, "figures/fig8_shared.png")
        (staging / "results.md").write_text(text, encoding="utf-8")
        (out / "figures").mkdir(exist_ok=True)
        written = []
        for name in figures:
            os.replace(staging / name, out / "figures" / name)
            written.append(out / "figures" / name)
        os.replace(staging / "results.md", out / "results.md")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Reproduction(results=out / "results.md", figures=written, wall_time=elapsed)


def _tick(items: Iterable[_T], bar: tqdm) -> Iterator[_T]:
    """Iterate ``items``, advancing ``bar`` after each."""
    for item in items:
        yield item
        bar.update(1)


# -- the replays ---------------------------------------------------------------------------------
def _policies_for(case: PaperCase) -> dict[str, Policy]:
    costs = case.stage_costs
    policies: dict[str, Policy] = {USS_UCB: USSUCB(costs, alpha=0.51), **_beyond_policies(costs)}
    if case.case in COMPARISON_CASES:
        policies[USS_UCB_1] = USSUCB(costs, alpha=1.0)
        policies[USS_UCB_15] = USSUCB(costs, alpha=1.5)
    if case.dataset in REAL_STAGE_FEATURES and case.case in SUPERVISED_CASES:
        policies[SUPERVISED] = SupervisedUCB(costs, alpha=0.51)
    return policies


def _beyond_policies(costs: list[float]) -> dict[str, Policy]:
    """Algorithm 2, USS-TS, USS-KL-UCB and the drift-aware USS-KL-UCB (USS-UCB is in every run)."""
    return {
        ALG2: Hanawal2017WD(costs),
        USS_TS: USSTS(costs, seed=TS_SEED),
        USS_KL: USSKLUCB(costs),
        DRIFT_AWARE: USSKLUCB(costs, discount=DRIFT_DISCOUNT),
    }


def _curves(result: ReplayResult) -> dict[str, _Curve]:
    curves = {}
    for name, regret in result.cumulative_regret.items():
        if result.reps > 1:
            half = Z_95 * regret.std(axis=0, ddof=1) / math.sqrt(result.reps)
        else:
            half = np.full(result.horizon, math.nan)
        curves[name] = _Curve(regret.mean(axis=0), half)
    return curves


def _replay_run(
    label: str, outputs: np.ndarray, labels: np.ndarray, policies: dict[str, Policy], settings: dict
) -> _Run:
    result = replay(outputs, labels, policies=policies, **settings)
    curves = _curves(result)
    tail = max(1, result.horizon // 10)
    optimal = result.instance.optimal_depth
    share = {name: float((d[:, -tail:] == optimal).mean()) for name, d in result.depths.items()}
    names = list(result.depths)
    identical = {
        frozenset((a, b))
        for k, a in enumerate(names)
        for b in names[k + 1 :]
        if np.array_equal(result.depths[a], result.depths[b])
    }
    instance = result.instance
    instance.name = label
    return _Run(label, instance, curves, share, identical)


def _run_case(case: PaperCase, settings: dict) -> _Run:
    outputs, labels = case.log()
    return _replay_run(case.name, outputs, labels, _policies_for(case), settings)


def _run_swapped(case: PaperCase, settings: dict) -> _Run:
    outputs, labels = case.log()
    order = list(range(outputs.shape[1]))
    order[-2], order[-1] = order[-1], order[-2]
    policies: dict[str, Policy] = {USS_UCB: USSUCB(case.stage_costs, alpha=0.51)}
    return _replay_run(f"{case.name} swapped", outputs[:, order], labels, policies, settings)


def _xi_costs() -> list[tuple[float, tuple[float, float, float]]]:
    """``(ξ, C)`` on the BSC log with ``C_1 = 0``, ``C_2 = 0.15`` and ``C_3 = C_2 + p_23 + ξ``."""
    outputs, labels = dataset_log("bsc")
    measured = Instance.from_log(outputs, labels, cumulative_costs=(0.0, 0.15, 1.0))
    p23 = float(measured.disagreement[1, 2])
    gamma = measured.error_rates
    floor = float(gamma[1] - gamma[2]) - p23  # ξ at which stage 3 ties stage 2
    return [(xi, (0.0, 0.15, 0.15 + p23 + xi)) for xi in XI_GRID if xi > floor + 1e-3]


def _run_xi(costs: tuple[float, float, float], settings: dict) -> _Run:
    outputs, labels = dataset_log("bsc")
    stage_costs = np.diff(costs, prepend=0.0).tolist()
    return _replay_run("bsc ξ sweep", outputs, labels, {USS_UCB: USSUCB(stage_costs, alpha=0.51)}, settings)


@dataclass
class _DriftRun:
    """A piecewise-stationary replay: per-segment instances, curves and segment regrets."""

    label: str
    instances: list[Instance]
    curves: dict[str, _Curve]
    segments: dict[str, list[tuple[float, float]]]


#: The drift streams: the BSC cascade (case 2 costs, i* = 2) and the same events after stage 1
#: has improved (it now copies stage 2 up to 3% flips: i* = 1), in both orders.
DRIFT_DIRECTIONS = ("stage 1 improves (i* 2 → 1)", "stage 1 degrades (i* 1 → 2)")


def _drift_logs() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The BSC log and the same events with an improved stage 1 (``DRIFT_FLIP`` flips of stage 2)."""
    outputs, labels = dataset_log("bsc")
    improved = outputs.copy()
    flips = np.random.default_rng(DRIFT_SEED).random(len(outputs)) < DRIFT_FLIP
    improved[:, 0] = outputs[:, 1] ^ flips
    return (outputs, labels), (improved, labels)


def _drift_policies(costs: list[float]) -> dict[str, Policy]:
    return {
        USS_UCB: USSUCB(costs, alpha=0.51),
        **_beyond_policies(costs),
        USS_UCB_DISCOUNTED: USSUCB(costs, alpha=0.51, discount=DRIFT_DISCOUNT),
        USS_TS_DISCOUNTED: USSTS(costs, seed=TS_SEED, discount=DRIFT_DISCOUNT),
    }


def _run_drift(direction: str, settings: dict) -> _DriftRun:
    original, improved = _drift_logs()
    segments = [original, improved] if direction == DRIFT_DIRECTIONS[0] else [improved, original]
    horizon = settings["horizon"]
    costs = PAPER_CASES["bsc-2"].stage_costs
    result = replay_piecewise(
        segments,
        horizons=[horizon // 2, horizon - horizon // 2],
        policies=_drift_policies(costs),
        reps=settings["reps"],
        seed=settings["seed"],
    )
    segment_regret = {name: [result.segment_regret(name, k) for k in range(2)] for name in result.names}
    return _DriftRun(direction, result.instances, _curves(result), segment_regret)


#: The River cascade of the "stages that learn online" check: stage costs and what each stage sees.
RIVER_COSTS = (0.0, 0.02, 0.05)


@dataclass
class _RiverRun:
    """Progressive validation of the River cascade under each policy on the SEA drift stream."""

    events: int
    error: dict[str, float]
    cost: dict[str, float]
    answered: dict[str, list[int]]
    default: str


def _river_policies() -> dict[str, Policy]:
    costs = list(RIVER_COSTS)
    return {
        USS_UCB: USSUCB(costs, alpha=0.51),
        USS_TS: USSTS(costs, seed=TS_SEED),
        USS_KL: USSKLUCB(costs),
        DRIFT_AWARE: USSKLUCB(costs, discount=DRIFT_DISCOUNT),
        **{f"fixed depth {d}": FixedDepth(d, costs) for d in range(1, len(costs) + 1)},
    }


def _run_river(events: int) -> _RiverRun:
    """The cascade LR(x_0) → LR(x_0..x_2) → Hoeffding tree on SEA with a concept change halfway.

    Stages learn online from every label (progressive validation: predict, then learn), after the
    default 50-label warm-up. ``default`` names the row whose policy is the cascade's default.
    """
    from river import linear_model, preprocessing, tree
    from river.datasets import synth

    from uss_stream.cascade.classifier import CascadeClassifier
    from uss_stream.cascade.stage import Stage

    def stages() -> list[Stage]:
        return [
            Stage(linear_model.LogisticRegression(), features=(0,), cost=RIVER_COSTS[0]),
            Stage(linear_model.LogisticRegression(), cost=RIVER_COSTS[1]),
            Stage(tree.HoeffdingTreeClassifier(grace_period=100), cost=RIVER_COSTS[2]),
        ]

    policies = _river_policies()
    default_policy = repr(CascadeClassifier(stages=stages())._policy)
    default = next((name for name, policy in policies.items() if repr(policy) == default_policy), "")
    error, cost, answered = {}, {}, {}
    for name, policy in policies.items():
        stream = synth.ConceptDriftStream(
            stream=synth.SEA(variant=0, seed=1),
            drift_stream=synth.SEA(variant=3, seed=2),
            position=events // 2,
            width=max(1, events // 40),
            seed=3,
        )
        cascade = CascadeClassifier(stages=stages(), policy=policy)
        model = preprocessing.StandardScaler() | cascade
        wrong = 0
        for x, y in itertools.islice(stream, events):
            wrong += model.predict_one(x) != y
            model.learn_one(x, y)
        summary = cascade.summary()
        error[name] = wrong / events
        cost[name] = summary.mean_cost
        answered[name] = summary.stages["answered"].tolist()
    return _RiverRun(events, error, cost, answered, default)


def _cases_of(dataset: str) -> list[str]:
    return [name for name, case in PAPER_CASES.items() if case.dataset == dataset]


# -- figures -------------------------------------------------------------------------------------
def _draw(ax: Axes, curve: _Curve, label: str, color: Any = None) -> None:
    t = np.arange(1, len(curve.mean) + 1)
    (line,) = ax.plot(t, curve.mean, label=label, color=color)
    if np.all(np.isfinite(curve.half)):
        ax.fill_between(
            t, curve.mean - curve.half, curve.mean + curve.half, color=line.get_color(), alpha=0.2, lw=0
        )


def _style(ax: Axes, title: str) -> None:
    ax.set_title(title, fontsize="medium")
    ax.set_xlabel("round t")
    ax.set_ylabel("cumulative regret")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def _figure_cases(runs: dict[str, _Run], suffix: str = "") -> Figure:
    """USS-UCB (α = 0.51) on every case, one panel per dataset; ``runs`` keyed by case name."""
    figure = Figure(figsize=(4.2 * len(DATASETS), 3.6), layout="constrained")
    for ax, dataset in zip(figure.subplots(1, len(DATASETS)), DATASETS):
        for name in _cases_of(dataset):
            run = runs[name]
            wd = "WD" if run.instance.satisfies_wd else "no WD"
            _draw(ax, run.curves[USS_UCB], f"case {PAPER_CASES[name].case} ({wd})")
        _style(ax, DATASET_TITLES[dataset] + suffix)
    return figure


def _figure_policies(main: dict[str, _Run], case: int) -> Figure:
    figure = Figure(figsize=(4.2 * len(DATASETS), 3.6), layout="constrained")
    for ax, dataset in zip(figure.subplots(1, len(DATASETS)), DATASETS):
        run = main[f"{dataset}-{case}"]
        for name in (ALG2, USS_UCB_15, USS_UCB_1, USS_UCB):
            _draw(ax, run.curves[name], name)
        _style(ax, f"{DATASET_TITLES[dataset]}, case {case}")
    return figure


def _figure_supervised(main: dict[str, _Run]) -> Figure:
    names = [f"{d}-{c}" for c in SUPERVISED_CASES for d in REAL_STAGE_FEATURES]
    figure = Figure(figsize=(4.2 * len(names), 3.6), layout="constrained")
    for ax, name in zip(figure.subplots(1, len(names)), names):
        for policy in (USS_UCB, SUPERVISED):
            _draw(ax, main[name].curves[policy], policy)
        case = PAPER_CASES[name]
        _style(ax, f"{DATASET_TITLES[case.dataset]}, case {case.case}")
    return figure


def _figure_xi(sweep: list[tuple[float, _Run]]) -> Figure:
    figure = Figure(figsize=(11.0, 3.8), layout="constrained")
    left, right = figure.subplots(1, 2)
    xi = np.array([x for x, _ in sweep])
    final = np.array([run.curves[USS_UCB].final for _, run in sweep])
    half = np.array([run.curves[USS_UCB].final_half for _, run in sweep])
    left.errorbar(xi, final, yerr=np.nan_to_num(half), marker="o", capsize=3)
    left.axvline(0.0, color="grey", ls="--", lw=1)
    left.set_xlabel("ξ = C_3 − C_2 − p_23")
    left.set_ylabel("cumulative regret at T")
    left.set_title("BSC, i* = 2: regret at T against ξ", fontsize="medium")
    left.grid(alpha=0.3)
    colors = colormaps["coolwarm"](np.linspace(0.0, 1.0, len(sweep)))
    for (x, run), color in zip(sweep, colors):
        _draw(right, run.curves[USS_UCB], f"ξ = {x:+.3f}", color)
    _style(right, "BSC, i* = 2: regret against t")
    right.legend(fontsize="x-small", ncol=2)
    return figure


def _figure_beyond(main: dict[str, _Run]) -> Figure:
    """Final regret of the "Beyond the paper" policies on every instance (log scale)."""
    names = list(PAPER_CASES)
    figure = Figure(figsize=(16.0, 4.6), layout="constrained")
    ax = figure.subplots()
    width = 0.8 / len(BEYOND)
    x = np.arange(len(names))
    for k, policy in enumerate(BEYOND):
        finals = np.array([max(main[n].curves[policy].final, 0.1) for n in names])
        ax.bar(x + (k - (len(BEYOND) - 1) / 2) * width, finals, width, label=policy)
    ax.set_yscale("log")
    ax.set_xticks(x, [n + ("" if main[n].instance.satisfies_wd else " (no WD)") for n in names])
    ax.tick_params(axis="x", rotation=60, labelsize="small")
    ax.set_ylabel("cumulative regret at T (mean; floor 0.1)")
    ax.set_title("Beyond the paper: regret at T on every instance", fontsize="medium")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize="small", ncol=len(BEYOND))
    return figure


def _figure_drift(drift: dict[str, _DriftRun]) -> Figure:
    figure = Figure(figsize=(12.0, 4.0), layout="constrained")
    for ax, (direction, run) in zip(figure.subplots(1, len(drift)), drift.items()):
        for name, curve in run.curves.items():
            _draw(ax, curve, name)
        ax.axvline(len(next(iter(run.curves.values())).mean) // 2, color="grey", ls="--", lw=1)
        _style(ax, f"BSC drift stream: {direction}")
    return figure


# -- results.md ----------------------------------------------------------------------------------
def _fmt(value: float, digits: int = 4) -> str:
    if math.isnan(value):
        return "—"
    if math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _error_rate_section(main: dict[str, _Run]) -> tuple[str, dict[str, float]]:
    rows = []
    worst: dict[str, float] = {}
    for dataset in DATASETS:
        ours = main[f"{dataset}-1"].instance.error_rates
        paper = PAPER_ERROR_RATES[dataset]
        worst[dataset] = float(np.max(np.abs(ours - np.array(paper))))
        for j, (a, b) in enumerate(zip(ours, paper), start=1):
            rows.append([DATASET_TITLES[dataset], str(j), _fmt(a), _fmt(b), f"{a - b:+.4f}"])
    table = _table(["dataset", "classifier", "γ ours", "γ paper", "ours − paper"], rows)
    return table, worst


def _feature_cost_table() -> str:
    costs = {
        "pima": pima_feature_costs().set_index("feature")["cost_cad"],
        "heart": heart_feature_costs().set_index("feature")["cost_cad"],
    }
    rows = []
    for dataset, stages in REAL_STAGE_FEATURES.items():
        for j, features in enumerate(stages, start=1):
            added = features if j == 1 else features[len(stages[j - 2]) :]
            total = float(costs[dataset][list(features)].sum())
            rows.append(
                [
                    DATASET_TITLES[dataset],
                    str(j),
                    ("" if j == 1 else "+ ") + ", ".join(added),
                    f"{total:.2f}",
                    f"{REAL_COSTS[dataset][j - 1]:.0f}",
                ]
            )
    return _table(["dataset", "classifier", "features", "Turney's full costs ($)", "Table 2 Cost ($)"], rows)


def _tables_section(main: dict[str, _Run]) -> tuple[str, list[str], list[str]]:
    parts = []
    optimal_mismatch: list[str] = []
    wd_mismatch: list[str] = []
    for dataset in DATASETS:
        rows = []
        for name in _cases_of(dataset):
            case = PAPER_CASES[name]
            instance = main[name].instance
            ours_opt, ours_wd = instance.optimal_depth, instance.satisfies_wd
            if ours_opt != case.paper_optimal_depth:
                optimal_mismatch.append(name)
            if ours_wd != case.paper_wd:
                wd_mismatch.append(name)
            costs = ", ".join(f"{c:g}" for c in case.cumulative_costs)
            if case.table_costs != case.cumulative_costs:
                costs += " (table: " + ", ".join(f"{c:g}" for c in case.table_costs) + ")"
            rows.append(
                [
                    str(case.case),
                    costs,
                    f"{ours_opt} / {case.paper_optimal_depth}",
                    _fmt(instance.xi),
                    f"{_yes(ours_wd)} / {_yes(case.paper_wd)}",
                ]
            )
        parts.append(
            f"**{DATASET_TITLES[dataset]}**\n\n"
            + _table(["case", "cumulative costs C_j", "i* ours / paper", "ξ ours", "WD ours / paper"], rows)
        )
    return "\n\n".join(parts), optimal_mismatch, wd_mismatch


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _regret_table(runs: dict[str, _Run], names: Sequence[str], policy: str) -> str:
    rows = []
    for name in names:
        run = runs[name]
        curve = run.curves[policy]
        rows.append(
            [
                run.label,
                str(run.instance.optimal_depth),
                _fmt(run.instance.xi),
                _yes(run.instance.satisfies_wd),
                curve.text(),
                _fmt(curve.growth, 2),
                f"{run.optimal_share[policy]:.1%}",
            ]
        )
    return _table(
        ["instance", "i*", "ξ", "WD", "R_T (mean ± 95% CI)", "R_T / R_T/2", "at i* in last 10% of rounds"],
        rows,
    )


def _growing(runs: dict[str, _Run], names: Sequence[str], policy: str) -> list[str]:
    return [n for n in names if runs[n].curves[policy].growth > LINEAR_GROWTH]


def _fig2_text(main: dict[str, _Run]) -> tuple[str, str]:
    """The paragraph under Fig. 2 and its one-line verdict."""
    names = list(PAPER_CASES)
    wd = [n for n in names if main[n].instance.satisfies_wd]
    not_wd = [n for n in names if n not in wd]
    growing_wd = _growing(main, wd, USS_UCB)
    linear_not = _growing(main, not_wd, USS_UCB)
    horizon = len(main[names[0]].curves[USS_UCB].mean)
    exceptions = ", ".join(f"{n} (ξ = {main[n].instance.xi:.4f})" for n in growing_wd)
    paragraph = (
        f"Of the {len(wd)} instances where WD holds on our data, {len(wd) - len(growing_wd)} have "
        f"flattening regret (R_T / R_T/2 ≤ {LINEAR_GROWTH}; 2 would be linear)"
        + (
            f"; {exceptions} still {'grows' if len(growing_wd) == 1 else 'grow'} nearly linearly at "
            f"T = {horizon}: with so small a ξ the confidence intervals have not yet separated "
            "C_j − C_i* from p_i*j (by Theorem 1 the regret bends later, after about log T / ξ² "
            "rounds of exploration)"
            if growing_wd
            else ""
        )
        + f". Of the {len(not_wd)} instances where WD fails, {len(linear_not)} have linear regret "
        f"({', '.join(linear_not) or 'none'}): USS-UCB settles on a deeper, sub-optimal stage, as the "
        "paper's theory predicts."
    )
    verdict = (
        f"**Fig. 2**: WD ⇒ flattening regret in {len(wd) - len(growing_wd)}/{len(wd)} instances"
        + (f" (not yet at T = {horizon}: {exceptions})" if growing_wd else "")
        + f"; WD fails ⇒ linear regret in {len(linear_not)}/{len(not_wd)}. The paper shows sub-linear "
        "regret for every WD instance."
    )
    return paragraph, verdict


def _comparison_text(main: dict[str, _Run]) -> tuple[str, str]:
    """The paragraph under Fig. 3 and its one-line verdict."""
    names = [f"{d}-{c}" for c in COMPARISON_CASES for d in DATASETS]

    def final(name: str, policy: str) -> float:
        return main[name].curves[policy].final

    best = [n for n in names if final(n, USS_UCB) <= min(final(n, p) for p in (ALG2, USS_UCB_15, USS_UCB_1))]
    ordered = [n for n in names if final(n, USS_UCB) <= final(n, USS_UCB_1) <= final(n, USS_UCB_15)]
    same = [n for n in names if frozenset((ALG2, USS_UCB_15)) in main[n].identical]
    differ = [n for n in names if n not in same]
    alg2_lower = [n for n in differ if final(n, ALG2) < final(n, USS_UCB_15)]
    alg2_higher = [n for n in differ if final(n, ALG2) > final(n, USS_UCB_15)]
    paragraph = (
        f"USS-UCB with α = 0.51 has the lowest final regret of the four policies (ties included) in "
        f"{len(best)} of {len(names)} instances, and the regret increases with α (0.51 ≤ 1 ≤ 1.5) in "
        f"{len(ordered)} of {len(names)}. Alg. 2 and USS-UCB with α = 1.5 (the same exploration "
        f"constant; Alg. 2 has no B^l test and compares with ≥) chose exactly the same depth in every "
        f"round of every repetition in {len(same)} of {len(names)} instances"
        + (
            f"; where they differ, Alg. 2's regret is lower in {', '.join(alg2_lower) or 'none'} and "
            f"higher in {', '.join(alg2_higher) or 'none'}"
            if differ
            else ""
        )
        + "."
    )
    verdict = (
        f"**Fig. 3**: α = 0.51 is best in {len(best)}/{len(names)} instances (the paper: α = 0.51 gives "
        f"the best result); Alg. 2 ≡ USS-UCB(α = 1.5) in {len(same)}/{len(names)} (the paper: the same "
        "regret)."
    )
    return paragraph, verdict


def _supervised_text(main: dict[str, _Run]) -> tuple[str, str]:
    """The paragraph under Fig. 4a and its one-line verdict."""
    names = [f"{d}-{c}" for c in SUPERVISED_CASES for d in REAL_STAGE_FEATURES]
    lower = [n for n in names if main[n].curves[SUPERVISED].final < main[n].curves[USS_UCB].final]
    ratio = [main[n].curves[USS_UCB].final / max(main[n].curves[SUPERVISED].final, 1e-12) for n in names]
    growing = _growing(main, names, USS_UCB)
    paragraph = (
        f"The supervised variant has lower final regret in {len(lower)} of {len(names)} instances "
        f"(unsupervised / supervised: {min(ratio):.1f}–{max(ratio):.1f}); USS-UCB's regret flattens in "
        f"{len(names) - len(growing)} of them."
    )
    verdict = (
        f"**Fig. 4a**: supervised lower in {len(lower)}/{len(names)}, unsupervised sub-linear in "
        f"{len(names) - len(growing)}/{len(names)} (the paper: supervised lower, unsupervised also "
        "sub-linear)."
    )
    return paragraph, verdict


def _xi_text(sweep: list[tuple[float, _Run]]) -> tuple[str, str]:
    """The paragraph under Fig. 4b and its one-line verdict."""
    finals = [(xi, run.curves[USS_UCB].final) for xi, run in sweep]
    negative = [item for item in finals if item[0] < 0]
    positive = [item for item in finals if item[0] > 0]
    increasing = all(b[1] >= a[1] for a, b in itertools.pairwise(negative))
    peak_xi, peak = max(finals, key=lambda item: item[1])
    last_xi, last = positive[-1] if positive else (math.nan, math.nan)
    at_zero = peak_xi <= min((xi for xi, _ in positive), default=math.inf)
    paragraph = (
        f"For ξ < 0 (WD fails) the regret {'grows' if increasing else 'does not grow monotonically'} "
        "with ξ: USS-UCB settles on stage 3, whose gap Δ_3 = ξ + p_23 − (γ_2 − γ_3) grows with C_3, so "
        f"the regret is about T·Δ_3. The largest regret ({peak:.0f}) is at ξ = {peak_xi:+.3f}; for larger "
        f"ξ it falls, to {last:.0f} at ξ = {last_xi:+.3f}. "
        + (
            "The transition is at ξ = 0, as in the paper's Fig. 4b."
            if at_zero
            else "So the transition is not exactly at ξ = 0 at this horizon: just above 0, ξ is the margin "
            "USS-UCB has to resolve (of the order of log T / ξ² samples of stage 3), and within T rounds "
            "it has not, so it keeps querying stage 3 and the regret keeps growing until ξ is a few "
            "hundredths."
        )
    )
    verdict = (
        f"**Fig. 4b**: linear regret growing with ξ below 0 and falling regret for large ξ, with the peak "
        f"at ξ = {peak_xi:+.3f}"
        + (
            " (the paper: transition at ξ = 0)."
            if at_zero
            else " rather than at 0 (the paper: transition at ξ = 0)."
        )
    )
    return paragraph, verdict


def _swapped_text(swapped: dict[str, _Run]) -> tuple[str, str]:
    """The paragraph under Fig. 4c and its one-line verdict."""
    names = list(swapped)
    wd = [n for n in names if swapped[n].instance.satisfies_wd]
    not_wd = [n for n in names if n not in wd]
    growing_wd = _growing(swapped, wd, USS_UCB)
    linear_not = _growing(swapped, not_wd, USS_UCB)
    case4 = [n for n in names if PAPER_CASES[n].case == 4]
    case4_fail = [n for n in case4 if not swapped[n].instance.satisfies_wd]
    synthetic5 = [n for n in names if PAPER_CASES[n].case == 5 and n.startswith("synthetic")]
    synthetic5_wd = [n for n in synthetic5 if swapped[n].instance.satisfies_wd]
    paragraph = (
        f"After the swap WD holds in {len(wd)} of {len(names)} instances; there the regret flattens in "
        f"{len(wd) - len(growing_wd)} of {len(wd)} (Section 4: what matters is WD, not the order of the "
        f"error rates). Where WD fails, {len(linear_not)} of {len(not_wd)} grow linearly. Case 4 (i* = K "
        f"before the swap) loses WD in {len(case4_fail)} of {len(case4)} datasets, as the paper states. "
        f"The appendix also says WD holds for case 5 of the synthetic datasets after the swap; on our data "
        f"it holds in {len(synthetic5_wd)} of {len(synthetic5)} ({', '.join(synthetic5_wd) or 'neither'})."
    )
    verdict = (
        f"**Fig. 4c**: WD ⇒ flattening regret in {len(wd) - len(growing_wd)}/{len(wd)}, no WD ⇒ linear in "
        f"{len(linear_not)}/{len(not_wd)}; case 4 loses WD in {len(case4_fail)}/{len(case4)} (as the paper "
        f"says); synthetic case 5 keeps WD in {len(synthetic5_wd)}/{len(synthetic5)} (the appendix: it "
        "does)."
    )
    return paragraph, verdict


def _beyond_rows(main: dict[str, _Run]) -> list[list[str]]:
    rows = []
    for name in PAPER_CASES:
        run = main[name]
        ucb = run.curves[USS_UCB].final
        ratios = [_fmt(run.curves[p].final / ucb, 2) if ucb > 0 else "—" for p in (USS_TS, USS_KL)]
        rows.append(
            [
                name,
                _yes(run.instance.satisfies_wd),
                str(run.instance.optimal_depth),
                _fmt(run.instance.xi),
                *(run.curves[p].text() for p in BEYOND),
                *ratios,
            ]
        )
    return rows


def _halves(main: dict[str, _Run], policy: str) -> tuple[list[str], list[str]]:
    """WD instances where USS-UCB's regret exceeds the floor: those ``policy`` halves, and the others."""
    names = [n for n in PAPER_CASES if main[n].instance.satisfies_wd]
    judged = [n for n in names if main[n].curves[USS_UCB].final > TARGET_FLOOR]
    met = [n for n in judged if main[n].curves[policy].final <= 0.5 * main[n].curves[USS_UCB].final]
    return met, [n for n in judged if n not in met]


def _versus(
    main: dict[str, _Run], names: Sequence[str], ours: str, other: str
) -> tuple[list[str], list[str]]:
    """Of ``names``: where ``ours`` has regret <= ``other``'s, and where it is significantly higher."""
    lower = [n for n in names if main[n].curves[ours].final <= main[n].curves[other].final]
    worse = []
    for n in names:
        a, b = main[n].curves[ours], main[n].curves[other]
        if a.final > b.final + math.hypot(np.nan_to_num(a.final_half), np.nan_to_num(b.final_half)):
            worse.append(n)
    return lower, worse


def _ratio_range(main: dict[str, _Run], names: Sequence[str], policy: str) -> str:
    ratios = [main[n].curves[policy].final / main[n].curves[USS_UCB].final for n in names]
    return f"{min(ratios):.2f}–{max(ratios):.2f}" if ratios else "—"


def _worst_at_deepest(main: dict[str, _Run], policy: str) -> float:
    """The largest final regret of ``policy`` among the instances whose optimal depth is ``K``."""
    finals = [
        run.curves[policy].final
        for run in main.values()
        if run.instance.optimal_depth == run.instance.n_stages
    ]
    return max(finals, default=0.0)


def _case_list(main: dict[str, _Run], names: Sequence[str], policies: Sequence[str]) -> str:
    if not names:
        return "none"
    return "; ".join(
        f"{n} (" + ", ".join(f"{p} {main[n].curves[p].final:.1f}" for p in policies) + ")" for n in names
    )


def _forgetting_cost(main: dict[str, _Run], wd: Sequence[str]) -> list[float]:
    """Per WD instance above the floor: the drift-aware policy's regret over USS-KL-UCB's."""
    return [
        main[n].curves[DRIFT_AWARE].final / main[n].curves[USS_KL].final
        for n in wd
        if main[n].curves[USS_KL].final > TARGET_FLOOR
    ]


def _beyond_policies_text() -> str:
    """The three policies of section 9 that the paper does not have, and USS-KL-UCB's guarantee."""
    return (
        "Three policies the paper does not have, on the same replays (same rows, seeds, T and "
        "repetitions as above):\n\n"
        f"- **{USS_TS}** (`USSTS(costs, seed={TS_SEED})`): Thompson sampling as in Verma, Hanawal & "
        "Hemachandra (ACML 2020): p̃_ij ~ Beta(1 + D_ij, 1 + n_j − D_ij), depth = the first i with "
        "C_j − C_i > p̃_ij for all j > i. Its random numbers are counter-based (SplitMix64 of the seed, "
        "the round and the pair; `uss_stream.rules.counter_rng`) and the draw is the inverse "
        "regularised incomplete beta of that uniform, so a decision is a function of (seed, t, counts): "
        "the replay is exact against the streaming loop (tested), and repetition r replays the stream "
        f"of `USSTS(costs, seed={TS_SEED}).for_repetition(r)`.\n"
        f"- **{USS_KL}** (`USSKLUCB(costs)`, ours): the paper's B^l ∩ B^h test with KL upper "
        "confidence bounds U_ij = max{q : n_j·kl(p̂_ij, q) ≤ log₊(t / (K·n_j))}. KL bounds are never "
        "wider than Hoeffding's and much narrower for disagreement rates far from 1/2; the anytime "
        "level log₊(t/(K·n)) (KL-UCB++/MOSS) stops exploring a pair seen in a 1/K share of the rounds. "
        "**Guarantee** under WD: O(log T) regret. A deeper j > i* is selected only if C_j − C_i* ≤ "
        "U_i*j; since the level is ≤ log T and Pinsker gives U ≤ p̂ + sqrt(level / 2n), the paper's "
        "Proposition 2 bound for j > i* holds with α = 1/2 (and asymptotically the sharper "
        "log T / kl(p_i*j, C_j − C_i*)). A shallower j < i* is selected only if U_ji* < C_i* − C_j = "
        "p_ji* − ξ_j; Chernoff's bound and kl(a, p) ≥ kl(a, g) + kl(g, p) for a ≤ g ≤ p bound its "
        "probability in round t by Σ_s (K·s/t)·e^{−2ξ_j²·s} ≤ K / (4ξ_j⁴·t), so E[N_j(T)] ≤ "
        "K(1 + log T) / (4ξ_j⁴): logarithmic, where USS-UCB's is finite — the price of exploring less. "
        "Decisions compare n·kl(p̂, C_j − C_i) with the level directly (no root finding), with a "
        "portable logarithm so that the vectorised replay agrees with the streaming loop to the bit.\n"
        f"- **{DRIFT_AWARE}** (`USSKLUCB(costs, discount={DRIFT_DISCOUNT})`), the drift-aware "
        "variant: every count is multiplied by γ at each round before the round's indicators are "
        "added (memory ≈ 1/(1 − γ) = "
        f"{1 / (1 - DRIFT_DISCOUNT):.0f} rounds), and t is replaced by the discounted number of "
        "rounds τ_t = (1 − γ^t)/(1 − γ) (`uss_stream.core.forgetting`; every policy takes `discount=`)."
    )


def _beyond_targets(main: dict[str, _Run], wd: Sequence[str], forgetting_cost: list[float]) -> str:
    """Section 9's targets: USS-TS and USS-KL-UCB against USS-UCB, and the cost of forgetting."""
    not_wd = [n for n in PAPER_CASES if n not in wd]
    ts_met, ts_missed = _halves(main, USS_TS)
    kl_met, kl_missed = _halves(main, USS_KL)
    kl_vs_ts, kl_worse_ts = _versus(main, wd, USS_KL, USS_TS)
    kl_vs_ucb, _ = _versus(main, wd, USS_KL, USS_UCB)
    kl_not_wd, _ = _versus(main, not_wd, USS_KL, USS_UCB)
    judged = len(ts_met) + len(ts_missed)
    return "\n".join(
        [
            f"Targets (WD instances on our data: {len(wd)}; those where USS-UCB's regret exceeds "
            f"{TARGET_FLOOR:g}: {judged}):",
            f"- {USS_TS} ≤ 0.5 × USS-UCB: **{len(ts_met)}/{judged}**"
            + (f"; missed on {_case_list(main, ts_missed, (USS_TS, USS_UCB))}" if ts_missed else "")
            + ".",
            f"- {USS_KL} ≤ 0.5 × USS-UCB: **{len(kl_met)}/{judged}**"
            + (f"; missed on {_case_list(main, kl_missed, (USS_KL, USS_UCB))}" if kl_missed else "")
            + ".",
            f"- {USS_KL} ≤ {USS_TS} on most WD instances: **{len(kl_vs_ts)}/{len(wd)}**; "
            f"{USS_KL} is higher by more than the combined 95% half-widths on "
            f"{_case_list(main, kl_worse_ts, (USS_KL, USS_TS))}. Against USS-UCB, {USS_KL} is lower or "
            f"equal on {len(kl_vs_ucb)}/{len(wd)} WD instances; where i* = K USS-UCB never leaves "
            f"depth K (regret 0) while {USS_KL} pays a few early rounds at a shallower depth.",
            f"- WD fails ({', '.join(not_wd)}): every policy's regret grows linearly, as the theory "
            f"says; {USS_KL} is lower than USS-UCB on {len(kl_not_wd)}/{len(not_wd)} of them.",
            "- Forgetting costs regret when nothing drifts: on the WD instances above the floor, "
            f"{DRIFT_AWARE} has {min(forgetting_cost):.1f}–{max(forgetting_cost):.1f}× the regret of "
            f"{USS_KL} (median {float(np.median(forgetting_cost)):.1f}×)."
            if forgetting_cost
            else "- (No WD instance above the floor to measure the cost of forgetting.)",
        ]
    )


def _drift_line(direction: str, run: _DriftRun) -> str:
    """One drift stream's verdict: the drift-aware policy's second half against stationary USS-UCB's."""
    stationary = run.segments[USS_UCB][1][0]
    aware = run.segments[DRIFT_AWARE][1][0]
    ratio = aware / stationary if stationary > 0 else math.nan
    best = min(run.segments, key=lambda name: run.segments[name][1][0])
    return (
        f"- **{direction}** (i* = {run.instances[0].optimal_depth} then "
        f"{run.instances[1].optimal_depth}; ξ = {run.instances[0].xi:.3f} then "
        f"{run.instances[1].xi:.3f}): second-half regret of "
        f"{DRIFT_AWARE} {aware:.1f} against stationary USS-UCB's {stationary:.1f}, a ratio of "
        f"{ratio:.2f} ("
        + (
            f"the target is ≤ 1/3: {'met' if ratio <= 1 / 3 else 'missed'}"
            if direction == DRIFT_DIRECTIONS[0]
            else "no target: this direction is a second check"
        )
        + f"); lowest second half: {best} ({run.segments[best][1][0]:.1f})."
    )


def _drift_section(drift: dict[str, _DriftRun], images: dict[str, str]) -> list[str]:
    """Section 9's piecewise-stationary stream: its protocol, figure, table and verdicts."""
    drift_rows = [
        [direction, name, f"{first:.1f} ± {first_half:.1f}", f"{second:.1f} ± {second_half:.1f}"]
        for direction, run in drift.items()
        for name, ((first, first_half), (second, second_half)) in run.segments.items()
    ]
    return [
        "### Piecewise-stationary stream",
        (
            "`uss_stream.replay.engine.replay_piecewise`: each repetition plays T/2 rounds sampled "
            "from one log, "
            "then T/2 from another, with one policy state throughout; the regret of a round is measured "
            "against the optimal depth of its own segment. The logs are the BSC log with case 2 costs "
            "(C = 0, 0.15, 0.35; i* = 2) and the same events after stage 1 has improved (it outputs "
            f"stage 2's prediction flipped with probability {DRIFT_FLIP}; i* = 1), in both orders. "
            "Besides the five policies above, the table has USS-UCB and USS-TS with the same discount."
        ),
        f"![Drift]({images['fig6_drift.png']})",
        _table(["stream", "policy", "regret, first half", "regret, second half"], drift_rows),
        "\n".join(_drift_line(direction, run) for direction, run in drift.items()),
    ]


def _river_section(river: _RiverRun, totals: dict[str, float]) -> list[str]:
    """Section 9's River cascade whose stages learn online: each policy's error, cost and depths."""
    best_fixed = min((n for n in totals if n.startswith("fixed")), key=totals.get)
    river_rows = [
        [
            name + (" (the cascade's default)" if name == river.default else ""),
            f"{river.error[name]:.4f}",
            f"{river.cost[name]:.4f}",
            f"{totals[name]:.4f}",
            ", ".join(str(a) for a in river.answered[name]),
        ]
        for name in river.error
    ]
    adaptive = [n for n in totals if not n.startswith("fixed")]
    river_best = min(adaptive, key=totals.get)
    return [
        "### A River cascade whose stages learn online",
        (
            f"`CascadeClassifier` on {river.events} events of River's SEA stream with a concept change "
            "halfway (`ConceptDriftStream` of SEA variants 0 and 3): stage 1 a logistic regression on "
            "x_0, stage 2 one on all three features, stage 3 a Hoeffding tree; costs "
            f"{', '.join(f'{c:g}' for c in RIVER_COSTS)}; the default 50-label warm-up; progressive "
            "validation (predict, then learn). The objective is the paper's: mean C_depth + error rate. "
            "One run (the stream is fixed), so differences are indicative, not significant."
        ),
        _table(
            ["policy", "error rate", "mean cost", "cost + error", "answered at depth 1, 2, 3"], river_rows
        ),
        (
            f"Lowest objective of the adaptive policies: {river_best} ({totals[river_best]:.4f}); best fixed "
            f"depth in hindsight: {best_fixed} ({totals[best_fixed]:.4f})."
        ),
    ]


def _defaults_text(
    main: dict[str, _Run], wd: Sequence[str], totals: dict[str, float], forgetting_cost: list[float]
) -> str:
    """Section 9's choice of the cascade's default policy, and what it gives up."""
    ts_met, ts_missed = _halves(main, USS_TS)
    kl_met, kl_missed = _halves(main, USS_KL)
    judged = len(ts_met) + len(ts_missed)
    return (
        f"`CascadeClassifier(policy=None)` uses **{USS_KL}** (α = 1, no discount) instead of the "
        f"paper's USS-UCB (α = 0.51): it halves USS-UCB's regret on {len(kl_met)} of the {judged} WD "
        f"instances where USS-UCB's exceeds {TARGET_FLOOR:g} (ratio "
        f"{_ratio_range(main, kl_met + kl_missed, USS_KL)}), keeps an O(log T) guarantee under WD, and "
        f"in the River cascade above its objective is {totals[USS_KL]:.4f} against USS-UCB's "
        f"{totals[USS_UCB]:.4f}. What it gives up: where i* = K it pays a few early rounds at "
        f"shallower depths (regret ≤ {_worst_at_deepest(main, USS_KL):.1f} at T = "
        f"{len(main[wd[0]].curves[USS_KL].mean)}, USS-UCB's is 0), and its bound for shallower "
        "stages is logarithmic rather than finite. USS-UCB stays available as "
        "`policy=USSUCB(stage_costs)`. The default does not forget: stages that keep learning online "
        "change the disagreement rates slowly, and forgetting costs "
        f"{float(np.median(forgetting_cost)) if forgetting_cost else math.nan:.1f}× the regret "
        f"(median) when nothing drifts; `discount={DRIFT_DISCOUNT}` is the recommendation when the "
        "stages' relative quality can change (a stage retrained or swapped, a sensor degrading); the "
        "drift streams above show what it buys."
    )


def _beyond_section(
    main: dict[str, _Run], drift: dict[str, _DriftRun], river: _RiverRun, images: dict[str, str]
) -> list[str]:
    """Section 9 of results.md: the new policies against the paper's, stationary and drifting."""
    wd = [n for n in PAPER_CASES if main[n].instance.satisfies_wd]
    forgetting_cost = _forgetting_cost(main, wd)
    totals = {name: river.error[name] + river.cost[name] for name in river.error}
    return [
        "## 9. Beyond the paper: USS-TS, USS-KL-UCB and drift-aware statistics",
        _beyond_policies_text(),
        f"![Beyond the paper]({images['fig5_beyond_regret.png']})",
        _table(
            [
                "instance",
                "WD",
                "i*",
                "ξ",
                *(f"{p} R_T" for p in BEYOND),
                f"{USS_TS} / USS-UCB",
                f"{USS_KL} / USS-UCB",
            ],
            _beyond_rows(main),
        ),
        _beyond_targets(main, wd, forgetting_cost),
        *_drift_section(drift, images),
        *_river_section(river, totals),
        "### Defaults",
        _defaults_text(main, wd, totals, forgetting_cost),
    ]


def _front_matter(settings: dict, elapsed: float) -> list[str]:
    """Title, how results.md was generated, the seed paper and the protocol."""
    horizon, reps, seed = settings["horizon"], settings["reps"], settings["seed"]
    return [
        "# Reproduction of the paper's experiments",
        (
            "> Generated by `python -m studies.reproduce --out docs/evidence "
            f"--reps {reps} --horizon {horizon} --seed {seed}` (uss-stream {__version__}; "
            f"`make reproduce` does the same) in {elapsed:.0f} s of wall time. Do not edit by "
            "hand: rerun the command."
        ),
        (
            "Seed paper: A. Verma, M. K. Hanawal, C. Szepesvári, V. Saligrama, *Online Algorithm for "
            "Unsupervised Sensor Selection*, AISTATS 2019 (Section 5 and the appendix "
            '"Additional experiments").'
        ),
        (
            f"**Protocol.** As in the paper: each repetition samples T = {horizon} rows of the dataset's log "
            f"uniformly with replacement; {reps} repetitions (seed {seed}; all policies of an instance see "
            "the same rows); pseudo-regret with c(j) = C_j + γ_j and γ_j the error rate of classifier j on "
            "the whole log; bands and ± are 95% confidence intervals of the mean, ±1.96·s/√reps. USS-UCB "
            "uses f(t) = t. Run by `uss_stream.replay.engine.replay`, whose depth sequences are "
            "identical to the "
            "streaming `select`/`update` loop (tested)."
        ),
    ]


def _data_section(error_table: str, worst: dict[str, float]) -> list[str]:
    """Section 1: the datasets, their classifiers, error rates and feature costs."""
    return [
        "## 1. Data, classifiers and error rates",
        (
            f"- **Synthetic BSC** (Table 1): `uss_stream.datasets.bsc`, Y ~ Bernoulli(0.7), γ = (0.4, 0.1, "
            f"0.05) exactly in distribution, SD errors plus up to 10% extra errors of sensors 2 and 3 when "
            f"sensor 1 is right (the paper's mechanism is not published; ours is documented in the module). "
            f"Log: {BSC_LOG_ROWS:,} events, seed {BSC_SEED}; the rates below are measured on that log.\n"
            "- **PIMA** (768 rows) and **Heart** (297 complete rows), Table 2: three logistic regressions "
            "on growing feature subsets (below), scikit-learn's default L2 logistic regression fitted on "
            "all rows with raw features, error rate on all rows. The paper does not give its training "
            "protocol; with an 80:20 split or standardised features the rates move by about ±0.01.\n"
            "- **Synthetic 1 and 2** (Tables 3 and 4): 10 000 uniform samples in (−1, 1)^d, d = 3 and 5. "
            "The paper does not say how labels are generated: ours are the side of x_1 + … + x_d = 0 "
            "flipped with probability 0.12; the classifiers are logistic regressions and linear SVMs whose "
            "class weight was set once, by bisection, to land on the paper's error rates (80:20 split, "
            "error on the whole dataset). See `uss_stream.datasets.synthetic`.\n"
            "- Costs: Tables 1, 3, 4 as printed (cumulative). Table 2: C_j = λ_j · Cost_j, except Heart "
            "case 5, whose C_1 = 0.0042 · 32 = 0.1344 exceeds C_2 = 0.0397 (impossible in a cascade) and is "
            "lowered to C_2; i* and WD do not depend on C_1 there."
        ),
        error_table,
        (
            "Largest |ours − paper| per dataset: "
            + ", ".join(f"{DATASET_TITLES[d]} {worst[d]:.4f}" for d in DATASETS)
            + ". The synthetic rates are calibrated to the paper's, so they agree by construction; the "
            "real-data rates are what the protocol above gives."
        ),
        (
            "Feature subsets of the real-data cascades and their cost. Table 2's classifier costs "
            "are used as printed, but they do not all follow from Turney's per-feature costs shipped with "
            "the data (`uss_stream/datasets/data/PROVENANCE.md`): the paper's text gives $6 for the first "
            "PIMA classifier (Table 2: 4), and the second-stage costs (29 and 397) would fit PIMA's profile "
            "+ insulin (28.78) and Heart's first 7 + thalach, exang, oldpeak, slope (396.77) better than "
            "the feature sets the text describes."
        ),
        _feature_cost_table(),
    ]


def _paper_figure_sections(
    main: dict[str, _Run],
    images: dict[str, str],
    fig2: tuple[str, str],
    fig3: tuple[str, str],
    fig4a: tuple[str, str],
) -> list[str]:
    """Sections 3 to 5: Fig. 2, Fig. 3 and Fig. 4a of the paper on every instance."""
    comparison_names = [f"{d}-{c}" for c in COMPARISON_CASES for d in DATASETS]
    sup_names = [f"{d}-{c}" for c in SUPERVISED_CASES for d in REAL_STAGE_FEATURES]
    policy_rows = [
        [n, *(main[n].curves[p].text() for p in (ALG2, USS_UCB_15, USS_UCB_1, USS_UCB))]
        for n in comparison_names
    ]
    sup_rows = [[n, main[n].curves[USS_UCB].text(), main[n].curves[SUPERVISED].text()] for n in sup_names]
    return [
        "## 3. Fig. 2 (and appendix): cumulative regret of USS-UCB (α = 0.51), every instance",
        f"![Fig. 2]({images['fig2_regret.png']})",
        fig2[0],
        _regret_table(main, list(PAPER_CASES), USS_UCB),
        "## 4. Fig. 3 (and appendix): Alg. 2 of Hanawal et al. (2017) vs USS-UCB, α ∈ {1.5, 1, 0.51}",
        *(f"![Fig. 3, case {c}]({images[f'fig3_alg2_vs_ussucb_case{c}.png']})" for c in COMPARISON_CASES),
        fig3[0],
        _table(["instance", ALG2, USS_UCB_15, USS_UCB_1, USS_UCB], policy_rows),
        "## 5. Fig. 4a (and appendix): supervised vs unsupervised",
        (
            "The supervised variant replaces USS-UCB's disagreement estimate by label-based error-rate "
            "differences (the paper's construction; `uss_stream.policies.SupervisedUCB`)."
        ),
        f"![Fig. 4a]({images['fig4a_supervised.png']})",
        fig4a[0],
        _table(["instance", USS_UCB, SUPERVISED], sup_rows),
    ]


def _xi_and_swapped_sections(
    sweep: list[tuple[float, _Run]],
    swapped: dict[str, _Run],
    images: dict[str, str],
    fig4b: tuple[str, str],
    fig4c: tuple[str, str],
) -> list[str]:
    """Sections 6 and 7: regret against ξ (Fig. 4b) and with the last two stages swapped (Fig. 4c)."""
    xi_rows = [
        [
            f"{xi:+.3f}",
            f"{run.instance.cumulative_costs[2]:.4f}",
            _fmt(run.instance.gaps[2]),
            _yes(run.instance.satisfies_wd),
            run.curves[USS_UCB].text(),
            f"{run.optimal_share[USS_UCB]:.1%}",
        ]
        for xi, run in sweep
    ]
    return [
        "## 6. Fig. 4b: regret against ξ (BSC, i* = 2)",
        (
            "C_1 = 0, C_2 = 0.15 and C_3 = C_2 + p_23 + ξ, with p_23 measured on the BSC log, so that ξ "
            "crosses 0 while stage 2 stays optimal (Δ_3 > 0)."
        ),
        f"![Fig. 4b]({images['fig4b_regret_vs_xi.png']})",
        fig4b[0],
        _table(["ξ", "C_3", "Δ_3", "WD", "R_T (mean ± 95% CI)", "at i* in last 10% of rounds"], xi_rows),
        "## 7. Fig. 4c (and appendix): last two stages swapped",
        (
            "The last two columns of each log are swapped while the costs stay in place (for BSC these are "
            "sensors 2 and 3, as in Fig. 4c); i*, ξ and WD are recomputed for the swapped cascade."
        ),
        f"![Fig. 4c]({images['fig4c_swapped.png']})",
        fig4c[0],
        _regret_table(swapped, list(swapped), USS_UCB),
    ]


def _mismatch_lines(main: dict[str, _Run], optimal_mismatch: list[str], wd_mismatch: list[str]) -> list[str]:
    """One line per instance whose WD verdict or optimal classifier differs from the paper's."""
    lines = []
    for name in wd_mismatch:
        case = PAPER_CASES[name]
        instance = main[name].instance
        star = instance.optimal_depth - 1
        costs = instance.cumulative_costs
        detail = ", ".join(
            f"C_{j + 1} − C_{star + 1} = {costs[j] - costs[star]:.4f} "
            f"vs p_{star + 1}{j + 1} = {instance.disagreement[star, j]:.4f}"
            for j in range(star + 1, instance.n_stages)
        )
        lines.append(
            f"- **{name}**: the paper says WD {'holds' if case.paper_wd else 'fails'}; on our data it "
            f"{'holds' if instance.satisfies_wd else 'fails'} ({detail})."
        )
    for name in optimal_mismatch:
        lines.append(
            f"- **{name}**: our optimal classifier is {main[name].instance.optimal_depth}, "
            f"the paper's {PAPER_CASES[name].paper_optimal_depth}."
        )
    return lines


def _match_section(
    main: dict[str, _Run],
    optimal_mismatch: list[str],
    wd_mismatch: list[str],
    worst: dict[str, float],
    verdicts: Sequence[str],
) -> list[str]:
    """Section 8: where the reproduction matches the paper and where it does not."""
    n_cases = len(PAPER_CASES)
    return [
        "## 8. Where we match the paper and where we do not",
        "\n".join(
            [
                f"- **Tables 1–4**: i* matches in {n_cases - len(optimal_mismatch)}/{n_cases} instances, WD "
                f"in {n_cases - len(wd_mismatch)}/{n_cases}.",
                *_mismatch_lines(main, optimal_mismatch, wd_mismatch),
                "- **Error rates** (§1): the real-data classifiers differ from the paper's by up to "
                f"{max(worst['pima'], worst['heart']):.3f} (the first Heart classifier is the furthest off; "
                "the paper's training protocol is not recoverable); the synthetic ones are calibrated to "
                "the paper's. The BSC and synthetic generators are ours (the paper does not publish its "
                "own), so what we find on them holds for our generators.",
                *(f"- {verdict}" for verdict in verdicts),
                "- Regret values cannot be compared number by number with the paper's plots (other data, "
                "and the paper gives no tables); the comparisons above are of the qualitative claims.",
            ]
        ),
    ]


def _markdown(
    main: dict[str, _Run],
    swapped: dict[str, _Run],
    sweep: list[tuple[float, _Run]],
    beyond: tuple[dict[str, _DriftRun], _RiverRun],
    figures: dict[str, Figure],
    settings: dict,
    elapsed: float,
) -> str:
    error_table, worst = _error_rate_section(main)
    tables, optimal_mismatch, wd_mismatch = _tables_section(main)
    fig2, fig3, fig4a = _fig2_text(main), _comparison_text(main), _supervised_text(main)
    fig4b, fig4c = _xi_text(sweep), _swapped_text(swapped)
    n_cases = len(PAPER_CASES)
    images = {name: f"figures/{name}" for name in figures}
    sections = [
        *_front_matter(settings, elapsed),
        *_data_section(error_table, worst),
        "## 2. Tables 1–4 recomputed: optimal classifier and weak dominance",
        (
            f"i* = max argmin_j (C_j + γ_j) with our error rates; ξ = min_{{j > i*}} (C_j − C_i* − p_i*j) "
            f"with p measured on the log; WD holds iff ξ > 0 (ξ = ∞ when i* = K). Our i* matches the paper "
            f"in {n_cases - len(optimal_mismatch)} of {n_cases} instances and the WD verdict in "
            f"{n_cases - len(wd_mismatch)} of {n_cases}."
        ),
        tables,
        *_paper_figure_sections(main, images, fig2, fig3, fig4a),
        *_xi_and_swapped_sections(sweep, swapped, images, fig4b, fig4c),
        *_match_section(
            main, optimal_mismatch, wd_mismatch, worst, [fig2[1], fig3[1], fig4a[1], fig4b[1], fig4c[1]]
        ),
        *_beyond_section(main, *beyond, images),
    ]
    return "\n\n".join(sections) + "\n"


if __name__ == "__main__":
    from studies.cli import main

    sys.exit(main())
