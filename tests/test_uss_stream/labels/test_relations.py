"""AuditedUSS's pair relations (``_audit_relations``) against their definitions."""

from __future__ import annotations

import numpy as np
import pytest

from uss_stream.labels.evidence import LabelEvidence, delta_bounds, e_bounds, pair_level
from uss_stream.labels.relations import (
    PairBounds,
    PairMasks,
    Relations,
    label_relation,
    plausible_many,
)
from uss_stream.rules.confidence import portable_log


def _pairs(k):
    return [(i, j) for j in range(k) for i in range(j)]


def _bit(mask, i, j):
    return bool(mask >> (j * (j - 1) // 2 + i) & 1)


def _set_test(k, beats):
    """``min(B^l ∩ B^h ∪ {K})`` written from the definition, 1-based."""
    high = {i for i in range(k) if all(_bit(beats, i, j) for j in range(i + 1, k))}
    low = {i for i in range(k) if not any(_bit(beats, h, i) for h in range(i))}
    return min((high & low) | {k - 1}) + 1


@pytest.mark.parametrize("k", [2, 3, 4])
def test_the_depth_of_every_mask_is_the_set_test(k):
    masks = PairMasks(k)
    for beats in range(1 << (k * (k - 1) // 2)):
        assert masks.depth(beats) == _set_test(k, beats)


@pytest.mark.parametrize("k", [3, 4, 5])
def test_relations_follow_their_definitions(k):
    rng = np.random.default_rng(k)
    masks = PairMasks(k)
    n_pairs = k * (k - 1) // 2
    for _ in range(300):
        kl, by_labels, worth, unconfirmed = (int(rng.integers(0, 1 << n_pairs)) for _ in range(4))
        relations = Relations(masks, kl, by_labels, worth, lambda p, u=unconfirmed: not u >> p & 1)
        beats = kl | by_labels
        label_free, informed = _set_test(k, kl), _set_test(k, beats)
        assert (relations.label_free_depth, relations.informed_depth) == (label_free, informed)
        for i, j in _pairs(k):
            # Decisive: a contradiction on a stage the label-free depth pays for (j queried there).
            decisive = _bit(by_labels, i, j) and not _bit(kl, i, j) and j < label_free
            assert _bit(relations.decisive, i, j) is decisive
            assert relations.audit(i, j) is (decisive and _bit(unconfirmed, i, j))
            assert relations.open(i, j) is (not _bit(beats, i, j) and not _bit(worth, i, j))
        for i in range(k):
            plausible = not any(_bit(beats, h, i) for h in range(i)) and not any(
                _bit(worth, i, j) for j in range(i + 1, k)
            )
            assert relations.plausible(i) is plausible
        assert relations.contradicted is bool(relations.decisive_pairs)


def test_plausible_many_agrees_with_the_streaming_relations():
    rng = np.random.default_rng(7)
    k, masks = 4, PairMasks(4)
    beats = rng.random((50, 6)) < 0.3
    worth = rng.random((50, 6)) < 0.2
    table = plausible_many(beats, worth, _pairs(k), k)
    for row in range(50):
        kl = sum(1 << p for p in range(6) if beats[row, p])
        good = sum(1 << p for p in range(6) if worth[row, p])
        relations = Relations(masks, kl, 0, good, lambda p: True)
        assert table[row].tolist() == [relations.plausible(i) for i in range(k)]


def test_the_label_relation_is_the_comparison_with_the_delta_bounds():
    rng = np.random.default_rng(3)
    k = 3
    for _ in range(2000):
        n = int(rng.integers(1, 5000))
        d = int(rng.integers(0, n + 1))
        e_lower, e_upper = np.sort(rng.uniform(-1.0, 1.0, size=2))
        gap = float(rng.choice([0.0, 0.01, 0.1, 0.3]))
        level = float(rng.uniform(0.5, 15.0))
        lower, upper = delta_bounds(d, n, e_lower, e_upper, level, k)
        found = label_relation(
            d, n, 2, e_lower, e_upper, gap, level, lambda j, count: portable_log(k * count)
        )
        assert found == (gap > upper, lower > gap)


def test_pair_bounds_follow_new_labels_and_level_changes():
    k, gap = 2, [0.05]
    evidence = LabelEvidence(k)
    bounds = PairBounds(k, gap)

    def expected(level):
        m, plus, minus = evidence.labelled[0], evidence.deeper_right[0], evidence.shallower_right[0]
        e_lower, e_upper = e_bounds(m, plus, minus, pair_level(level, m, k))
        lower, upper = delta_bounds(30, 100, e_lower, e_upper, level, k)
        return gap[0] > upper, lower > gap[0]

    def log_count(j, n):
        return portable_log(k * n)

    for label in [1, 1, 1, 0, 1, 1, 1, 1, 0, 1] * 4:
        evidence.record([0, 1], label=label)
        for level in (3.0, 9.0, 3.0):
            assert bounds.relation(evidence, 0, 30, 100, level, log_count) == expected(level)
