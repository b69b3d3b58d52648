"""The safety-net evaluation: AuditedUSS against five policies on 51 instances, labels D rounds late.

Writes ``docs/evidence/results_safety_net.md`` and its figures (``docs/evidence/figures/safety_net_*.png``)::

    python -m studies.safety_net --horizon 100000 --reps 50 --label-delay 100

All policies see the same rows of an instance (they depend on the seed only). Each policy's
summary on each instance is cached as JSON under ``--cache`` (default ``out/safety_net``), so an
interrupted run resumes where it stopped and ``--policies`` replays a subset; ``--report-only``
writes the page from whatever is cached. The instances: the paper's 25
(``uss_stream.datasets.paper``), the same 25 with their last two stages swapped (costs in place),
and a synthetic K = 8 cascade whose third stage is at chance level (:func:`chance_cascade`).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from uss_stream.core.instances import WD_VERDICTS, Instance
from uss_stream.datasets.paper import PAPER_CASES
from uss_stream.policies import UEEUCB, USSKLUCB, USSTS, USSUCB, AuditedUSS, SupervisedUCB
from uss_stream.replay.engine import Z_95, replay

POLICIES = ("USS-UCB", "USS-KL-UCB", "USS-TS", "UEE-UCB", "Supervised UCB", "AuditedUSS")
#: Cumulative costs of the chance-level cascade; its error rates are CHANCE_ERRORS.
CHANCE_COSTS = (0.0, 0.02, 0.06, 0.12, 0.16, 0.20, 0.24, 0.28)
CHANCE_ERRORS = (0.30, 0.20, 0.50, 0.15, 0.12, 0.10, 0.09, 0.085)
CHANCE_NAME = "chance-8"
CURVE_POINTS = 200
LINEAR_GROWTH = 1.6


def chance_cascade(n_rows: int = 100_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A K = 8 multi-exit cascade whose third exit is at chance level (an under-trained exit).

    Labels are fair coins. Every other exit errs on the events whose difficulty ``u ~ U(0, 1)``
    is below its error rate (deeper exits err on a subset of the events shallower ones err on, as
    nested exits of one network do), and on 1% of the events at random; exit 3 outputs a fair coin.
    With :data:`CHANCE_COSTS` the best exit is 2 (``C + γ`` = 0.30, 0.22, 0.56, 0.27, ...), and
    weak dominance fails there: exit 3 disagrees with exit 2 on half the events.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n_rows)
    difficulty = rng.random(n_rows)
    outputs = np.empty((n_rows, len(CHANCE_ERRORS)), dtype=np.int64)
    for j, gamma in enumerate(CHANCE_ERRORS):
        if j == 2:
            outputs[:, j] = rng.integers(0, 2, size=n_rows)
            continue
        wrong = (difficulty < gamma - 0.01) | (rng.random(n_rows) < 0.01)
        outputs[:, j] = labels ^ wrong
    return outputs, labels


def instances() -> list[tuple[str, list[float]]]:
    """``(name, per-stage costs)`` of the 51 instances, WD-failing paper cases first."""
    names = [f"{case}" for case in PAPER_CASES]
    names += [f"{case} swapped" for case in PAPER_CASES]
    names.append(CHANCE_NAME)
    costs = {name: list(case.stage_costs) for name, case in PAPER_CASES.items()}
    urgent = [CHANCE_NAME] + [n for n in names if n.split(" ")[0][-1] in "45" and n != CHANCE_NAME]
    names = urgent + [n for n in names if n not in urgent]
    listed = []
    for name in names:
        if name == CHANCE_NAME:
            listed.append((name, np.diff(CHANCE_COSTS, prepend=0.0).tolist()))
        else:
            listed.append((name, costs[name.removesuffix(" swapped")]))
    return listed


def instance_log(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == CHANCE_NAME:
        return chance_cascade()
    outputs, labels = PAPER_CASES[name.removesuffix(" swapped")].log()
    if name.endswith(" swapped"):
        order = list(range(outputs.shape[1]))
        order[-2], order[-1] = order[-1], order[-2]
        outputs = outputs[:, order]
    return outputs, labels


def policies(costs: list[float]) -> dict[str, Any]:
    return {
        "USS-UCB": USSUCB(costs, alpha=0.51),
        "USS-KL-UCB": USSKLUCB(costs),
        "USS-TS": USSTS(costs, seed=0),
        "UEE-UCB": UEEUCB(costs),
        "Supervised UCB": SupervisedUCB(costs, alpha=0.51),
        "AuditedUSS": AuditedUSS(costs),
    }


def run_instance(
    name: str, costs: list[float], settings: dict[str, Any], chosen: tuple[str, ...] = POLICIES
) -> dict[str, Any]:
    """Replay one instance with the ``chosen`` policies; the JSON-able summary the page is written from.

    The rows of a repetition depend on the seed only, so policies replayed in separate calls see
    the same rows as in one call.
    """
    outputs, labels = instance_log(name)
    began = time.perf_counter()
    result = replay(
        outputs,
        labels,
        policies={p: policy for p, policy in policies(costs).items() if p in chosen},
        horizon=settings["horizon"],
        reps=settings["reps"],
        seed=settings["seed"],
        label_delay=settings["label_delay"],
    )
    instance: Instance = result.instance
    horizon = settings["horizon"]
    grid = np.unique(np.geomspace(1, horizon, CURVE_POINTS).astype(np.int64)) - 1
    summary: dict[str, Any] = {
        "name": name,
        "cumulative_costs": instance.cumulative_costs.tolist(),
        "error_rates": instance.error_rates.tolist(),
        "optimal_depth": instance.optimal_depth,
        "xi": None if math.isinf(instance.xi) else float(instance.xi),
        "wd": bool(instance.satisfies_wd),
        "grid": (grid + 1).tolist(),
        "policies": {},
    }
    for policy in result.names:
        regret = result.cumulative_regret[policy]
        final = regret[:, -1]
        half = regret[:, horizon // 2 - 1]
        labels_curve = None
        if policy == "AuditedUSS":
            labels_curve = result.cumulative_labels(policy).mean(axis=0)[grid].tolist()
        entry = {
            "regret_mean": float(final.mean()),
            "regret_half": float(Z_95 * final.std(ddof=1) / math.sqrt(final.size)),
            "regret_at_half": float(half.mean()),
            "curve": regret.mean(axis=0)[grid].tolist(),
            "labels_mean": float(result.labels_used[policy].mean()),
            "labels_max": int(result.labels_used[policy].max()),
            "labels_curve": labels_curve,
            "at_optimum_last10": float(
                (result.depths[policy][:, -horizon // 10 :] == instance.optimal_depth).mean()
            ),
        }
        reports = result.wd_reports.get(policy)
        if reports:
            entry["wd_verdicts"] = {v: sum(r.verdict == v for r in reports) for v in WD_VERDICTS}
            entry["wd_best_depth"] = [r.best_depth for r in reports]
        summary["policies"][policy] = entry
    summary["seconds"] = time.perf_counter() - began
    return summary


def cache_file(cache: Path, name: str, policy: str) -> Path:
    """Where one policy's summary on one instance is cached."""
    return cache / f"{name}__{policy}".replace(" ", "_").replace("/", "_")


