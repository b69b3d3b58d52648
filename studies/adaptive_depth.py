"""Adaptive depth: a sequential, label-free policy against fixed depths and hindsight rules, 7 streams.

Run: ``python studies/adaptive_depth.py`` (about ten minutes on two cores). Writes
``docs/results_adaptive.md`` and ``docs/figures/adaptive_*.png``.

Protocol. Each stream is run once under progressive validation with online River stages: for every
event, each stage predicts (label and top-class probability, its *confidence*), then every stage
learns the label. Because a :class:`~uss_stream.CascadeClassifier` trains every stage on every
label whatever the depth, the stages' answers do not depend on the policy, so this log is exactly
what any policy would see online (``tests/test_cascade_sequential.py`` checks the equality on
Phishing). The first ``WARM_UP`` events are the cascade's warm-up (every stage queried) and are
left out of every figure. The policies then run over the log in stream order, one pass:

* *Sequential KL-UCB*: :class:`~uss_stream.policies.SequentialKLUCB` (defaults: 4 bins, α = 1),
* *USS-KL-UCB*: the fixed-depth default of the cascade,
* *Full cascade*: always depth K,
* hindsight references computed from the labels of the same events: *Oracle* (the best fixed
  depth), *Threshold (hindsight)* (the confidence-threshold cascade with the best thresholds on a
  20-quantile grid) and *Stopping rule (hindsight)* (the best table "stage, confidence quartile
  -> stop/continue").

Costs. One rule for every stream, nothing tuned per stream: the whole cascade costs ``C_K = λ``
(``λ = 0.1`` unless swept) and the cheaper depths a fixed share of it: PIMA and Heart use the
paper's dollar costs of their three classifiers (Table 2: 4, 29, 46 and 32, 397, 601 dollars,
normalised by the last); the River streams use the mean of the share of the features bought so far
and the share of the stages run so far. The objective is the paper's: mean cost plus error rate.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from river import datasets, linear_model, naive_bayes, neighbors, preprocessing, tree
from river.datasets import synth

from uss_stream.datasets.heart import load_heart
from uss_stream.datasets.paper import REAL_COSTS, REAL_STAGE_FEATURES
from uss_stream.datasets.pima import load_pima
from uss_stream.policies import USSKLUCB, SequentialKLUCB
from uss_stream.replay import encode_log
from uss_stream.replay_sequential import (
    best_fixed_depth,
    best_stopping_rule,
    confidence_bins,
    context_wd,
    replay_sequential,
    rule_depths,
    stage_values,
    threshold_depths,
    threshold_frontier,
)

ROOT = Path(__file__).resolve().parents[1]
WARM_UP = 50
SCALE = 0.1
MULTIPLIERS = (0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
N_BINS = 4
REGRET_HORIZON = 20_000
REGRET_REPS = 4
ABSTAIN = "<abstained>"

POLICIES = (
    "Sequential KL-UCB",
    "USS-KL-UCB",
    "Full cascade",
    "Oracle (best fixed depth)",
    "Threshold (hindsight)",
    "Stopping rule (hindsight)",
)


@dataclass(frozen=True)
class StreamSpec:
    """A stream, its stages (features, model factory) and its cost profile ``C_j / C_K``."""

    name: str
    description: str
    events: Callable[[], Iterable[tuple[dict, Any]]]
    stages: tuple[tuple[tuple[Any, ...] | None, Callable[[], Any]], ...]
    profile: tuple[float, ...] | None = None


def _river_profile(spec: StreamSpec, n_features: int) -> tuple[float, ...]:
    bought: set[Any] = set()
    profile = []
    k = len(spec.stages)
    for j, (features, _) in enumerate(spec.stages):
        bought |= set(features) if features is not None else set(range(n_features))
        profile.append((min(len(bought), n_features) / n_features + (j + 1) / k) / 2)
    return tuple(profile)


def _frame_events(loader: Callable[[], tuple[pd.DataFrame, pd.Series]]) -> Callable[[], Iterable]:
    def events():
        x, y = loader()
        return zip(x.to_dict(orient="records"), y.tolist())

    return events


def _lr():
    return linear_model.LogisticRegression()


def streams() -> list[StreamSpec]:
    phishing_cheap = ("empty_server_form_handler", "popup_window", "https")
    segments = [f for f in next(iter(datasets.ImageSegments()))[0]]
    agrawal = ("salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan")
    return [
        StreamSpec(
            "Phishing",
            "River bundled, 1250 events, 9 features; LR on 3 features, LR on all, Hoeffding tree on all",
            lambda: datasets.Phishing(),
            ((phishing_cheap, _lr), (None, _lr), (None, tree.HoeffdingTreeClassifier)),
        ),
        StreamSpec(
            "Bananas",
            "River bundled, 5300 events, 2 features; Gaussian NB on feature 1, Gaussian NB on both, 5-NN",
            lambda: datasets.Bananas(),
            (
                (("1",), naive_bayes.GaussianNB),
                (None, naive_bayes.GaussianNB),
                (None, neighbors.KNNClassifier),
            ),
        ),
        StreamSpec(
            "ImageSegments",
            "River bundled, 2310 events, 7 classes, 18 features; Gaussian NB on 6, Gaussian NB on all, "
            "Hoeffding tree on all",
            lambda: datasets.ImageSegments(),
            (
                (tuple(segments[:6]), naive_bayes.GaussianNB),
                (None, naive_bayes.GaussianNB),
                (None, tree.HoeffdingTreeClassifier),
            ),
        ),
        StreamSpec(
            "PIMA",
            "768 events; the paper's cascade: LR on the profile, + glucose, + insulin (Table 2 costs)",
            _frame_events(load_pima),
            tuple((features, _lr) for features in REAL_STAGE_FEATURES["pima"]),
            tuple(c / REAL_COSTS["pima"][-1] for c in REAL_COSTS["pima"]),
        ),
        StreamSpec(
            "Heart",
            "297 events; the paper's cascade: LR on the first 7 attributes, + 3, all 13 (Table 2 costs)",
            _frame_events(load_heart),
            tuple((features, _lr) for features in REAL_STAGE_FEATURES["heart"]),
            tuple(c / REAL_COSTS["heart"][-1] for c in REAL_COSTS["heart"]),
        ),
        StreamSpec(
            "Agrawal (drift)",
            "10000 events, function 0 drifting to 2 around event 5000 (width 500); LR on salary and age, "
            "Hoeffding tree on 4 features, Hoeffding tree on all 9",
            lambda: synth.ConceptDriftStream(
                stream=synth.Agrawal(classification_function=0, seed=1),
                drift_stream=synth.Agrawal(classification_function=2, seed=2),
                position=5000,
                width=500,
                seed=3,
            ).take(10_000),
            (
                (("salary", "age"), _lr),
                (agrawal[:4], tree.HoeffdingTreeClassifier),
                (None, tree.HoeffdingTreeClassifier),
            ),
        ),
        StreamSpec(
            "Hyperplane (drift)",
            "10000 events, 10 features, 5 drifting (magnitude 0.001), 5% noise; LR on 3, 6 and 10 features",
            lambda: synth.Hyperplane(seed=1, n_features=10, n_drift_features=5, mag_change=0.001).take(
                10_000
            ),
            ((tuple(range(3)), _lr), (tuple(range(6)), _lr), (None, _lr)),
        ),
    ]


@dataclass
class StreamLog:
    """A stream's log after the warm-up: encoded outputs, confidences, labels, cumulative cost profile."""

    spec: StreamSpec
    codes: np.ndarray
    confidences: np.ndarray
    labels: np.ndarray
    profile: np.ndarray
    seconds: float


