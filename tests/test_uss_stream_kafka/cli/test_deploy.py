"""The deployment files (Docker, Compose, Kubernetes) parse and run real ``uss-stream`` command lines.

Docker does not run here: the files are parsed, and every command line they run goes through the
real argparse parser, with the environment the deployment gives it.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from uss_stream.commands.cli import build_parser
from uss_stream_kafka import Application
from uss_stream_kafka.cli.commands import ENVIRONMENT

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"


def parse(command: list[str]) -> Any:
    """Parse a command line with the real parser; a bad option fails the test (SystemExit)."""
    try:
        return build_parser().parse_args(command)
    except SystemExit as exit:
        pytest.fail(f"uss-stream rejects {command}: exit {exit.code}")


def clear_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in {*ENVIRONMENT.values(), "KAFKA_BOOTSTRAP_SERVERS"}:
        monkeypatch.delenv(name, raising=False)


RUN_MINIMUM = ["kafka", "run", "--bootstrap-servers", "b:9092", "--input-topic", "i", "--output-topic", "o",
               "--dlq-topic", "d", "--state-topic", "s", "--group-id", "g"]  # fmt: skip


@pytest.fixture
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


@pytest.fixture
def k8s() -> dict[str, dict[str, Any]]:
    documents = [
        doc
        for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
    ]
    return {doc["kind"]: doc for doc in documents}


def pod_command(k8s: dict[str, dict[str, Any]], kind: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The command line of the one container of ``k8s[kind]``'s pod, parsed with the environment
    Kubernetes gives it (the ConfigMap's variables, then the container's own ``env``)."""
    (container,) = k8s[kind]["spec"]["template"]["spec"]["containers"]
    sources = {ref.get("configMapRef", {}).get("name") for ref in container["envFrom"]}
    assert k8s["ConfigMap"]["metadata"]["name"] in sources
    config = k8s["ConfigMap"]["data"]
    environment = {**config, **{item["name"]: item["value"] for item in container.get("env", [])}}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    # Kubernetes expands $(VAR) in args from the container's environment.
    command = [re.sub(r"\$\((\w+)\)", lambda m: environment[m.group(1)], arg) for arg in container["args"]]
    return parse(command)


