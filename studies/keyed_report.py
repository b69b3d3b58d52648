"""The keyed evaluation's page, ``docs/evidence/keyed.md``, from the cache of :mod:`studies.keyed_study`."""

from __future__ import annotations

import json
import platform
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from studies.keyed_study import GRID_SETTINGS, GRID_VARIANTS, SMALL_KEY, instance_names
from studies.markdown import table

__all__ = ["development_table", "load_runs", "target_figures", "write_report"]

PAGE = "keyed.md"
#: The targets of the issue: keyed / one learner on mixed best depths, keyed / independent on rare
#: keys, keyed / one learner on a shared best depth, and the share of mixtures that must meet the first.
TARGET_MIXED, TARGET_SHARE, TARGET_RARE, TARGET_SHARED = 0.5, 0.9, 0.8, 1.2


def load_runs(
    cache: Path, split: str, settings: dict[str, Any] | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """``instance -> variant -> cached summary`` of a split (those run under ``settings``, if given)."""
    runs: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for path in sorted((cache / split).glob("*.json")):
        summary = json.loads(path.read_text())
        if settings is None or summary["settings"] == settings:
            runs[path.name.split("__")[0]][summary["variant"]] = summary
    return dict(runs)


def _mean(summary: dict[str, Any], field: str) -> float:
    return float(np.mean([rep[field] for rep in summary["reps"]]))


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else (1.0 if numerator <= 0 else float("inf"))


def target_figures(runs: dict[str, dict[str, dict[str, Any]]], variant: str) -> dict[str, Any]:
    """The three targets' figures of ``variant`` against ``one`` and ``independent`` on ``runs``.

    ``mixed``: per mixture of the ``different`` family, total regret keyed / one (on the keys of
    types where WD holds: ``mixed_wd``; on the mixtures all of whose types satisfy WD:
    ``mixed_all_wd``); ``rare``: regret on keys with fewer than
    :data:`~studies.keyed_study.SMALL_KEY` events, keyed / independent, summed over all mixtures
    and per mixture; ``shared``: per mixture of the ``shared`` family, keyed / one. ``rare_sums``:
    the rare keys' summed ratio by scope: ``all``, ``wd`` (keys of types that satisfy WD), each
    also per family (``"wd shared"``, ...).
    """
    mixed, mixed_wd, mixed_all_wd, shared, rare = {}, {}, {}, {}, {}
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for name, by_variant in runs.items():
        if not {variant, "one", "independent"} <= set(by_variant):
            continue
        mine, one, alone = by_variant[variant], by_variant["one"], by_variant["independent"]
        ratio = _ratio(_mean(mine, "regret"), _mean(one, "regret"))
        if mine["family"] == "shared":
            shared[name] = ratio
        else:
            mixed[name] = ratio
            if mine["reps"][0].get("wd_regret") is not None and _mean(mine, "wd_events") > 0:
                mixed_wd[name] = _ratio(_mean(mine, "wd_regret"), _mean(one, "wd_regret"))
            if mine["family"] == "different" and min(mine["details"]["xi"]) >= 0:
                mixed_all_wd[name] = ratio
        for field, part in (("small_regret", "all"), ("wd_small_regret", "wd")):
            if mine["reps"][0].get(field) is None:
                continue
            for scope in (part, f"{part} {mine['family']}"):
                sums[scope][0] += _mean(mine, field)
                sums[scope][1] += _mean(alone, field)
        rare[name] = _ratio(_mean(mine, "small_regret"), _mean(alone, "small_regret"))
    return {
        "mixed": mixed,
        "mixed_wd": mixed_wd,
        "mixed_all_wd": mixed_all_wd,
        "shared": shared,
        "rare": rare,
        "rare_total": _ratio(*sums["all"]),
        "rare_sums": {scope: _ratio(*pair) for scope, pair in sums.items()},
    }


def _share(values: dict[str, float], limit: float) -> str:
    if not values:
        return "–"
    met = sum(v <= limit for v in values.values())
    return f"{met}/{len(values)} ({met / len(values):.0%})"


def _median(values: dict[str, float]) -> str:
    return f"{np.median(list(values.values())):.2f}" if values else "–"


def development_table(runs: dict[str, dict[str, dict[str, Any]]]) -> list[list[str]]:
    """One row per variant replayed on the development mixtures: the three targets' figures."""
    variants = sorted({v for by_variant in runs.values() for v in by_variant} - {"one"})
    rows = []
    for variant in variants:
        figures = target_figures(runs, variant)
        rows.append(
            [
                variant,
                _share(figures["mixed"], TARGET_MIXED),
                _median(figures["mixed"]),
                _share(figures["mixed_wd"], TARGET_MIXED),
                f"{figures['rare_total']:.2f}",
                _median(figures["rare"]),
                _share(figures["shared"], TARGET_SHARED),
                _median(figures["shared"]),
            ]
        )
    return rows


_HEADER = [
    "variant",
    "mixed: keyed/one <= 0.5",
    "median",
    "on WD keys <= 0.5",
    "rare keys: keyed/indep. (sum)",
    "median",
    "shared: keyed/one <= 1.2",
    "median",
]


def _real_rows(runs: dict[str, dict[str, dict[str, Any]]]) -> list[list[str]]:
    rows = []
    for name, by_variant in sorted(runs.items()):
        if not {"one", "independent", "keyed"} <= set(by_variant):
            continue
        regret = {v: _mean(by_variant[v], "regret") for v in ("one", "independent", "keyed")}
        details = by_variant["keyed"]["details"]
        rows.append(
            [
                name,
                str(len(details["rows"])),
                f"{regret['one']:.1f}",
                f"{regret['independent']:.1f}",
                f"{regret['keyed']:.1f}",
                f"{_ratio(regret['keyed'], regret['one']):.2f}",
                f"{_ratio(regret['keyed'], regret['independent']):.2f}",
            ]
        )
    return rows


def _misses(values: dict[str, float], limit: float, runs: dict[str, Any]) -> str:
    missed = sorted((name for name, v in values.items() if v > limit), key=lambda n: -values[n])
    if not missed:
        return "none"
    parts = []
    for name in missed:
        details = runs[name]["one"]["details"]
        xi = ", ".join(f"{x:.2f}" for x in details["xi"])
        parts.append(f"`{name}` {values[name]:.2f} (best depths {details['best_depths']}, ξ {xi})")
    return "; ".join(parts)


def write_report(cache: Path, out: Path, settings: dict[str, Any]) -> Path:
    """Write ``out/keyed.md`` from the cache: the development choice, the held-out and real figures."""
    from uss_stream.policies.keyed import (
        DEFAULT_PRIOR_HALF_LIFE,
        DEFAULT_PRIOR_STRENGTH,
        DEFAULT_PRIOR_TOLERANCE,
    )

    development = {
        name: by_variant
        for name, by_variant in load_runs(cache, "development", GRID_SETTINGS).items()
        if set(GRID_VARIANTS) <= set(by_variant)
    }
    heldout = load_runs(cache, "heldout", settings)
    real = load_runs(cache, "real", settings)
    figures = target_figures(heldout, "keyed")
    dev_settings = next((s["settings"] for v in development.values() for s in v.values()), {})
    expected = len(instance_names("heldout"))
    lines = [
        "# Keyed selection: one cascade per key against one for all keys",
        "",
        "Generated by `make keyed` (`python -m studies.keyed_study`, then `--report`); the protocol, the",
        "instances and the learners are in `studies/keyed_instances.py` and `studies/keyed_study.py`.",
        "Every learner is USS-KL-UCB. `one`: one learner for all keys. `independent`: one learner per",
        f"key, no prior. `keyed`: `KeyedPolicy` at its defaults (prior strength {DEFAULT_PRIOR_STRENGTH},",
        f"half-life {DEFAULT_PRIOR_HALF_LIFE}, tolerance {DEFAULT_PRIOR_TOLERANCE}). Regret of a key's event",
        "is against the key's own best fixed depth. Held-out: "
        f"{len(heldout)}/{expected} mixtures and {len(real)} real cascades, horizon {settings['horizon']}, "
        f"{settings['reps']} repetitions, on {platform.machine()}.",
        "",
        "## Targets, held-out",
        "",
        table(
            ["target", "measured", "met"],
            [
                [
                    f"mixed best depths: keyed/one <= {TARGET_MIXED} on >= {TARGET_SHARE:.0%} of mixtures",
                    _share(figures["mixed"], TARGET_MIXED) + f", median {_median(figures['mixed'])}",
                    _met(figures["mixed"], TARGET_MIXED, TARGET_SHARE),
                ],
                [
                    "... on the keys whose type satisfies WD",
                    _share(figures["mixed_wd"], TARGET_MIXED) + f", median {_median(figures['mixed_wd'])}",
                    _met(figures["mixed_wd"], TARGET_MIXED, TARGET_SHARE),
                ],
                [
                    "... on the mixtures all of whose types satisfy WD",
                    _share(figures["mixed_all_wd"], TARGET_MIXED)
                    + f", median {_median(figures['mixed_all_wd'])}",
                    _met(figures["mixed_all_wd"], TARGET_MIXED, TARGET_SHARE),
                ],
                [
                    f"keys with < {SMALL_KEY} events: keyed/independent <= {TARGET_RARE}",
                    f"{figures['rare_total']:.2f} summed; median {_median(figures['rare'])}, "
                    + _share(figures["rare"], TARGET_RARE),
                    "yes" if figures["rare_total"] <= TARGET_RARE else "no",
                ],
                [
                    "... by family and on the keys whose type satisfies WD (summed)",
                    ", ".join(
                        f"{scope} {value:.2f}" for scope, value in sorted(figures["rare_sums"].items())
                    ),
                    "",
                ],
                [
                    f"one shared best depth: keyed/one <= {TARGET_SHARED}",
                    _share(figures["shared"], TARGET_SHARED) + f", median {_median(figures['shared'])}",
                    _met(figures["shared"], TARGET_SHARED, TARGET_SHARE),
                ],
            ],
        ),
        "",
        f"Mixed mixtures above {TARGET_MIXED}: {_misses(figures['mixed'], TARGET_MIXED, heldout)}.",
        "",
        f"Shared mixtures above {TARGET_SHARED}: {_misses(figures['shared'], TARGET_SHARED, heldout)}.",
        "",
        "## Real cascades keyed by an attribute, held-out",
        "",
        table(
            ["cascade", "keys", "one", "independent", "keyed", "keyed/one", "keyed/indep."], _real_rows(real)
        ),
        "",
        "## The prior, chosen on the development mixtures",
        "",
        f"{len(development)} development mixtures (`python -m studies.keyed_study --grid`), settings",
        f"{dev_settings}. Variant",
        "`m<M>-h<H>[-c<C>]`: strength `M`, half-life `H` (`inf`: none), tolerance `C` (none if absent).",
        "",
        table(_HEADER, development_table(development)),
        "",
    ]
    out.mkdir(parents=True, exist_ok=True)
    path = out / PAGE
    path.write_text("\n".join(lines))
    return path


def _met(values: dict[str, float], limit: float, share: float) -> str:
    if not values:
        return "–"
    return "yes" if np.mean([v <= limit for v in values.values()]) >= share else "no"
