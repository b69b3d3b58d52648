"""``uss-stream kafka ...``: run the decision service, create its topics, stream the demo events.

Every option of every subcommand is a setting of :class:`~uss_stream_kafka.cli.settings.KafkaSettings`,
added here from its one table (:data:`~uss_stream_kafka.cli.settings.SETTINGS`): ``--foo-bar`` falls back
to the variable ``USS_KAFKA_FOO_BAR`` (named in ``--help``, listed in :data:`ENVIRONMENT`), the
variable to the default. Secrets (SASL and SSL key passwords) are best passed by environment only.

::

    uss-stream kafka create-topics --bootstrap-servers 127.0.0.1:9092 --input-topic IN \\
        --output-topic OUT --dlq-topic DLQ --state-topic STATE --partitions 3
    uss-stream kafka run --bootstrap-servers 127.0.0.1:9092 --input-topic IN --output-topic OUT \\
        --dlq-topic DLQ --state-topic STATE --group-id G --stage-costs 0,0.15,0.2
    uss-stream kafka demo-producer --bootstrap-servers 127.0.0.1:9092 --input-topic IN --events 10000
    uss-stream kafka status --bootstrap-servers 127.0.0.1:9092 --state-topic STATE --group-id G [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import functools
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from uss_stream_kafka.cli.exit_codes import one_line_errors
from uss_stream_kafka.cli.settings import (
    COMMON_GROUP,
    SETTINGS,
    KafkaSettings,
    Setting,
    default,
    deprecated,
    env_name,
)
from uss_stream_kafka.exceptions import StartupInterrupted

__all__ = ["ENVIRONMENT", "LEGACY_ENVIRONMENT", "env_name", "register"]

#: Environment variable of each setting, by ``argparse`` destination (the naming rule, :func:`env_name`).
ENVIRONMENT: dict[str, str] = {item.name: item.env for item in SETTINGS}

#: Deprecated variables still read (with a warning) when the ruled one is not set, by destination.
LEGACY_ENVIRONMENT: dict[str, tuple[str, ...]] = {
    item.name: (*(env_name(alias) for alias in item.aliases), *filter(None, [item.legacy_env]))
    for item in SETTINGS
    if item.aliases or item.legacy_env
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``kafka`` command and its subcommands."""
    parser = subparsers.add_parser(
        "kafka",
        help="Kafka decision service: run it, create its topics, stream demo events",
        description="Consume events from Kafka, decide each event's depth, produce the decisions.",
    )
    commands = parser.add_subparsers(dest="kafka_command", required=True, metavar="SUBCOMMAND")
    for name in ("run", "create-topics", "demo-producer", "orchestrate", "status"):
        handler, help_text, description = _SUBCOMMANDS[name]
        command = commands.add_parser(name, help=help_text, description=description)
        add_settings(command, name)
        command.set_defaults(handler=handler)


#: Each subcommand's handler and ``--help`` texts, by name (:func:`_subcommand`).
_SUBCOMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str, str | None]] = {}