def _job(args: tuple[str, list[float], dict[str, Any], str, tuple[str, ...]]) -> str:
    name, costs, settings, cache, chosen = args
    summary = run_instance(name, costs, settings, chosen)
    share = summary["seconds"] / len(chosen)
    for policy, entry in summary["policies"].items():
        document = {**summary, "policies": {policy: entry}, "seconds": share, "settings": settings}
        target = cache_file(Path(cache), name, policy).with_suffix(".json")
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(document))
        tmp.replace(target)
    return f"{name} ({', '.join(chosen)}): {summary['seconds']:.0f} s"


def run_jobs(job: Callable[[Any], str], todo: list[Any], jobs: int) -> None:
    """``job`` on each item of ``todo`` (on ``jobs`` processes if more than one), printing each line."""
    began = time.perf_counter()
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            for line in pool.map(job, todo):
                print(line, flush=True)
    else:
        for item in todo:
            print(job(item), flush=True)
    print(f"replayed {len(todo)} run(s) in {time.perf_counter() - began:.0f} s", flush=True)


def replay_parser(description: str, reps: int, cache: str) -> argparse.ArgumentParser:
    """A study's parser with the replay settings (horizon, reps, label delay, seed), jobs and cache."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--horizon", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=reps)
    parser.add_argument("--label-delay", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--cache", default=cache)
    return parser


def replay_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings a cached run is keyed by, from :func:`replay_parser`'s arguments."""
    return {"horizon": args.horizon, "reps": args.reps, "label_delay": args.label_delay, "seed": args.seed}


def main(argv: list[str] | None = None) -> int:
    parser = replay_parser(__doc__.splitlines()[0], 50, "out/safety_net")
    parser.add_argument("--out", default="docs/evidence")
    parser.add_argument("--page", default="results_safety_net.md", help="page name under --out")
    parser.add_argument("--only", help="comma-separated instance names (default: all)")
    parser.add_argument("--policies", help="comma-separated policy names to replay (default: all six)")
    parser.add_argument("--report-only", action="store_true", help="write the page from the cache")
    args = parser.parse_args(argv)
    settings = replay_settings(args)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    chosen = instances()
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        chosen = [(n, c) for n, c in chosen if n in wanted]
    if not args.report_only:
        wanted_policies = POLICIES
        if args.policies:
            wanted_policies = tuple(p for p in POLICIES if p in {q.strip() for q in args.policies.split(",")})
        todo = []
        for name, costs in chosen:
            missing = []
            for policy in wanted_policies:
                target = cache_file(cache, name, policy).with_suffix(".json")
                if not (target.exists() and json.loads(target.read_text()).get("settings") == settings):
                    missing.append(policy)
            if missing:
                todo.append((name, costs, settings, str(cache), tuple(missing)))
        run_jobs(_job, todo, args.jobs)
    from studies.safety_net_report import write_report

    write_report(cache, Path(args.out), settings, [n for n, _ in chosen], page=args.page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
