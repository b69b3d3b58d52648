"""One settings object for every Kafka mode: one naming rule, one meaning, one place of checks (issue 13).

Every setting of :data:`~uss_stream_kafka.cli.settings.SETTINGS` is given by its flag ``--foo-bar`` or
its variable ``USS_KAFKA_FOO_BAR`` (the flag wins, the variable wins over the default) in every
subcommand that takes it, reads the same text as the same value in each of them, and a wrong value
is refused with an error naming the flag and the variable. The expectations are written here
independently of the code under test: the naming rule from the issue's text, a sample text per
setting, and the values those texts stand for.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.test_uss_stream_kafka.helpers import stream
from uss_stream.commands.cli import build_parser, main
from uss_stream.policies import USSKLUCB
from uss_stream_kafka.cli.settings import COMMANDS, SETTINGS, KafkaSettings, markdown_table
from uss_stream_kafka.processing.formats import PayloadFormat

DOCS = Path(__file__).resolve().parents[3] / "docs" / "kafka.md"

#: The minimal command line of each subcommand, as flag -> text (the required settings).
MINIMAL = {
    "run": {"--bootstrap-servers": "b:9092", "--input-topic": "i", "--output-topic": "o", "--dlq-topic": "d",
            "--state-topic": "s", "--group-id": "g", "--stage-costs": "0,0.1"},
    "orchestrate": {"--bootstrap-servers": "b:9092", "--input-topic": "q", "--reports-topic": "r",
                    "--output-topic": "d", "--dlq-topic": "x", "--state-topic": "s", "--group-id": "g",
                    "--stage-costs": "0,0.1"},
    "create-topics": {"--bootstrap-servers": "b:9092", "--input-topic": "i", "--output-topic": "o",
                      "--dlq-topic": "d", "--state-topic": "s"},
    "demo-producer": {"--bootstrap-servers": "b:9092", "--input-topic": "i"},
    "status": {"--bootstrap-servers": "b:9092", "--state-topic": "s", "--group-id": "g"},
}  # fmt: skip

#: A valid text of each setting that is not free text, and the value it stands for.
SAMPLES: dict[str, tuple[str, Any]] = {
    "security_protocol": ("SSL", "SSL"),
    "sasl_mechanism": ("GSSAPI", "GSSAPI"),
    "no_ssl_check_hostname": ("yes", True),
    "kafka_option": (
        "request_timeout_ms=60000,retry_backoff_ms=50",
        ["request_timeout_ms=60000", "retry_backoff_ms=50"],
    ),
    "mode": ("features", "features"),
    "stage_costs": ("0, 0.25 ,0.5", [0.0, 0.25, 0.5]),
    "price_of_error": ("250", 250.0),
    "stage_names": ("xray, ct", ["xray", "ct"]),
    "policy": ("uss-ts:seed=3", "uss-ts:seed=3"),
    "alpha": ("0.75", 0.75),
    "max_input_bytes": ("4096", 4096),
    "value_format": ("avro", "avro"),
    "schema_registry_auth": ("user:secret", "user:secret"),
    "subject_name_strategy": ("topic-record", "topic-record"),
    "max_age_decisions": ("12", 12),
    "relearn_max_labels": ("5000", 5000),
    "max_age_seconds": ("1.5", 1.5),
    "guarantee": ("exactly-once", "exactly-once"),
    "shared_learning": ("true", True),
    "no_rebuild_models": ("on", True),
    "commit_interval": ("0.25", 0.25),
    "commit_every": ("0", 0),
    "checkpoint_interval": ("0", 0.0),
    "checkpoint_every": ("0", 0),
    "max_poll_records": ("77", 77),
    "auto_offset_reset": ("latest", "latest"),
    "exit_when_idle": ("2.5", 2.5),
    "compression": ("zstd", "zstd"),
    "client": ("confluent", "confluent"),
    "propagate_header": ("baggage", ["baggage"]),
    "session_timeout_ms": ("6000", 6000),
    "consumer_option": ("fetch_max_wait_ms=100", ["fetch_max_wait_ms=100"]),
    "producer_option": ("linger_ms=5,batch_size=1024", ["linger_ms=5", "batch_size=1024"]),
    "metrics_port": ("-1", -1),
    "log_level": ("DEBUG", "DEBUG"),
    "json": ("yes", True),
    "partitions": ("3", 3),
    "replication_factor": ("2", 2),
    "state_partitions": ("4", 4),
    "events": ("0", 0),
    "rate": ("12.5", 12.5),
    "seed": ("-3", -3),
}


def flag_of(name: str) -> str:
    """The issue's rule, field name -> flag: ``checkpoint_every`` -> ``--checkpoint-every``."""
    return "--" + "-".join(name.split("_"))


