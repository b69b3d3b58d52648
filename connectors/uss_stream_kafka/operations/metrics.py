"""Prometheus metrics of the decision service.

All metrics live in the service's own ``CollectorRegistry`` (several services can run in one
process). The hot loop never touches a metric per event: counts are added once per batch, and so are the
timings (:class:`LatencyHistogram` takes weighted samples in bulk). Events are decided a batch at a
time, so the decide latency is reported twice: per event (the batch's time divided by its events:
what one decision costs) and per batch (how long an event waits for its decision).

=========================================  =========  =============================================
metric                                     type       meaning
=========================================  =========  =============================================
``uss_kafka_events_total``                 counter    input records consumed (each counted once)
``uss_kafka_labels_total``                 counter    labelled records consumed (features mode)
``uss_kafka_decisions_total{depth}``       counter    decisions produced, by depth ``1..K``
``uss_kafka_dead_letters_total{reason}``   counter    dead letters produced, by reason
``uss_kafka_replayed_total``               counter    records replayed into a restored learner
``uss_kafka_commits_total``                counter    offset commits
``uss_kafka_checkpoints_total``            counter    checkpoint records written
``uss_kafka_last_commit_age_seconds``      gauge      seconds since the last commit (or start)
``uss_kafka_last_checkpoint_age_seconds``  gauge      seconds since the last checkpoint (or start)
``uss_kafka_assigned_partitions``          gauge      input partitions with a learner
``uss_kafka_consumer_lag{partition}``      gauge      records behind the partition's end (from
                                                      its restore on, removed on its revocation)
``uss_kafka_decide_latency_seconds``       histogram  per-event decide time: a partition batch's
                                                      processing time (decode, validate, decide,
                                                      encode) divided by its events, counted once
                                                      per event
``uss_kafka_batch_seconds``                histogram  processing time of one partition batch (how
                                                      long its events wait inside the service,
                                                      Kafka I/O excluded)
=========================================  =========  =============================================
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from uss_stream_kafka.processing.events import REASONS

__all__ = ["BATCH_BUCKETS", "LATENCY_BUCKETS", "LatencyHistogram", "ServiceMetrics"]

#: Upper bounds (seconds) of the per-event decide-time buckets.
LATENCY_BUCKETS = (5e-7, 1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 1e-2, 0.1, 1.0)
#: Upper bounds (seconds) of the batch-time buckets.
BATCH_BUCKETS = (1e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class LatencyHistogram(Collector):
    """A Prometheus histogram fed with many (optionally weighted) samples at once, plus recent quantiles.

    Parameters
    ----------
    name, documentation
        The metric's full name (e.g. ending in ``_seconds``) and help text.
    buckets
        Upper bounds in seconds (``+Inf`` is added).
    window
        How many of the most recent samples :meth:`quantile` looks at.

    Examples
    --------
    >>> histogram = LatencyHistogram("demo_latency_seconds", "demo", buckets=(1e-6, 1e-5))
    >>> histogram.observe_ns([500, 1500, 20_000])
    >>> histogram.observe_ns([2000], weights=[5])       # 5 events that took 2 us each
    >>> histogram.count, histogram.quantile(0.5)
    (8, 2e-06)
    >>> family = next(iter(histogram.collect()))
    >>> [(s.labels.get("le"), s.value) for s in family.samples if s.name.endswith("_bucket")]
    [('1e-06', 1.0), ('1e-05', 7.0), ('+Inf', 8.0)]

    """

    def __init__(
        self, name: str, documentation: str, buckets: Sequence[float] = LATENCY_BUCKETS, window: int = 100_000
    ) -> None:
        self.name = name
        self.documentation = documentation
        self._bounds = [float(b) for b in buckets]
        self._bounds_ns = np.array([b * 1e9 for b in self._bounds])
        self._counts = np.zeros(len(self._bounds) + 1, dtype=np.int64)
        self._sum_ns = 0
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        # The last `window` samples (values and weights), a ring filled from `_next` on: fixed
        # memory, however few samples each call brings (the service: one per partition batch).
        self._recent_values = np.zeros(window, dtype=np.int64)
        self._recent_weights = np.zeros(window, dtype=np.int64)
        self._next = 0
        self._filled = 0
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """Number of samples observed (weights included)."""
        return int(self._counts.sum())

    def observe_ns(self, values_ns: Sequence[int], weights: Sequence[int] | None = None) -> None:
        """Add latencies given in nanoseconds; ``weights[i]`` samples of ``values_ns[i]`` each."""
        if not len(values_ns):
            return
        values = np.asarray(values_ns, dtype=np.int64)
        counts = (
            np.ones(len(values), dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
        )
        slots = np.searchsorted(self._bounds_ns, values, side="left")
        increments = np.bincount(slots, weights=counts, minlength=len(self._counts)).astype(np.int64)
        with self._lock:
            self._counts += increments
            self._sum_ns += int((values * counts).sum())
            window = len(self._recent_values)
            kept = slice(max(0, len(values) - window), None)
            slots = (self._next + np.arange(len(values[kept]))) % window
            self._recent_values[slots] = values[kept]
            self._recent_weights[slots] = counts[kept]
            self._next = int(slots[-1] + 1) % window
            self._filled = min(window, self._filled + len(values))

    def quantile(self, q: float) -> float:
        """The weighted ``q``-quantile (seconds) of the recent samples; NaN before any sample."""
        with self._lock:
            if not self._filled:
                return float("nan")
            values = self._recent_values[: self._filled].copy()
            counts = self._recent_weights[: self._filled].copy()
        order = np.argsort(values, kind="stable")
        cumulative = np.cumsum(counts[order])
        rank = min(int(np.ceil(q * cumulative[-1])), int(cumulative[-1]))
        return float(values[order][np.searchsorted(cumulative, max(rank, 1))]) / 1e9

    def collect(self) -> Iterator[HistogramMetricFamily]:
        with self._lock:
            cumulative = np.cumsum(self._counts).tolist()
            total = self._sum_ns / 1e9
        buckets = [(repr(b), float(c)) for b, c in zip(self._bounds, cumulative)]
        buckets.append(("+Inf", float(cumulative[-1])))
        family = HistogramMetricFamily(self.name, self.documentation)
        family.add_metric([], buckets, total)
        yield family


class ServiceMetrics:
    """The metrics of one decision service.

    Parameters
    ----------
    n_stages
        ``K``: the ``depth`` label takes the values ``1..K`` (all exported from the start).
    registry
        Where to register; a new ``CollectorRegistry`` by default.

    Examples
    --------
    >>> from prometheus_client import generate_latest
    >>> metrics = ServiceMetrics(n_stages=3)
    >>> metrics.record_batch(events=4, depth_counts=[0, 1, 3, 0], timings=[(12_000, 4)])
    >>> metrics.dead_letter("invalid_json")
    >>> text = generate_latest(metrics.registry).decode()
    >>> 'uss_kafka_decisions_total{depth="2"} 3.0' in text
    True
    >>> 'uss_kafka_dead_letters_total{reason="invalid_json"} 1.0' in text
    True

    """

    def __init__(self, n_stages: int, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        self.n_stages = n_stages
        self.events = Counter("uss_kafka_events", "Input records consumed.", registry=reg)
        self.labels = Counter("uss_kafka_labels", "Labelled records consumed (features mode).", registry=reg)
        self.decisions = Counter(
            "uss_kafka_decisions", "Decisions produced, by depth.", ["depth"], registry=reg
        )
        self._by_depth = [self.decisions.labels(depth=str(d)) for d in range(1, n_stages + 1)]
        self.dead_letters = Counter(
            "uss_kafka_dead_letters", "Dead letters produced, by reason.", ["reason"], registry=reg
        )
        for reason in REASONS:
            self.dead_letters.labels(reason=reason)
        self.replayed = Counter(
            "uss_kafka_replayed", "Records replayed into a restored learner without producing.", registry=reg
        )
        self.commits = Counter("uss_kafka_commits", "Offset commits.", registry=reg)
        self.checkpoints = Counter("uss_kafka_checkpoints", "Checkpoint records written.", registry=reg)
        self.aborts = Counter(
            "uss_kafka_transaction_aborts",
            "Transactions aborted (exactly-once): their records are processed again.",
            registry=reg,
        )
        self.producer_replacements = Counter(
            "uss_kafka_producer_replacements",
            "Transactional producers replaced after a stuck flush or a fence (exactly-once).",
            registry=reg,
        )
        self.shares = Counter(
            "uss_kafka_shares",
            "Shared-learning refreshes: the other partitions' counts merged.",
            registry=reg,
        )
        now = time.monotonic()
        self._last_commit = now
        self._last_checkpoint = now
        Gauge(
            "uss_kafka_last_commit_age_seconds",
            "Seconds since the last offset commit (or the start).",
            registry=reg,
        ).set_function(lambda: time.monotonic() - self._last_commit)
        Gauge(
            "uss_kafka_last_checkpoint_age_seconds",
            "Seconds since the last checkpoint (or the start).",
            registry=reg,
        ).set_function(lambda: time.monotonic() - self._last_checkpoint)
        self.assigned = Gauge(
            "uss_kafka_assigned_partitions", "Input partitions with a learner.", registry=reg
        )
        self.lag = Gauge(
            "uss_kafka_consumer_lag", "Records behind the end of the partition.", ["partition"], registry=reg
        )
        self._lagged: set[int] = set()  # the partitions with a lag series
        self.latency = LatencyHistogram(
            "uss_kafka_decide_latency_seconds",
            "Per-event decide time (decode, validate, decide, encode): batch time / events in the batch.",
        )
        self.batch_time = LatencyHistogram(
            "uss_kafka_batch_seconds",
            "Processing time of one partition batch (Kafka I/O excluded).",
            buckets=BATCH_BUCKETS,
        )
        reg.register(self.latency)
        reg.register(self.batch_time)

    def record_batch(
        self, events: int, depth_counts: Sequence[int], timings: Sequence[tuple[int, int]]
    ) -> None:
        """Account for one poll: ``depth_counts[d]`` decisions of depth ``d`` (index 0 unused) and
        ``(nanoseconds, events)`` per partition batch processed."""
        if events:
            self.events.inc(events)
        for depth in range(1, self.n_stages + 1):
            if depth_counts[depth]:
                self._by_depth[depth - 1].inc(depth_counts[depth])
        if timings:
            elapsed = [ns for ns, _ in timings]
            sizes = [n for _, n in timings]
            self.batch_time.observe_ns(elapsed)
            self.latency.observe_ns([ns // n for ns, n in timings], weights=sizes)

    def set_lag(self, partition: int, records: int) -> None:
        """Input partition ``partition`` is ``records`` behind its end."""
        self.lag.labels(partition=str(partition)).set(records)
        self._lagged.add(partition)

    def partitions_held(self, partitions: Collection[int], lags: Mapping[int, int]) -> None:
        """The input partitions assigned now are ``partitions``: ``lags`` gives the lag of those just
        restored (their series are born), and the lag series of the others are removed.

        >>> metrics = ServiceMetrics(n_stages=2)
        >>> metrics.partitions_held([0, 1], {0: 5, 1: 0})
        >>> metrics.partitions_held([1], {})
        >>> [(s.labels, s.value) for s in metrics.lag.collect()[0].samples]
        [({'partition': '1'}, 0.0)]
        >>> metrics.registry.get_sample_value("uss_kafka_assigned_partitions")
        1.0

        """
        self.assigned.set(len(partitions))
        for partition, records in lags.items():
            self.set_lag(partition, records)
        for partition in self._lagged.difference(partitions):
            self.lag.remove(str(partition))
        self._lagged.intersection_update(partitions)

    def dead_letter(self, reason: str) -> None:
        self.dead_letters.labels(reason=reason).inc()

    def committed(self) -> None:
        self.commits.inc()
        self._last_commit = time.monotonic()

    def checkpointed(self, records: int) -> None:
        self.checkpoints.inc(records)
        self._last_checkpoint = time.monotonic()

    def last_commit_age(self) -> float:
        return time.monotonic() - self._last_commit

    def last_checkpoint_age(self) -> float:
        return time.monotonic() - self._last_checkpoint
