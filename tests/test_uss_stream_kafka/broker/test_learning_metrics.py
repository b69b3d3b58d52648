"""The learning metrics on ``/metrics`` of a service on a real broker, against hand-computed values.

Outputs mode (both clients): the cost counter equals the sum of ``C_d`` over the depths read from
the decisions topic, the full cascade's is ``n · C_K``, and the round, the chosen depth and the
disagreement rates are those of an in-process policy run over the same outputs (its scalar
``select``, the rates counted from the revealed outputs with numpy). Orchestration with the
label-asking policy: pending decisions, label counters, the report-delay histogram and the WD
verdict against an in-process ``PendingDecisions`` fed the same calls.
"""

from __future__ import annotations

import json
import random
import urllib.request
import uuid
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, CUMULATIVE, Running, decisions_of, new_app, produce, read_all, stream
from prometheus_client.parser import text_string_to_metric_families
from test_orchestration_labels import COSTS as AUDITED_COSTS
from test_orchestration_labels import Sensors, serve
from test_orchestration_labels import topics as orchestration  # noqa: F401 (a fixture)
from waiting import wait_until

from uss_stream.labels.wd_monitor import wd_report
from uss_stream.pending import PendingDecisions
from uss_stream.policies import USSUCB, AuditedUSS
from uss_stream_kafka import OutputsProcessor
from uss_stream_kafka.processing.orchestration import OrchestrationTopics

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

EVENTS = 3000  # per partition


#: The learning metrics' families (docs/metrics.md).
LEARNING = {
    "uss_kafka_cost",
    "uss_kafka_full_cascade_cost",
    "uss_kafka_chosen_depth",
    "uss_kafka_disagreement_ratio",
    "uss_kafka_policy_round",
    "uss_kafka_wd_verdict",
    "uss_kafka_labels_requested",
    "uss_kafka_labels_answered",
    "uss_kafka_labels_expired",
    "uss_kafka_pending_decisions",
    "uss_kafka_report_delay_seconds",
}


def exposition(app: Any) -> str:
    host, port = app.http_address
    return urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5).read().decode()


def scrape(app: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of the service's ``/metrics``."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition(app))
        for sample in family.samples
    }


def series(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def names(samples: dict) -> set[str]:
    return {name for name, _ in samples}


def revealed_rates(outputs: np.ndarray, depths: np.ndarray) -> dict[str, float]:
    """``D_ij / n_j`` counted from the outputs each decision revealed (its first ``depth`` stages)."""
    rates = {}
    for j in range(1, outputs.shape[1]):
        seen = depths > j
        for i in range(j):
            rates[f"{i + 1}-{j + 1}"] = float((outputs[seen, i] != outputs[seen, j]).sum() / seen.sum())
    return rates


def test_outputs_mode_metrics_equal_the_decisions_and_an_in_process_policy(
    kafka_client, bootstrap_servers, make_topics
):
    topics = make_topics(partitions=2)
    streams = {p: stream(EVENTS, seed=p, start=p * EVENTS) for p in (0, 1)}
    for partition, (values, _) in streams.items():
        produce(bootstrap_servers, topics.input, values, partition=partition)
    app = new_app(bootstrap_servers, topics, http_port=0, http_host="127.0.0.1", client_library=kafka_client)
    running = Running(app, OutputsProcessor(COSTS, alpha=0.51))
    running.wait_for(lambda a: a.summary.events == 2 * EVENTS)
    wait_until(
        lambda: all(
            series(scrape(app), "uss_kafka_policy_round", partition=str(p)) == EVENTS for p in (0, 1)
        ),
        "the learning gauges at the last round",
        timeout=60,
    )
    samples = scrape(app)
    app.stop()
    running.join()

    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=2 * EVENTS))
    for partition, (_, outputs) in streams.items():
        label = str(partition)
        mine = [d for d in decisions if partition * EVENTS <= int(d["id"][1:]) < (partition + 1) * EVENTS]
        depths = np.array([d["depth"] for d in sorted(mine, key=lambda d: int(d["id"][1:]))])
        assert len(depths) == EVENTS
        spent = sum(CUMULATIVE[d - 1] for d in depths)
        assert series(samples, "uss_kafka_cost_total", partition=label) == pytest.approx(spent, rel=1e-12)
        full = series(samples, "uss_kafka_full_cascade_cost_total", partition=label)
        assert full == pytest.approx(EVENTS * CUMULATIVE[-1], rel=1e-12)
        policy = USSUCB(COSTS, alpha=0.51)
        assert policy.run(outputs).tolist() == depths.tolist()
        assert series(samples, "uss_kafka_chosen_depth", partition=label) == policy.select()
        for pair, rate in revealed_rates(outputs, depths).items():
            measured = series(samples, "uss_kafka_disagreement_ratio", partition=label, pair=pair)
            assert measured == pytest.approx(rate, rel=1e-12), pair
    # Outputs mode has no labels: no WD verdict, no label counters, no pending decisions.
    absent = {
        "uss_kafka_wd_verdict",
        "uss_kafka_labels_requested_total",
        "uss_kafka_pending_decisions",
        "uss_kafka_report_delay_seconds_count",
    }
    present = names(samples)
    assert "uss_kafka_report_delay_seconds_count" in present  # an empty histogram: count 0
    assert series(samples, "uss_kafka_report_delay_seconds_count") == 0
    assert not (absent - {"uss_kafka_report_delay_seconds_count"}) & present