def variable_of(flag: str) -> str:
    """The issue's rule, flag -> variable: ``--foo-bar`` <-> ``USS_KAFKA_FOO_BAR``."""
    return "USS_KAFKA_" + flag[2:].upper().replace("-", "_")


def sample(name: str) -> tuple[str, Any]:
    return SAMPLES.get(name, (f"text-of-{name}", f"text-of-{name}"))


def argv(command: str, without: str = "", **extra: str) -> list[str]:
    flags = {**{flag: text for flag, text in MINIMAL[command].items() if flag != without}, **extra}
    return ["kafka", command, *[part for flag, text in flags.items() for part in (flag, text)]]


def kind(name: str) -> str:
    return next(row.kind for row in SETTINGS if row.name == name)


def parse(arguments: list[str]) -> argparse.Namespace:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated spelling in these command lines
        return build_parser().parse_args(arguments)


@pytest.fixture(autouse=True)
def _no_service_variables(monkeypatch):
    for name in list(os.environ):
        if name.startswith("USS_KAFKA_") or name == "KAFKA_BOOTSTRAP_SERVERS":
            monkeypatch.delenv(name)


def test_the_table_covers_every_subcommand_and_names_each_setting_by_the_rule():
    assert {command for row in SETTINGS for command in row.commands} == set(COMMANDS)
    for row in SETTINGS:
        assert (row.flag, row.env) == (flag_of(row.name), variable_of(flag_of(row.name)))
    assert variable_of("--checkpoint-every") == "USS_KAFKA_CHECKPOINT_EVERY"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_setting_is_read_from_its_flag_else_its_variable_else_its_default(command, monkeypatch):
    for row in (row for row in SETTINGS if command in row.commands):
        flag, variable = flag_of(row.name), variable_of(flag_of(row.name))
        text, value = sample(row.name)
        on_line: dict[str, str] = {}
        if kind(row.name) == "switch":
            args = parse([*argv(command), flag])
            assert getattr(args, row.name) is True, flag
        elif kind(row.name) == "list":
            args = parse([*argv(command), *[p for item in text.split(",") for p in (flag, item)]])
            assert getattr(args, row.name) == value, flag
            on_line = {flag: "other_setting=1"}
        else:
            args = parse(argv(command, without=flag, **{flag: text}))
            assert getattr(args, row.name) == value, flag
            on_line = {flag: "0.5" if row.name == "stage_costs" else text}
        # the variable, when the flag is not given
        monkeypatch.setenv(variable, text)
        args = parse(argv(command, without=flag))
        assert getattr(args, row.name) == value, (variable, text)
        if kind(row.name) == "value":  # the flag wins over the variable
            args = parse(argv(command, without=flag, **on_line))
            expected = [0.5] if row.name == "stage_costs" else value
            assert getattr(args, row.name) == expected, flag
        if kind(row.name) == "list":
            args = parse([*argv(command), flag, "linger_ms=7"])
            assert getattr(args, row.name) == ["linger_ms=7"], "the flags replace the variable's items"
        monkeypatch.delenv(variable)


def test_without_flag_or_variable_each_setting_has_its_default_and_the_object_the_same_values():
    for command in COMMANDS:
        args = parse(argv(command))
        settings = KafkaSettings.from_args(args)
        for row in (row for row in SETTINGS if command in row.commands):
            given = getattr(args, row.name)
            assert getattr(settings, row.name) == given or (
                isinstance(given, list) and list(getattr(settings, row.name)) == given
            ), (command, row.name)
    run = KafkaSettings.from_args(parse(argv("run")))
    orchestrate = KafkaSettings.from_args(parse(argv("orchestrate")))
    # The two documented per-mode defaults (docs/kafka.md): checkpoints every 0 (off) records in run,
    # 10000 in orchestrate, which commits only with a checkpoint; 256 KiB inputs in run, 1 MiB in orchestrate.
    assert (run.checkpoint_every, orchestrate.checkpoint_every) == (0, 10_000)
    assert (run.max_input_bytes, orchestrate.max_input_bytes) == (256 * 1024, 1024 * 1024)


def test_the_help_of_every_subcommand_lists_every_setting_with_its_variable():
    commands = subcommands()
    for command in COMMANDS:
        text = " ".join(commands[command].format_help().split())
        for row in (row for row in SETTINGS if command in row.commands):
            flag = flag_of(row.name)
            assert f"{flag} " in text and f"[env {variable_of(flag)}]" in text, (command, flag)


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    kafka = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["kafka"]
    return dict(next(a for a in kafka._actions if isinstance(a, argparse._SubParsersAction)).choices)