def build_log(spec: StreamSpec) -> StreamLog:
    """Progressive validation: every stage predicts on its view, then every stage learns."""
    started = time.perf_counter()
    scaler = preprocessing.StandardScaler()
    models = [factory() for _, factory in spec.stages]
    outputs, confidences, labels = [], [], []
    n_features = 0
    for i, (x, y) in enumerate(spec.events()):
        n_features = max(n_features, len(x))
        xs = scaler.transform_one(x)
        views = [xs if f is None else {k: xs[k] for k in f if k in xs} for f, _ in spec.stages]
        if i >= WARM_UP:
            row, row_conf = [], []
            for model, view in zip(models, views):
                proba = model.predict_proba_one(view)
                if proba:
                    label = max(proba, key=proba.get)
                    row.append(label)
                    row_conf.append(min(1.0, max(0.0, float(proba[label]))))
                else:
                    row.append(ABSTAIN)
                    row_conf.append(math.nan)
            outputs.append(row)
            confidences.append(row_conf)
            labels.append(y)
        scaler.learn_one(x)
        for model, view in zip(models, views):
            model.learn_one(view, y)
    codes, label_codes = encode_log(np.array(outputs, dtype=object), np.array(labels, dtype=object))
    profile = spec.profile if spec.profile is not None else _river_profile(spec, n_features)
    return StreamLog(
        spec, codes, np.array(confidences), label_codes, np.array(profile), time.perf_counter() - started
    )


