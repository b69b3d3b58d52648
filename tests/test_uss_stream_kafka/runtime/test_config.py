"""The service's one configuration: :class:`ServiceConfig` checks every value once, at and near its
bounds; the command line maps its settings to one config and builds the policy and the client
configuration once."""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest

from uss_stream.commands.cli import build_parser
from uss_stream.policies.specs import PolicySpec
from uss_stream_kafka import Application, ClientConfig, OutputsProcessor, ServiceConfig, Topics
from uss_stream_kafka.cli.settings import KafkaSettings
from uss_stream_kafka.clients import config as client_config
from uss_stream_kafka.processing.orchestration import OrchestrationProcessor

TOPICS = Topics(input="i", output="o", dead_letter="d", state="s")
WITH_LABELS = Topics(input="i", output="o", dead_letter="d", state="s", labels="l")
SERVICE = ["--bootstrap-servers", "b:9092", "--output-topic", "o", "--dlq-topic", "d", "--state-topic", "s"]
RUN = ["kafka", "run", *SERVICE, "--input-topic", "i", "--group-id", "g", "--stage-costs", "0,0.1"]
ORCHESTRATE = [
    "kafka", "orchestrate", *SERVICE, "--input-topic", "q", "--reports-topic", "r", "--group-id", "g",
    "--stage-costs", "0,0.1",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _no_service_variables(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("USS_KAFKA_"):
            monkeypatch.delenv(name)


# At each bound the value is taken; just past it, refused with the setting's name.
@pytest.mark.parametrize(
    ("name", "taken", "refused"),
    [
        ("commit_interval", 0, -0.001),
        ("checkpoint_interval", 0.0, -1e-9),
        ("health_timeout", 0, -0.5),
        ("commit_every", 0, -1),
        ("checkpoint_every", 0, -1),
        ("max_input_bytes", 1, 0),
        ("max_poll_records", 1, 0),
        ("exit_when_idle", 1e-9, 0),
        ("relearn_max_labels", 1, 0),
    ],
)
def test_each_bound_is_taken_and_the_value_just_past_it_refused(name, taken, refused):
    assert getattr(ServiceConfig("g", TOPICS, **{name: taken}), name) == taken
    with pytest.raises(ValueError, match=rf"^{name} must be .*, got {refused!r}$"):
        ServiceConfig("g", TOPICS, **{name: refused})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_poll_records", 2.5),  # no silent truncation
        ("commit_every", True),  # a bool is not a count
        ("relearn_max_labels", True),
        ("commit_interval", "1"),
        ("group_id", ""),
        ("auto_offset_reset", "smallest"),
        ("guarantee", "exactly_once"),
        ("client_library", "rdkafka"),
    ],
)
def test_values_of_the_wrong_kind_or_choice_are_refused_by_name(name, value):
    values = {"group_id": "g", "topics": TOPICS, name: value}
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        ServiceConfig(**values)


def test_client_options_are_checked_as_the_client_takes_them():
    with pytest.raises(ValueError, match="'linger_ms' is not a kafka-python consumer setting"):
        ServiceConfig("g", TOPICS, consumer_options={"linger_ms": 5})
    assert ServiceConfig("g", TOPICS, producer_options={"linger_ms": 5}).producer_options == {"linger_ms": 5}


def test_the_config_is_frozen_and_normalised():
    config = ServiceConfig("g", TOPICS, commit_interval=2, propagate_headers=["x-a"], client_library="auto")
    assert config.commit_interval == 2.0 and isinstance(config.commit_interval, float)
    assert config.propagate_headers == ("x-a",)
    assert config.client_library == "auto" and config.library in ("kafka-python", "confluent")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.group_id = "h"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("topics", "shared", "mode", "refusal"),
    [
        (TOPICS, False, "outputs", None),
        (WITH_LABELS, False, "outputs", "a labels topic is only used in features and orchestration mode"),
        (WITH_LABELS, False, "features", None),
        (TOPICS, False, "orchestration", "orchestration needs a reports topic"),
        (WITH_LABELS, False, "orchestration", None),
        (TOPICS, True, "outputs", None),
        (WITH_LABELS, True, "features", "shared_learning needs outputs mode"),
    ],
)
def test_a_processor_mode_must_fit_the_topics_and_options(topics, shared, mode, refusal):
    config = ServiceConfig("g", topics, shared_learning=shared)
    if refusal is None:
        config.check_processor(mode)
    else:
        with pytest.raises(ValueError, match=refusal):
            config.check_processor(mode)


