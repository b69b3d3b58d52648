"""A real Prometheus scrapes running services; every dashboard query and alert expression returns data.

Debian's ``prometheus`` (``make test`` installs it: ``deploy/observability/install-prometheus.sh``)
runs on a free port with a temporary configuration that scrapes, as the job ``uss-stream``, a
``uss-stream kafka run`` (outputs mode) and a ``uss-stream kafka orchestrate --policy audited``,
both subprocesses on the local broker, and loads ``deploy/observability/rules.yml``. Events,
malformed records, sensor reports and the labels the policy asks for are fed in two phases, each
waited for until Prometheus has scraped it, so that every counter grows inside the rate windows.
Then each query of each panel of the committed dashboard, and each alert rule's expression, is
evaluated through ``/api/v1/query`` and must return a series with a number. A renamed or missing
metric returns nothing and fails the test.

Alert expressions are comparisons that return nothing while nothing is wrong. They are evaluated
with every comparison operator made a ``bool`` comparison (``up == 0`` -> ``up == bool 0``), which
returns a 0/1 series wherever both sides have data: the rule's selectors, aggregations and vector
matchings are exactly the rule's, only the filtering is off.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import sys
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import produce, read_all, stream
from test_crash_restart import Process
from waiting import wait_until

from tests import needs
from uss_stream_kafka.operations.dashboard import queries
from uss_stream_kafka.processing.orchestration import OrchestrationTopics, create_orchestration_topics

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(400),
]

ROOT = Path(__file__).resolve().parents[3]
OBSERVABILITY = ROOT / "deploy" / "observability"
COSTS = "0,0.15,0.2"
#: What the dashboard's Grafana variables stand for here: the job, a rate window covering the
#: test's samples (1 s scrapes), and a dashboard range.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__range": "1h", "$job": "uss-stream"}
COMPARISON = re.compile(r"(==|!=|>=|<=|>|<)(\s*bool\b)?")


def with_bool_comparisons(expr: str) -> str:
    """``expr`` with each comparison outside label matchers turned into a ``bool`` comparison.

    >>> with_bool_comparisons('up{job="a", x!="b"} == 0 and rate(y[1m]) > 1.25 * z')
    'up{job="a", x!="b"} == bool 0 and rate(y[1m]) > bool 1.25 * z'
    >>> with_bool_comparisons("a >= bool 1")
    'a >= bool 1'
    """
    pieces = re.split(r'(\{[^}]*\}|"[^"]*")', expr)  # label matchers and strings stay as they are
    return "".join(
        piece if i % 2 else COMPARISON.sub(lambda m: f"{m.group(1)} bool", piece)
        for i, piece in enumerate(pieces)
    )


def grafana_expr(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Prometheus:
    """A ``prometheus`` server on a free port scraping ``targets`` every second, rules loaded."""

    def __init__(self, directory: Path, targets: list[str]) -> None:
        binary = needs.program("prometheus", needs.PROMETHEUS)
        shutil.copy(OBSERVABILITY / "rules.yml", directory / "rules.yml")
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yml"],
            "scrape_configs": [{"job_name": "uss-stream", "static_configs": [{"targets": targets}]}],
        }
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{free_port()}"
        self.process = Process(
            [
                binary, f"--config.file={directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address={self.url[7:]}",
                "--log.level=warn",
            ]
        )  # fmt: skip
        wait_until(self.ready, "Prometheus ready", timeout=60, alive=self.process.alive, every=0.2)

    def ready(self) -> bool:
        try:
            return urllib.request.urlopen(f"{self.url}/-/ready", timeout=2).status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=30) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now (a scalar as one unlabelled sample)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def total(self, expr: str) -> float:
        return sum(float(sample["value"][1]) for sample in self.query(expr))


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[list[str]], Prometheus]]:
    started: list[Prometheus] = []

    def start(targets: list[str]) -> Prometheus:
        started.append(Prometheus(tmp_path, targets))
        return started[-1]

    yield start
    for server in started:
        server.process.kill()
    shutil.rmtree(tmp_path, ignore_errors=True)  # the configuration, the rules and the TSDB


def metrics_address(process: Process) -> str:
    """``host:port`` of the service's ``/metrics``, from its start-up log line."""
    found: list[str] = []

    def logged() -> bool:
        found[:] = re.findall(r"metrics and health on http://([\d.]+:\d+)/metrics", process.log)
        return bool(found)

    wait_until(logged, "the metrics address in the log", timeout=120, alive=process.alive, every=0.1)
    return found[0]