def evaluate(log: StreamLog, scale: float) -> dict[str, dict[str, Any]]:
    """Every policy's mean cost, error, objective, depth mix and regret on the log in stream order."""
    cumulative = log.profile * scale
    stage_costs = np.diff(cumulative, prepend=0.0).tolist()
    values = stage_values(log.codes, log.labels, cumulative)
    k = values.shape[1]
    bins, _ = confidence_bins(log.confidences, N_BINS)
    rule, _ = best_stopping_rule(values, bins, N_BINS)
    fixed, _ = best_fixed_depth(values)
    frontier = threshold_frontier(values, cumulative, log.confidences)
    best_thresholds = frontier.loc[frontier["objective"].idxmin()].iloc[: k - 1].to_numpy()
    depths = {
        "Sequential KL-UCB": SequentialKLUCB(stage_costs).run(log.codes, log.confidences),
        "USS-KL-UCB": USSKLUCB(stage_costs).run(log.codes),
        "Full cascade": np.full(len(values), k),
        "Oracle (best fixed depth)": np.full(len(values), fixed),
        "Threshold (hindsight)": threshold_depths(log.confidences, best_thresholds),
        "Stopping rule (hindsight)": rule_depths(bins, rule),
    }
    rows = np.arange(len(values))
    rule_values = values[rows, depths["Stopping rule (hindsight)"] - 1]
    fixed_values = values[:, fixed - 1]
    out = {}
    for name, d in depths.items():
        v = values[rows, d - 1]
        cost = cumulative[d - 1]
        out[name] = {
            "cost": float(cost.mean()),
            "error": float((v - cost).mean()),
            "objective": float(v.mean()),
            "mix": [float(np.mean(d == j)) for j in range(1, k + 1)],
            "regret_fixed": float(np.sum(v - fixed_values)),
            "regret_rule": float(np.sum(v - rule_values)),
            "curve": np.cumsum(v - rule_values),
        }
    out["_frontier"] = {"frame": frontier, "cumulative": cumulative}
    return out


def regret_replay(log: StreamLog, scale: float) -> dict[str, Any]:
    """Rows drawn uniformly from the second half of the log (stages settled): regret growth."""
    half = len(log.codes) // 2
    codes, conf, labels = log.codes[half:], log.confidences[half:], log.labels[half:]
    cumulative = log.profile * scale
    stage_costs = np.diff(cumulative, prepend=0.0).tolist()
    result = replay_sequential(
        codes,
        conf,
        labels,
        stage_costs=stage_costs,
        policies={"Sequential KL-UCB": SequentialKLUCB(stage_costs), "USS-KL-UCB": USSKLUCB(stage_costs)},
        horizon=REGRET_HORIZON,
        reps=REGRET_REPS,
        seed=0,
        n_bins=N_BINS,
    )
    curves = {name: result.cumulative_regret(name, "rule").mean(axis=0) for name in result.depths}
    fixed_curves = {name: result.cumulative_regret(name, "fixed").mean(axis=0) for name in result.depths}
    bins, _ = confidence_bins(conf, N_BINS)
    wd = context_wd(codes, labels, bins, cumulative)
    return {
        "curves": curves,
        "fixed_curves": fixed_curves,
        "wd": wd,
        "rule_value": result.best_rule_value,
        "fixed_value": result.best_fixed_value,
    }