def test_a_fixed_full_depth_costs_exactly_the_full_cascade(bootstrap_servers, make_topics):
    topics = make_topics()
    values, _ = stream(1000)
    produce(bootstrap_servers, topics.input, values)
    app = new_app(bootstrap_servers, topics, http_port=0, http_host="127.0.0.1")
    running = Running(app, OutputsProcessor(COSTS, policy="fixed:depth=3"))
    running.wait_for(lambda a: a.summary.events == 1000)
    wait_until(
        lambda: series(scrape(app), "uss_kafka_policy_round", partition="0") == 1000,
        "the learning gauges at the last round",
        timeout=60,
    )
    samples = scrape(app)
    app.stop()
    running.join()
    cost = series(samples, "uss_kafka_cost_total", partition="0")
    assert cost == series(samples, "uss_kafka_full_cascade_cost_total", partition="0")
    assert cost == pytest.approx(1000 * CUMULATIVE[-1], rel=1e-12)
    assert series(samples, "uss_kafka_chosen_depth", partition="0") == 3


def test_without_learning_metrics_only_the_service_metrics_are_served(bootstrap_servers, make_topics):
    topics = make_topics()
    produce(bootstrap_servers, topics.input, stream(100)[0])
    app = new_app(bootstrap_servers, topics, http_port=0, http_host="127.0.0.1", learning_metrics=False)
    running = Running(app, OutputsProcessor(COSTS))
    running.wait_for(lambda a: a.summary.events == 100)
    families = {family.name for family in text_string_to_metric_families(exposition(app))}
    app.stop()
    running.join()
    assert "uss_kafka_events" in families
    assert not families & LEARNING


def test_orchestration_metrics_equal_an_in_process_pending_decisions(
    bootstrap_servers: str,
    orchestration: OrchestrationTopics,  # noqa: F811 (the fixture imported above)
) -> None:
    topics = orchestration
    serving = serve(
        bootstrap_servers, topics, f"g-{uuid.uuid4().hex[:8]}", http_port=0, http_host="127.0.0.1"
    )
    sensors = Sensors(bootstrap_servers, topics, serving)
    sensors.request(range(300))
    reported = [f"r{i}" for i in range(300)]
    random.Random(5).shuffle(reported)
    sensors.report(reported[:280])  # 20 stay pending
    assert len(sensors.asked) >= 10
    sensors.label(sensors.asked[::2])
    reference: PendingDecisions = sensors.reference
    app = serving.app
    answered = len(sensors.asked[::2])
    wait_until(
        lambda: series(scrape(app), "uss_kafka_labels_answered_total", partition="0") == answered,
        "the label counters after the last label",
        timeout=60,
    )
    samples = scrape(app)
    decisions = [d for d in sensors.decisions() if "depth" in d]
    serving.stop()

    cumulative = np.cumsum(AUDITED_COSTS)
    assert series(samples, "uss_kafka_cost_total", partition="0") == pytest.approx(
        sum(cumulative[d["depth"] - 1] for d in decisions), rel=1e-12
    )
    assert series(samples, "uss_kafka_full_cascade_cost_total", partition="0") == pytest.approx(
        300 * cumulative[-1], rel=1e-12
    )
    assert series(samples, "uss_kafka_pending_decisions", partition="0") == 20
    assert series(samples, "uss_kafka_policy_round", partition="0") == 300
    assert series(samples, "uss_kafka_labels_requested_total", partition="0") == len(sensors.asked)
    assert series(samples, "uss_kafka_labels_expired_total", partition="0") == 0
    assert series(samples, "uss_kafka_report_delay_seconds_count") == 280
    assert series(samples, "uss_kafka_report_delay_seconds_sum") > 0
    # The depth the service would choose now: the reference's next decision (its scalar rule).
    probe = PendingDecisions(AuditedUSS(AUDITED_COSTS))
    probe.load_state_dict(json.loads(json.dumps(reference.state_dict())))
    assert series(samples, "uss_kafka_chosen_depth", partition="0") == probe.decide("probe")
    stats = reference.policy.stats
    for j in range(1, 3):
        for i in range(j):
            measured = series(samples, "uss_kafka_disagreement_ratio", partition="0", pair=f"{i + 1}-{j + 1}")
            assert measured == pytest.approx(stats.disagreements[i][j] / stats.queried[j], rel=1e-12)
    verdicts = {
        v: series(samples, "uss_kafka_wd_verdict", partition="0", verdict=v)
        for v in ("holds", "violated", "undecided")
    }
    expected = wd_report(
        reference.policy.cumulative_costs, stats.queried, stats.disagreements,
        reference.policy.evidence, stats.decisions + 1,
    ).verdict  # fmt: skip
    assert verdicts == {v: float(v == expected) for v in verdicts}