def common_options(bootstrap: str, group: str) -> list[str]:
    return [
        "--bootstrap-servers", bootstrap, "--group-id", group, "--stage-costs", COSTS,
        "--checkpoint-interval", "1", "--metrics-host", "127.0.0.1", "--metrics-port", "0",
        "--log-level", "INFO",
    ]  # fmt: skip


class Feed:
    """What the test sends: events (and malformed records) to ``run``; requests, then the sensors'
    reports of the decisions and the labels the policy asks for, to ``orchestrate``."""

    def __init__(self, bootstrap: str, run_input: str, orchestration: OrchestrationTopics) -> None:
        self.bootstrap = bootstrap
        self.run_input = run_input
        self.topics = orchestration
        self.events = 0  # input records of both services (orchestrate counts its requests as events)
        self.requests = 0
        self.feedback = 0  # reports and labels sent (orchestrate counts them as labels)
        self.answered: set[tuple[str, Any]] = set()
        _, self.outputs = stream(100_000, seed=99)

    def send_events(self, n: int) -> None:
        values, _ = stream(n, seed=self.events, start=self.events)
        produce(self.bootstrap, self.run_input, [*values, b"not json", b'{"outputs": [1, 0, 1]}'])
        requests = [json.dumps({"id": self.requests + i}).encode() for i in range(n)]
        produce(self.bootstrap, self.topics.requests, [*requests, b"[]"])
        self.requests += n
        self.events += 2 * n + 3

    def send_feedback(self) -> None:
        """A report for each decision and a label for each label request not yet answered."""
        records = [json.loads(r.value) for r in read_all(self.bootstrap, self.topics.decisions)]
        reports = [r for r in records if "depth" in r and ("report", r["id"]) not in self.answered]
        asked = [r for r in records if r.get("label_requested") and ("label", r["id"]) not in self.answered]
        feedback = [{"id": r["id"], "outputs": self.outputs[r["id"], : r["depth"]].tolist()} for r in reports]
        feedback += [{"id": r["id"], "label": int(self.outputs[r["id"], -1])} for r in asked]
        produce(self.bootstrap, self.topics.reports, [json.dumps(document).encode() for document in feedback])
        self.answered.update(("report", r["id"]) for r in reports)
        self.answered.update(("label", r["id"]) for r in asked)
        self.feedback += len(feedback)

    def decided(self) -> int:
        records = read_all(self.bootstrap, self.topics.decisions)
        return sum("depth" in json.loads(r.value) for r in records)


def numbers(result: list[dict[str, Any]]) -> list[float]:
    return [float(sample["value"][1]) for sample in result if not math.isnan(float(sample["value"][1]))]


def test_every_dashboard_query_and_alert_expression_returns_data_from_a_real_prometheus(
    bootstrap_servers, make_topics, admin, prometheus
):
    run_topics = make_topics(partitions=2)
    run = uuid.uuid4().hex[:10]
    orchestration = OrchestrationTopics(
        *(f"p-{run}-{role}" for role in ("req", "rep", "dec", "dlq", "state"))
    )
    create_orchestration_topics(admin, orchestration)
    try:
        service = Process(
            [
                sys.executable, "-m", "uss_stream", "kafka", "run", "--input-topic", run_topics.input,
                "--output-topic", run_topics.output, "--dlq-topic", run_topics.dead_letter,
                "--state-topic", run_topics.state, *common_options(bootstrap_servers, f"g-{run}-run"),
            ]
        )  # fmt: skip
        orchestrator = Process(
            [
                sys.executable, "-m", "uss_stream", "kafka", "orchestrate", "--policy", "audited",
                "--input-topic", orchestration.requests, "--reports-topic", orchestration.reports,
                "--output-topic", orchestration.decisions, "--dlq-topic", orchestration.dead_letter,
                "--state-topic", orchestration.state, *common_options(bootstrap_servers, f"g-{run}-orch"),
            ]
        )  # fmt: skip
        try:
            evaluate_everything(
                prometheus, service, orchestrator, Feed(bootstrap_servers, run_topics.input, orchestration)
            )
        finally:
            service.kill()
            orchestrator.kill()
    finally:
        admin.delete_topics(list(orchestration.all()))


