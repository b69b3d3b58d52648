"""The disagreement-rate series stay linear in the number of stages K.

``uss_kafka_disagreement_ratio{partition,pair}`` had one series per pair ``i < j``: ``K(K-1)/2`` per
partition, 56 640 of a scrape's 57 030 series with K = 60 on 32 partitions (4.2 MB per scrape).
``docs/metrics.md``: up to 8 stages every pair is exported; beyond, the adjacent pairs ``i-(i+1)`` and
the pairs with the last stage ``i-K``. The expected pairs are built here from that rule, and each
exported rate from the learner's checkpointed counts (``D_ij / n_j``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from uss_stream_kafka.operations.learning_metrics import LearningMetrics
from uss_stream_kafka.processing.processors import OutputsProcessor


def _scrape(n_stages: int, n_partitions: int, events: int = 3):
    """Learners of ``n_partitions`` partitions that decided ``events`` random events each, and the
    ``uss_kafka_disagreement_ratio`` samples a scrape of their metrics returns."""
    costs = [0.0] + [0.01] * (n_stages - 1)
    processor = OutputsProcessor(costs)
    rng = np.random.default_rng(n_stages)
    learners = {}
    for partition in range(n_partitions):
        learner = processor.new_learner()
        for i in range(events):
            outputs = rng.integers(0, 2, n_stages).tolist()
            learner.process(b'{"id": %d, "outputs": %s}' % (i, str(outputs).encode()))
        learners[partition] = learner
    metrics = LearningMetrics(costs)
    registry = CollectorRegistry()
    registry.register(metrics)
    metrics.refresh(learners)
    text = generate_latest(registry).decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    samples = families["uss_kafka_disagreement_ratio"].samples
    return learners, samples, text


def _expected_pairs(k: int) -> set[tuple[int, int]]:
    if k <= 8:
        return {(i, j) for i, j in itertools.combinations(range(1, k + 1), 2)}
    return {(i, i + 1) for i in range(1, k)} | {(i, k) for i in range(1, k)}


@pytest.mark.parametrize("n_stages", [2, 3, 8, 9, 12])
def test_the_exported_pairs_are_all_up_to_8_stages_then_adjacent_and_with_the_last(n_stages):
    learners, samples, _ = _scrape(n_stages, 2)
    for partition, learner in learners.items():
        stats = learner.state_dict()["stats"]
        exported = {
            tuple(int(s) for s in sample.labels["pair"].split("-")): sample.value
            for sample in samples
            if sample.labels["partition"] == str(partition)
        }
        # The first decisions query every stage (nothing learned yet), so every pair is defined.
        assert set(exported) == _expected_pairs(n_stages)
        for (i, j), value in exported.items():
            assert value == stats["disagreements"][i - 1][j - 1] / stats["queried"][j - 1]


def test_sixty_stages_export_117_pairs_a_partition_not_1770():
    _, samples, _ = _scrape(60, 4, events=1)
    assert len(samples) == 4 * (2 * 60 - 3)