def test_the_docs_table_is_the_settings_table():
    text = DOCS.read_text()
    start = text.index(
        "<!-- settings table: generated by uss_stream_kafka.cli.settings.markdown_table() -->\n"
    )
    table = text[text.index("\n", start) + 1 : text.index("<!-- end of the settings table -->")]
    assert table == markdown_table(), "regenerate the table of docs/kafka.md with markdown_table()"
    for row in SETTINGS:
        assert f"| `{flag_of(row.name)}` | `{variable_of(flag_of(row.name))}` |" in table


WRONG = ["x", "-5", "0", "1.5", "70000", "", "a=b=c,", "uss-ucb:beta=1"]


def test_a_wrong_value_is_refused_naming_the_flag_and_the_variable_in_every_mode(monkeypatch, capsys):
    for row in (row for row in SETTINGS if row.name in SAMPLES):
        flag, variable = flag_of(row.name), variable_of(flag_of(row.name))
        refused = 0
        for text in WRONG:
            outcomes = set()
            for command in row.commands:
                try:
                    settings = KafkaSettings(command, **{**minimal_values(command), row.name: text})
                    outcomes.add(("value", repr(getattr(settings, row.name))))
                except ValueError as error:
                    if f"{flag} (env {variable})" in str(error):
                        outcomes.add(("refused", None))
                    else:  # refused for another setting's sake: the combination
                        outcomes.add(("combination", None))
            if ("refused", None) in outcomes:
                refused += 1
                assert outcomes == {("refused", None)}, (row.name, text, outcomes)  # in every mode
                if kind(row.name) == "value":  # and on the command line, from the flag and from the variable
                    command = row.commands[0]
                    error = refusal(argv(command, without=flag, **{flag: text}), capsys)
                    assert flag in error, error
                    if not text:  # an empty variable is an unset one
                        continue
                    monkeypatch.setenv(variable, text)
                    error = refusal(argv(command, without=flag), capsys)
                    assert flag in error and variable in error, error
                    monkeypatch.delenv(variable)
        assert refused or kind(row.name) == "list" or row.name in ("stage_names", "seed"), row.name


def refusal(arguments: list[str], capsys: pytest.CaptureFixture) -> str:
    """The error of a refused command line: argparse's (exit 2) or the settings' check (exit 2 too)."""
    try:
        KafkaSettings.from_args(build_parser().parse_args(arguments))
    except SystemExit as exit:
        assert exit.code == 2
        return capsys.readouterr().err
    except ValueError as error:
        return str(error)
    raise AssertionError(f"{arguments} was not refused")


def minimal_values(command: str) -> dict[str, Any]:
    return {flag[2:].replace("-", "_"): text for flag, text in MINIMAL[command].items()}


@pytest.mark.parametrize(
    ("command", "given", "names"),
    [
        ("run", {"stage_costs": None}, ["--stage-costs"]),
        ("run", {"mode": "features"}, ["--cascade-factory"]),
        ("run", {"cascade_factory": "uss_stream_kafka.cli.demo:pima_cascade"}, ["--cascade-factory"]),
        ("run", {"policy": "uss-ts", "alpha": 0.5}, ["--policy", "--alpha"]),
        ("orchestrate", {"policy": "uss-ts", "alpha": "0.5"}, ["--policy", "--alpha"]),
        ("run", {"policy": "fixed:depth=3"}, ["--policy"]),
        ("orchestrate", {"policy": "supervised"}, ["--policy"]),
        ("run", {"policy": "uss-kl-ucb:discount=0.9", "shared_learning": True},
         ["--shared-learning", "--policy"]),
        ("run", {"mode": "features", "cascade_factory": "m:f", "alpha": 1}, ["--policy", "--alpha"]),
        ("orchestrate", {"stage_names": "a,b,c"}, ["--stage-names"]),
        ("demo-producer", {"labels_topic": "l"}, ["--labels-topic"]),
        ("run", {"security_protocol": "SASL_SSL"}, ["--security-protocol", "--sasl-mechanism"]),
        ("run", {"consumer_option": ["linger_ms=5"]}, ["--consumer-option"]),
        ("orchestrate", {"kafka_option": ["no_such_setting=1"]}, ["--kafka-option"]),
        ("orchestrate", {"commit_every": 5}, ["--commit-every"]),  # not a setting of orchestrate
        ("orchestrate", {"input_topic": None}, ["--input-topic"]),
        ("run", {"max_poll_records": 2.5}, ["--max-poll-records"]),  # Python values: no silent truncation
        ("orchestrate", {"checkpoint_every": True}, ["--checkpoint-every"]),
    ],
)  # fmt: skip
def test_settings_that_do_not_go_together_are_refused_naming_each_flag_and_variable(command, given, names):
    with pytest.raises(ValueError) as refused:
        KafkaSettings(command, **{**minimal_values(command), **given})
    message = str(refused.value)
    for flag in names:
        assert flag in message and variable_of(flag) in message, message


