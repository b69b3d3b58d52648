"""The Grafana dashboard of the decision service, generated from the panel list below.

``deploy/observability/uss-stream-dashboard.json`` is this module's output (a test checks that the
committed file equals it); regenerate it after editing a panel::

    python -m uss_stream_kafka.operations.dashboard deploy/observability/uss-stream-dashboard.json

Every query selects the scrape job with the dashboard variable ``$job`` and rates over Grafana's
``$__rate_interval``; ``tests/test_uss_stream_kafka/broker/test_prometheus.py`` evaluates each of
them on a real Prometheus scraping a running service.

Examples
--------
>>> board = dashboard()
>>> board["title"], board["uid"]
('uss-stream decision service', 'uss-stream')
>>> [panel["title"] for panel in board["panels"]][:3]
['Throughput', 'Consumer lag by partition', 'Instances up, partitions assigned']
>>> next(queries(board))["expr"]
'sum by (instance) (rate(uss_kafka_events_total{job=~"$job"}[$__rate_interval]))'
>>> render(board) == render(dashboard())     # deterministic: the committed file can be compared
True
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PANELS", "Panel", "dashboard", "queries", "render"]

#: The scrape job the dashboard's ``$job`` variable starts on.
DEFAULT_JOB = "uss-stream"
_SELECT = '{job=~"$job"}'


def _rate(metric: str, by: str = "") -> str:
    """``sum [by (...)] (rate(metric{job=~"$job"}[$__rate_interval]))``."""
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (rate({metric}{_SELECT}[$__rate_interval]))"


def _per_partition(metric: str, aggregation: str = "max") -> tuple[str, str]:
    """A gauge per input partition (across instances), legend ``partition <p>``."""
    return f"{aggregation} by (partition) ({metric}{_SELECT})", "partition {{partition}}"


def _quantile(q: float, histogram: str) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{_SELECT}[$__rate_interval])))"


@dataclass(frozen=True)
class Panel:
    """One panel: a title, its queries ``(PromQL, legend)``, a unit and a visualisation.

    ``stacking="percent"`` stacks the series to 100 % (a mix); ``kind`` is a Grafana panel type.
    """

    title: str
    description: str
    targets: Sequence[tuple[str, str]]
    unit: str = "short"
    kind: str = "timeseries"
    stacking: str = "none"
    options: dict[str, Any] = field(default_factory=dict)


_COST_PER_EVENT = _rate("uss_kafka_cost_total") + " / " + _rate("uss_kafka_decisions_total")
_FULL_PER_EVENT = _rate("uss_kafka_full_cascade_cost_total") + " / " + _rate("uss_kafka_decisions_total")

#: The dashboard's panels, in reading order (two per row).
PANELS: tuple[Panel, ...] = (
    Panel(
        "Throughput",
        "Input records consumed and decisions produced per second (labels: labelled records consumed).",
        [
            (_rate("uss_kafka_events_total", "instance"), "{{instance}} events"),
            (_rate("uss_kafka_decisions_total"), "decisions"),
            (_rate("uss_kafka_labels_total"), "labels"),
        ],
        unit="ops",
    ),
    Panel(
        "Consumer lag by partition",
        "Records behind the end of each input partition, measured at each offset commit.",
        [_per_partition("uss_kafka_consumer_lag")],
    ),
    Panel(
        "Instances up, partitions assigned",
        "Scrape targets answering, and input partitions with a learner across them.",
        [
            (f"sum(up{_SELECT})", "instances up"),
            (f"sum(uss_kafka_assigned_partitions{_SELECT})", "partitions assigned"),
        ],
        kind="stat",
    ),
    Panel(
        "Commit and checkpoint age",
        "Seconds since the last offset commit and the last checkpoint (an idle input commits nothing).",
        [
            (f"max by (instance) (uss_kafka_last_commit_age_seconds{_SELECT})", "{{instance}} commit"),
            (
                f"max by (instance) (uss_kafka_last_checkpoint_age_seconds{_SELECT})",
                "{{instance}} checkpoint",
            ),
        ],
        unit="s",
    ),
    Panel(
        "Cost per event against the whole cascade",
        "Mean cost of a decision (stage-cost units), and what querying every stage would cost.",
        [(_COST_PER_EVENT, "selector"), (_FULL_PER_EVENT, "whole cascade")],
    ),
    Panel(
        "Savings against the whole cascade",
        "Share of the whole cascade's cost not spent, now and over the dashboard's time range.",
        [
            (f"1 - {_rate('uss_kafka_cost_total')} / {_rate('uss_kafka_full_cascade_cost_total')}", "now"),
            (
                f"1 - sum(increase(uss_kafka_cost_total{_SELECT}[$__range]))"
                f" / sum(increase(uss_kafka_full_cascade_cost_total{_SELECT}[$__range]))",
                "over the range",
            ),
        ],
        unit="percentunit",
    ),
    Panel(
        "Depth mix",
        "Decisions per second at each depth, stacked to 100 %: the share of each depth (all partitions).",
        [(_rate("uss_kafka_decisions_total", "depth"), "depth {{depth}}")],
        unit="ops",
        stacking="percent",
    ),
    Panel(
        "Chosen depth by partition",
        "The depth each partition's learner would choose now (1-based).",
        [_per_partition("uss_kafka_chosen_depth")],
    ),
    Panel(
        "Disagreement rates",
        "Pairwise disagreement rate of stages i-j that each partition's learner decides from.",
        [
            (
                f"max by (partition, pair) (uss_kafka_disagreement_ratio{_SELECT})",
                "partition {{partition}} pair {{pair}}",
            )
        ],
        unit="percentunit",
    ),
    Panel(
        "Policy round by partition",
        "Events each partition's learner has learned from.",
        [_per_partition("uss_kafka_policy_round")],
    ),
    Panel(
        "WD verdict by partition",
        "1 for the current verdict of the weak-dominance monitor (holds, violated, undecided); "
        "only where labels arrive.",
        [
            (
                f"max by (partition, verdict) (uss_kafka_wd_verdict{_SELECT})",
                "partition {{partition}} {{verdict}}",
            )
        ],
    ),
    Panel(
        "Labels",
        "Labels the policy asked for, requests answered, and requests expired unanswered, per second.",
        [
            (_rate("uss_kafka_labels_requested_total"), "requested"),
            (_rate("uss_kafka_labels_answered_total"), "answered"),
            (_rate("uss_kafka_labels_expired_total"), "expired"),
        ],
        unit="ops",
    ),
    Panel(
        "Dead letters by reason",
        "Records sent to the dead-letter topic per second, by reason.",
        [(_rate("uss_kafka_dead_letters_total", "reason"), "{{reason}}")],
        unit="ops",
    ),
    Panel(
        "Dead-letter share",
        "Dead letters per input record consumed.",
        [(_rate("uss_kafka_dead_letters_total") + " / " + _rate("uss_kafka_events_total"), "share")],
        unit="percentunit",
    ),
    Panel(
        "Decide latency",
        "Per-event decide time (median, 99th percentile) and the 99th percentile of a batch's time.",
        [
            (_quantile(0.5, "uss_kafka_decide_latency_seconds"), "per event p50"),
            (_quantile(0.99, "uss_kafka_decide_latency_seconds"), "per event p99"),
            (_quantile(0.99, "uss_kafka_batch_seconds"), "batch p99"),
        ],
        unit="s",
    ),
    Panel(
        "Orchestration: pending decisions",
        "Decisions waiting for their sensor reports, by partition (orchestration mode).",
        [_per_partition("uss_kafka_pending_decisions", "sum")],
    ),
    Panel(
        "Orchestration: report delay",
        "Time from a decision to its sensor report (median, 99th percentile; orchestration mode).",
        [
            (_quantile(0.5, "uss_kafka_report_delay_seconds"), "p50"),
            (_quantile(0.99, "uss_kafka_report_delay_seconds"), "p99"),
        ],
        unit="s",
    ),
)


def _panel_json(panel: Panel, number: int) -> dict[str, Any]:
    targets = [
        {
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "expr": expr,
            "legendFormat": legend,
            "refId": chr(ord("A") + i),
        }
        for i, (expr, legend) in enumerate(panel.targets)
    ]
    custom = {"stacking": {"mode": panel.stacking, "group": "A"}} if panel.kind == "timeseries" else {}
    if panel.stacking != "none":
        custom["fillOpacity"] = 60
    return {
        "id": number + 1,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": 12 * (number % 2), "y": 8 * (number // 2)},
        "fieldConfig": {"defaults": {"unit": panel.unit, "custom": custom}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, **panel.options},
        "targets": targets,
    }


def dashboard(panels: Sequence[Panel] = PANELS) -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (import it, or provision it as a file)."""
    return {
        "uid": "uss-stream",
        "title": "uss-stream decision service",
        "description": "Flow, cost, depth choices and learning of `uss-stream kafka run` / `orchestrate`.",
        "tags": ["uss-stream", "kafka"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
                {
                    "name": "job",
                    "label": "Job",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": "label_values(uss_kafka_events_total, job)",
                    "definition": "label_values(uss_kafka_events_total, job)",
                    "current": {"text": DEFAULT_JOB, "value": DEFAULT_JOB},
                    "refresh": 2,
                    "includeAll": False,
                    "multi": False,
                },
            ]
        },
        "panels": [_panel_json(panel, i) for i, panel in enumerate(panels)],
    }


def queries(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every query target of every panel of a dashboard's JSON model."""
    for panel in board["panels"]:
        yield from panel.get("targets", [])


def render(board: dict[str, Any]) -> str:
    """The JSON text committed to the repository (stable key order, two-space indent)."""
    return json.dumps(board, indent=2) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the dashboard to the file named by the single argument (``-``: standard output)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(
            "usage: python -m uss_stream_kafka.operations.dashboard OUTPUT.json (or - for standard output)",
            file=sys.stderr,
        )
        return 2
    text = render(dashboard())
    if args[0] == "-":
        sys.stdout.write(text)
    else:
        with open(args[0], "w") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