def _growth(curve: np.ndarray) -> float:
    """``log2(R(T) / R(T/2))``: 1 for linear growth, near 0 for logarithmic (NaN if R(T/2) <= 0)."""
    end, middle = curve[-1], curve[len(curve) // 2 - 1]
    return math.log2(end / middle) if middle > 0 and end > 0 else math.nan


def _fmt(x: float, digits: int = 4) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def sweep(log: StreamLog) -> pd.DataFrame:
    """Sequential KL-UCB and the full cascade at every cost multiplier."""
    rows = []
    for m in MULTIPLIERS:
        result = evaluate(log, SCALE * m)
        seq, full = result["Sequential KL-UCB"], result["Full cascade"]
        frontier = result["_frontier"]["frame"]
        reachable = frontier[frontier["error"] <= seq["error"] + 1e-12]
        rows.append(
            {
                "multiplier": m,
                "cost_ratio": seq["cost"] / full["cost"],
                "error": seq["error"],
                "full_error": full["error"],
                "threshold_cost_ratio": seq["cost"] / reachable["cost"].min() if len(reachable) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def figure_cost_error(results: dict[str, dict], path: Path) -> None:
    names = list(results)
    fig, axes = plt.subplots(2, 4, figsize=(18, 8.5))
    markers = dict(zip(POLICIES, "o^sDvP"))
    for ax, name in zip(axes.flat, names):
        result = results[name]["base"]
        frontier = result["_frontier"]["frame"]
        hull = frontier.sort_values("cost")
        hull = hull[hull["error"] <= hull["error"].cummin()]
        ax.plot(hull["cost"], hull["error"], color="0.75", lw=1, label="threshold frontier (hindsight)")
        for policy in POLICIES:
            ax.scatter(
                result[policy]["cost"], result[policy]["error"], marker=markers[policy], s=60, label=policy
            )
        ax.set_title(name)
        ax.set_xlabel("mean cost")
        ax.set_ylabel("error rate")
        ax.grid(alpha=0.3)
    axes.flat[-1].axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[-1].legend(handles, labels, loc="center")
    fig.suptitle(f"Cost against error, every policy (C_K = {SCALE})")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def figure_sweep(results: dict[str, dict], path: Path) -> None:
    fig, axes = plt.subplots(2, 4, figsize=(18, 8.5))
    for ax, name in zip(axes.flat, results):
        table = results[name]["sweep"]
        ax.plot(table["cost_ratio"], table["error"], "o-", label="Sequential KL-UCB (multiplier sweep)")
        for _, row in table.iterrows():
            ax.annotate(f"×{row['multiplier']:g}", (row["cost_ratio"], row["error"]), fontsize=7)
        full = table["full_error"].iloc[0]
        ax.axhline(full, color="k", lw=0.8, label="full cascade error")
        ax.axhline(full + 0.01, color="k", lw=0.8, ls="--", label="+1 point")
        ax.axvline(0.6, color="r", lw=0.8, ls=":", label="0.6 × full cost")
        ax.set_title(name)
        ax.set_xlabel("mean cost / C_K")
        ax.set_ylabel("error rate")
        ax.grid(alpha=0.3)
    axes.flat[-1].axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[-1].legend(handles, labels, loc="center")
    fig.suptitle("Cost multiplier sweep: error against relative cost")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def figure_regret(results: dict[str, dict], path: Path) -> None:
    fig, axes = plt.subplots(2, 4, figsize=(18, 8.5))
    for ax, name in zip(axes.flat, results):
        replay = results[name]["replay"]
        for policy, curve in replay["curves"].items():
            ax.plot(curve, label=f"{policy} vs best stopping rule")
        for policy, curve in replay["fixed_curves"].items():
            ax.plot(curve, ls="--", label=f"{policy} vs best fixed depth")
        ax.set_title(name)
        ax.set_xlabel("round")
        ax.set_ylabel("cumulative regret")
        ax.grid(alpha=0.3)
    axes.flat[-1].axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[-1].legend(handles, labels, loc="center")
    fig.suptitle(f"Regret on rows drawn from each log's second half ({REGRET_REPS} repetitions)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run(output: Path, figures: Path) -> dict[str, dict]:
    results: dict[str, dict] = {}
    for spec in streams():
        log = build_log(spec)
        print(f"{spec.name}: {len(log.codes)} events logged in {log.seconds:.1f} s", flush=True)
        results[spec.name] = {
            "log": log,
            "base": evaluate(log, SCALE),
            "sweep": sweep(log),
            "replay": regret_replay(log, SCALE),
        }
    figures.mkdir(parents=True, exist_ok=True)
    figure_cost_error(results, figures / "adaptive_cost_error.png")
    figure_sweep(results, figures / "adaptive_sweep.png")
    figure_regret(results, figures / "adaptive_regret.png")
    output.write_text(markdown(results))
    return results


def markdown(results: dict[str, dict]) -> str:
    return "TODO"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "results_adaptive.md")
    parser.add_argument("--figures", type=Path, default=ROOT / "docs" / "figures")
    args = parser.parse_args()
    run(args.output, args.figures)


if __name__ == "__main__":
    main()
