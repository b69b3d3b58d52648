"""The keyed evaluation: one learner per key (the pool prior) against one learner and independent learners.

Replays each keyed instance of a split (:mod:`studies.keyed_instances`: ``development`` and
``heldout`` generated mixtures, ``real`` keyed tables) with USS-KL-UCB, the library's default, as
every learner: ``one`` (one learner for all keys), ``independent`` (one per key, no prior) and
keyed variants ``m<strength>-h<half-life>`` (``hinf``: no decay; ``keyed``: the library's
defaults). Caches one JSON summary per instance and variant under ``--cache``; ``--report``
writes ``docs/evidence/keyed.md`` from the cache. The full protocol (``make keyed``)::

    python -m studies.keyed_study --grid --jobs 2
    python -m studies.keyed_study --split heldout --jobs 2
    python -m studies.keyed_study --split real
    python -m studies.keyed_study --report

The prior's defaults are chosen with ``--grid`` (:data:`GRID_VARIANTS` on the development mixtures
of :data:`GRID_SEEDS`, :data:`GRID_SETTINGS`; development seeds only); ``--split heldout`` and
``real`` replay the three policies of the targets.

Each repetition of a generated mixture is a new stream (:meth:`~studies.keyed_instances.KeyedInstance.stream`)
of ``--horizon`` events, each key's regret measured against its own type's best depth; a real
cascade's repetition draws ``--horizon`` rows of its log uniformly, each key's regret against its
own rows' best depth (:func:`uss_stream.replay.keyed.replay_keyed`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from studies.keyed_instances import (
    DEVELOPMENT_SEEDS,
    HELDOUT_SEEDS,
    REAL_KEYED,
    KeyedInstance,
    generate,
    real_keyed,
)
from studies.safety_net import run_jobs
from uss_stream.policies import USSKLUCB, KeyedPolicy, Policy
from uss_stream.replay.keyed import replay_keyed

__all__ = [
    "GRID_SEEDS",
    "GRID_SETTINGS",
    "GRID_VARIANTS",
    "SMALL_KEY",
    "TARGET_VARIANTS",
    "instance_names",
    "load_instance",
    "main",
    "run_variant",
    "variant",
]

#: Keys with fewer events than this (in a repetition) are the "rare keys" of the pooling target.
SMALL_KEY = 1000
#: The variants the held-out and real splits replay.
TARGET_VARIANTS = ("one", "independent", "keyed")
#: The settings of the prior's grid on the development mixtures (the seeds of ``GRID_SEEDS``).
GRID_SETTINGS = {"horizon": 100_000, "reps": 2, "seed": 0}
GRID_SEEDS = range(30)
#: The grid: strength, half-life (``inf``: none), tolerance (absent: none).
GRID_VARIANTS = (
    "one",
    "independent",
    *(f"m{m}-h{h}{c}" for m in (100, 1000) for h in (30, 300, "inf") for c in ("", "-c1", "-c3", "-c10")),
)


def variant(name: str, costs: list[float]) -> Policy | KeyedPolicy:
    """The policy of a variant name, with USS-KL-UCB on ``costs`` as every learner.

    >>> variant("m300-h100", [0.0, 0.1]).prior_half_life, variant("m300-hinf", [0.0, 0.1]).prior_half_life
    (100, None)
    >>> variant("m300-h100-c5", [0.0, 0.1]).prior_tolerance
    5.0
    >>> type(variant("one", [0.0, 0.1])).__name__, variant("independent", [0.0, 0.1]).prior_strength
    ('USSKLUCB', 0)
    """
    base = USSKLUCB(costs)
    if name == "one":
        return base
    if name == "independent":
        return KeyedPolicy(base, prior_strength=0)
    if name == "keyed":
        return KeyedPolicy(base)
    strength, half_life, *tolerance = name.split("-")
    if not (
        strength.startswith("m") and half_life.startswith("h") and all(t.startswith("c") for t in tolerance)
    ):
        raise ValueError(f"variant must be one, independent, keyed or m<M>-h<H>[-c<C>], got {name!r}")
    return KeyedPolicy(
        base,
        prior_strength=int(strength[1:]),
        prior_half_life=None if half_life == "hinf" else int(half_life[1:]),
        prior_tolerance=float(tolerance[0][1:]) if tolerance else None,
    )


def instance_names(split: str) -> list[str]:
    """The instances of a split."""
    if split == "real":
        return list(REAL_KEYED)
    seeds = {"development": DEVELOPMENT_SEEDS, "heldout": HELDOUT_SEEDS}[split]
    return [f"seed-{seed}" for seed in seeds]


def load_instance(name: str) -> KeyedInstance:
    """A generated mixture (``seed-<s>``) or a real keyed cascade by name."""
    if name.startswith("seed-"):
        return generate(int(name.removeprefix("seed-")))
    return real_keyed(name)


def run_variant(instance: KeyedInstance, name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """One variant on one instance: per repetition, the total regret and the regret and events of
    the keys with fewer than :data:`SMALL_KEY` events."""
    began = time.process_time()
    horizon, reps, seed = settings["horizon"], settings["reps"], settings["seed"]
    policies = {name: variant(name, instance.stage_costs)}
    per_rep = []
    for rep in range(reps):
        if instance.family == "real":
            keys = np.empty(len(instance.labels), dtype=object)
            for k, rows in enumerate(instance.key_rows):
                keys[rows] = instance.key_names[k]
            result = replay_keyed(
                instance.outputs,
                keys,
                instance.labels,
                policies=policies,
                horizon=horizon,
                reps=1,
                seed=[seed, rep],
                sampling="uniform",
            )
        else:
            key_index, rows = instance.stream(horizon, seed=seed * 1000 + rep)
            names = np.array(instance.key_names, dtype=object)
            result = replay_keyed(
                instance.outputs[rows],
                names[key_index],
                policies=policies,
                key_error_rates=_key_error_rates(instance),
            )
        regret, events = result.key_regret(name)[0], result.key_events()[0]
        small = events < SMALL_KEY
        wd = _wd_keys(instance, result.keys)
        per_rep.append(
            {
                "regret": float(regret.sum()),
                "small_regret": float(regret[small].sum()),
                "small_events": int(events[small].sum()),
                "small_keys": int((small & (events > 0)).sum()),
                "keys": int((events > 0).sum()),
                "wd_regret": None if wd is None else float(regret[wd].sum()),
                "wd_small_regret": None if wd is None else float(regret[wd & small].sum()),
                "wd_events": None if wd is None else int(events[wd].sum()),
            }
        )
    return {
        "instance": instance.name,
        "family": instance.family,
        "details": instance.details,
        "variant": name,
        "policy": repr(policies[name]),
        "reps": per_rep,
        "cpu_seconds": time.process_time() - began,
        "settings": settings,
    }


def _wd_keys(instance: KeyedInstance, keys: list[Any]) -> np.ndarray | None:
    """Which of ``keys`` (a replay's) are of a type where weak dominance holds (``ξ >= 0``), for a
    generated mixture (``None`` for a real cascade)."""
    if instance.family == "real":
        return None
    holds = [xi >= 0 for xi in instance.details["xi"]]
    kinds = dict(zip(instance.key_names, instance.details["key_types"]))
    return np.array([holds[kinds[key]] for key in keys], dtype=bool)


def _key_error_rates(instance: KeyedInstance) -> dict[str, list[float]]:
    """Each key's stage error rates: those of its type's log (its rows)."""
    rates: dict[int, list[float]] = {}
    result = {}
    for name, rows in zip(instance.key_names, instance.key_rows):
        first = int(rows[0])
        if first not in rates:
            wrong = instance.outputs[rows] != instance.labels[rows][:, None]
            rates[first] = wrong.mean(axis=0).tolist()
        result[name] = rates[first]
    return result


def cache_file(cache: Path, split: str, name: str, variant_name: str) -> Path:
    """Where a run's summary is cached."""
    return cache / split / f"{name}__{variant_name}.json"


def _job(item: tuple[str, str, list[str], dict[str, Any], str]) -> str:
    """Every missing variant of one instance (built once)."""
    split, name, variants, settings, cache = item
    instance = load_instance(name)
    spent = 0.0
    for variant_name in variants:
        summary = run_variant(instance, variant_name, settings)
        target = cache_file(Path(cache), split, name, variant_name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.with_suffix(".tmp").write_text(json.dumps(summary))
        target.with_suffix(".tmp").replace(target)
        spent += summary["cpu_seconds"]
    return f"{split} {name}: {len(variants)} variant(s), {spent:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("development", "heldout", "real"), default="development")
    parser.add_argument("--variants", help=f"comma-separated variants (default: {','.join(TARGET_VARIANTS)})")
    parser.add_argument("--horizon", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", help="comma-separated instance names")
    parser.add_argument("--cache", default="out/keyed")
    parser.add_argument("--report", action="store_true", help="write docs/evidence/keyed.md from the cache")
    parser.add_argument("--grid", action="store_true", help="replay the prior's grid on development mixtures")
    parser.add_argument("--out", default="docs/evidence")
    args = parser.parse_args(argv)
    settings = {"horizon": args.horizon, "reps": args.reps, "seed": args.seed}
    cache = Path(args.cache)
    if args.grid:
        args.split, args.variants, settings = "development", ",".join(GRID_VARIANTS), dict(GRID_SETTINGS)
        args.only = ",".join(f"seed-{seed}" for seed in GRID_SEEDS)
    if args.report:
        from studies.keyed_report import write_report

        print(write_report(cache, Path(args.out), settings))
        return 0
    variants = [v.strip() for v in (args.variants or ",".join(TARGET_VARIANTS)).split(",")]
    if args.split != "development" and set(variants) - set(TARGET_VARIANTS):
        parser.error("variants other than one, independent and keyed are replayed on development seeds only")
    names = instance_names(args.split)
    if args.only:
        names = [n for n in names if n in {x.strip() for x in args.only.split(",")}]
    todo = []
    for name in names:
        missing = []
        for variant_name in variants:
            path = cache_file(cache, args.split, name, variant_name)
            if not (path.exists() and json.loads(path.read_text())["settings"] == settings):
                missing.append(variant_name)
        if missing:
            todo.append((args.split, name, missing, settings, str(cache)))
    run_jobs(_job, todo, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
