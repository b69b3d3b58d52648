"""Every metric name a dashboard, alert, rule test, deployment file or page uses is one the service exports.

The names exported are derived from the collectors themselves (``ServiceMetrics`` and
``LearningMetrics`` registered as a service registers them): a counter ``c`` is scraped as
``c_total`` (and ``c_created``), a histogram ``h`` as ``h_bucket``, ``h_count``, ``h_sum``, a gauge
under its name. The names used are read from the files: every ``uss_kafka_*`` token of ``deploy/``
(queries and series must be scraped names) and of the documentation (prose may also name a family).
A renamed metric, or a query with a typo, returns no data in Grafana and never fires an alert;
here it fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from uss_stream_kafka.operations.dashboard import dashboard, queries
from uss_stream_kafka.operations.learning_metrics import LearningMetrics
from uss_stream_kafka.operations.metrics import ServiceMetrics
from uss_stream_kafka.processing.keyed import KeyedOutputsProcessor

ROOT = Path(__file__).resolve().parents[3]
NAME = re.compile(r"\buss_kafka_\w+")
#: How Prometheus's text format names the samples of each kind of family.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
}


def families() -> dict[str, str]:
    """Every family the service exports, with its type (the keys' families with a keyed learner)."""
    metrics = ServiceMetrics(n_stages=3)
    learning = LearningMetrics([0.0, 0.15, 0.2])
    metrics.registry.register(learning)
    keyed = KeyedOutputsProcessor([0.0, 0.15, 0.2], key_from="site").new_learner()
    keyed.process_values([b'{"id": 1, "site": "a", "outputs": [1, 0, 1]}'], None, None, 1 << 20)
    learning.refresh({0: keyed})
    return {family.name: family.type for family in metrics.registry.collect()}


def scraped() -> set[str]:
    return {name + suffix for name, kind in families().items() for suffix in SUFFIXES[kind]}


def files(*patterns: str) -> list[Path]:
    found = [path for pattern in patterns for path in ROOT.glob(pattern) if path.is_file()]
    return sorted(path for path in found if not {".lib", ".logs"} & set(path.parts))


QUERIES = files("deploy/**/*.yml", "deploy/**/*.yaml", "deploy/**/*.json")
PROSE = files("deploy/**/*.md", "docs/**/*.md", "README.md")


def test_the_collectors_export_counters_histograms_and_gauges():
    kinds = families()
    assert {"counter", "gauge", "histogram"} <= set(kinds.values())
    assert kinds["uss_kafka_events"] == "counter" and "uss_kafka_events_total" in scraped()


def test_the_generated_dashboard_queries_only_scraped_names():
    used = {name for target in queries(dashboard()) for name in NAME.findall(target["expr"])}
    assert used and used <= scraped(), sorted(used - scraped())


@pytest.mark.parametrize("path", QUERIES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_name_in_a_deployment_file_is_scraped(path):
    used = set(NAME.findall(path.read_text()))
    assert used <= scraped(), f"{path.relative_to(ROOT)} uses {sorted(used - scraped())}, not exported"


@pytest.mark.parametrize("path", PROSE, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_name_a_page_mentions_is_exported(path):
    known = scraped() | set(families())
    used = set(NAME.findall(path.read_text()))
    assert used <= known, f"{path.relative_to(ROOT)} mentions {sorted(used - known)}, not exported"


def test_the_alerts_rule_tests_and_dashboard_files_are_among_those_read():
    read = {str(path.relative_to(ROOT)) for path in QUERIES if NAME.search(path.read_text())}
    assert {
        "deploy/observability/rules.yml",
        "deploy/observability/rules_test.yml",
        "deploy/observability/uss-stream-dashboard.json",
    } <= read
