"""The learning metrics: what each partition's learner has learned and what its decisions cost.

:class:`LearningMetrics` is a Prometheus collector registered beside :class:`~.metrics.ServiceMetrics`.
Nothing here runs per event: the costs are added once per partition batch (from the depth counts
the dispatcher makes anyway), and the learners' quantities
(:meth:`~uss_stream_kafka.processing.processors.Learner.learning_state`) are read at most once per poll batch
and at most once per :data:`REFRESH_SECONDS`, and when the assignment changes; a scrape reads the last
snapshot. A partition's series are born when it is restored (before its first record: counters at 0,
gauges at its learner's values) and removed when it is revoked. ``docs/metrics.md`` lists every metric.

=============================================================  =========  ==================================
metric                                                         type       meaning
=============================================================  =========  ==================================
``uss_kafka_cost_total{partition}``                            counter    sum of ``C_d`` of the decided depths
``uss_kafka_full_cascade_cost_total{partition}``               counter    ``C_K`` per decided event
``uss_kafka_chosen_depth{partition}``                          gauge      depth the learner would choose now
``uss_kafka_disagreement_ratio{partition,pair}``               gauge      ``p̂_ij``, ``pair="i-j"`` (see below)
``uss_kafka_policy_round{partition}``                          gauge      the learner's round
``uss_kafka_wd_verdict{partition,verdict}``                    gauge      1 for the current WD verdict
``uss_kafka_labels_requested_total{partition}``                counter    labels the policy asked for
``uss_kafka_labels_answered_total{partition}``                 counter    label requests answered
``uss_kafka_labels_expired_total{partition}``                  counter    label requests expired
``uss_kafka_pending_decisions{partition}``                     gauge      orchestration: awaiting reports
``uss_kafka_report_delay_seconds``                             histogram  orchestration: decision to report
=============================================================  =========  ==================================

The pairs of ``uss_kafka_disagreement_ratio`` grow as ``K²``: with at most
:data:`ALL_PAIRS_UP_TO` stages every pair ``i < j`` is exported, with more only the adjacent pairs
``i-(i+1)`` and the pairs with the last stage ``i-K`` (``2K - 3`` per partition, see
:func:`exported_pairs`), so that the series stay linear in ``K``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from uss_stream.policies.learning_state import WD_VERDICTS
from uss_stream_kafka.operations.metrics import LatencyHistogram

__all__ = ["ALL_PAIRS_UP_TO", "REFRESH_SECONDS", "REPORT_DELAY_BUCKETS", "LearningMetrics", "exported_pairs"]

#: Up to this many stages every pair's disagreement rate is exported (28 pairs); beyond, 2K - 3.
ALL_PAIRS_UP_TO = 8

#: The learners' quantities are read at most this often (and at most once per poll batch).
REFRESH_SECONDS = 1.0
#: Upper bounds (seconds) of the report-delay buckets.
REPORT_DELAY_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)

_GAUGES = (
    ("chosen_depth", "The depth (1-based) the partition's learner would choose now."),
    ("policy_round", "The learner's round: the decisions its policy has counted."),
    ("pending_decisions", "Orchestration: decisions waiting for their sensor reports."),
)
_LABEL_COUNTERS = (
    ("labels_requested_total", "Labels the policy asked for (its learned state's count)."),
    ("labels_answered_total", "Label requests answered (its learned state's count)."),
    ("labels_expired_total", "Label requests that expired unanswered (its learned state's count)."),
)


def exported_pairs(n_stages: int) -> frozenset[str] | None:
    """The ``pair`` labels of ``uss_kafka_disagreement_ratio`` for ``n_stages`` stages (``None``: all).

    Up to :data:`ALL_PAIRS_UP_TO` stages, all of them; beyond, the adjacent pairs (how much a stage
    adds to the one before it) and the pairs with the last stage (how far each stage is from the
    most informed one).

    >>> exported_pairs(ALL_PAIRS_UP_TO) is None
    True
    >>> sorted(exported_pairs(9), key=lambda pair: [int(i) for i in pair.split("-")])
    ['1-2', '1-9', '2-3', '2-9', '3-4', '3-9', '4-5', '4-9', '5-6', '5-9', '6-7', '6-9', '7-8', '7-9', '8-9']
    """
    if n_stages <= ALL_PAIRS_UP_TO:
        return None
    adjacent = {f"{i}-{i + 1}" for i in range(1, n_stages)}
    with_last = {f"{i}-{n_stages}" for i in range(1, n_stages)}
    return frozenset(adjacent | with_last)


class LearningMetrics(Collector):
    """The learning metrics of one service run (see the module docstring).

    Parameters
    ----------
    stage_costs
        ``c_1..c_K``: the cost of a decision of depth ``d`` is ``C_d = c_1 + ... + c_d``.

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry, generate_latest
    >>> from uss_stream_kafka.processing.processors import OutputsProcessor
    >>> metrics = LearningMetrics([0.0, 0.25, 0.5])
    >>> registry = CollectorRegistry()
    >>> registry.register(metrics)
    >>> metrics.add_costs(0, [0, 5, 0, 2])             # 5 decisions at depth 1, 2 at depth 3
    >>> learner = OutputsProcessor([0.0, 0.25, 0.5]).new_learner()
    >>> metrics.refresh({0: learner}, now=10.0)
    >>> text = generate_latest(registry).decode()
    >>> 'uss_kafka_cost_total{partition="0"} 1.5' in text              # 2 x C_3 = 2 x 0.75
    True
    >>> 'uss_kafka_full_cascade_cost_total{partition="0"} 5.25' in text  # 7 x C_3
    True
    >>> 'uss_kafka_chosen_depth{partition="0"} 3.0' in text
    True
    >>> metrics.due(10.5), metrics.due(11.0)          # read again after REFRESH_SECONDS
    (False, True)

    A partition restored is exported before its first batch; one revoked is not exported any more.

    >>> metrics.refresh({1: OutputsProcessor([0.0, 0.25, 0.5]).new_learner()})
    >>> text = generate_latest(registry).decode()
    >>> 'uss_kafka_cost_total{partition="1"} 0.0' in text, 'partition="0"' in text
    (True, False)

    """

    def __init__(self, stage_costs: Sequence[float]) -> None:
        costs = [float(c) for c in stage_costs]
        self.cumulative = [sum(costs[: d + 1]) for d in range(len(costs))]
        self.pairs = exported_pairs(len(costs))
        self._lock = threading.Lock()
        self._cost: dict[int, float] = {}
        self._full_cost: dict[int, float] = {}
        self._states: dict[int, dict[str, Any]] = {}
        self._last_refresh = -float("inf")
        self.report_delay = LatencyHistogram(
            "uss_kafka_report_delay_seconds",
            "Orchestration: seconds from a decision to its sensor report.",
            buckets=REPORT_DELAY_BUCKETS,
            window=1,
        )

    def add_costs(self, partition: int, depth_counts: Sequence[int]) -> None:
        """Account for a partition batch: ``depth_counts[d]`` decisions of depth ``d`` (index 0 unused)."""
        cumulative = self.cumulative
        spent = 0.0
        decided = 0
        for depth in range(1, len(depth_counts)):
            count = depth_counts[depth]
            if count:
                spent += count * cumulative[depth - 1]
                decided += count
        with self._lock:
            self._cost[partition] = self._cost.get(partition, 0.0) + spent
            self._full_cost[partition] = self._full_cost.get(partition, 0.0) + decided * cumulative[-1]

    def due(self, now: float) -> bool:
        """Whether :data:`REFRESH_SECONDS` passed since the last :meth:`refresh` (monotonic ``now``)."""
        return now - self._last_refresh >= REFRESH_SECONDS

    def refresh(self, learners: Mapping[int, Any], now: float | None = None) -> None:
        """Read the quantities of ``learners`` and drain their report delays into the histogram.

        ``learners`` are the assigned partitions': exactly theirs are exported, a new partition's
        cost counters at 0, and every series of a partition no longer among them disappears.
        """
        self._last_refresh = time.monotonic() if now is None else now
        states = {partition: learner.learning_state() for partition, learner in learners.items()}
        delays = [
            delay
            for learner in learners.values()
            for delay in _drained(getattr(learner, "report_delays", None))
        ]
        if delays:
            self.report_delay.observe_ns([round(delay * 1e9) for delay in delays])
        with self._lock:
            self._cost = {partition: self._cost.get(partition, 0.0) for partition in learners}
            self._full_cost = {partition: self._full_cost.get(partition, 0.0) for partition in learners}
        self._states = states  # one assignment: a scrape sees the old or the new snapshot

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            cost, full_cost = dict(self._cost), dict(self._full_cost)
        states = self._states
        yield _counter("cost", "Cost spent on decided events: sum of C_d of their depths.", cost)
        yield _counter(
            "full_cascade_cost", "What querying every stage would have cost on the same events.", full_cost
        )
        for name, documentation in _GAUGES:
            family = GaugeMetricFamily(f"uss_kafka_{name}", documentation, labels=["partition"])
            for partition, state in sorted(states.items()):
                if state.get(name) is not None:
                    family.add_metric([str(partition)], state[name])
            yield family
        ratios = GaugeMetricFamily(
            "uss_kafka_disagreement_ratio",
            "Pairwise disagreement rate the learner decides from (pair i-j, 1-based stages).",
            labels=["partition", "pair"],
        )
        verdicts = GaugeMetricFamily(
            "uss_kafka_wd_verdict",
            "1 for the current weak-dominance verdict of the labels, 0 for the others.",
            labels=["partition", "verdict"],
        )
        pairs = self.pairs
        for partition, state in sorted(states.items()):
            for pair, ratio in state["disagreement_ratio"].items():
                if pairs is None or pair in pairs:
                    ratios.add_metric([str(partition), pair], ratio)
            if state.get("wd_verdict") is not None:
                for verdict in WD_VERDICTS:
                    verdicts.add_metric([str(partition), verdict], float(verdict == state["wd_verdict"]))
        yield ratios
        yield verdicts
        for name, documentation in _LABEL_COUNTERS:
            counts = {p: s[name] for p, s in states.items() if s.get(name) is not None}
            yield _counter(name.removesuffix("_total"), documentation, counts)
        yield from self.report_delay.collect()


def _counter(name: str, documentation: str, values: Mapping[int, float]) -> CounterMetricFamily:
    """``uss_kafka_<name>_total{partition}``."""
    family = CounterMetricFamily(f"uss_kafka_{name}", documentation, labels=["partition"])
    for partition, value in sorted(values.items()):
        family.add_metric([str(partition)], value)
    return family


def _drained(delays: Any) -> list[float]:
    """The items of a learner's ``report_delays`` deque, which is emptied (none: no item)."""
    if not delays:
        return []
    items = []
    while delays:
        items.append(delays.popleft())
    return items