def scraped(server: Prometheus, metric: str, expected: Callable[[], int]) -> None:
    """Wait until Prometheus has scraped the sum of ``metric`` over both services at ``expected()``."""
    wait_until(
        lambda: server.total(metric) >= expected(),
        lambda: f"{metric} scraped at {expected()} (seen {server.total(metric)})",
        every=0.2,
    )


def evaluate_everything(
    prometheus: Callable[[list[str]], Prometheus], service: Process, orchestrator: Process, feed: Feed
) -> None:
    server = prometheus([metrics_address(service), metrics_address(orchestrator)])
    wait_until(lambda: server.total('up{job="uss-stream"}') == 2, "both services scraped", every=0.2)
    for _ in range(2):  # two phases: every counter grows between two scrapes in the rate windows
        feed.send_events(2_000)
        scraped(server, "uss_kafka_events_total", lambda: feed.events)
        wait_until(lambda: feed.decided() >= feed.requests, "every request decided", every=0.3)
        for _ in range(2):  # the reports, then the labels they asked for
            feed.send_feedback()
            scraped(server, "uss_kafka_labels_total", lambda: feed.feedback)
    board = json.loads((OBSERVABILITY / "uss-stream-dashboard.json").read_text())
    panel_queries = [grafana_expr(target["expr"]) for target in queries(board)]
    rules = [
        rule
        for group in yaml.safe_load((OBSERVABILITY / "rules.yml").read_text())["groups"]
        for rule in group["rules"]
    ]
    alert_queries = [with_bool_comparisons(rule["expr"]) for rule in rules]
    empty = [expr for expr in panel_queries + alert_queries if not numbers(server.query(expr))]
    assert not empty, "queries without data:\n" + "\n".join(empty)
    # What the cost panel means: querying every stage costs C_K = 0 + 0.15 + 0.2 per event, and the
    # selector spends less. The counters, the panel's operands, hold exactly that; the ratio of
    # their rates only roughly: rate() extrapolates each series over its own samples, and a
    # per-partition series born with its first batch takes that batch as its baseline, so in this
    # short run the panel's whole-cascade line falls short of C_K by the share of the first batches
    # (0.19 and 0.26 for 0.35 were seen on a loaded machine). The panel must show both lines, the
    # selector's below the whole cascade's.
    exact = server.total("sum(uss_kafka_full_cascade_cost_total) / sum(uss_kafka_decisions_total)")
    assert exact == pytest.approx(0.35, rel=1e-12)
    cost_panel = next(panel for panel in board["panels"] if panel["title"].startswith("Cost per event"))
    selector, whole = (numbers(server.query(grafana_expr(t["expr"]))) for t in cost_panel["targets"])
    assert len(whole) == 1 and 0 < selector[0] < whole[0]
    # The dashboard's job variable: label_values(<metric>, job) is Grafana's call of the label API.
    (variable,) = (v for v in board["templating"]["list"] if v["name"] == "job")
    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["query"]).groups()
    assert server.api(f"label/{label}/values", **{"match[]": metric}) == ["uss-stream"]

    # The rules as Prometheus loaded and evaluated them: each ran without an error.
    def evaluated() -> bool:
        loaded = [rule for group in server.api("rules")["groups"] for rule in group["rules"]]
        return len(loaded) == len(rules) and all(rule["lastEvaluation"] > "2000" for rule in loaded)

    wait_until(evaluated, "every rule evaluated", every=0.2)
    loaded = [rule for group in server.api("rules")["groups"] for rule in group["rules"]]
    assert [(rule["name"], rule["health"], rule.get("lastError", "")) for rule in loaded] == [
        (rule["alert"], "ok", "") for rule in rules
    ]
