"""Issue 16 item 15: arbitrary bytes and JSON into every parser of the connector.

Events, labels, requests, reports and checkpoints always yield a decision, a dead letter
(:class:`InvalidEvent`) or a clean rejection (``ValueError``), never an escaping exception, and a
dead letter always fits its record limit. No broker needed: these are the functions the services
call on each record.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uss_stream.pending import RejectedReport
from uss_stream.policies import USSUCB
from uss_stream_kafka import DeadLetter, FeaturesProcessor, OutputsProcessor
from uss_stream_kafka.processing.events import REASONS, FeaturesCodec, InvalidEvent
from uss_stream_kafka.processing.orchestration import (
    OrchestrationLearner,
    OrchestrationProcessor,
    parse_report,
    parse_request,
)
from uss_stream_kafka.runtime.checkpoint import Checkpoint

COSTS = [0.0, 0.15, 0.2]
#: Costs under which the depth changes within a dozen events (stage 2 costs 0.9: from the second
#: event on, stage 1 beats it unless they disagreed), so that the decisions are worth comparing.
STEEP = [0.0, 0.9, 0.05]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=25,
)
#: Objects with the fields the parsers look at, holding anything.
fielded = st.fixed_dictionaries(
    {},
    optional={
        "id": documents,
        "outputs": st.lists(documents, max_size=4) | documents,
        "features": st.dictionaries(st.text(max_size=5), documents, max_size=4) | documents,
        "label": documents,
        "context": documents,
    },
)


def encoded(document: Any) -> bytes:
    return json.dumps(document, allow_nan=True).encode()


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


values = (
    st.none()
    | st.binary(max_size=300)
    | documents.map(encoded)
    | fielded.map(encoded)
    | st.integers(1, 5_000).map(nested)
)


#: Events the outputs mode takes: an id and one output per stage, equal or not across types.
events = st.fixed_dictionaries(
    {
        "id": st.text(max_size=8),
        "outputs": st.lists(st.sampled_from([0, 1, 1.0, True, False, "1", "a"]), min_size=3, max_size=3),
    }
).map(encoded)


@FUZZ
@pytest.mark.parametrize("costs", [COSTS, STEEP], ids=["costs", "steep"])
@given(batch=st.lists(values | events, max_size=12))
def test_outputs_mode_decides_or_dead_letters_every_value(
    costs: list[float], batch: list[bytes | None]
) -> None:
    learner = OutputsProcessor(costs, alpha=0.51).new_learner()
    payloads, depths, errors = learner.process_batch(batch, max_bytes=400)
    reference = USSUCB(costs)  # the accepted events alone, in order, through the library's loop
    for value, payload, depth, error in zip(batch, payloads, depths, errors):
        assert (payload is None) != (error is None)
        if error is not None:
            assert isinstance(error, InvalidEvent) and error.reason in REASONS and depth == 0
        else:
            decision = json.loads(payload)
            event = json.loads(value)
            assert decision["id"] == event["id"] and decision["depth"] == depth
            assert depth == reference.select()
            reference.update(event["outputs"][:depth])


@FUZZ
@given(values)
def test_features_codec_decodes_or_names_the_reason(value: bytes | None) -> None:
    codec = FeaturesCodec()
    for decode in (codec.decode, codec.decode_label):
        try:
            decode(value)
        except InvalidEvent as error:
            assert error.reason in REASONS


@pytest.fixture(scope="module")
def features_learner() -> Any:
    return FeaturesProcessor("uss_stream_kafka.cli.demo:pima_cascade").new_learner()


# Fuzzed events often carry none of a stage's features: the cascade warns once per stage, as it should.
@pytest.mark.filterwarnings("ignore::uss_stream.cascade.querying.EmptyViewWarning")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.fixed_dictionaries(
        {"id": st.integers(0, 9) | st.text(max_size=3)},
        optional={
            "features": st.dictionaries(
                st.sampled_from(["age", "bmi", "glucose", "x"]), documents, max_size=4
            ),
            "label": documents,
        },
    ).map(encoded)
    | values
)
def test_features_learner_processes_and_learns_or_rejects(features_learner: Any, value: bytes | None) -> None:
    for step in (features_learner.process, features_learner.learn):
        try:
            step(value)
        except InvalidEvent as error:
            assert error.reason in REASONS


@FUZZ
@given(values)
def test_requests_and_reports_parse_or_are_rejected(value: bytes | None) -> None:
    for parse in (parse_request, parse_report):
        try:
            parse(value, 400)
        except InvalidEvent as error:
            assert error.reason in REASONS


def offline() -> OrchestrationLearner:
    return OrchestrationProcessor(COSTS).new_learner()


#: Reports for the decisions the test makes, with outputs of anything.
reports_for_pending = st.fixed_dictionaries(
    {"id": st.sampled_from([0, 1, "a", "b"]), "outputs": st.lists(documents, min_size=1, max_size=3)}
).map(encoded)


@FUZZ
@given(st.lists(st.one_of(reports_for_pending, fielded.map(encoded), values), max_size=10))
def test_reports_are_applied_only_when_they_are_labels_of_a_pending_decision(
    reports: list[bytes | None],
) -> None:
    book = offline().book
    for decision_id in (0, 1, "a", "b"):
        book.decide(decision_id)
    for value in reports:
        try:
            decision_id, outputs = parse_report(value, 400)
            book.report(decision_id, outputs)
        except (InvalidEvent, RejectedReport):
            continue
        for output in outputs:  # what kafka run accepts as a label
            assert isinstance(output, (str, int, bool)) or (
                isinstance(output, float) and math.isfinite(output)
            )


@FUZZ
@given(values)
def test_checkpoint_records_parse_or_raise_value_error(value: bytes | None) -> None:
    if value is None:
        return
    with contextlib.suppress(ValueError):
        Checkpoint.from_record(None, value)


@FUZZ
@given(
    st.fixed_dictionaries(
        {"mode": st.just("orchestration"), "stage_costs": st.just(COSTS)},
        optional={"policy": documents, "alpha": documents, "stage_names": documents},
    ),
    documents | fielded,
)
def test_orchestration_restore_loads_or_raises_what_the_reader_turns_into_a_checkpoint_error(
    description: dict[str, Any], state: Any
) -> None:
    # The runtime's restore turns a ValueError into a CheckpointError; anything else would escape.
    with contextlib.suppress(ValueError):
        OrchestrationProcessor(COSTS).check_checkpoint(description)
    with contextlib.suppress(ValueError):
        offline().load_state_dict(state)


@FUZZ
@given(
    key=st.none() | st.binary(max_size=3_000),
    value=st.none() | st.binary(max_size=60_000),
    headers=st.lists(st.tuples(st.text(max_size=300), st.binary(max_size=20_000)), max_size=6),
    error=st.text(max_size=6_000),
    limit=st.integers(2_000, 50_000),
)
def test_a_dead_letter_always_fits_its_record_limit(key, value, headers, error, limit) -> None:
    letter = DeadLetter("invalid_json", error, "t" * 249, 3, 17, None, key, value, tuple(headers))
    record_key, record_value, record_headers = letter.to_record(1 << 20, limit)
    size = len(record_key or b"") + len(record_value) + sum(len(n) + len(v) for n, v in record_headers)
    assert size + 128 <= limit
    restored = DeadLetter.from_record(record_value)
    assert (restored.reason, restored.offset, restored.value_size) == ("invalid_json", 17, letter.value_size)
    assert value is None or value.startswith(restored.value)