def _subcommand(
    name: str, help_text: str, description: str | None = None
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Make the decorated handler ``uss-stream kafka NAME``, with ``help_text`` and ``description``.

    Its options are the settings of ``name`` (:func:`add_settings`); a known error it raises
    becomes one line on stderr and its exit code (:func:`~uss_stream_kafka.cli.exit_codes.one_line_errors`).
    """

    def decorate(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        handler = one_line_errors(name)(handler)
        _SUBCOMMANDS[name] = (handler, help_text, description)
        return handler

    return decorate


# -- options, from the settings table ---------------------------------------------------------------
class _EnvText(str):
    """The text of a variable, as an argparse default: converted (and checked) like a flag's text."""

    source: str
    old: bool


def _environment(item: Setting, command: str) -> _EnvText | None:
    """The text of the setting's variable; else of a deprecated one (aliases' variables, legacy)."""
    olds = [env_name(alias) for alias, commands in item.aliases.items() if command in commands]
    for name in [item.env, *olds, *filter(None, [item.legacy_env])]:
        raw = os.environ.get(name)
        if raw:
            text = _EnvText(raw)
            text.source, text.old = name, name != item.env
            return text
    return None


def _typed(item: Setting) -> Callable[[str], Any]:
    """argparse ``type`` of a setting: its conversion; an error names the variable it came from."""

    def convert(text: str) -> Any:
        if isinstance(text, _EnvText) and text.old:
            deprecated(text.source, item)
        try:
            if item.choices is not None and text not in item.choices:
                raise ValueError(f"must be one of {', '.join(item.choices)}, got {text!r}")
            return item.convert(str(text))
        except ValueError as error:
            origin = f"from {text.source}" if isinstance(text, _EnvText) else f"env {item.env}"
            raise argparse.ArgumentTypeError(f"{error} ({origin})") from None

    convert.__name__ = item.name
    return convert


class _Deprecated(argparse.Action):
    """A deprecated spelling of a flag (its setting is ``const``): stores the value and warns."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        deprecated(str(option_string), self.const)
        setattr(namespace, self.dest, values)


class _Append(argparse.Action):
    """A repeatable flag; the flags replace the variable's items (a flag wins over its variable)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        current = getattr(namespace, self.dest)
        items = [] if current is self.default else list(current)
        setattr(namespace, self.dest, [*items, values])


def add_settings(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the options of every setting ``command`` takes, in their ``--help`` sections.

    The section :data:`~uss_stream_kafka.cli.settings.COMMON_GROUP` comes first, then the others
    in the table's order; the usage line names the required options only.
    """
    taken = [item for item in SETTINGS if command in item.commands]
    groups: dict[str, argparse._ArgumentGroup] = {}
    for item in sorted(taken, key=lambda item: item.group != COMMON_GROUP):  # stable: table order
        if item.group not in groups:
            groups[item.group] = parser.add_argument_group(item.group)
        _add_setting(groups[item.group], item, command)
    parser.usage = _usage(parser.prog, [item for item in taken if command in item.required])


def _usage(prog: str, required: list[Setting], width: int = 79) -> str:
    """``prog [-h] --required VALUE ... [OPTION ...]``, wrapped under the program name."""
    words = ["[-h]", *(f"{item.flag} {item.name.upper()}" for item in required), "[OPTION ...]"]
    prefix = "usage: "  # argparse's, before the first line
    lines, indent = [prefix + prog], " " * (len(prefix) + len(prog) + 1)
    for word in words:
        if len(lines[-1]) + 1 + len(word) > width and lines[-1] != indent.rstrip():
            lines.append(indent + word)
        else:
            lines[-1] += " " + word
    return "\n".join(lines).removeprefix(prefix)


def _add_setting(group: argparse._ArgumentGroup, item: Setting, command: str) -> None:
    value = default(item.name, command)
    text = _environment(item, command)
    shown = f" (default {value})" if value not in (None, (), False) else ""
    choices = f": {', '.join(item.choices)}" if item.choices else ""
    help = f"{item.help}{choices}{shown} [env {item.env}]"
    aliases = [alias for alias, commands in item.aliases.items() if command in commands]
    if item.kind == "switch":
        on = value if text is None else _parsed(item, text)
        group.add_argument(item.flag, dest=item.name, action="store_true", default=on, help=help)
    elif item.kind == "list":
        items = [] if text is None else _parsed(item, text)
        group.add_argument(
            item.flag, dest=item.name, action=_Append, default=items, metavar="KEY=VALUE", help=help
        )
    else:
        group.add_argument(
            item.flag,
            dest=item.name,
            type=_typed(item),
            default=value if text is None else text,
            required=command in item.required and text is None and not aliases,
            metavar=item.name.upper() if item.choices is None else "{" + ",".join(item.choices) + "}",
            help=help,
        )
        for alias in aliases:
            group.add_argument(
                alias,
                dest=item.name,
                type=_typed(item),
                action=_Deprecated,
                const=item,
                default=argparse.SUPPRESS,
                help=argparse.SUPPRESS,
            )


def _parsed(item: Setting, text: _EnvText) -> Any:
    """A switch's or a list's variable, converted; the text itself if wrong (the settings refuse it)."""
    if text.old:
        deprecated(text.source, item)
    try:
        return list(item.convert(str(text))) if item.kind == "list" else item.convert(str(text))
    except ValueError:
        return str(text)


def _setup_logging(level: str) -> None:
    """The service's log on stderr, and every thread's stack on stderr at ``SIGUSR1``.

    The stacks (:mod:`faulthandler`, written without the interpreter's help, so a blocked main
    thread does not stop them) show where a service that looks stuck waits; the service goes on.
    """
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # The libraries' own logs: kafka-python's at WARNING, and the Schema Registry client's HTTP
    # requests (httpx2, one line per request, INFO) too, unless DEBUG.
    for library in ("kafka", "httpx2", "httpx"):
        logging.getLogger(library).setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)
    if hasattr(signal, "SIGUSR1"):  # POSIX
        # A stderr without a file descriptor (a command called in-process with stderr captured)
        # cannot take the dumps, and the command must still run.
        with contextlib.suppress(AttributeError, ValueError, OSError):
            faulthandler.register(signal.SIGUSR1, all_threads=True)


# -- run -------------------------------------------------------------------------------------------
@_subcommand(
    "run",
    help_text="run the decision service",
    description="Consume events, decide each event's depth (--policy), produce decisions; "
    "dead-letter invalid events; checkpoint the learners to the compacted state topic.",
)
def run(args: argparse.Namespace) -> int:
    """``uss-stream kafka run``: serve until SIGTERM/SIGINT (or idle); exit 0 after a clean stop.

    Startup and configuration errors print one line and exit with the codes of
    :mod:`uss_stream_kafka.cli.exit_codes`.
    """
    from uss_stream_kafka.processing.processors import FeaturesProcessor, OutputsProcessor

    settings = KafkaSettings.from_args(args)
    _setup_logging(settings.log_level)
    if settings.mode == "outputs":
        codec = functools.partial(
            settings.payload_format().outputs_codec,
            input_topic=settings.input_topic,
            output_topic=settings.output_topic,
        )
        processor: Any = OutputsProcessor(
            settings.error_unit_costs(), policy=settings.policy_template()[0], codec=codec
        )
    else:
        processor = FeaturesProcessor(settings.cascade_factory)
    app = _serve(settings, processor)
    if app is None:
        return 7
    summary = app.summary
    dead = sum(summary.dead_letters.values())
    print(
        f"kafka run: {summary.events} events, {summary.decisions} decisions "
        f"(depths {summary.depth_counts}), {dead} dead letters, {summary.replayed} replayed, "
        f"{summary.checkpoints} checkpoints, {summary.commits} commits in {summary.seconds:.1f}s",
        file=sys.stderr,
    )
    return 0


def _serve(settings: KafkaSettings, processor: Any) -> Any:
    """Run ``processor`` in an application of the settings' service config until it stops.

    Checks TLS and SASL first (``None``: they failed, said on stderr: the caller exits 7); SIGTERM
    and SIGINT stop the service after the batch (during start-up at once); the start-up heap is
    frozen before the loop. Returns the stopped :class:`~uss_stream_kafka.runtime.app.Application`.
    """
    from uss_stream_kafka.runtime.app import Application
    from uss_stream_kafka.runtime.startup import freeze_startup_heap

    client = settings.client_config()
    if not _security_checked(client):
        return None
    app = Application(client, config=settings.service_config())
    log = logging.getLogger("uss_stream_kafka")

    def _stop(signum: int, frame: Any) -> None:
        if app.health()[1]["status"] in ("created", "starting"):
            raise StartupInterrupted(signum)  # a blocking connect or restore: do not wait for it
        log.info("%s: finishing the batch, then stopping", signal.Signals(signum).name)
        app.stop()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    log.info("starting: connecting to %s", settings.bootstrap_servers)
    freeze_startup_heap()
    try:
        app.run(processor)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return app


def _security_checked(client: Any) -> bool:
    """TLS and SASL work with the brokers; else one line on stderr (the caller exits 7)."""
    from uss_stream_kafka.clients.security import check_security
    from uss_stream_kafka.exceptions import SecurityCheckError

    try:
        check_security(client)
    except SecurityCheckError as error:
        print(f"uss-stream kafka run: error: {error}", file=sys.stderr)
        return False
    return True


# -- orchestrate -----------------------------------------------------------------------------------
# The same settings as ``run`` where they mean the same thing.
@_subcommand(
    "orchestrate",
    help_text="orchestration mode: decide requests now, learn from the sensors' later reports",
    description="Consume requests (--input-topic), produce decisions (depth, stages, cost) to "
    "--output-topic, join the sensors' reports (--reports-topic, co-partitioned with the requests "
    "by id) to the pending decisions by id.",
)
def orchestrate(args: argparse.Namespace) -> int:
    """``uss-stream kafka orchestrate``: the runtime with an orchestration processor.

    See ``docs/orchestration.md``; errors print one line, as :func:`run`'s.
    """
    from uss_stream_kafka.processing.orchestration import OrchestrationProcessor, OrchestrationSummary

    settings = KafkaSettings.from_args(args)
    _setup_logging(settings.log_level)
    processor = OrchestrationProcessor(
        settings.error_unit_costs(),
        stage_names=settings.stage_names,
        policy=settings.policy_template()[0],
        max_age_decisions=settings.max_age_decisions,
        max_age_seconds=settings.max_age_seconds,
    )
    app = _serve(settings, processor)
    if app is None:
        return 7
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


# -- create-topics ---------------------------------------------------------------------------------
@_subcommand(
    "create-topics",
    help_text="create the input, output, dead-letter (and labels) topics and the compacted state topic",
)
def create_topics_command(args: argparse.Namespace) -> int:
    """``uss-stream kafka create-topics``: prints one line per topic (created or exists)."""
    from uss_stream_kafka import clients
    from uss_stream_kafka.clients.security import check_security
    from uss_stream_kafka.clients.topics import create_topics

    settings = KafkaSettings.from_args(args)
    topics = settings.topics()
    check_security(settings.client_config())  # TLS and SASL in one round trip, before the admin's retries
    admin = clients.admin(settings.client, **settings.client_config().kafka_kwargs("admin"))
    try:
        outcome = create_topics(
            admin,
            topics,
            partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            state_partitions=settings.state_partitions,
        )
    finally:
        admin.close()
    for name in topics.all():
        print(f"{name}: {outcome[name]}")
    return 0


# -- demo-producer ---------------------------------------------------------------------------------
@_subcommand(
    "demo-producer",
    help_text="stream the bundled PIMA events (stage outputs or features)",
    description="Stream PIMA diabetes events. Outputs mode: the per-stage predictions of a "
    "three-stage cascade trained offline (scikit-learn logistic regressions on growing, "
    "cost-ordered feature subsets). Features mode: the features (and labels to --labels-topic).",
)
def demo_producer_command(args: argparse.Namespace) -> int:
    """``uss-stream kafka demo-producer``."""
    from uss_stream_kafka import clients
    from uss_stream_kafka.cli.demo import pima_stage_costs, produce_demo

    settings = KafkaSettings.from_args(args)
    _setup_logging(settings.log_level)
    producer = clients.producer(
        settings.client, **settings.client_config().kafka_kwargs("demo-producer"), linger_ms=10
    )
    try:
        sent = produce_demo(
            producer,
            settings.input_topic,
            mode=settings.mode,
            events=settings.events,
            rate=settings.rate,
            labels_topic=settings.labels_topic,
            seed=settings.seed,
        )
    finally:
        producer.close()
    costs = ",".join(f"{c:.4g}" for c in pima_stage_costs())
    print(
        f"demo-producer: {sent} {settings.mode} events to {settings.input_topic} (PIMA stage costs {costs})",
        file=sys.stderr,
    )
    return 0


# -- status ----------------------------------------------------------------------------------------
@_subcommand(
    "status",
    help_text="what a group's learners have learned, from its last checkpoints in the state topic",
    description="Per input partition with a checkpoint of --group-id in --state-topic: round, depth "
    "mix, the depth it would choose now, disagreement rates, WD verdict, labels, pending decisions, "
    "checkpoint age (docs/metrics.md). Works while the service runs and after it stopped; exits 5 "
    "when the group has no checkpoint.",
)
def status_command(args: argparse.Namespace) -> int:
    """``uss-stream kafka status``: a table (or ``--json``) on stdout; 5 without a checkpoint."""
    import json

    from uss_stream_kafka.cli.exit_codes import EXIT_CODES
    from uss_stream_kafka.cli.status import format_table, group_status

    settings = KafkaSettings.from_args(args)
    rows = group_status(settings.client_config(), settings.state_topic, settings.group_id, settings.client)
    if settings.json:
        document = {"group_id": settings.group_id, "state_topic": settings.state_topic, "partitions": rows}
        print(json.dumps(document, indent=2))
    elif rows:
        print(format_table(rows))
    if not rows:
        print(
            f"uss-stream kafka status: group {settings.group_id!r} has no checkpoint in state topic "
            f"{settings.state_topic!r} (not started yet, nothing checkpointed yet, or another state topic)",
            file=sys.stderr,
        )
        return EXIT_CODES["checkpoint"]
    return 0