def partition_samples(samples: dict, partition: str) -> dict[str, float]:
    """``{sample name: value}`` of the ``uss_kafka_`` series labelled ``partition`` (one per name
    but the disagreement ratios, which are left out)."""
    return {
        name: value
        for (name, labels), value in samples.items()
        if name.startswith("uss_kafka_") and ("partition", partition) in labels and len(labels) == 1
    }


def test_per_partition_series_are_born_at_the_restore_and_removed_at_the_revocation(
    kafka_client, bootstrap_servers, make_topics
):
    topics = make_topics(partitions=2)
    group = f"g-{uuid.uuid4().hex[:10]}"
    settings = {"http_port": 0, "http_host": "127.0.0.1", "client_library": kafka_client}
    first = new_app(bootstrap_servers, topics, group, **settings)
    running = [Running(first, OutputsProcessor(COSTS, alpha=0.51))]

    # Restored, no record yet: every per-partition series is there, the counters at 0.
    wait_until(
        lambda: (
            first.http_address is not None
            and all(series(scrape(first), "uss_kafka_cost_total", partition=p) is not None for p in "01")
        ),
        "the cost series of both partitions",
        timeout=60,
    )
    samples = scrape(first)
    assert first.summary.events == 0
    for p in "01":
        assert partition_samples(samples, p) == {
            "uss_kafka_cost_total": 0.0,
            "uss_kafka_full_cascade_cost_total": 0.0,
            "uss_kafka_consumer_lag": 0.0,  # an empty partition
            "uss_kafka_policy_round": 0.0,
            "uss_kafka_chosen_depth": 3.0,  # nothing learned: the whole cascade
        }
        # No pair observed yet: a rate 0/0 is not exported (docs/metrics.md).
        assert series(samples, "uss_kafka_disagreement_ratio", partition=p, pair="1-2") is None

    counts = {0: 400, 1: 250}
    for partition, n in counts.items():
        values, _ = stream(n, seed=partition, start=1000 * partition)
        produce(bootstrap_servers, topics.input, values, partition=partition)
    running[0].wait_for(lambda a: a.summary.events == sum(counts.values()))
    wait_until(
        lambda: all(
            series(scrape(first), "uss_kafka_policy_round", partition=str(p)) == n for p, n in counts.items()
        ),
        "the learning gauges at the last round",
        timeout=60,
    )
    samples = scrape(first)
    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=sum(counts.values())))
    for partition, n in counts.items():
        depths = [d["depth"] for d in decisions if int(d["id"][1:]) // 1000 == partition]
        assert len(depths) == n
        label = str(partition)
        assert series(samples, "uss_kafka_cost_total", partition=label) == pytest.approx(
            sum(CUMULATIVE[d - 1] for d in depths), rel=1e-12
        )
        assert series(samples, "uss_kafka_full_cascade_cost_total", partition=label) == pytest.approx(
            n * CUMULATIVE[-1], rel=1e-12
        )

    # A second worker joins: each holds one partition; the one that left the first worker has no
    # series there any more, and is born at the second's restore (its learner's round restored).
    second = new_app(bootstrap_servers, topics, group, **settings)
    running.append(Running(second, OutputsProcessor(COSTS, alpha=0.51)))
    wait_until(
        lambda: len(first.learners()) == len(second.learners()) == 1,
        "one partition for each worker",
        timeout=120,
    )
    (moved,) = second.learners()
    label = str(moved)
    wait_until(
        lambda: (
            second.http_address is not None
            and series(scrape(second), "uss_kafka_cost_total", partition=label) is not None
        ),
        "the moved partition's series on the second worker",
        timeout=60,
    )
    samples = scrape(second)
    assert second.summary.events == 0
    born = partition_samples(samples, label)
    assert born["uss_kafka_cost_total"] == born["uss_kafka_full_cascade_cost_total"] == 0
    assert born["uss_kafka_policy_round"] == counts[moved]
    assert "uss_kafka_consumer_lag" in born
    assert not [key for key in scrape(first) if ("partition", label) in key[1]]
    for each in running:
        each.app.stop()
    for each in running:
        each.join()
