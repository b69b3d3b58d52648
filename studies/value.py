"""The value report: what each policy saves and costs on real cascades, in the user's units.

Run: ``python -m studies.value`` (or ``make value``). Replays every cascade of
:mod:`studies.value_cascades` (the list, the prices and the practitioners' rules were fixed there
before any replay) with every policy, caches one JSON document per cascade under ``--cache`` and
writes ``docs/evidence/value.md`` and ``docs/evidence/value.csv`` (:mod:`studies.value_report`).

Per cascade and policy: mean cost per event and the share saved against always querying the
deepest stage, accuracy and its change in points against the deepest stage and against the best
fixed depth, labels used, regret against the best fixed depth, and the loss
``mean cost + price_of_error × error rate``, all in the cascade's unit (dollars or errors).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from studies.safety_net import replay_parser, run_jobs
from studies.value_cascades import GROUPS, PRACTITIONER_RULES, ValueCascade, cascade_names, load_cascade
from uss_stream.policies import UEEUCB, USSKLUCB, USSUCB, AuditedUSS, SequentialKLUCB
from uss_stream.policies.specs import parse_spec
from uss_stream.replay.engine import replay
from uss_stream.replay.sequential import (
    best_fixed_depth,
    replay_sequential,
    stage_values,
    threshold_depths,
    threshold_frontier,
)

__all__ = [
    "LABEL_ASKING",
    "LIBRARY_LABEL_FREE",
    "PROXIES",
    "REFERENCES",
    "evaluate_cascade",
    "main",
    "policy_metrics",
    "proxy_choices",
]

#: The library's label-free policies, by report name.
LIBRARY_LABEL_FREE = ("USS-KL-UCB", "USS-UCB", "SequentialKLUCB", "UEE-UCB")
#: The library's label-asking policy.
LABEL_ASKING = ("AuditedUSS",)
#: References: always the deepest stage (no choice), and three chosen with the labels in hindsight.
REFERENCES = (
    "always deepest",
    "best fixed depth (hindsight)",
    "best thresholds (hindsight)",
    "per-event oracle (hindsight)",
)


def _depth_first(costs: list[float]) -> dict[str, Any]:
    return {
        "USS-KL-UCB": USSKLUCB(costs),
        "USS-UCB": USSUCB(costs, alpha=0.51),
        "UEE-UCB": UEEUCB(costs),
        "AuditedUSS": AuditedUSS(costs),
    }


#: Spec families whose decision is a function of the event alone (nothing learned decides).
STATELESS = ("confidence-threshold", "entropy-threshold")


def _sequential(costs: list[float], stateless: bool) -> dict[str, Any]:
    """The sequential policies that learn (``stateless=False``) or the rules that do not."""
    policies: dict[str, Any] = {} if stateless else {"SequentialKLUCB": SequentialKLUCB(costs)}
    for name, (family, params) in PRACTITIONER_RULES.items():
        if (family in STATELESS) == stateless:
            given = ",".join(f"{key}={value}" for key, value in params.items())
            policies[name] = parse_spec(family + (f":{given}" if given else "")).build(costs)
    return policies


def _stateless_depths(cascade: ValueCascade) -> dict[str, np.ndarray]:
    """The fixed rules' depths on every row of the log: each rule run once over the log.

    A fixed threshold rule's decision depends on the event alone, so its depth on a replayed row is
    its depth on that row of the log: the same decisions as a replay, for a pass over the log.
    """
    policies = _sequential(cascade.error_costs, stateless=True)
    return {
        name: policy.run(cascade.outputs, cascade.confidences, cascade.probabilities)
        for name, policy in policies.items()
    }


#: Label-free stand-ins for the label of an event, by name (the reach scan's selectors).
PROXIES = ("deepest stage", "majority of stages", "mean of the stages' probabilities", "stage confidence")


def proxy_choices(cascade: ValueCascade, rule_depths: dict[str, np.ndarray]) -> dict[str, str]:
    """Per label-free proxy, the rule a selector with full information would pick (the reach scan).

    Each selector sees every stage of every event of the log (as if every event were explored, at
    no cost) but no label, and picks the rule with the least mean ``C_d + e_d``, ``e_d`` a
    label-free stand-in for the answering stage's error: disagreement with the deepest stage,
    with the stages' majority (ties: the smaller class code), with the argmax of the stages' mean
    probabilities, or ``1 - confidence`` (what CeeBERT's bandit maximises). Ties: the first rule.

    >>> from studies.value_cascades import ValueCascade
    >>> probabilities = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.6, 0.4], [0.7, 0.3]]])
    >>> log = ValueCascade("x", "development", probabilities.argmax(axis=2), probabilities,
    ...                    np.array([1, 0]), (0.0, 0.1), "error", 1.0)
    >>> proxy_choices(log, {"stop": np.array([1, 1]), "go on": np.array([2, 2])})["deepest stage"]
    'go on'
    """
    outputs, probabilities = cascade.outputs, cascade.probabilities
    cumulative = np.cumsum(cascade.error_costs)
    rows = np.arange(len(outputs))
    counts = np.stack([(outputs == c).sum(axis=1) for c in range(probabilities.shape[2])], axis=1)
    pseudo = {
        "deepest stage": outputs[:, -1],
        "majority of stages": counts.argmax(axis=1),
        "mean of the stages' probabilities": probabilities.mean(axis=1).argmax(axis=1),
    }
    choices = {}
    for proxy in PROXIES:
        scores = {}
        for name, depth in rule_depths.items():
            if proxy == "stage confidence":
                errors = 1.0 - cascade.confidences[rows, depth - 1]
            else:
                errors = outputs[rows, depth - 1] != pseudo[proxy]
            scores[name] = float((cumulative[depth - 1] + errors).mean())
        choices[proxy] = min(scores, key=scores.get)
    return choices


def policy_metrics(
    depths: np.ndarray, rows: np.ndarray, wrong: np.ndarray, stage_costs: Any, price: float, best_depth: int
) -> dict[str, float]:
    """One policy's figures from its ``(reps, T)`` depths on the ``(reps, T)`` rows of a log.

    ``wrong`` is the log's ``N x K`` errors, ``stage_costs`` the costs ``c_j`` in the user's unit
    and ``price`` the price of one error in that unit; ``best_depth`` (1-based) the best fixed
    depth the regret is measured against. Each figure is the mean over the repetitions of the
    repetition's mean (the regret: its sum over the rounds).

    >>> wrong = np.array([[True, False], [False, False]])
    >>> depths, rows = np.array([[1, 2, 1, 2]]), np.array([[0, 0, 1, 1]])
    >>> metrics = policy_metrics(depths, rows, wrong, [1.0, 3.0], 10.0, 2)
    >>> {key: round(value, 3) for key, value in metrics.items()}
    {'cost': 2.5, 'error': 0.25, 'loss': 5.0, 'regret': 4.0}
    """
    cumulative = np.cumsum(np.asarray(stage_costs, dtype=float))
    index = depths.astype(np.int64) - 1
    cost = cumulative[index]
    error = wrong[rows, index].astype(float)
    loss = cost + price * error
    best = cumulative[best_depth - 1] + price * wrong[rows, best_depth - 1]
    return {
        "cost": float(cost.mean()),
        "error": float(error.mean()),
        "loss": float(loss.mean()),
        "regret": float((loss - best).sum(axis=1).mean()),
    }


def _reference_depths(cascade: ValueCascade, values: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The references' depths on the replayed rows (thresholds and depths chosen on the whole log)."""
    k = values.shape[1]
    confidences = cascade.confidences
    best, _ = best_fixed_depth(values)
    frontier = threshold_frontier(values, np.cumsum(cascade.error_costs), confidences)
    thresholds = frontier.loc[frontier["objective"].idxmin()].iloc[: k - 1].to_numpy()
    by_row = {
        "always deepest": np.full(len(values), k),
        "best fixed depth (hindsight)": np.full(len(values), best),
        "best thresholds (hindsight)": threshold_depths(confidences, thresholds),
        "per-event oracle (hindsight)": values.argmin(axis=1) + 1,
    }
    return {name: depth[rows] for name, depth in by_row.items()}


