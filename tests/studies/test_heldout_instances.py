"""The held-out generator: each instance belongs to the families it claims, checked from the definitions."""

from __future__ import annotations

import numpy as np
import pytest

from studies.heldout_instances import DEVELOPMENT_SEEDS, HELDOUT_SEEDS, MIN_GAP, generate


def _margins(outputs, labels, costs):
    """i*, ξ and the best depth's margin, written from the paper's definitions (loops, no vectorising)."""
    k = outputs.shape[1]
    cumulative = np.cumsum(costs)
    gamma = [float(np.mean(outputs[:, j] != labels)) for j in range(k)]
    total = [cumulative[j] + gamma[j] for j in range(k)]
    best = min(total)
    star = max(j for j in range(k) if total[j] <= best + 1e-12)
    others = sorted(t for j, t in enumerate(total) if j != star)
    xi = min(
        (
            cumulative[j] - cumulative[star] - float(np.mean(outputs[:, star] != outputs[:, j]))
            for j in range(star + 1, k)
        ),
        default=float("inf"),
    )
    return star + 1, xi, others[0] - best


def test_the_split_is_fixed_disjoint_and_holds_200_heldout_instances():
    assert len(HELDOUT_SEEDS) >= 200
    assert not set(DEVELOPMENT_SEEDS) & set(HELDOUT_SEEDS)
    assert tuple(range(60)) == DEVELOPMENT_SEEDS
    assert tuple(range(10_000, 10_240)) == HELDOUT_SEEDS


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 7, 10_000, 10_001, 10_002])
def test_an_instance_has_the_wd_family_of_its_seed_and_a_unique_best_depth(seed):
    instance = generate(seed)
    k = instance.outputs.shape[1]
    assert 3 <= k <= 8 and len(instance.stage_costs) == k
    assert set(np.unique(instance.labels)) <= set(range(instance.n_classes))
    star, xi, gap = _margins(instance.outputs, instance.labels, instance.stage_costs)
    assert star >= 2 and gap >= MIN_GAP
    wd = instance.families["wd"]
    assert wd == ("holds", "mild", "strong")[seed % 3]
    if wd == "holds":
        assert xi >= 0.01
    elif wd == "mild":
        assert -0.05 <= xi < 0
    else:
        assert xi < -0.05


def test_the_same_seed_gives_the_same_instance():
    one, two = generate(4), generate(4)
    assert np.array_equal(one.outputs, two.outputs) and one.stage_costs == two.stage_costs


def _violation(outputs, labels, skip):
    """The largest P(Y^i right, Y^j wrong), i < j, over the stages other than ``skip``."""
    wrong = outputs != labels[:, None]
    k = outputs.shape[1]
    stages = [j for j in range(k) if j not in skip]
    return max(float(np.mean(~wrong[:, i] & wrong[:, j])) for i in stages for j in stages if i < j)


def _chance_stage(instance):
    """The intermediate stage whose error is closest to chance (1 - 1/n)."""
    gamma = np.mean(instance.outputs != instance.labels[:, None], axis=0)
    return int(np.argmin(np.abs(gamma[1:-1] - (1 - 1 / instance.n_classes)))) + 1


def test_the_families_cover_sd_chance_costs_classes_and_k_and_each_is_what_it_says():
    seen: dict[str, set] = {"sd": set(), "chance": set(), "costs": set(), "classes": set(), "k": set()}
    for seed in DEVELOPMENT_SEEDS[:45]:
        instance = generate(seed)
        families = instance.families
        for key in ("sd", "chance", "costs"):
            seen[key].add(families[key])
        seen["classes"].add(instance.n_classes == 2)
        seen["k"].add(instance.outputs.shape[1])
        skip = set() if families["chance"] == "none" else {_chance_stage(instance)}
        violation = _violation(instance.outputs, instance.labels, skip)
        # SD: nested errors never violate it; 1-2% independent errors barely; half independent, clearly.
        assert {"holds": violation == 0, "nearly": 0 < violation <= 0.025, "fails": violation > 0.025}[
            families["sd"]
        ]
        if families["chance"] == "at":
            c = _chance_stage(instance)
            error = np.mean(instance.outputs[:, c] != instance.labels)
            assert abs(error - (1 - 1 / instance.n_classes)) < 0.02
        cumulative = np.cumsum(instance.stage_costs)
        steps = np.diff(cumulative)
        # cheap: √x (increments shrink), linear (equal), steep: x² (increments grow).
        shape = {
            "cheap": bool(np.all(np.diff(steps) < 0)),
            "linear": bool(np.allclose(steps, steps[0])),
            "steep": bool(np.all(np.diff(steps) > 0)),
        }
        assert shape[families["costs"]], f"seed {seed}: costs {cumulative} are not {families['costs']}"
    assert seen["sd"] == {"holds", "nearly", "fails"} and seen["chance"] == {"none", "at", "near"}
    assert seen["costs"] == {"cheap", "linear", "steep"} and seen["classes"] == {True, False}
    assert seen["k"] == set(range(3, 9))