def test_the_same_text_means_the_same_in_every_mode():
    texts = ["0", "1", "-1", "2.5", "x", "uss-ucb", "0,0.1", "DEBUG", "yes", "linger_ms=5"]
    for row in (row for row in SETTINGS if len(row.commands) > 1):
        actions = {
            command: next(a for a in subcommands()[command]._actions if a.dest == row.name and a.help)
            for command in row.commands
        }
        assert {tuple(a.option_strings) for a in actions.values()} == {(flag_of(row.name),)}, row.name
        if row.kind != "value":
            continue
        for text in texts:
            outcomes = set()
            for action in actions.values():
                try:
                    outcomes.add(("value", repr(action.type(text))))
                except argparse.ArgumentTypeError:
                    outcomes.add(("refused", None))
            assert len(outcomes) == 1, (row.name, text, outcomes)


def test_zero_checkpoints_are_off_in_every_mode_from_the_variables(monkeypatch):
    monkeypatch.setenv("USS_KAFKA_CHECKPOINT_EVERY", "0")
    monkeypatch.setenv("USS_KAFKA_CHECKPOINT_INTERVAL", "0")
    for command in ("run", "orchestrate"):
        settings = KafkaSettings.from_args(parse(argv(command)))
        assert (settings.checkpoint_every, settings.checkpoint_interval) == (0, 0.0)


def test_the_older_spellings_still_work_with_a_warning_and_lose_to_the_ruled_ones(monkeypatch):
    old = argv("orchestrate", without="--input-topic")
    old = [*old[: old.index("--output-topic")], *old[old.index("--output-topic") + 2 :]]
    with (
        pytest.warns(FutureWarning, match="--decisions-topic is deprecated: use --output-topic"),
        pytest.warns(FutureWarning, match="--requests-topic is deprecated: use --input-topic"),
    ):
        args = build_parser().parse_args([*old, "--requests-topic", "q", "--decisions-topic", "d"])
    assert (args.input_topic, args.output_topic) == ("q", "d")
    monkeypatch.setenv("USS_KAFKA_REQUESTS_TOPIC", "old-q")  # an old flag's variable, by the same rule
    with pytest.warns(FutureWarning, match="USS_KAFKA_REQUESTS_TOPIC is deprecated: use --input-topic"):
        args = build_parser().parse_args([*old, "--output-topic", "d"])
    assert args.input_topic == "old-q"
    monkeypatch.setenv("USS_KAFKA_INPUT_TOPIC", "q")
    assert parse([*old, "--output-topic", "d"]).input_topic == "q"
    with pytest.warns(FutureWarning, match="--topic is deprecated: use --input-topic"):
        args = build_parser().parse_args([*argv("demo-producer", without="--input-topic"), "--topic", "t"])
    assert args.input_topic == "t"
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "legacy:9092")
    with pytest.warns(FutureWarning, match="KAFKA_BOOTSTRAP_SERVERS is deprecated"):
        args = build_parser().parse_args(argv("run", without="--bootstrap-servers"))
    assert args.bootstrap_servers == "legacy:9092"
    monkeypatch.setenv("USS_KAFKA_BOOTSTRAP_SERVERS", "ruled:9092")
    assert parse(argv("run", without="--bootstrap-servers")).bootstrap_servers == "ruled:9092"
    assert parse(argv("run")).bootstrap_servers == "b:9092"


def test_the_python_default_policy_is_the_command_line_default():
    """USS-KL-UCB in Python and on the command line (the library's default), decided as USSKLUCB does."""
    from uss_stream.policies.specs import serving_policy
    from uss_stream_kafka import OutputsProcessor
    from uss_stream_kafka.processing.orchestration import OrchestrationProcessor

    cli = KafkaSettings.from_args(parse(argv("run")))
    assert cli.policy_spec() == "uss-kl-ucb"
    _, canonical = serving_policy(cli.policy_spec(), [0, 0.1], "outputs mode")
    processor = OutputsProcessor([0, 0.1])
    assert processor.policy == canonical == "uss-kl-ucb:alpha=1.0"
    assert OrchestrationProcessor([0, 0.1]).policy == canonical
    assert KafkaSettings.from_args(parse(argv("orchestrate"))).policy_spec() == "uss-kl-ucb"
    _, outputs = stream(400, seed=3)
    learner = processor.new_learner()
    depths = [learner.process(json.dumps({"id": i, "outputs": row}).encode())[1]
              for i, row in enumerate(outputs[:, :2].tolist())]  # fmt: skip
    assert depths == USSKLUCB([0, 0.1]).run(outputs[:, :2]).tolist()
    assert OutputsProcessor([0, 0.1], alpha=0.51).policy == "uss-ucb:alpha=0.51"