def evaluate_cascade(cascade: ValueCascade, settings: dict[str, Any]) -> dict[str, Any]:
    """Replay every policy on ``cascade``; its facts and each policy's figures (a JSON document).

    ``settings``: ``horizon``, ``reps``, ``seed``, ``label_delay``. A cascade learned online is
    replayed once in stream order instead (its horizon is its length).
    """
    began = time.process_time()
    n_rows = len(cascade.labels)
    horizon, reps = (n_rows, 1) if cascade.in_order else (settings["horizon"], settings["reps"])
    shared = {
        "horizon": horizon,
        "reps": reps,
        "seed": settings["seed"],
        "sampling": "sequential" if cascade.in_order else "uniform",
        "stage_costs": cascade.error_costs,
    }
    costs = cascade.error_costs
    delay = settings["label_delay"]
    first = replay(cascade.outputs, cascade.labels, policies=_depth_first(costs), label_delay=delay, **shared)
    second = replay_sequential(
        cascade.outputs,
        cascade.confidences,
        cascade.labels,
        policies=_sequential(costs, stateless=False),
        probabilities=cascade.probabilities,
        **shared,
    )
    if not np.array_equal(first.rows, second.rows):
        raise AssertionError("the depth-first and the sequential replays saw different rows")
    rows = first.rows
    wrong = cascade.outputs != cascade.labels[:, None]
    values = stage_values(cascade.outputs, cascade.labels, np.cumsum(costs))
    best, _ = best_fixed_depth(values)
    stateless = _stateless_depths(cascade)
    depths = {
        **first.depths,
        **second.depths,
        **{name: depth[rows] for name, depth in stateless.items()},
        **_reference_depths(cascade, values, rows),
    }
    policies = {}
    for name, chosen in depths.items():
        figures = policy_metrics(chosen, rows, wrong, cascade.stage_costs, cascade.price_of_error, best)
        figures["labels"] = float(np.mean(first.labels_used[name])) if name in first.labels_used else 0.0
        figures["depth_mix"] = np.bincount(chosen.ravel(), minlength=values.shape[1] + 1)[1:].tolist()
        policies[name] = figures
    instance = first.instance
    return {
        "name": cascade.name,
        "group": cascade.group,
        "unit": cascade.unit,
        "price_of_error": cascade.price_of_error,
        "stage_costs": list(cascade.stage_costs),
        "rows": n_rows,
        "classes": int(cascade.probabilities.shape[2]),
        "horizon": horizon,
        "reps": reps,
        "best_fixed_depth": int(best),
        "wd": bool(instance.satisfies_wd),
        "xi": None if np.isinf(instance.xi) else float(instance.xi),
        "policies": policies,
        "reach": proxy_choices(cascade, stateless),
        "cpu_seconds": time.process_time() - began,
        "settings": settings,
    }