def test_compose_runs_a_kraft_apache_kafka_and_real_commands(compose, monkeypatch):
    clear_environment(monkeypatch)
    services = compose["services"]
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:4.")
    assert set(kafka["environment"]["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "PLAINTEXT://kafka:9092" in kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"]

    parsed = {
        name: parse(services[name]["command"]) for name in ("create-topics", "service", "demo-producer")
    }
    topics, run, producer = parsed["create-topics"], parsed["service"], parsed["demo-producer"]
    assert (topics.kafka_command, run.kafka_command, producer.kafka_command) == (
        "create-topics",
        "run",
        "demo-producer",
    )
    assert {args.bootstrap_servers for args in parsed.values()} == {"kafka:9092"}
    assert (run.input_topic, run.output_topic, run.dlq_topic, run.state_topic) == (
        topics.input_topic,
        topics.output_topic,
        topics.dlq_topic,
        topics.state_topic,
    )
    assert producer.input_topic == run.input_topic and producer.mode == run.mode == "outputs"
    assert len(run.stage_costs) == 3
    assert services["service"]["ports"] == [f"{run.metrics_port}:{run.metrics_port}"]
    assert services["service"]["stop_signal"] == "SIGTERM"
    for name in ("create-topics", "service", "demo-producer"):
        assert services[name]["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert services["service"]["depends_on"]["create-topics"]["condition"] == "service_completed_successfully"


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """``(KEYWORD, arguments)`` of each instruction, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, arguments = (pending + line).partition(" ")
        instructions.append((keyword.upper(), " ".join(arguments.split())))
        pending = ""
    return instructions


def test_the_dockerfile_installs_the_package_and_serves_health_on_the_metrics_port(monkeypatch):
    clear_environment(monkeypatch)
    instructions = dockerfile_instructions((DEPLOY / "Dockerfile").read_text())
    found = dict(instructions)  # the last of each keyword: the runtime stage
    for keyword, arguments in instructions:
        if keyword == "COPY" and not arguments.startswith("--from"):
            for source in arguments.split()[:-1]:
                assert (ROOT / source).exists(), f"COPY source {source} is not in the repository"
    assert json.loads(found["ENTRYPOINT"]) == ["uss-stream"]
    parse(json.loads(found["CMD"])[:2] + RUN_MINIMUM[2:])
    default_port = build_parser().parse_args(RUN_MINIMUM).metrics_port
    assert found["EXPOSE"] == str(default_port)
    assert f"127.0.0.1:{default_port}/healthz" in found["HEALTHCHECK"]
    assert found["STOPSIGNAL"] == "SIGTERM"
    assert found["USER"] != "root"


def test_the_kubernetes_deployment_runs_the_service_configured_by_its_configmap(k8s, monkeypatch):
    clear_environment(monkeypatch)
    config = k8s["ConfigMap"]["data"]
    known = {*ENVIRONMENT.values(), "KAFKA_BOOTSTRAP_SERVERS"}
    assert set(config) <= known, f"unknown variables: {set(config) - known}"
    assert not {"USS_KAFKA_SASL_PASSWORD", "USS_KAFKA_SSL_PASSWORD"} & set(config), (
        "secrets belong in a Secret"
    )

    pod = k8s["Deployment"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    args = pod_command(k8s, "Deployment", monkeypatch)
    assert (args.kafka_command, args.mode, args.group_id) == ("run", "outputs", config["USS_KAFKA_GROUP_ID"])
    assert args.stage_costs == [float(c) for c in config["USS_KAFKA_STAGE_COSTS"].split(",")]
    assert args.bootstrap_servers == config["USS_KAFKA_BOOTSTRAP_SERVERS"]

    (port,) = container["ports"]
    assert port["containerPort"] == args.metrics_port
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert pod["metadata"]["labels"] == k8s["Deployment"]["spec"]["selector"]["matchLabels"]
    assert pod["spec"]["terminationGracePeriodSeconds"] >= 30


def test_the_metrics_service_selects_the_pods_and_their_metrics_port(k8s):
    service = k8s["Service"]["spec"]
    pod = k8s["Deployment"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert service["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = service["ports"]
    assert port["targetPort"] == container["ports"][0]["name"]
    assert port["port"] == container["ports"][0]["containerPort"]


def test_the_kubernetes_job_creates_the_topics_the_deployment_uses(k8s, monkeypatch):
    clear_environment(monkeypatch)
    job = k8s["Job"]
    topics = pod_command(k8s, "Job", monkeypatch)
    clear_environment(monkeypatch)
    run = pod_command(k8s, "Deployment", monkeypatch)
    assert topics.kafka_command == "create-topics"
    assert topics.bootstrap_servers == run.bootstrap_servers
    assert (topics.input_topic, topics.output_topic, topics.dlq_topic, topics.state_topic) == (
        run.input_topic,
        run.output_topic,
        run.dlq_topic,
        run.state_topic,
    )
    assert job["apiVersion"] == "batch/v1"
    assert job["spec"]["template"]["spec"]["restartPolicy"] in {"OnFailure", "Never"}
    # Its pod is not one of the service's: the metrics Service and the ScaledObject leave it alone.
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert not k8s["Service"]["spec"]["selector"].items() <= labels.items()
    assert not k8s["Deployment"]["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_scaled_object_scales_the_deployment_on_its_groups_lag_up_to_one_replica_per_partition(
    k8s, monkeypatch
):
    clear_environment(monkeypatch)
    scaled = k8s["ScaledObject"]
    config = k8s["ConfigMap"]["data"]
    assert scaled["apiVersion"].startswith("keda.sh/")
    assert scaled["spec"]["scaleTargetRef"]["name"] == k8s["Deployment"]["metadata"]["name"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    assert (meta["bootstrapServers"], meta["consumerGroup"], meta["topic"]) == (
        config["USS_KAFKA_BOOTSTRAP_SERVERS"],
        config["USS_KAFKA_GROUP_ID"],
        config["USS_KAFKA_INPUT_TOPIC"],
    )
    partitions = pod_command(k8s, "Job", monkeypatch).partitions  # the input topic's, as the Job creates it
    replicas = scaled["spec"]
    assert replicas["maxReplicaCount"] == partitions  # never more replicas than partitions to hold
    assert 1 <= replicas["minReplicaCount"] <= partitions  # never scaled to zero, never above the max
    assert meta["allowIdleConsumers"] == "false"  # KEDA's own cap: never more replicas than partitions
    default_reset = inspect.signature(Application).parameters["auto_offset_reset"].default
    assert meta["offsetResetPolicy"] == default_reset
    assert int(meta["lagThreshold"]) > 0


def test_compose_scrapes_the_service_with_the_alert_rules_and_provisions_the_dashboard(compose, monkeypatch):
    clear_environment(monkeypatch)
    services = compose["services"]
    metrics_port = parse(services["service"]["command"]).metrics_port
    mounts = {
        name: dict(volume.removesuffix(":ro").split(":") for volume in services[name]["volumes"])
        for name in ("prometheus", "grafana")
    }
    for sources in mounts.values():
        for source in sources:
            assert (DEPLOY / source).is_file(), f"{source} is not in deploy/"
    prometheus = {target: source for source, target in mounts["prometheus"].items()}
    config = yaml.safe_load((DEPLOY / prometheus["/etc/prometheus/prometheus.yml"]).read_text())
    assert f"/etc/prometheus/{config['rule_files'][0]}" in prometheus
    (job,) = config["scrape_configs"]
    (discovery,) = job["dns_sd_configs"]
    assert (job["job_name"], discovery["names"], discovery["port"]) == (
        "uss-stream",
        ["service"],
        metrics_port,
    )
    grafana = set(mounts["grafana"])
    assert {"./observability/uss-stream-dashboard.json", "./observability/grafana/datasource.yml"} <= grafana
    (source,) = yaml.safe_load((DEPLOY / "observability/grafana/datasource.yml").read_text())["datasources"]
    assert source["url"] == "http://prometheus:9090" and source["type"] == "prometheus"


def test_the_kubernetes_scrape_config_keeps_the_annotated_pods_of_the_deployment(k8s):
    config = yaml.safe_load((DEPLOY / "observability/prometheus-kubernetes.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "uss-stream"  # the job rules.yml alerts on
    pod = k8s["Deployment"]["spec"]["template"]["metadata"]
    keep_labels, keep_annotation = (rule for rule in job["relabel_configs"] if rule.get("action") == "keep")
    # Kubernetes service discovery names a pod label __meta_kubernetes_pod_label_<name, non-word -> _>.
    meta = {"__meta_kubernetes_pod_label_" + re.sub(r"\W", "_", k): v for k, v in pod["labels"].items()}
    values = [meta[name] for name in keep_labels["source_labels"]]
    assert re.fullmatch(keep_labels["regex"], ";".join(values))
    assert pod["annotations"]["prometheus.io/scrape"] == keep_annotation["regex"]
    port_rule = next(rule for rule in job["relabel_configs"] if rule.get("target_label") == "__address__")
    port = pod["annotations"]["prometheus.io/port"]
    address = re.sub(port_rule["regex"], port_rule["replacement"].replace("$", "\\"), f"10.0.0.7:80;{port}")
    assert address == f"10.0.0.7:{port}"