def test_an_application_is_built_from_a_config_or_its_keywords_alike():
    client = ClientConfig("b:9092")
    config = ServiceConfig("g", TOPICS, max_input_bytes=1024, http_port=None)
    by_config = Application(client, config=config)
    by_keywords = Application(client, "g", TOPICS, max_input_bytes=1024, http_port=None)
    assert by_config.config is config
    assert by_keywords.config == config
    assert by_keywords.max_input_bytes == by_config.max_input_bytes == 1024
    assert by_keywords.topics == TOPICS and by_keywords.http_port is None
    with pytest.raises(ValueError, match="max_poll_records must be an integer >= 1, got 0"):
        Application(client, "g", TOPICS, max_poll_records=0)
    with pytest.raises(TypeError, match="not both"):
        Application(client, "g", TOPICS, config=config)
    with pytest.raises(AttributeError, match="no_such_setting"):
        _ = by_config.no_such_setting


def test_the_settings_map_to_one_service_config_per_command():
    run = KafkaSettings.from_args(build_parser().parse_args([*RUN, "--metrics-port", "-1"]))
    config = run.service_config()
    assert config is run.service_config()  # built once
    assert (config.group_id, config.topics, config.http_port, config.commit_interval) == (
        "g",
        TOPICS,
        None,
        1.0,
    )
    assert config.producer_options == {} and config.rebuild_models
    arguments = [*ORCHESTRATE, "--producer-option", "linger_ms=5", "--checkpoint-every", "7"]
    orchestrate = KafkaSettings.from_args(build_parser().parse_args(arguments)).service_config()
    assert orchestrate.topics == Topics(input="q", output="o", dead_letter="d", state="s", labels="r")
    assert math.isinf(orchestrate.commit_interval)  # commits at its checkpoints only
    assert orchestrate.producer_options == {"linger_ms": 5} and orchestrate.checkpoint_every == 7
    default = KafkaSettings.from_args(build_parser().parse_args(ORCHESTRATE)).service_config()
    assert default.producer_options == {"linger_ms": 2}


@pytest.mark.parametrize(
    ("command", "processor"), [(RUN, OutputsProcessor), (ORCHESTRATE, OrchestrationProcessor)]
)
def test_the_policy_and_the_client_config_are_built_once(monkeypatch, command, processor):
    builds = {"policy": 0, "client": 0}
    build, init = PolicySpec.build, client_config.ClientConfig.__post_init__

    def counted_build(self, *args, **kwargs):
        builds["policy"] += 1
        return build(self, *args, **kwargs)

    def counted_init(self):
        builds["client"] += 1
        init(self)

    monkeypatch.setattr(PolicySpec, "build", counted_build)
    monkeypatch.setattr(client_config.ClientConfig, "__post_init__", counted_init)
    settings = KafkaSettings.from_args(build_parser().parse_args(command))  # checks the policy
    template, canonical = settings.policy_template()
    built = processor([0, 0.1], policy=template)
    settings.client_config(), settings.client_config()
    assert builds == {"policy": 1, "client": 1}
    assert built.policy == canonical == "uss-kl-ucb:alpha=1.0"
    assert built.new_learner() is not None and builds["policy"] == 1  # learners clone the template


def test_a_built_policy_for_other_costs_is_refused():
    template = KafkaSettings.from_args(build_parser().parse_args(RUN)).policy_template()[0]
    with pytest.raises(
        ValueError, match=r"built for stage costs \[0.0, 0.1\], the processor has \[0.0, 0.2\]"
    ):
        OutputsProcessor([0, 0.2], policy=template)


def test_alpha_is_deprecated_naming_the_policy_to_use_and_still_works():
    with pytest.warns(FutureWarning, match=r"--alpha is deprecated: use --policy uss-ucb:alpha=0.51"):
        settings = KafkaSettings.from_args(build_parser().parse_args([*RUN, "--alpha", "0.51"]))
    assert settings.policy_template()[1] == "uss-ucb:alpha=0.51"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KafkaSettings.from_args(build_parser().parse_args([*RUN, "--policy", "uss-ucb:alpha=0.51"]))
