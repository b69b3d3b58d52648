"""deploy/observability: the committed dashboard is the generator's, and promtool passes the rules.

``promtool`` comes with Debian's ``prometheus`` package, which ``make test`` installs
(``deploy/observability/install-prometheus.sh``). That every query returns data from a real
Prometheus is ``tests/test_uss_stream_kafka/broker/test_prometheus.py``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from tests import needs
from uss_stream_kafka.operations.dashboard import dashboard, queries, render

OBSERVABILITY = Path(__file__).resolve().parents[3] / "deploy" / "observability"
DASHBOARD = OBSERVABILITY / "uss-stream-dashboard.json"

#: The service's exposed metrics a person looks at (docs/metrics.md); each has a panel. The
#: counters of internal events (replays, commits, checkpoints, aborts, producer replacements,
#: shared-learning refreshes) are left to ad-hoc queries.
DASHBOARD_METRICS = {
    "up",
    "uss_kafka_events_total",
    "uss_kafka_labels_total",
    "uss_kafka_decisions_total",
    "uss_kafka_dead_letters_total",
    "uss_kafka_last_commit_age_seconds",
    "uss_kafka_last_checkpoint_age_seconds",
    "uss_kafka_assigned_partitions",
    "uss_kafka_consumer_lag",
    "uss_kafka_decide_latency_seconds_bucket",
    "uss_kafka_batch_seconds_bucket",
    "uss_kafka_cost_total",
    "uss_kafka_full_cascade_cost_total",
    "uss_kafka_chosen_depth",
    "uss_kafka_disagreement_ratio",
    "uss_kafka_policy_round",
    "uss_kafka_wd_verdict",
    "uss_kafka_labels_requested_total",
    "uss_kafka_labels_answered_total",
    "uss_kafka_labels_expired_total",
    "uss_kafka_pending_decisions",
    "uss_kafka_report_delay_seconds_bucket",
}
ALERTS = {
    "UssStreamDown",
    "UssStreamLagGrowing",
    "UssStreamNoCommit",
    "UssStreamDeadLetterShareHigh",
    "UssStreamWdViolated",
    "UssStreamCostPerEventDriftingUp",
}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = needs.program("promtool", needs.PROMETHEUS)
    return subprocess.run([binary, *args], cwd=OBSERVABILITY, capture_output=True, text=True, timeout=300)


def test_the_committed_dashboard_is_the_generators_output():
    assert DASHBOARD.read_text() == render(dashboard()), (
        "regenerate it: python -m uss_stream_kafka.operations.dashboard "
        "deploy/observability/uss-stream-dashboard.json"
    )


def test_every_panel_queries_the_selected_job_and_every_looked_at_metric_has_a_panel():
    board = dashboard()
    expressions = [target["expr"] for target in queries(board)]
    assert all(panel["targets"] for panel in board["panels"])
    assert all('{job=~"$job"}' in expr for expr in expressions)
    used = {name for expr in expressions for name in re.findall(r"\b(up|uss_kafka_\w+)\{", expr)}
    assert used == DASHBOARD_METRICS
    ids = [panel["id"] for panel in board["panels"]]
    places = [(panel["gridPos"]["x"], panel["gridPos"]["y"]) for panel in board["panels"]]
    assert len(set(ids)) == len(ids) and len(set(places)) == len(places)
    for panel in board["panels"]:
        assert [target["refId"] for target in panel["targets"]] == [
            "ABCDEFGH"[i] for i in range(len(panel["targets"]))
        ]


def test_promtool_checks_the_rules_and_the_compose_configuration():
    for args in (("check", "rules", "rules.yml"), ("check", "config", "prometheus.yml")):
        checked = promtool(*args)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 6 rules found" in promtool("check", "rules", "rules.yml").stdout


def test_promtool_unit_tests_of_the_rules_pass_and_cover_every_alert():
    tests = yaml.safe_load((OBSERVABILITY / "rules_test.yml").read_text())
    rules = yaml.safe_load((OBSERVABILITY / "rules.yml").read_text())
    assert {rule["alert"] for group in rules["groups"] for rule in group["rules"]} == ALERTS
    tested = {case["alertname"] for test in tests["tests"] for case in test["alert_rule_test"]}
    assert tested == ALERTS
    for test in tests["tests"]:  # each alert: not firing at some evaluation, firing at another
        cases = test["alert_rule_test"]
        assert any(case["exp_alerts"] for case in cases) and any(not case["exp_alerts"] for case in cases)
    result = promtool("test", "rules", "rules_test.yml")
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr
