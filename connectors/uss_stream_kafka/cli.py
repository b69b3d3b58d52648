"""``uss-stream kafka ...``: run the decision service, create its topics, stream the demo events.

Every option can also be given by an environment variable (named in ``--help``, listed in
:data:`ENVIRONMENT`); a command-line option wins over its variable. Secrets (SASL and SSL key
passwords) are best passed by environment only.

::

    uss-stream kafka create-topics --bootstrap-servers 127.0.0.1:9092 --input-topic IN \\
        --output-topic OUT --dlq-topic DLQ --state-topic STATE --partitions 3
    uss-stream kafka run --bootstrap-servers 127.0.0.1:9092 --input-topic IN --output-topic OUT \\
        --dlq-topic DLQ --state-topic STATE --group-id G --stage-costs 0,0.15,0.2
    uss-stream kafka demo-producer --bootstrap-servers 127.0.0.1:9092 --topic IN --events 10000
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from uss_stream_kafka.exit_codes import StartupInterrupted, one_line_errors

__all__ = ["ENVIRONMENT", "register"]

#: Environment variable of each option, by ``argparse`` destination (:func:`env_name`).
ENVIRONMENT: dict[str, str] = {}

#: Variables read before the naming rule, still read when the ruled one is not set (by destination).
LEGACY_ENVIRONMENT: dict[str, str] = {
    "bootstrap_servers": "KAFKA_BOOTSTRAP_SERVERS",
    "topic": "USS_KAFKA_INPUT_TOPIC",
    "events": "USS_KAFKA_DEMO_EVENTS",
    "rate": "USS_KAFKA_DEMO_RATE",
    "seed": "USS_KAFKA_DEMO_SEED",
}


def env_name(flag: str) -> str:
    """The environment variable of an option, one rule for every subcommand.

    >>> env_name("--checkpoint-every")
    'USS_KAFKA_CHECKPOINT_EVERY'

    """
    return "USS_KAFKA_" + flag.lstrip("-").replace("-", "_").upper()


def _environment(flag: str) -> tuple[str, str, str | None]:
    """``(dest, variable, its value)`` of ``flag``; the legacy variable's value if the ruled one is unset."""
    dest = flag.lstrip("-").replace("-", "_")
    env = env_name(flag)
    ENVIRONMENT[dest] = env
    raw = os.environ.get(env)
    if not raw and dest in LEGACY_ENVIRONMENT:
        raw = os.environ.get(LEGACY_ENVIRONMENT[dest])
    return dest, env, raw


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``kafka`` command and its subcommands."""
    parser = subparsers.add_parser(
        "kafka",
        help="Kafka decision service: run it, create its topics, stream demo events",
        description="Consume events from Kafka, decide each event's depth, produce the decisions.",
    )
    commands = parser.add_subparsers(dest="kafka_command", required=True, metavar="SUBCOMMAND")
    _add_run(commands)
    _add_create_topics(commands)
    _add_demo_producer(commands)
    _add_orchestrate(commands)


# -- options ---------------------------------------------------------------------------------------
def _option(
    parser: argparse._ActionsContainer,
    flag: str,
    *,
    required: bool = False,
    convert: Callable[[str], Any] = str,
    default: Any = None,
    choices: tuple[str, ...] | None = None,
    help: str,
) -> None:
    """An option that falls back to its environment variable (:func:`env_name`).

    The variable's text goes through the same conversion and checks as the option, when the
    subcommand is parsed (argparse converts string defaults).
    """
    dest, env, raw = _environment(flag)
    if raw:
        default = raw
    if choices is not None:
        convert = _one_of(choices)
        help = f"{help}: {', '.join(choices)}"
    parser.add_argument(
        flag,
        dest=dest,
        type=convert,
        default=default,
        required=required and default is None,
        metavar=dest.upper() if choices is None else "{" + ",".join(choices) + "}",
        help=f"{help} [env {env}{_legacy(dest)}]",
    )


def _legacy(dest: str) -> str:
    return f" or {LEGACY_ENVIRONMENT[dest]}" if dest in LEGACY_ENVIRONMENT else ""


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"must be one of {', '.join(choices)}, got {text!r}")
        return text

    return convert


def _flag(parser: argparse._ActionsContainer, flag: str, *, help: str) -> None:
    """A boolean flag that its environment variable (``1/true/yes``) can also set."""
    dest, env, raw = _environment(flag)
    default = (raw or "").strip().lower() in ("1", "true", "yes", "on")
    parser.add_argument(flag, dest=dest, action="store_true", default=default, help=f"{help} [env {env}]")


#: Codecs of ``--compression``; input in any of them is decoded whatever this is.
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


def _compression(codec: str) -> dict[str, Any]:
    """kafka-python producer settings of ``--compression`` (``none``: the client's default)."""
    return {} if codec == "none" else {"compression_type": codec}


def _costs(text: str) -> list[float]:
    """``"0,0.15,0.2"`` -> ``[0.0, 0.15, 0.2]``."""
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"stage costs must be comma-separated numbers, got {text!r}"
        ) from None


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not -1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port 0..65535 (or -1: none), got {text}")
    return value


def _spec(text: str) -> str:
    """A ``--policy`` spec, checked by the library's one parser (:mod:`uss_stream.policies.specs`)."""
    from uss_stream.policies.specs import parse_spec

    try:
        parse_spec(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--policy ")) from None
    return text


def _add_policy(group: argparse._ActionsContainer) -> None:
    """``--policy`` and its shorthand ``--alpha`` (``run`` and ``orchestrate``)."""
    from uss_stream.policies.specs import DEFAULT_POLICY

    _option(
        group,
        "--policy",
        convert=_spec,
        help="the depth-selection policy, as uss-stream replay takes it: uss-kl-ucb[:alpha=A], "
        "uss-ucb[:alpha=A], uss-ts[:seed=S], uee-ucb[:alpha=A], alg2, fixed:depth=D; the learning "
        f"ones also take discount=G (default {DEFAULT_POLICY}, the library's default)",
    )
    _option(
        group,
        "--alpha",
        convert=_positive_float,
        help="shorthand for --policy uss-ucb:alpha=ALPHA (> 0)",
    )


def _policy(args: argparse.Namespace) -> str:
    """The policy spec of ``--policy`` / ``--alpha`` (default: the library's default policy)."""
    from uss_stream.policies.specs import DEFAULT_POLICY

    if args.policy is not None and args.alpha is not None:
        raise ValueError(
            f"give --policy or --alpha (shorthand for --policy uss-ucb:alpha=A), not both: "
            f"got --policy {args.policy} and --alpha {args.alpha}"
        )
    if args.alpha is not None:
        return f"uss-ucb:alpha={args.alpha!r}"
    return args.policy or DEFAULT_POLICY


def _add_connection(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection and security")
    _option(group, "--bootstrap-servers", required=True, help="host:port[,host:port]")
    _option(group, "--client-id", default="uss-stream", help="client id prefix")
    _option(
        group,
        "--security-protocol",
        default="PLAINTEXT",
        choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        help="protocol to talk to the brokers",
    )
    _option(group, "--ssl-cafile", help="CA certificate (PEM) to verify the brokers")
    _option(group, "--ssl-certfile", help="client certificate (PEM) for mutual TLS")
    _option(group, "--ssl-keyfile", help="client private key (PEM)")
    _option(group, "--ssl-password", help="password of the private key")
    _option(group, "--ssl-crlfile", help="certificate revocation list (PEM)")
    _flag(
        group,
        "--no-ssl-check-hostname",
        help="skip host name verification",
    )
    _option(
        group,
        "--sasl-mechanism",
        choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"),
        help="SASL mechanism",
    )
    _option(group, "--sasl-username", help="SASL user")
    _option(group, "--sasl-password", help="SASL password (prefer the variable)")
    _option(
        group,
        "--sasl-kerberos-service-name",
        default="kafka",
        help="Kerberos service name (GSSAPI)",
    )
    group.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any kafka-python client setting, for every client (repeatable), e.g. request_timeout_ms=60000",
    )


def _client_config(args: argparse.Namespace) -> Any:
    from uss_stream_kafka.config import ClientConfig, merge_options

    return ClientConfig(
        bootstrap_servers=args.bootstrap_servers,
        client_id=args.client_id,
        security_protocol=args.security_protocol,
        ssl_cafile=args.ssl_cafile,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
        ssl_password=args.ssl_password,
        ssl_crlfile=args.ssl_crlfile,
        ssl_check_hostname=not args.no_ssl_check_hostname,
        sasl_mechanism=args.sasl_mechanism,
        sasl_username=args.sasl_username,
        sasl_password=args.sasl_password,
        sasl_kerberos_service_name=args.sasl_kerberos_service_name,
        options=merge_options(args.kafka_option),
    )


def _add_consumer_options(
    parser: argparse.ArgumentParser, group: argparse._ArgumentGroup | None = None
) -> None:
    """Group membership and pass-through client settings (``run`` and ``orchestrate``)."""
    group = group or parser.add_argument_group("consumer group and clients")
    _option(
        group,
        "--group-instance-id",
        help="static group membership id (a restart takes its partitions back at once)",
    )
    _option(
        group,
        "--session-timeout-ms",
        convert=_positive_int,
        default=45_000,
        help="consumer group session timeout",
    )
    group.add_argument(
        "--consumer-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="kafka-python consumer setting",
    )
    group.add_argument(
        "--producer-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="kafka-python producer setting",
    )


def _add_topics(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("topics")
    _option(group, "--input-topic", required=True, help="events to decide")
    _option(group, "--output-topic", required=True, help="decisions")
    _option(group, "--dlq-topic", required=True, help="dead letters")
    _option(group, "--state-topic", required=True, help="learner checkpoints (compacted)")
    _option(group, "--labels-topic", help="labelled events (features mode only)")


def _topics(args: argparse.Namespace) -> Any:
    from uss_stream_kafka.topics import Topics

    return Topics(
        input=args.input_topic,
        output=args.output_topic,
        dead_letter=args.dlq_topic,
        state=args.state_topic,
        labels=args.labels_topic,
    )


def _add_logging(parser: argparse.ArgumentParser) -> None:
    _option(
        parser,
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log level of the service (kafka-python logs at WARNING unless DEBUG)",
    )


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("kafka").setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)


# -- run -------------------------------------------------------------------------------------------
def _add_run(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "run",
        help="run the decision service",
        description="Consume events, decide each event's depth (--policy), produce decisions; "
        "dead-letter invalid events; checkpoint the learners to the compacted state topic.",
    )
    _add_connection(parser)
    _add_topics(parser)
    job = parser.add_argument_group("processing")
    _option(job, "--group-id", required=True, help="consumer group")
    _option(
        job,
        "--mode",
        default="outputs",
        choices=("outputs", "features"),
        help="outputs: events carry the stage outputs; features: the service runs a cascade",
    )
    _option(job, "--stage-costs", convert=_costs, help="c_1,...,c_K (outputs mode)")
    _add_policy(job)
    _option(
        job,
        "--cascade-factory",
        help="package.module:function returning a CascadeClassifier (features mode)",
    )
    _option(
        job,
        "--max-input-bytes",
        convert=_positive_int,
        default=256 * 1024,
        help="larger input values are dead-lettered as oversize",
    )
    delivery = parser.add_argument_group("delivery, checkpoints and lifecycle")
    _option(
        delivery,
        "--guarantee",
        default="at-least-once",
        choices=("at-least-once", "exactly-once"),
        help="delivery guarantee (exactly-once: transactions; readers use read_committed)",
    )
    _flag(
        delivery,
        "--shared-learning",
        help="outputs mode: decide on the pooled counts of every input partition (from the checkpoints)",
    )
    _flag(
        delivery,
        "--no-rebuild-models",
        help="features mode: do not re-learn the labels log on restore (the stages start untrained)",
    )
    _option(
        delivery,
        "--commit-interval",
        convert=_non_negative_float,
        default=1.0,
        help="seconds between commits (flush first); 0 = after every batch",
    )
    _option(
        delivery,
        "--commit-every",
        convert=_non_negative_int,
        default=0,
        help="also commit after this many records (0 = off)",
    )
    _option(
        delivery,
        "--checkpoint-interval",
        convert=_non_negative_float,
        default=5.0,
        help="seconds between learner checkpoints (0 = off)",
    )
    _option(
        delivery,
        "--checkpoint-every",
        convert=_non_negative_int,
        default=0,
        help="also checkpoint after this many records (0 = off)",
    )
    _option(
        delivery,
        "--max-poll-records",
        convert=_positive_int,
        default=5000,
        help="records per batch",
    )
    _option(
        delivery,
        "--auto-offset-reset",
        default="earliest",
        choices=("earliest", "latest"),
        help="where a new consumer group starts",
    )
    _option(
        delivery,
        "--exit-when-idle",
        convert=_positive_float,
        help="exit 0 (after commit and checkpoint) once no record arrived for this many seconds "
        "after the partitions were assigned, and every one is read to its end offset",
    )
    _option(
        delivery,
        "--compression",
        default="none",
        choices=COMPRESSIONS,
        help="compression of the produced records (decisions, dead letters, checkpoints)",
    )
    _add_consumer_options(parser, delivery)
    ops = parser.add_argument_group("metrics and health")
    _option(
        ops,
        "--metrics-host",
        default="0.0.0.0",
        help="address of /metrics, /healthz",
    )
    _option(
        ops,
        "--metrics-port",
        convert=_port,
        default=9108,
        help="port of /metrics and /healthz (0 = any free port, -1 = no endpoint)",
    )
    _add_logging(parser)
    parser.set_defaults(handler=run)


@one_line_errors("run")
def run(args: argparse.Namespace) -> int:
    """``uss-stream kafka run``: serve until SIGTERM/SIGINT (or idle); exit 0 after a clean stop.

    Startup and configuration errors print one line and exit with the codes of
    :mod:`uss_stream_kafka.exit_codes`.
    """
    from uss_stream_kafka.app import Application
    from uss_stream_kafka.config import merge_options
    from uss_stream_kafka.processing import FeaturesProcessor, OutputsProcessor

    _setup_logging(args.log_level)
    if args.mode == "outputs":
        if not args.stage_costs:
            raise ValueError("outputs mode needs --stage-costs c_1,...,c_K")
        if args.cascade_factory:
            raise ValueError("--cascade-factory is for features mode (--mode features)")
        processor: Any = OutputsProcessor(args.stage_costs, policy=_policy(args))
        if args.shared_learning and processor.new_learner().policy.discount is not None:
            raise ValueError(
                f"--shared-learning pools plain counts; --policy {args.policy} discounts them: "
                "give one or the other"
            )
    else:
        if not args.cascade_factory:
            raise ValueError("features mode needs --cascade-factory package.module:function")
        if args.policy is not None or args.alpha is not None:
            raise ValueError(
                "--policy and --alpha are for outputs mode: in features mode the cascade factory "
                "builds the cascade and its policy (CascadeClassifier(policy=...))"
            )
        processor = FeaturesProcessor(args.cascade_factory)
    client = _client_config(args)
    if not _security_checked(client):
        return 7
    app = Application(
        client,
        group_id=args.group_id,
        topics=_topics(args),
        commit_interval=args.commit_interval,
        commit_every=args.commit_every,
        checkpoint_interval=args.checkpoint_interval,
        checkpoint_every=args.checkpoint_every,
        max_input_bytes=args.max_input_bytes,
        max_poll_records=args.max_poll_records,
        auto_offset_reset=args.auto_offset_reset,
        group_instance_id=args.group_instance_id,
        guarantee=args.guarantee,
        shared_learning=args.shared_learning,
        rebuild_models=not args.no_rebuild_models,
        exit_when_idle=args.exit_when_idle,
        consumer_options={
            "session_timeout_ms": args.session_timeout_ms,
            **merge_options(args.consumer_option),
        },
        producer_options={**_compression(args.compression), **merge_options(args.producer_option)},
        http_host=args.metrics_host,
        http_port=None if args.metrics_port < 0 else args.metrics_port,
    )

    def _stop(signum: int, frame: Any) -> None:
        if app.health()[1]["status"] in ("created", "starting"):
            raise StartupInterrupted(signum)  # a blocking connect or restore: do not wait for it
        logging.getLogger("uss_stream_kafka").info(
            "%s: finishing the batch, then stopping", signal.Signals(signum).name
        )
        app.stop()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    logging.getLogger("uss_stream_kafka").info("starting: connecting to %s", args.bootstrap_servers)
    try:
        summary = app.run(processor)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    dead = sum(summary.dead_letters.values())
    print(
        f"kafka run: {summary.events} events, {summary.decisions} decisions "
        f"(depths {summary.depth_counts}), {dead} dead letters, {summary.replayed} replayed, "
        f"{summary.checkpoints} checkpoints, {summary.commits} commits in {summary.seconds:.1f}s",
        file=sys.stderr,
    )
    return 0


# -- orchestrate -----------------------------------------------------------------------------------
def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _add_orchestrate(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "orchestrate",
        help="orchestration mode: decide requests now, learn from the sensors' later reports",
        description="Consume requests, produce decisions (depth, stages, cost), join the sensors' "
        "reports (co-partitioned with the requests by id) to the pending decisions by id.",
    )
    _add_connection(parser)
    topics = parser.add_argument_group("topics")
    _option(topics, "--requests-topic", required=True, help="requests")
    _option(topics, "--reports-topic", required=True, help="sensor reports (co-partitioned by id)")
    _option(topics, "--decisions-topic", required=True, help="decisions")
    _option(topics, "--dlq-topic", required=True, help="dead letters")
    _option(topics, "--state-topic", required=True, help="checkpoints (compacted)")
    job = parser.add_argument_group("orchestration")
    _option(job, "--group-id", required=True, help="consumer group")
    _option(job, "--stage-costs", convert=_costs, required=True, help="c_1,...,c_K")
    _option(job, "--stage-names", convert=_names, help="names (default stage1..K)")
    _add_policy(job)
    _option(
        job,
        "--max-age-decisions",
        convert=_positive_int,
        help="expire a pending decision after that many later decisions",
    )
    _option(
        job,
        "--max-age-seconds",
        convert=_positive_float,
        help="expire a pending decision after that many seconds",
    )
    _option(
        job,
        "--checkpoint-every",
        convert=_non_negative_int,
        default=10_000,
        help="checkpoint and commit after this many records (0 = off)",
    )
    _option(
        job,
        "--checkpoint-interval",
        convert=_non_negative_float,
        default=5.0,
        help="seconds between checkpoints and commits (0 = off; with both off, only at the stop)",
    )
    _option(
        job,
        "--guarantee",
        default="at-least-once",
        choices=("at-least-once", "exactly-once"),
        help="delivery guarantee (exactly-once: transactions; readers use read_committed)",
    )
    _option(
        job,
        "--exit-when-idle",
        convert=_positive_float,
        help="stop after S seconds without records, once the partitions are assigned and read to their end",
    )
    _option(
        job,
        "--max-input-bytes",
        convert=_positive_int,
        default=1 << 20,
        help="larger requests and reports are dead-lettered as oversize",
    )
    _add_consumer_options(parser)
    ops = parser.add_argument_group("metrics and health")
    _option(ops, "--metrics-host", default="0.0.0.0", help="address of /metrics, /healthz")
    _option(
        ops,
        "--metrics-port",
        convert=_port,
        default=9108,
        help="port of /metrics and /healthz (0 = any free port, -1 = no endpoint)",
    )
    _add_logging(parser)
    parser.set_defaults(handler=orchestrate)


@one_line_errors("orchestrate")
def orchestrate(args: argparse.Namespace) -> int:
    """``uss-stream kafka orchestrate``: the runtime with an orchestration processor.

    See ``docs/orchestration.md``; errors print one line, as :func:`run`'s.
    """
    from uss_stream_kafka.app import Application
    from uss_stream_kafka.config import merge_options
    from uss_stream_kafka.orchestrating import (
        OrchestrationProcessor,
        OrchestrationSummary,
        OrchestrationTopics,
    )

    _setup_logging(args.log_level)
    processor = OrchestrationProcessor(
        args.stage_costs,
        stage_names=args.stage_names,
        policy=_policy(args),
        max_age_decisions=args.max_age_decisions,
        max_age_seconds=args.max_age_seconds,
    )
    topics = OrchestrationTopics(
        args.requests_topic, args.reports_topic, args.decisions_topic, args.dlq_topic, args.state_topic
    )
    client = _client_config(args)
    if not _security_checked(client):
        return 7
    app = Application(
        client,
        group_id=args.group_id,
        topics=topics.as_topics(),
        # Commits only at the checkpoints: both cover the same offsets of both topics.
        commit_interval=float("inf"),
        checkpoint_interval=args.checkpoint_interval,
        checkpoint_every=args.checkpoint_every,
        max_input_bytes=args.max_input_bytes,
        group_instance_id=args.group_instance_id,
        guarantee=args.guarantee,
        exit_when_idle=args.exit_when_idle,
        consumer_options={
            "session_timeout_ms": args.session_timeout_ms,
            **merge_options(args.consumer_option),
        },
        # A decision is awaited: linger 2 ms rather than the throughput default.
        producer_options={"linger_ms": 2, **merge_options(args.producer_option)},
        http_host=args.metrics_host,
        http_port=None if args.metrics_port < 0 else args.metrics_port,
    )

    def _stop(signum: int, frame: Any) -> None:
        if app.health()[1]["status"] in ("created", "starting"):
            raise StartupInterrupted(signum)  # a blocking connect or restore: do not wait for it
        app.stop()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        app.run(processor)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    summary = OrchestrationSummary.of(app)
    dead = {reason: n for reason, n in summary.dead_letters.items() if n}
    print(
        f"kafka orchestrate: {summary.requests} requests, {summary.decisions} decisions "
        f"(depths {summary.depth_counts}), {summary.reports} reports, {summary.applied} applied, "
        f"{summary.pending} pending, {summary.expired} expired, dead letters {dead}, "
        f"{summary.checkpoints} checkpoints in {summary.seconds:.1f}s",
        file=sys.stderr,
    )
    return 0


def _security_checked(client: Any) -> bool:
    """TLS and SASL work with the brokers; else one line on stderr (the caller exits 7)."""
    from uss_stream_kafka.security import SecurityCheckError, check_security

    try:
        check_security(client)
    except SecurityCheckError as error:
        print(f"uss-stream kafka run: error: {error}", file=sys.stderr)
        return False
    return True


# -- create-topics ---------------------------------------------------------------------------------
def _add_create_topics(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "create-topics",
        help="create the input, output, dead-letter (and labels) topics and the compacted state topic",
    )
    _add_connection(parser)
    _add_topics(parser)
    _option(parser, "--partitions", convert=_positive_int, default=1, help="partitions")
    _option(
        parser,
        "--replication-factor",
        convert=_positive_int,
        default=1,
        help="replicas per partition",
    )
    _option(
        parser,
        "--state-partitions",
        convert=_positive_int,
        default=1,
        help="partitions of the state topic",
    )
    parser.set_defaults(handler=create_topics_command)


@one_line_errors("create-topics")
def create_topics_command(args: argparse.Namespace) -> int:
    """``uss-stream kafka create-topics``: prints one line per topic (created or exists)."""
    from kafka import KafkaAdminClient

    from uss_stream_kafka.topics import create_topics

    topics = _topics(args)
    admin = KafkaAdminClient(**_client_config(args).kafka_kwargs("admin"))
    try:
        outcome = create_topics(
            admin,
            topics,
            partitions=args.partitions,
            replication_factor=args.replication_factor,
            state_partitions=args.state_partitions,
        )
    finally:
        admin.close()
    for name in topics.all():
        print(f"{name}: {outcome[name]}")
    return 0


# -- demo-producer ---------------------------------------------------------------------------------
def _add_demo_producer(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo-producer",
        help="stream the bundled PIMA events (stage outputs or features)",
        description="Stream PIMA diabetes events. Outputs mode: the per-stage predictions of a "
        "three-stage cascade trained offline (scikit-learn logistic regressions on growing, "
        "cost-ordered feature subsets). Features mode: the features (and labels to --labels-topic).",
    )
    _add_connection(parser)
    _option(parser, "--topic", required=True, help="topic to write the events to")
    _option(
        parser,
        "--mode",
        default="outputs",
        choices=("outputs", "features"),
        help="what the events carry",
    )
    _option(parser, "--labels-topic", help="features mode: write labelled copies here")
    _option(
        parser,
        "--events",
        convert=_non_negative_int,
        default=10_000,
        help="how many",
    )
    _option(
        parser,
        "--rate",
        convert=_non_negative_float,
        default=0.0,
        help="events per second (0 = as fast as possible)",
    )
    _option(parser, "--seed", convert=int, default=0, help="shuffle seed")
    _add_logging(parser)
    parser.set_defaults(handler=demo_producer_command)


@one_line_errors("demo-producer")
def demo_producer_command(args: argparse.Namespace) -> int:
    """``uss-stream kafka demo-producer``."""
    from kafka import KafkaProducer

    from uss_stream_kafka.demo import pima_stage_costs, produce_demo

    _setup_logging(args.log_level)
    if args.labels_topic and args.mode != "features":
        raise ValueError("--labels-topic is for --mode features")
    producer = KafkaProducer(**_client_config(args).kafka_kwargs("demo-producer"), linger_ms=10)
    try:
        sent = produce_demo(
            producer,
            args.topic,
            mode=args.mode,
            events=args.events,
            rate=args.rate,
            labels_topic=args.labels_topic,
            seed=args.seed,
        )
    finally:
        producer.close()
    costs = ",".join(f"{c:.4g}" for c in pima_stage_costs())
    print(
        f"demo-producer: {sent} {args.mode} events to {args.topic} (PIMA stage costs {costs})",
        file=sys.stderr,
    )
    return 0