def _cache_file(cache: Path, name: str) -> Path:
    return cache / f"{name}.json"


def _job(item: tuple[str, str, dict[str, Any], str]) -> str:
    name, group, settings, cache = item
    document = evaluate_cascade(load_cascade(name, group), settings)
    target = _cache_file(Path(cache), name)
    target.with_suffix(".tmp").write_text(json.dumps(document))
    target.with_suffix(".tmp").replace(target)
    return f"{group}: {name}: {document['cpu_seconds']:.1f} s"


def cached(cache: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every cascade's cached document under ``settings``, in report order (missing ones left out)."""
    documents = []
    for group in GROUPS:
        for name in cascade_names(group):
            path = _cache_file(cache, name)
            if path.exists():
                document = json.loads(path.read_text())
                if document["settings"] == settings:
                    documents.append(document)
    return documents


def main(argv: list[str] | None = None) -> int:
    parser = replay_parser(__doc__.splitlines()[0], 3, "out/value")
    parser.set_defaults(horizon=20_000)
    parser.add_argument("--out", default="docs/evidence", help="folder of value.md and value.csv")
    parser.add_argument("--groups", help=f"comma-separated subset of: {', '.join(GROUPS)}")
    parser.add_argument("--report-only", action="store_true", help="write the page from the cache")
    args = parser.parse_args(argv)
    settings = {"horizon": args.horizon, "reps": args.reps, "label_delay": args.label_delay}
    settings["seed"] = args.seed
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    groups = GROUPS if not args.groups else tuple(g.strip() for g in args.groups.split(","))
    if not args.report_only:
        todo = []
        for group in groups:
            for name in cascade_names(group):
                path = _cache_file(cache, name)
                if path.exists() and json.loads(path.read_text())["settings"] == settings:
                    continue
                todo.append((name, group, settings, str(cache)))
        run_jobs(_job, todo, args.jobs)
    from studies.value_report import write_report

    for path in write_report(cached(cache, settings), Path(args.out), settings):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