POLICY_RUN = ["kafka", "run", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "i",
              "--output-topic", "o", "--dlq-topic", "d", "--state-topic", "s", "--group-id", "g",
              "--stage-costs", "0,0.15,0.2", "--metrics-port", "-1"]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "ucb"], "unknown policy 'ucb'"),
        (["--policy", "uss-ucb:beta=2"], "unknown parameter(s) beta"),
        (["--policy", "fixed:depth=4"], "--policy 'fixed:depth=4': depth must be <= the number of stages 3"),
        (["--policy", "audited-uss"], "--policy 'audited-uss': AuditedUSS asks for labels"),
        (["--policy", "uss-kl-ucb", "--alpha", "0.5"], "give --policy or --alpha"),
        (["--policy", "uss-kl-ucb:discount=0.9", "--shared-learning"], "--shared-learning pools plain"),
        (["--mode", "features", "--cascade-factory", "uss_stream_kafka.cli.demo:pima_cascade",
          "--policy", "uss-ts"], "--policy and --alpha are for outputs mode"),
    ],
)  # fmt: skip
def test_a_bad_policy_is_a_configuration_error_exit_2(extra, message, capsys, monkeypatch):
    """Refused before any connection (the bootstrap address is unreachable): exit code 2."""
    monkeypatch.delenv("USS_KAFKA_POLICY", raising=False)
    monkeypatch.delenv("USS_KAFKA_ALPHA", raising=False)
    try:
        code = main([*POLICY_RUN, *extra])
    except SystemExit as exit:  # argparse refuses the spec's syntax (usage error)
        code = exit.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "--policy" in err, err


def test_orchestrate_takes_the_same_policy_option(capsys):
    args = ["kafka", "orchestrate", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "q",
            "--reports-topic", "r", "--output-topic", "d", "--dlq-topic", "x", "--state-topic", "s",
            "--group-id", "g", "--stage-costs", "0,0.1,0.2"]  # fmt: skip
    assert main([*args, "--policy", "supervised"]) == 2
    err = capsys.readouterr().err
    assert (
        "--policy 'supervised': SupervisedUCB learns from every event's label; orchestration has only" in err
    )
    with pytest.raises(SystemExit) as exit:
        main([*args, "--policy", "uss-ts:seed=x"])
    assert exit.value.code == 2 and "argument --policy" in capsys.readouterr().err


def test_registry_settings_are_checked_together():
    common = dict(bootstrap_servers="b:9092", input_topic="i", output_topic="o", dlq_topic="d",
                  state_topic="s", group_id="g", stage_costs="0,0.1")  # fmt: skip
    settings = KafkaSettings("run", **common, value_format="protobuf", schema_registry_url="http://r:8081",
                             schema_registry_auth="user:secret", subject_name_strategy="record")  # fmt: skip
    assert settings.payload_format() == PayloadFormat("protobuf", "http://r:8081", "user:secret", "record")
    with pytest.raises(
        ValueError, match=r"--value-format avro needs --schema-registry-url \(env USS_KAFKA_SCHEMA"
    ):
        KafkaSettings("run", **common, value_format="avro")
    with pytest.raises(ValueError, match=r"--schema-registry-auth .*: must be USER:PASSWORD"):
        KafkaSettings("run", **common, value_format="avro", schema_registry_url="u", schema_registry_auth="x")
    with pytest.raises(ValueError, match=r"--schema-registry-url .* is for --value-format avro"):
        KafkaSettings("run", **common, schema_registry_url="http://r:8081")
    with pytest.raises(ValueError, match=r"--value-format .* avro needs outputs mode"):
        KafkaSettings("run", **{**common, "stage_costs": None}, mode="features", cascade_factory="m:f",
                      value_format="avro", schema_registry_url="u")  # fmt: skip
    with pytest.raises(
        ValueError, match=r"--value-format .*: must be one of json, avro, protobuf, jsonschema"
    ):
        KafkaSettings("run", **common, value_format="xml")
