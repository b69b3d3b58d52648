"""One naming rule and one meaning for the service's settings in every mode (issue 13 item 4).

Every option of every ``uss-stream kafka`` subcommand falls back to the variable its flag names
(``--foo-bar`` <-> ``USS_KAFKA_FOO_BAR``; a few older names are still read), and an option that
``run`` and ``orchestrate`` share reads the same text as the same value (``0`` checkpoints mean
"off" in both).
"""

from __future__ import annotations

import argparse
import json
import uuid

import pytest
from conftest import COSTS, produce, read_all

from uss_stream.cli import build_parser
from uss_stream_kafka.cli import ENVIRONMENT, LEGACY_ENVIRONMENT, env_name

RUN = ["kafka", "run", "--bootstrap-servers", "b:9092", "--input-topic", "i", "--output-topic", "o",
       "--dlq-topic", "d", "--state-topic", "s", "--group-id", "g", "--stage-costs", "0,0.1"]  # fmt: skip
ORCHESTRATE = ["kafka", "orchestrate", "--bootstrap-servers", "b:9092", "--requests-topic", "q",
               "--reports-topic", "r", "--decisions-topic", "d", "--dlq-topic", "x", "--state-topic", "s",
               "--group-id", "g", "--stage-costs", "0,0.1"]  # fmt: skip


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    kafka = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["kafka"]
    commands = next(a for a in kafka._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


@pytest.fixture(autouse=True)
def _no_service_variables(monkeypatch):
    build_parser()  # fills ENVIRONMENT
    for name in {*ENVIRONMENT.values(), *LEGACY_ENVIRONMENT.values()}:
        monkeypatch.delenv(name, raising=False)


def test_every_option_of_every_subcommand_follows_the_naming_rule():
    for command, parser in subcommands().items():
        for action in parser._actions:
            flags = [flag for flag in action.option_strings if flag.startswith("--")]
            if not flags or action.dest in ("help",) or action.default == []:  # repeatable KEY=VALUE lists
                continue
            (flag,) = flags
            assert ENVIRONMENT[action.dest] == env_name(flag), (command, flag)
            assert f"[env {env_name(flag)}" in action.help, (command, flag, action.help)


def test_the_variable_is_read_by_its_rule_and_older_names_still_work(monkeypatch):
    monkeypatch.setenv("USS_KAFKA_CHECKPOINT_EVERY", "7")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "legacy:9092")
    args = build_parser().parse_args(RUN[:2] + RUN[4:])  # no --bootstrap-servers on the command line
    assert (args.checkpoint_every, args.bootstrap_servers) == (7, "legacy:9092")
    monkeypatch.setenv("USS_KAFKA_BOOTSTRAP_SERVERS", "ruled:9092")
    assert build_parser().parse_args(RUN[:2] + RUN[4:]).bootstrap_servers == "ruled:9092"
    assert build_parser().parse_args(RUN).bootstrap_servers == "b:9092"  # the option wins


def test_options_shared_by_run_and_orchestrate_mean_the_same():
    commands = subcommands()
    actions = {
        name: {a.dest: a for a in commands[name]._actions if a.option_strings}
        for name in ("run", "orchestrate")
    }
    shared = sorted(set(actions["run"]) & set(actions["orchestrate"]) - {"help"})
    assert {"checkpoint_every", "checkpoint_interval", "exit_when_idle", "policy", "alpha"} <= set(shared)
    samples = ["0", "1", "-1", "2.5", "x", "uss-ucb", "0,0.1", "DEBUG"]
    for dest in shared:
        run, orchestrate = actions["run"][dest], actions["orchestrate"][dest]
        assert run.option_strings == orchestrate.option_strings, dest
        if run.type is None:
            assert orchestrate.type is None, dest
            continue
        for text in samples:
            outcomes = []
            for action in (run, orchestrate):
                try:
                    outcomes.append(("value", action.type(text)))
                except (argparse.ArgumentTypeError, ValueError):
                    outcomes.append(("refused", None))
            assert outcomes[0] == outcomes[1], (dest, text, outcomes)


def test_zero_checkpoints_mean_off_in_every_mode(monkeypatch):
    monkeypatch.setenv("USS_KAFKA_CHECKPOINT_EVERY", "0")
    monkeypatch.setenv("USS_KAFKA_CHECKPOINT_INTERVAL", "0")
    for command in (RUN, ORCHESTRATE):
        args = build_parser().parse_args(command)
        assert (args.checkpoint_every, args.checkpoint_interval) == (0, 0.0)


@pytest.mark.kafka
@pytest.mark.timeout(180)
@pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")
def test_orchestrate_with_checkpoints_off_checkpoints_only_at_the_stop(bootstrap_servers, admin):
    from orchestrated import orchestrator as orchestration_service

    from uss_stream_kafka.orchestrating import OrchestrationTopics, create_orchestration_topics

    run = uuid.uuid4().hex[:10]
    topics = OrchestrationTopics(*(f"o-{run}-{role}" for role in ("req", "rep", "dec", "dlq", "state")))
    create_orchestration_topics(admin, topics)
    try:
        produce(bootstrap_servers, topics.requests, [json.dumps({"id": i}).encode() for i in range(1_500)])
        orchestrator = orchestration_service(
            bootstrap_servers,
            topics,
            f"g-{run}",
            COSTS,
            checkpoint_every=0,
            checkpoint_interval=0,
            exit_when_idle=1.0,
            max_poll_records=200,
        )
        summary = orchestrator.run()
        assert summary.decisions == 1_500
        assert summary.checkpoints == 1
        assert len(read_all(bootstrap_servers, topics.state)) == 1
    finally:
        admin.delete_topics(list(topics.all()))
