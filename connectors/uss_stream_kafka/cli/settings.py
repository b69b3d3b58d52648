"""One settings object for every ``uss-stream kafka`` mode, from flags and environment variables.

Every setting is one field of :class:`KafkaSettings`; its :class:`Setting` (the field's metadata)
is its row in the one table (:data:`SETTINGS`) from which the command line, its ``--help``, the
environment variables and the table in ``docs/kafka.md`` are derived. One naming rule:
``--foo-bar`` <-> ``USS_KAFKA_FOO_BAR`` (:func:`env_name`); a flag wins over its variable, the
variable over the default. A setting has the same name, the same conversion and the same checks in
every subcommand that takes it, and :meth:`KafkaSettings.__post_init__` validates all of them and
their combinations in one place, naming the flag and the variable of each offending setting.

To add a setting: one field with ``setting(...)``, listing the subcommands that take it.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from uss_stream.core.units import check_price_of_error, in_error_units
from uss_stream.policies.specs import policy_spec, serving_policy
from uss_stream_kafka.clients.config import SASL_MECHANISMS, SECURITY_PROTOCOLS, merge_options

__all__ = [
    "COMMANDS",
    "COMMON_GROUP",
    "KafkaSettings",
    "SETTINGS",
    "Setting",
    "env_name",
    "markdown_table",
    "parse_switch",
    "row",
    "setting",
]

#: The subcommands that take settings.
COMMANDS = ("run", "orchestrate", "create-topics", "demo-producer", "status")
_ALL = COMMANDS
_SERVICE = ("run", "orchestrate")
_TOPICS = ("run", "orchestrate", "create-topics")
#: Codecs of ``--compression``; input in any of them is decoded whatever this is.
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def env_name(flag: str) -> str:
    """The environment variable of a flag: one rule for every subcommand.

    >>> env_name("--checkpoint-every")
    'USS_KAFKA_CHECKPOINT_EVERY'

    """
    return "USS_KAFKA_" + flag.lstrip("-").replace("-", "_").upper()


# -- conversions: text (flag or variable) or value (Python) -> checked value --------------------------
def _number(kind: type, low: float, strict: bool = False) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        try:
            if isinstance(value, bool) or (
                kind is int and isinstance(value, float) and not value.is_integer()
            ):
                raise ValueError  # no silent truncation of 2.5 to 2, no True for 1
            number = kind(value)
        except (TypeError, ValueError):
            what = "an integer" if kind is int else "a number"
            raise ValueError(f"must be {what}, got {value!r}") from None
        if not (number > low if strict else number >= low):
            raise ValueError(f"must be {'>' if strict else '>='} {low:g}, got {value!r}")
        return number

    return convert


def _integer(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"must be an integer, got {value!r}") from None


def _port(value: Any) -> int:
    port = _integer(value)
    if not -1 <= port <= 65535:
        raise ValueError(f"must be a port 0..65535 (or -1: none), got {value!r}")
    return port


def _costs(value: Any) -> list[float]:
    """``"0,0.15,0.2"`` (or a sequence) -> ``[0.0, 0.15, 0.2]``."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    try:
        return [float(part) for part in parts if str(part).strip()]
    except ValueError:
        raise ValueError(f"stage costs must be comma-separated numbers, got {value!r}") from None


def _price(value: Any) -> float:
    """The price of one error: a finite number > 0 (:func:`~uss_stream.core.units.check_price_of_error`)."""
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        raise ValueError(f"must be a number, got {value!r}") from None
    try:
        return check_price_of_error(number)  # type: ignore[return-value]
    except ValueError:
        raise ValueError(f"must be a finite number > 0, got {value!r}") from None


def _names(value: Any) -> list[str]:
    parts = value.split(",") if isinstance(value, str) else list(value)
    return [str(part).strip() for part in parts if str(part).strip()]


def _spec(value: Any) -> str:
    """A ``--policy`` spec, checked by the library's one parser (:mod:`uss_stream.policies.specs`)."""
    from uss_stream.policies.specs import parse_spec

    try:
        parse_spec(str(value))
    except ValueError as error:
        raise ValueError(str(error).removeprefix("--policy ")) from None
    return str(value)


