"""The held-out evaluation: AuditedUSS against USS-KL-UCB and Supervised UCB on instances nobody tuned for.

Replays each instance of a split (:mod:`studies.heldout_instances`: ``development`` or ``heldout``;
``real``: bundled data sets as cascades, :mod:`studies.heldout_real`) and caches one JSON
summary per instance and policy under ``--cache``; ``--report`` writes the results page from the
cache. The full protocol (about 3 CPU-hours for the held-out split on one core)::

    python -m studies.heldout --split heldout --horizon 100000 --reps 20 --jobs 2
    python -m studies.heldout --split real --horizon 100000 --reps 20
    python -m studies.heldout --report --horizon 100000 --reps 20

``--report --split real`` writes the real cascades' page alone (``results_heldout_real.md``).

``--audited KEY=VALUE,...`` replays AuditedUSS with other parameters (development seeds only: the
defaults are chosen there), cached under its own name.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from studies.safety_net import replay_parser, replay_settings, run_jobs
from uss_stream.policies import USSKLUCB, AuditedUSS, SupervisedUCB
from uss_stream.replay.engine import replay

__all__ = ["audited_name", "cascades", "main", "run_instance", "summarise"]

BASELINES = ("USS-KL-UCB", "Supervised UCB")


def audited_name(params: dict[str, float]) -> str:
    """The cache name of AuditedUSS with ``params`` (``AuditedUSS`` for the defaults).

    >>> audited_name({}), audited_name({"label_budget": 2.0})
    ('AuditedUSS', 'AuditedUSS[label_budget=2.0]')
    """
    if not params:
        return "AuditedUSS"
    return "AuditedUSS[" + ",".join(f"{k}={v}" for k, v in sorted(params.items())) + "]"


def _policy(name: str, costs: list[float], params: dict[str, float]) -> Any:
    if name == "USS-KL-UCB":
        return USSKLUCB(costs)
    if name == "Supervised UCB":
        return SupervisedUCB(costs, alpha=0.51)
    return AuditedUSS(costs, **params)


def cascades(split: str) -> Iterator[tuple[str, Callable[[], tuple[np.ndarray, np.ndarray, list[float]]]]]:
    """``(name, loader)`` of the instances of ``split``; a loader gives ``(outputs, labels, costs)``."""
    if split == "real":
        from studies.heldout_real import REAL_CASCADES, real_cascade

        for name in REAL_CASCADES:
            yield name, lambda name=name: real_cascade(name)
        return
    from studies.heldout_instances import DEVELOPMENT_SEEDS, HELDOUT_SEEDS

    seeds = {"development": DEVELOPMENT_SEEDS, "heldout": HELDOUT_SEEDS}[split]
    for seed in seeds:
        yield f"seed-{seed}", lambda seed=seed: _generated(seed)


def _generated(seed: int) -> tuple[np.ndarray, np.ndarray, list[float]]:
    from studies.heldout_instances import generate

    instance = generate(seed)
    return instance.outputs, instance.labels, instance.stage_costs


def run_instance(
    loader: Callable[[], tuple[np.ndarray, np.ndarray, list[float]]],
    policy: str,
    settings: dict[str, Any],
    params: dict[str, float],
) -> dict[str, Any]:
    """One policy on one instance: ``R_T``, ``R_{T/2}``, the labels and the instance's margins."""
    outputs, labels, costs = loader()
    began = time.process_time()
    horizon = settings["horizon"]
    result = replay(
        outputs,
        labels,
        policies={policy: _policy(policy, costs, params)},
        horizon=horizon,
        reps=settings["reps"],
        seed=settings["seed"],
        label_delay=settings["label_delay"],
    )
    instance = result.instance
    regret = result.cumulative_regret[policy]
    return {
        "K": instance.n_stages,
        "optimal_depth": instance.optimal_depth,
        "xi": None if np.isinf(instance.xi) else float(instance.xi),
        "wd": bool(instance.satisfies_wd),
        "regret": regret[:, -1].tolist(),
        "regret_half": regret[:, horizon // 2 - 1].tolist(),
        "labels": result.labels_used[policy].tolist(),
        "cpu_seconds": time.process_time() - began,
        "settings": settings,
    }


def _cache_file(cache: Path, name: str, policy: str) -> Path:
    return cache / f"{name}__{policy}.json".replace(" ", "_")


def _job(args: tuple[str, str, str, dict[str, Any], dict[str, float], str]) -> str:
    split, name, policy, settings, params, cache = args
    loader = dict(cascades(split))[name]
    summary = run_instance(
        loader, "AuditedUSS" if policy.startswith("AuditedUSS") else policy, settings, params
    )
    target = _cache_file(Path(cache), name, policy)
    target.with_suffix(".tmp").write_text(json.dumps(summary))
    target.with_suffix(".tmp").replace(target)
    return f"{name} {policy}: {summary['cpu_seconds']:.1f} s"


def summarise(cache: Path, names: list[str], audited: str, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per instance with every policy cached under ``settings``: the issue's columns."""
    rows = []
    for name in names:
        found = {}
        for policy in (audited, *BASELINES):
            path = _cache_file(cache, name, policy)
            if not path.exists():
                break
            document = json.loads(path.read_text())
            if document["settings"] != settings:
                break
            found[policy] = document
        if len(found) < 3:
            continue
        mine = found[audited]
        row = {"name": name, "K": mine["K"], "wd": mine["wd"], "xi": mine["xi"], "i*": mine["optimal_depth"]}
        for policy, document in found.items():
            key = "audited" if policy == audited else policy
            row[f"{key} R_T"] = float(np.mean(document["regret"]))
            row[f"{key} R_T/2"] = float(np.mean(document["regret_half"]))
        row["labels share"] = float(np.mean(mine["labels"])) / settings["horizon"]
        row["labels max share"] = float(np.max(mine["labels"])) / settings["horizon"]
        rows.append(row)
    return rows


def _parse_params(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    params = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        params[key.strip()] = float(value)
    return params


def main(argv: list[str] | None = None) -> int:
    parser = replay_parser(__doc__.splitlines()[0], 20, "out/heldout")
    parser.add_argument(
        "--split",
        choices=("development", "heldout", "real"),
        help="the split to replay (default: development); with --report, real writes only the real page",
    )
    parser.add_argument("--audited", help="AuditedUSS parameters KEY=VALUE,... (development only)")
    parser.add_argument("--only", help="comma-separated instance names")
    parser.add_argument("--policies", help="comma-separated subset of USS-KL-UCB,Supervised UCB,AuditedUSS")
    parser.add_argument("--report", action="store_true", help="write OUT/results_heldout.md from the cache")
    parser.add_argument("--out", default="docs/evidence", help="output folder (default: docs/evidence)")
    args = parser.parse_args(argv)
    settings = replay_settings(args)
    params = _parse_params(args.audited)
    split = args.split or "development"
    if params and split != "development":
        parser.error("--audited variants are replayed on development seeds only")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    if args.report:
        from studies.heldout_report import write_report

        print(write_report(cache, Path(args.out), settings, split=args.split))
        return 0
    names = [name for name, _ in cascades(split)]
    if args.only:
        names = [n for n in names if n in {x.strip() for x in args.only.split(",")}]
    audited = audited_name(params)
    chosen = (*BASELINES, audited)
    if args.policies:
        chosen = tuple(p for p in chosen if p in {x.strip() for x in args.policies.split(",")})
    todo = []
    for name in names:
        # A variant is compared with the baselines of the default run: replay it alone.
        for policy in (audited,) if params else chosen:
            path = _cache_file(cache, name, policy)
            if path.exists() and json.loads(path.read_text())["settings"] == settings:
                continue
            todo.append((split, name, policy, settings, params, str(cache)))
    run_jobs(_job, todo, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
