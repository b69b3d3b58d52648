"""Keyed instances for the evaluation of keyed selection, and the seed split fixed once.

A keyed instance is a cascade (stage costs) shared by many keys and, for each key, the stream of
its events. **Generated mixtures** (:func:`generate`) are built from the held-out generator's
logs (:func:`studies.heldout_instances.draw_log`): one seed draws ``K`` (3 to 6), the labels
(binary or 3 to 10 classes), a cost profile, and two or three *site types*, each with its own
log (its own error rates, strong-dominance and chance-exit families, so its own best depth and
weak-dominance status). Then 30, 100 or 300 keys, each of one type (one type holds half to four
fifths of the keys), with long-tailed traffic: key weights ``∝ rank^-a``, ``a`` in ``[0.9, 1.3]``;
a quarter of the keys are there from the start, the others arrive at a uniform time in the first
90% of the stream, and a key's events are spread uniformly from its arrival to the end. An event
of a key replays a row of its type's log drawn uniformly with replacement.

Two **families**, by the seed's parity: ``different`` (even seeds), where the cost scale ``λ``
(``C_j = λ·s_j``) is drawn among those of a fine grid under which the types' best depths are not
all the same, and ``shared`` (odd seeds), where every type has the same best depth; in both,
each type's best depth beats every other depth by at least
:data:`~studies.heldout_instances.MIN_GAP`.

**Real keyed cascades** (:data:`REAL_KEYED`): tables of the held-out real split
(:mod:`studies.heldout_real`, the same four tree stages and cost scales) whose rows carry a
natural categorical attribute, the key: a passenger's class, a household's standard of living,
a loan's purpose, an occupation, a mushroom's habitat, a speaker, a mass's shape. An event replays
a row of the table's log (uniformly with replacement), with its key.

**The split** (:data:`DEVELOPMENT_SEEDS`, :data:`HELDOUT_SEEDS`) and the list of real keyed
cascades were fixed before any keyed policy was replayed on them. The prior's defaults are chosen
on development seeds only; every published figure is held-out, the real cascades included.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from studies.heldout_instances import (
    CHANCE_FAMILIES,
    COST_PROFILES,
    MIN_GAP,
    N_EVENTS,
    SD_FAMILIES,
    cost_profile,
    draw_log,
    log_margins,
)

__all__ = [
    "DEVELOPMENT_SEEDS",
    "FAMILIES",
    "HELDOUT_SEEDS",
    "REAL_KEYED",
    "KeyedInstance",
    "generate",
    "real_keyed",
]

#: Development seeds: the prior's defaults are chosen on these only.
DEVELOPMENT_SEEDS = tuple(range(0, 60))
#: Held-out seeds (200 mixtures, 100 per family): every published figure; never moved.
HELDOUT_SEEDS = tuple(range(20_000, 20_200))
FAMILIES = ("different", "shared")
#: ``name -> (table, column, attribute)``: the key of a real cascade is that column of its table.
REAL_KEYED_TABLES = {
    "titanic-class": ("keel.titanic", 0, "class"),
    "contraceptive-living": ("keel.contraceptive", 7, "standard of living"),
    "german-purpose": ("keel.german", 3, "purpose"),
    "marketing-occupation": ("keel.marketing", 4, "occupation"),
    "mushroom-habitat": ("keel.mushroom", 21, "habitat"),
    "vowel-speaker": ("keel.vowel", 1, "speaker"),
    "mammographic-shape": ("keel.mammographic", 2, "shape"),
}
_SCALES_REAL = (0.02, 0.1)
#: ``name-λ -> (table name, λ)`` of the real keyed cascades.
REAL_KEYED = {f"{name}-{scale}": (name, scale) for name in REAL_KEYED_TABLES for scale in _SCALES_REAL}
_SCALES = np.geomspace(0.01, 3.0, 800)


@dataclass(frozen=True)
class KeyedInstance:
    """A keyed instance: the events' log rows (all types' or the table's), the costs, and the keys.

    ``key_rows[k]`` are the log rows key ``k``'s events replay (drawn uniformly with replacement);
    ``weights``, ``arrivals`` (a share of the stream, 0 for keys there from the start) set its
    traffic; ``key_names`` are the keys as the policies see them.
    """

    name: str
    family: str
    outputs: np.ndarray
    labels: np.ndarray
    stage_costs: list[float]
    key_names: list[str]
    key_rows: list[np.ndarray]
    weights: np.ndarray
    arrivals: np.ndarray
    details: dict[str, object] = field(default_factory=dict)

    def stream(self, horizon: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """``horizon`` events: each one's key index and log row, in stream order.

        Every key active at a time is drawn in proportion to its weight: a key's event count is
        multinomial in ``weight · (1 - arrival)``, its events uniform over its active span.

        >>> instance = generate(0)
        >>> keys, rows = instance.stream(1000, seed=1)
        >>> keys.shape, rows.shape, bool(np.isin(rows[keys == 0], instance.key_rows[0]).all())
        ((1000,), (1000,), True)
        """
        rng = np.random.default_rng([35, 1, seed])
        share = self.weights * (1.0 - self.arrivals)
        counts = rng.multinomial(horizon, share / share.sum())
        keys = np.repeat(np.arange(len(counts)), counts)
        times = rng.uniform(np.repeat(self.arrivals, counts), 1.0)
        keys = keys[np.argsort(times, kind="stable")]
        rows = np.empty(horizon, dtype=np.int64)
        for key in np.flatnonzero(counts):
            mine = keys == key
            pool = self.key_rows[key]
            rows[mine] = pool[rng.integers(0, len(pool), size=int(counts[key]))]
        return keys, rows


def generate(seed: int, max_attempts: int = 200) -> KeyedInstance:
    """The generated mixture of ``seed`` (deterministic); see the module docstring.

    >>> instance = generate(1)
    >>> instance.family, len(set(instance.details["best_depths"]))
    ('shared', 1)
    >>> generate(2).family, len(set(generate(2).details["best_depths"])) > 1
    ('different', True)
    """
    rng = np.random.default_rng([35, seed])
    family = FAMILIES[seed % 2]
    for _ in range(max_attempts):
        k = int(rng.integers(3, 7))
        n_classes = 2 if rng.random() < 0.5 else int(rng.integers(3, 11))
        profile = COST_PROFILES[int(rng.integers(3))]
        n_types = int(rng.integers(2, 4))
        logs = [
            draw_log(
                rng, k, n_classes, SD_FAMILIES[int(rng.integers(3))], CHANCE_FAMILIES[int(rng.integers(3))]
            )
            for _ in range(n_types)
        ]
        shape = cost_profile(profile, k)
        margins = [
            log_margins(outputs, labels, _SCALES[:, None] * shape[None, :]) for outputs, labels in logs
        ]
        stars = np.stack([m[0] for m in margins])
        unique = np.all(np.stack([m[2] for m in margins]) >= MIN_GAP, axis=0)
        same = np.all(stars == stars[0], axis=0)
        fits = np.flatnonzero(unique & (same if family == "shared" else ~same))
        if fits.size:
            pick = int(rng.choice(fits))
            costs = np.diff(_SCALES[pick] * shape, prepend=0.0).tolist()
            details = {
                "K": k,
                "classes": n_classes,
                "costs": profile,
                "types": n_types,
                "best_depths": [int(m[0][pick]) for m in margins],
                "xi": [float(m[1][pick]) for m in margins],
            }
            return _mixture(rng, seed, family, logs, costs, details)
    raise RuntimeError(f"seed {seed}: no {family} mixture in {max_attempts} attempts")


def _mixture(
    rng: np.random.Generator,
    seed: int,
    family: str,
    logs: list[tuple[np.ndarray, np.ndarray]],
    costs: list[float],
    details: dict[str, object],
) -> KeyedInstance:
    """The keys of a mixture: their types, weights and arrivals (see the module docstring)."""
    n_types = len(logs)
    n_keys = int(rng.choice([30, 100, 300]))
    majority = rng.uniform(0.5, 0.8)
    others = rng.dirichlet(np.ones(n_types - 1)) * (1.0 - majority)
    kinds = rng.choice(n_types, size=n_keys, p=np.r_[majority, others])
    exponent = rng.uniform(0.9, 1.3)
    weights = rng.permutation(np.arange(1, n_keys + 1) ** -exponent)
    arrivals = np.where(rng.random(n_keys) < 0.25, 0.0, rng.uniform(0.0, 0.9, size=n_keys))
    outputs = np.concatenate([log[0] for log in logs])
    labels = np.concatenate([log[1] for log in logs])
    type_rows = [np.arange(t * N_EVENTS, (t + 1) * N_EVENTS) for t in range(n_types)]
    details = {**details, "keys": n_keys, "exponent": float(exponent), "key_types": kinds.tolist()}
    return KeyedInstance(
        name=f"s{seed}-{family}-K{details['K']}-types{n_types}-keys{n_keys}",
        family=family,
        outputs=outputs,
        labels=labels,
        stage_costs=costs,
        key_names=[f"site-{n}" for n in range(n_keys)],
        key_rows=[type_rows[t] for t in kinds],
        weights=weights / weights.sum(),
        arrivals=arrivals,
        details=details,
    )


def real_keyed(name: str) -> KeyedInstance:
    """A real keyed cascade of :data:`REAL_KEYED`: the held-out real split's log of the table, its
    rows keyed by the attribute's value (keys weighted by their rows, all there from the start).

    >>> instance = real_keyed("titanic-class-0.1")
    >>> instance.outputs.shape, len(instance.key_names), instance.stage_costs
    ((1101, 4), 4, [0.025, 0.025, 0.025, 0.025])
    """
    from studies.heldout_real import N_STAGES, stage_predictions, table

    table_name, scale = REAL_KEYED[name]
    source, column, attribute = REAL_KEYED_TABLES[table_name]
    features, targets = table(source)
    outputs, labels, rows = stage_predictions(features, targets)
    values, keys = np.unique(features[rows, column], return_inverse=True)
    key_rows = [np.flatnonzero(keys == k) for k in range(len(values))]
    sizes = np.array([len(r) for r in key_rows], dtype=float)
    return KeyedInstance(
        name=name,
        family="real",
        outputs=outputs,
        labels=labels,
        stage_costs=[scale / N_STAGES] * N_STAGES,
        key_names=[f"{attribute}={v:g}" for v in values],
        key_rows=key_rows,
        weights=sizes / sizes.sum(),
        arrivals=np.zeros(len(values)),
        details={"table": source, "attribute": attribute, "rows": sizes.astype(int).tolist()},
    )