def parse_switch(value: Any) -> bool:
    """A switch's value: ``1/true/yes/on`` or ``0/false/no/off`` (any case), or a ``bool``.

    >>> parse_switch("Yes"), parse_switch("0"), parse_switch(False)
    (True, False, False)

    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in _TRUE + _FALSE:
        raise ValueError(
            f"must be one of {', '.join(_TRUE)} (on) or {', '.join(_FALSE[1:])} (off), got {value!r}"
        )
    return text in _TRUE


def _options(value: Any) -> tuple[str, ...]:
    """``KEY=VALUE`` items: a comma-separated text (a variable) or a sequence (repeated flags)."""
    items = tuple(
        part.strip() for part in (value.split(",") if isinstance(value, str) else value) if part.strip()
    )
    merge_options(items)
    return items


@dataclass(frozen=True)
class Setting:
    """A row of the settings table: how one :class:`KafkaSettings` field is given and checked.

    Parameters
    ----------
    help
        What it means (one text for every subcommand).
    commands
        The subcommands that take it.
    group
        The ``--help`` section: :data:`COMMON_GROUP` (listed first) for the settings most runs give.
    convert
        Text or value -> checked value; raises ``ValueError`` with the reason.
    choices
        The allowed values, if a fixed list.
    kind
        ``"value"``, ``"switch"`` (a flag without value) or ``"list"`` (a repeatable flag; its
        variable holds comma-separated items).
    required
        The subcommands in which it must be given.
    defaults
        The default of each subcommand, where they differ (the field's default is then ``None``).
    aliases
        Deprecated flags, by the subcommands that still take them (their variables, by the naming
        rule, are read too); each use warns.
    legacy_env
        An older variable still read (with a warning) when neither the flag nor its variable is given.
    """

    help: str
    commands: tuple[str, ...]
    group: str
    convert: Callable[[Any], Any] = str
    choices: tuple[str, ...] | None = None
    kind: str = "value"
    required: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    legacy_env: str | None = None
    name: str = ""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return env_name(self.flag)

    def named(self) -> str:
        """``--foo-bar (env USS_KAFKA_FOO_BAR)``: how error messages name the setting."""
        return f"{self.flag} (env {self.env})"

    def check(self, value: Any) -> Any:
        """The checked value; ``ValueError`` naming the flag and the variable."""
        try:
            if self.choices is not None and value not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}, got {value!r}")
            return self.convert(value)
        except ValueError as error:
            raise ValueError(f"{self.named()}: {error}") from None


def setting(default: Any, help: str, commands: tuple[str, ...], group: str, **row: Any) -> Any:
    """A :class:`KafkaSettings` field and its row of the table."""
    return field(default=default, metadata={"setting": Setting(help, commands, group, **row)})


#: The ``--help`` section listed first: the settings most runs give (the topics, the group, the costs).
COMMON_GROUP = "common options"
_CONNECTION, _TOPIC, _PROCESSING = "connection and security", "topics", "processing"
_DELIVERY, _GROUP, _OPS, _CREATE, _DEMO = (
    "delivery, checkpoints and lifecycle",
    "consumer group and clients",
    "metrics, health and logging",
    "topic creation",
    "demo events",
)
_non_negative_int, _positive_int = _number(int, 0), _number(int, 1)
_non_negative_float, _positive_float = _number(float, 0), _number(float, 0, strict=True)


@dataclass(frozen=True)
class KafkaSettings:
    """The settings of one ``uss-stream kafka`` subcommand, checked together at construction.

    Built by :meth:`from_args` from the parsed command line (flags, then variables, then defaults),
    or directly in Python; either way the same checks run, and their errors name the flag and the
    variable (scikit-learn style). A setting the subcommand does not take must keep its default.

    Examples
    --------
    >>> s = KafkaSettings("run", bootstrap_servers="b:9092", input_topic="i", output_topic="o",
    ...                   dlq_topic="d", state_topic="s", group_id="g", stage_costs="0,0.1")
    >>> s.stage_costs, s.policy_spec(), s.checkpoint_every
    ([0.0, 0.1], 'uss-kl-ucb', 0)
    >>> KafkaSettings("orchestrate", bootstrap_servers="b:9092", input_topic="q", reports_topic="r",
    ...               output_topic="d", dlq_topic="x", state_topic="s", group_id="g",
    ...               stage_costs=[0, 0.1], checkpoint_every=-1)
    Traceback (most recent call last):
    ...
    ValueError: --checkpoint-every (env USS_KAFKA_CHECKPOINT_EVERY): must be >= 0, got -1

    """

    command: str
    # connection and security (every subcommand)
    bootstrap_servers: str | None = setting(
        None, "host:port[,host:port]", _ALL, COMMON_GROUP, required=_ALL, legacy_env="KAFKA_BOOTSTRAP_SERVERS"
    )
    client_id: str = setting("uss-stream", "client id prefix", _ALL, _CONNECTION)
    security_protocol: str = setting(
        "PLAINTEXT", "protocol to talk to the brokers", _ALL, _CONNECTION, choices=SECURITY_PROTOCOLS
    )
    ssl_cafile: str | None = setting(None, "CA certificate (PEM) to verify the brokers", _ALL, _CONNECTION)
    ssl_certfile: str | None = setting(None, "client certificate (PEM) for mutual TLS", _ALL, _CONNECTION)
    ssl_keyfile: str | None = setting(None, "client private key (PEM)", _ALL, _CONNECTION)
    ssl_password: str | None = setting(
        None, "password of the private key (prefer the variable)", _ALL, _CONNECTION
    )
    ssl_crlfile: str | None = setting(None, "certificate revocation list (PEM)", _ALL, _CONNECTION)
    no_ssl_check_hostname: bool = setting(
        False, "skip host name verification", _ALL, _CONNECTION, kind="switch", convert=parse_switch
    )
    sasl_mechanism: str | None = setting(None, "SASL mechanism", _ALL, _CONNECTION, choices=SASL_MECHANISMS)
    sasl_username: str | None = setting(None, "SASL user", _ALL, _CONNECTION)
    sasl_password: str | None = setting(None, "SASL password (prefer the variable)", _ALL, _CONNECTION)
    sasl_kerberos_service_name: str = setting("kafka", "Kerberos service name (GSSAPI)", _ALL, _CONNECTION)
    kafka_option: tuple[str, ...] = setting(
        (),
        "any kafka-python client setting KEY=VALUE, for every client that takes it (repeatable), "
        "e.g. request_timeout_ms=60000",
        _ALL,
        _CONNECTION,
        kind="list",
        convert=_options,
    )
    # topics
    input_topic: str | None = setting(
        None,
        "events to decide (orchestrate: the requests; demo-producer writes its events there)",
        (*_TOPICS, "demo-producer"),
        COMMON_GROUP,
        required=(*_TOPICS, "demo-producer"),
        aliases={"--requests-topic": ("orchestrate",), "--topic": ("demo-producer",)},
    )
    output_topic: str | None = setting(
        None,
        "decisions",
        _TOPICS,
        COMMON_GROUP,
        required=_TOPICS,
        aliases={"--decisions-topic": ("orchestrate",)},
    )
    dlq_topic: str | None = setting(None, "dead letters", _TOPICS, COMMON_GROUP, required=_TOPICS)
    state_topic: str | None = setting(
        None, "checkpoints (compacted)", (*_TOPICS, "status"), COMMON_GROUP, required=(*_TOPICS, "status")
    )
    labels_topic: str | None = setting(
        None,
        "labelled events (features mode: the service learns from them, demo-producer writes them)",
        ("run", "create-topics", "demo-producer"),
        _TOPIC,
    )
    reports_topic: str | None = setting(
        None, "the sensors' reports", ("orchestrate",), COMMON_GROUP, required=("orchestrate",)
    )
    # processing
    group_id: str | None = setting(
        None,
        "consumer group (and checkpoint key)",
        (*_SERVICE, "status"),
        COMMON_GROUP,
        required=(*_SERVICE, "status"),
    )
    mode: str = setting(
        "outputs",
        "outputs: events carry the stage outputs; features: they carry features, the service runs a cascade",
        ("run", "demo-producer"),
        COMMON_GROUP,
        choices=("outputs", "features"),
    )
    stage_costs: list[float] | None = setting(  # noqa: RUF009 (checked and copied, never shared)
        None, "c_1,...,c_K in units of one error (the objective is error rate + cost), or in any unit "
        "with --price-of-error (outputs mode, orchestrate)", _SERVICE, COMMON_GROUP, convert=_costs,
        required=("orchestrate",),
    )  # fmt: skip
    price_of_error: float | None = setting(
        None, "the price of one error in the unit of --stage-costs, e.g. 250 for costs in dollars where "
        "a wrong decision costs 250 dollars; the service works with the costs divided by it, in error "
        "units (outputs mode, orchestrate)", _SERVICE, _PROCESSING, convert=_price,
    )  # fmt: skip
    stage_names: list[str] | None = setting(  # noqa: RUF009 (checked and copied, never shared)
        None, "names of the stages in the decisions (default stage1..K)", ("orchestrate",), _PROCESSING,
        convert=_names,
    )  # fmt: skip
    policy: str | None = setting(
        None,
        "the depth-selection policy, as uss-stream replay takes it: uss-kl-ucb[:alpha=A], "
        "uss-ucb[:alpha=A], uss-ts[:seed=S], uee-ucb[:alpha=A], alg2, fixed:depth=D; the learning ones "
        "also take discount=G (default uss-kl-ucb, the library's default); orchestrate also takes the "
        "label-asking audited[:label_budget=C,alpha=A]",
        _SERVICE,
        COMMON_GROUP,
        convert=_spec,
    )
    alpha: float | None = setting(
        None,
        "deprecated: use --policy uss-ucb:alpha=ALPHA (> 0)",
        _SERVICE,
        _PROCESSING,
        convert=_positive_float,
    )
    cascade_factory: str | None = setting(
        None, "package.module:function returning a CascadeClassifier (features mode)", ("run",), _PROCESSING
    )
    max_input_bytes: int = setting(
        None,
        "larger values are dead-lettered as oversize",
        _SERVICE,
        _PROCESSING,
        convert=_positive_int,
        defaults={"run": 256 * 1024, "orchestrate": 1 << 20},
    )
    value_format: str = setting(
        "json",
        "format of the events' and decisions' values (outputs mode); avro, protobuf and jsonschema go "
        "through a Schema Registry (--schema-registry-url); dead letters keep the input's bytes",
        ("run",),
        _PROCESSING,
        choices=("json", "avro", "protobuf", "jsonschema"),
    )
    schema_registry_url: str | None = setting(
        None, "Schema Registry URL (Confluent API) of --value-format avro, protobuf, jsonschema", ("run",),
        _PROCESSING,
    )  # fmt: skip
    schema_registry_auth: str | None = setting(
        None, "USER:PASSWORD for the Schema Registry's basic authentication (prefer the variable)", ("run",),
        _PROCESSING,
    )  # fmt: skip
    subject_name_strategy: str = setting(
        "topic",
        "subject of the decisions' schema: topic (<topic>-value), record (uss_stream.Decision) or "
        "topic-record (<topic>-uss_stream.Decision)",
        ("run",),
        _PROCESSING,
        choices=("topic", "record", "topic-record"),
    )
    max_age_decisions: int | None = setting(
        None, "expire a pending decision after that many later decisions", ("orchestrate",), _PROCESSING,
        convert=_positive_int,
    )  # fmt: skip
    max_age_seconds: float | None = setting(
        None, "expire a pending decision after that many seconds", ("orchestrate",), _PROCESSING,
        convert=_positive_float,
    )  # fmt: skip
    # delivery, checkpoints and lifecycle
    guarantee: str = setting(
        "at-least-once",
        "delivery guarantee (exactly-once: transactions; readers use read_committed)",
        _SERVICE,
        COMMON_GROUP,
        choices=("at-least-once", "exactly-once"),
    )
    shared_learning: bool = setting(
        False, "outputs mode: decide on the pooled counts of every input partition (from the checkpoints)",
        ("run",), _DELIVERY, kind="switch", convert=parse_switch,
    )  # fmt: skip
    no_rebuild_models: bool = setting(
        False, "features mode: do not re-learn the labels log on restore (the stages start untrained)",
        ("run",), _DELIVERY, kind="switch", convert=parse_switch,
    )  # fmt: skip
    relearn_max_labels: int | None = setting(
        None, "features mode: re-learn at most the newest this many labels per partition on a restore "
        "(default: all)", ("run",), _DELIVERY, convert=_positive_int,
    )  # fmt: skip
    commit_interval: float = setting(
        1.0, "seconds between commits (flush first); 0 = after every batch", ("run",), _DELIVERY,
        convert=_non_negative_float,
    )  # fmt: skip
    commit_every: int = setting(
        0, "also commit after this many records (0 = off)", ("run",), _DELIVERY, convert=_non_negative_int
    )
    checkpoint_interval: float = setting(
        5.0,
        "seconds between checkpoints (0 = off; orchestrate commits only with a checkpoint, and with "
        "both checkpoint settings off the only one is at the stop)",
        _SERVICE,
        _DELIVERY,
        convert=_non_negative_float,
    )
    checkpoint_every: int = setting(
        None,
        "also checkpoint after this many records (0 = off)",
        _SERVICE,
        _DELIVERY,
        convert=_non_negative_int,
        defaults={"run": 0, "orchestrate": 10_000},
    )
    max_poll_records: int = setting(5000, "records per batch", _SERVICE, _DELIVERY, convert=_positive_int)
    auto_offset_reset: str = setting(
        "earliest", "where a new consumer group starts", _SERVICE, _DELIVERY, choices=("earliest", "latest")
    )
    exit_when_idle: float | None = setting(
        None,
        "exit 0 (after commit and checkpoint) once no record arrived for this many seconds after the "
        "partitions were assigned, and every one is read to its end offset",
        _SERVICE,
        _DELIVERY,
        convert=_positive_float,
    )
    compression: str = setting(
        "none",
        "compression of the produced records (decisions, dead letters, checkpoints)",
        _SERVICE,
        _DELIVERY,
        choices=COMPRESSIONS,
    )
    propagate_header: tuple[str, ...] = setting(
        (), "input header copied onto the record's decision and dead letter, besides the trace context "
        "(traceparent, tracestate), which always is (repeatable)", _SERVICE, _DELIVERY, kind="list",
        convert=lambda value: tuple(_names(value)),
    )  # fmt: skip
    # consumer group and clients
    client: str = setting(
        "auto",
        "Kafka client library (confluent: librdkafka, needs the extra uss-stream[confluent]; auto: "
        "confluent when installed, else kafka-python)",
        _ALL,
        _GROUP,
        choices=("auto", "kafka-python", "confluent"),
    )
    group_instance_id: str | None = setting(
        None, "static group membership id (a restart takes its partitions back at once)", _SERVICE, _GROUP
    )
    session_timeout_ms: int = setting(
        45_000, "consumer group session timeout", _SERVICE, _GROUP, convert=_positive_int
    )
    consumer_option: tuple[str, ...] = setting(
        (), "consumer setting KEY=VALUE, kafka-python's name or (--client confluent) librdkafka's "
        "property without underscores, e.g. debug=cgrp (repeatable)", _SERVICE, _GROUP, kind="list",
        convert=_options,
    )  # fmt: skip
    producer_option: tuple[str, ...] = setting(
        (), "producer setting KEY=VALUE, kafka-python's name or (--client confluent) librdkafka's "
        "property without underscores, e.g. debug=cgrp (repeatable)", _SERVICE, _GROUP, kind="list",
        convert=_options,
    )  # fmt: skip
    # metrics, health and logging
    metrics_host: str = setting("0.0.0.0", "address of /metrics, /healthz", _SERVICE, _OPS)
    metrics_port: int = setting(
        9108, "port of /metrics and /healthz (0 = any free port, -1 = no endpoint)", _SERVICE, _OPS,
        convert=_port,
    )  # fmt: skip
    log_level: str = setting(
        "INFO",
        "log level (kafka-python logs at WARNING unless DEBUG)",
        ("run", "orchestrate", "demo-producer"),
        _OPS,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
    )
    json: bool = setting(
        False, "status: print one JSON document (for scripts) instead of the table", ("status",), _OPS,
        kind="switch", convert=parse_switch,
    )  # fmt: skip
    # create-topics
    partitions: int = setting(1, "partitions", ("create-topics",), COMMON_GROUP, convert=_positive_int)
    replication_factor: int = setting(
        1, "replicas per partition", ("create-topics",), _CREATE, convert=_positive_int
    )
    state_partitions: int = setting(
        1, "partitions of the state topic", ("create-topics",), _CREATE, convert=_positive_int
    )
    # demo-producer
    events: int = setting(
        10_000, "how many", ("demo-producer",), COMMON_GROUP, convert=_non_negative_int,
        legacy_env="USS_KAFKA_DEMO_EVENTS",
    )  # fmt: skip
    rate: float = setting(
        0.0, "events per second (0 = as fast as possible)", ("demo-producer",), COMMON_GROUP,
        convert=_non_negative_float, legacy_env="USS_KAFKA_DEMO_RATE",
    )  # fmt: skip
    seed: int = setting(
        0, "shuffle seed", ("demo-producer",), _DEMO, convert=_integer, legacy_env="USS_KAFKA_DEMO_SEED"
    )

    #: What the settings build, built once (the policy template, the client and service configs).
    _built: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_settings(self)

    def _once(self, name: str, build: Callable[[], Any]) -> Any:
        if name not in self._built:
            self._built[name] = build()
        return self._built[name]

    @classmethod
    def from_args(cls, args: Any) -> KafkaSettings:
        """The settings of a parsed ``uss-stream kafka`` command line (``args.kafka_command``)."""
        command = args.kafka_command
        given = {item.name: getattr(args, item.name) for item in SETTINGS if command in item.commands}
        return cls(command, **given)

    def policy_spec(self) -> str:
        """The spec of ``--policy`` / ``--alpha``; the library's default without either."""
        return policy_spec(self.policy, self.alpha)

    def error_unit_costs(self) -> list[float]:
        """``--stage-costs`` in units of one error (divided by ``--price-of-error`` if given), as the
        policy, the decisions, the metrics and the checkpoints take them; converted once by the
        library (:func:`~uss_stream.core.units.in_error_units`), which warns when a depth is
        unreachable."""
        return self._once("costs", lambda: in_error_units(self.stage_costs, self.price_of_error))

    def policy_template(self) -> tuple[Any, str]:
        """The policy of ``run`` (outputs mode) or ``orchestrate`` and its canonical spec, built once
        by the library (:func:`~uss_stream.policies.specs.serving_policy`); every learner clones it."""
        orchestrate = self.command == "orchestrate"
        mode, labels = ("orchestration", "requested") if orchestrate else ("outputs mode", "none")
        return self._once(
            "policy", lambda: serving_policy(self.policy_spec(), self.error_unit_costs(), mode, labels)
        )

    def payload_format(self) -> Any:
        """The :class:`~uss_stream_kafka.processing.formats.PayloadFormat` of ``--value-format``
        and its registry."""
        from uss_stream_kafka.processing.formats import PayloadFormat

        return PayloadFormat(
            self.value_format, self.schema_registry_url, self.schema_registry_auth, self.subject_name_strategy
        )

    def client_config(self) -> Any:
        """The :class:`~uss_stream_kafka.clients.config.ClientConfig` every client of the command uses
        (built once)."""
        from uss_stream_kafka.clients.config import ClientConfig

        return self._once(
            "client",
            lambda: ClientConfig(
                **{name: getattr(self, name) for name in _CLIENT_FIELDS},
                ssl_check_hostname=not self.no_ssl_check_hostname,
                options=merge_options(self.kafka_option),
            ),
        )

    def topics(self) -> Any:
        """The service's :class:`~uss_stream_kafka.clients.topics.Topics` (``orchestrate``: the
        requests as input, the reports as labels)."""
        from uss_stream_kafka.clients.topics import Topics

        if self.command == "orchestrate":
            from uss_stream_kafka.processing.orchestration import OrchestrationTopics

            names = (self.input_topic, self.reports_topic, self.output_topic, self.dlq_topic)
            return OrchestrationTopics(*names, self.state_topic).as_topics()
        names = (self.input_topic, self.output_topic, self.dlq_topic, self.state_topic)
        return Topics(*names, labels=self.labels_topic)

    def service_config(self) -> Any:
        """The :class:`~uss_stream_kafka.runtime.config.ServiceConfig` of ``run`` or ``orchestrate``
        (built once): the one mapping from the settings to the service's.

        A setting of the same name is the config's; ``orchestrate`` commits only at its checkpoints
        (both cover the same offsets of both topics) and lingers 2 ms (a decision is awaited) unless
        ``--producer-option`` says otherwise.
        """
        return self._once("service", lambda: _service_config(self))

    @property
    def librdkafka(self) -> bool:
        """Whether the client is librdkafka (``--client confluent``, or ``auto`` with it installed).

        librdkafka takes its own properties.
        """
        from uss_stream_kafka.clients import resolve

        return resolve(self.client) == "confluent"

    def consumer_options(self) -> dict[str, Any]:
        """``--session-timeout-ms`` and ``--consumer-option`` as kafka-python consumer settings."""
        options = merge_options(self.consumer_option, librdkafka=self.librdkafka)
        return {"session_timeout_ms": self.session_timeout_ms, **options}

    def producer_options(self) -> dict[str, Any]:
        """``--compression`` and ``--producer-option`` as kafka-python producer settings."""
        codec = {} if self.compression == "none" else {"compression_type": self.compression}
        return {**codec, **merge_options(self.producer_option, librdkafka=self.librdkafka)}


def _rows() -> tuple[Setting, ...]:
    rows = []
    for item in dataclasses.fields(KafkaSettings):
        if "setting" in item.metadata:
            row = dataclasses.replace(item.metadata["setting"], name=item.name)
            rows.append(row)
    return tuple(rows)


#: The table: one row per setting, in the order of the fields.
SETTINGS: tuple[Setting, ...] = _rows()
_BY_NAME = {row.name: row for row in SETTINGS}
_CLIENT_FIELDS = (
    "bootstrap_servers", "client_id", "security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
    "ssl_password", "ssl_crlfile", "sasl_mechanism", "sasl_username", "sasl_password",
    "sasl_kerberos_service_name",
)  # fmt: skip


def _service_config(settings: KafkaSettings) -> Any:
    """The mapping of :meth:`KafkaSettings.service_config`."""
    from uss_stream_kafka.runtime.config import ServiceConfig

    orchestrate = settings.command == "orchestrate"
    linger = {"linger_ms": 2} if orchestrate else {}
    mapped = {
        "topics": settings.topics(),
        "commit_interval": float("inf") if orchestrate else settings.commit_interval,
        "rebuild_models": not settings.no_rebuild_models,
        "consumer_options": settings.consumer_options(),
        "producer_options": {**linger, **settings.producer_options()},
        "http_host": settings.metrics_host,
        "http_port": None if settings.metrics_port < 0 else settings.metrics_port,
        "client_library": settings.client,
        "propagate_headers": settings.propagate_header,
    }
    same = [name for name in ServiceConfig.field_names() if name in _BY_NAME and name not in mapped]
    return ServiceConfig(**{name: getattr(settings, name) for name in same}, **mapped)


def row(name: str) -> Setting:
    """The row of the setting ``name`` (a field of :class:`KafkaSettings`)."""
    return _BY_NAME[name]


def default(name: str, command: str) -> Any:
    """The default of setting ``name`` in ``command``.

    >>> default("checkpoint_every", "run"), default("checkpoint_every", "orchestrate")
    (0, 10000)

    """
    return _BY_NAME[name].defaults.get(command, KafkaSettings.__dataclass_fields__[name].default)


def check_settings(settings: KafkaSettings) -> None:
    """Check and normalise every setting of ``settings``, then their combinations (in place).

    Every error names the flag and the variable of the setting at fault.
    """
    command = settings.command
    if command not in COMMANDS:
        raise ValueError(f"command must be one of {', '.join(COMMANDS)}, got {command!r}")
    for item in SETTINGS:
        value = getattr(settings, item.name)
        if command not in item.commands:
            if value != KafkaSettings.__dataclass_fields__[item.name].default:
                raise ValueError(
                    f"{item.named()} is not a setting of `uss-stream kafka {command}` "
                    f"(it is one of: {', '.join(item.commands)})"
                )
            continue
        if value is None:
            value = item.defaults.get(command)
        if value is None and command in item.required:
            raise ValueError(f"{item.named()} is required by `uss-stream kafka {command}`")
        object.__setattr__(settings, item.name, None if value is None else item.check(value))
    _check_clients(settings)
    if command in _SERVICE:
        _check_processing(settings)
    if command == "demo-producer" and settings.labels_topic and settings.mode != "features":
        raise ValueError(f"{row('labels_topic').named()} is for --mode features")


def _check_clients(settings: KafkaSettings) -> None:
    """The connection settings together (:class:`~uss_stream_kafka.clients.config.ClientConfig`'s checks)."""
    import re

    try:
        settings.client_config()
    except ValueError as error:
        names = {**{name: name for name in _CLIENT_FIELDS}, "options": "kafka_option"}
        pattern = r"\b(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b"
        raise ValueError(re.sub(pattern, lambda m: row(names[m.group(1)]).named(), str(error))) from None
    if settings.command in _SERVICE:
        try:
            settings.service_config()
        except ValueError as error:
            names = {"consumer_options": "consumer_option", "producer_options": "producer_option"}
            pattern = r"\b(" + "|".join(names) + r")\b"
            raise ValueError(re.sub(pattern, lambda m: row(names[m.group(1)]).named(), str(error))) from None


def _check_processing(settings: KafkaSettings) -> None:
    """``run`` and ``orchestrate``: mode, stage costs, policy and their combinations."""
    policy, alpha = row("policy"), row("alpha")
    if settings.policy is not None and settings.alpha is not None:
        raise ValueError(
            f"give --policy or --alpha, not both (env {policy.env}, {alpha.env}; --alpha A is "
            f"shorthand for --policy uss-ucb:alpha=A): got --policy {settings.policy} and "
            f"--alpha {settings.alpha}"
        )
    features = settings.command == "run" and settings.mode == "features"
    if features:
        if not settings.cascade_factory:
            raise ValueError(f"features mode needs {row('cascade_factory').named()} package.module:function")
        if settings.policy is not None or settings.alpha is not None:
            raise ValueError(
                f"--policy and --alpha are for outputs mode (env {policy.env}, {alpha.env}): in features "
                "mode the cascade factory builds the cascade and its policy (CascadeClassifier(policy=...))"
            )
        if settings.price_of_error is not None:
            raise ValueError(
                f"{row('price_of_error').named()} is for outputs mode: in features mode the cascade "
                "factory gives the cascade its costs and price (CascadeClassifier(price_of_error=...))"
            )
        if settings.shared_learning:
            raise ValueError(f"{row('shared_learning').named()} needs outputs mode (--mode outputs)")
        if settings.value_format != "json":
            raise ValueError(f"{row('value_format').named()} {settings.value_format} needs outputs mode")
        return
    _check_registry(settings)
    costs = settings.stage_costs
    if not costs:
        raise ValueError(f"outputs mode needs {row('stage_costs').named()} c_1,...,c_K")
    if settings.cascade_factory:
        raise ValueError(f"{row('cascade_factory').named()} is for features mode (--mode features)")
    if settings.alpha is not None:
        instead = f"--policy uss-ucb:alpha={settings.alpha!r}"
        warnings.warn(f"--alpha is deprecated: use {instead}", FutureWarning, stacklevel=4)
    try:
        settings.error_unit_costs()
    except ValueError as error:
        raise ValueError(f"{row('stage_costs').named()}: {error}") from None
    try:
        built, _ = settings.policy_template()
    except ValueError as error:
        raise ValueError(f"{error} (env {policy.env})") from None
    if settings.shared_learning and built.discount is not None:
        raise ValueError(
            f"--shared-learning pools plain counts; --policy {settings.policy} discounts them: give one "
            f"or the other (env {row('shared_learning').env}, {policy.env})"
        )
    names = settings.stage_names
    if names is not None and (len(names) != len(costs) or len(set(names)) != len(names)):
        raise ValueError(f"{row('stage_names').named()}: must be {len(costs)} distinct names, got {names!r}")


def _check_registry(settings: KafkaSettings) -> None:
    """``--value-format`` and its Schema Registry settings together."""
    url, auth = row("schema_registry_url"), row("schema_registry_auth")
    if settings.value_format == "json":
        for item in (url, auth):
            if getattr(settings, item.name) is not None:
                raise ValueError(f"{item.named()} is for --value-format avro, protobuf or jsonschema")
        return
    if not settings.schema_registry_url:
        raise ValueError(f"--value-format {settings.value_format} needs {url.named()}")
    if settings.schema_registry_auth is not None and ":" not in settings.schema_registry_auth:
        raise ValueError(f"{auth.named()}: must be USER:PASSWORD")


def deprecated(old: str, new: Setting) -> None:
    """Warn that ``old`` (a flag or a variable) is read for ``new``."""
    warnings.warn(f"{old} is deprecated: use {new.named()}", FutureWarning, stacklevel=3)


def markdown_table() -> str:
    """The table of ``docs/kafka.md``: every setting, its variable, subcommands, default and meaning."""
    lines = ["| option | variable | subcommands | default | meaning |", "|---|---|---|---|---|"]
    for item in SETTINGS:
        if item.defaults:
            shown = ", ".join(f"{_shown(value)} ({command})" for command, value in item.defaults.items())
        elif item.required:
            shown = "required" + ("" if item.required == item.commands else f" ({', '.join(item.required)})")
        else:
            shown = _shown(KafkaSettings.__dataclass_fields__[item.name].default)
        commands = "all" if item.commands == COMMANDS else ", ".join(item.commands)
        choices = f": {', '.join(f'`{choice}`' for choice in item.choices)}" if item.choices else ""
        old = [f"`{alias}` ({', '.join(c)})" for alias, c in item.aliases.items()]
        old += [f"`{item.legacy_env}`"] if item.legacy_env else []
        note = f"; deprecated: {', '.join(old)}" if old else ""
        lines.append(f"| `{item.flag}` | `{item.env}` | {commands} | {shown} | {item.help}{choices}{note} |")
    return "\n".join(lines) + "\n"


def _shown(value: Any) -> str:
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"`{value}`"
