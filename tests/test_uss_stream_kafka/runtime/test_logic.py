"""The connector's logic without a broker: batched decisions, restore plans, configuration, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_uss_stream_kafka.helpers import DEEPER, NESTED
from uss_stream.commands.cli import build_parser
from uss_stream.policies import USSUCB
from uss_stream.policies.batch import MIN_BATCH, decide_batch
from uss_stream_kafka import (
    Application,
    Checkpoint,
    CheckpointError,
    ClientConfig,
    OutputsProcessor,
    plan_restore,
)
from uss_stream_kafka.cli.commands import ENVIRONMENT
from uss_stream_kafka.operations.metrics import LatencyHistogram

LABELS = {
    "ints": st.integers(0, 2),
    "bools and ints": st.sampled_from([True, False, 0, 1]),
    "strings": st.sampled_from(["cat", "dog", "1"]),
    "mixed": st.sampled_from([1, "1", 1.0, True, "one"]),
    "huge ints and floats": st.sampled_from([2**53 + 1, float(2**53), 2**70, 0]),
}


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(sorted(LABELS)),
    data=st.data(),
    n_stages=st.integers(1, 4),
    warm=st.integers(0, 300),
    batch=st.integers(1, 600),
    guess=st.integers(1, 4),
)
def test_batched_decisions_equal_the_select_update_loop(kind, data, n_stages, warm, batch, guess):
    rows = data.draw(
        st.lists(
            st.lists(LABELS[kind], min_size=n_stages, max_size=n_stages),
            min_size=warm + batch,
            max_size=warm + batch,
        )
    )
    costs = data.draw(st.lists(st.sampled_from([0.0, 0.05, 0.1, 0.3]), min_size=n_stages, max_size=n_stages))
    looped, batched = USSUCB(costs), USSUCB(costs)
    expected = looped.run(np.array(rows, dtype=object)).tolist()
    batched.run(np.array(rows[:warm], dtype=object).reshape(warm, n_stages))
    flat = [value for row in rows[warm:] for value in row]
    assert decide_batch(batched, flat, guess=min(guess, n_stages)) == expected[warm:]
    assert batched.state_dict() == looped.state_dict()


def test_batches_below_the_threshold_use_the_loop_and_agree():
    rows = [[1, 0, 1]] * (MIN_BATCH - 1)
    policy = USSUCB([0, 0.1, 0.1])
    assert decide_batch(policy, [v for row in rows for v in row]) == USSUCB([0, 0.1, 0.1]).run(rows).tolist()


def test_a_learner_decides_the_same_in_batches_of_any_size():
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 2, 3000)
    outputs = np.stack([truth ^ (rng.random(3000) < 0.3), truth, truth ^ (rng.random(3000) < 0.05)], axis=1)
    values = [json.dumps({"id": i, "outputs": row}).encode() for i, row in enumerate(outputs.tolist())]
    expected = USSUCB([0, 0.2, 0.1]).run(outputs).tolist()
    for size in (1, 7, 64, 1000, 3000):
        learner = OutputsProcessor([0, 0.2, 0.1], alpha=0.51).new_learner()
        depths = []
        for start in range(0, len(values), size):
            depths += learner.process_batch(values[start : start + size], max_bytes=1024).depths
        assert depths == expected, size


@pytest.mark.parametrize(
    ("checkpoint", "committed", "start", "end", "expected", "warns"),
    [
        (None, None, 0, 100, (False, None, -1, -1), False),  # new group: auto_offset_reset decides
        (None, 40, 0, 100, (False, 0, 40, 40), True),  # state lost: rebuild from the log
        (None, 40, 10, 100, (False, 10, 40, 40), True),  # ... of which retention deleted a part
        (30, 40, 0, 100, (True, 30, 40, 40), False),  # checkpoint behind the commit: replay
        (40, 30, 0, 100, (True, 40, 40, 30), True),  # checkpoint ahead of the commit: skip, counted
        (40, None, 0, 100, (True, 40, 40, -1), False),
        (40, 40, 0, 40, (True, 40, 40, 40), False),
        (5, 40, 10, 100, (True, 10, 40, 40), True),  # retention deleted records after the checkpoint
    ],
)
def test_restore_plans(checkpoint, committed, start, end, expected, warns):
    plan = plan_restore(checkpoint, committed, start, end)
    assert (plan.use_checkpoint, plan.seek, plan.replay_until, plan.committed) == expected
    assert (plan.warning is not None) == warns


def test_a_checkpoint_beyond_the_end_of_the_partition_is_an_error():
    with pytest.raises(CheckpointError, match="recreated or truncated"):
        plan_restore(checkpoint=500, committed=None, log_start=0, log_end=100)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"{", "not JSON"),
        (b'{"format": "other"}', "format"),
        (
            b'{"format": "uss-stream/kafka-checkpoint/v1", "topic": "t", "partition": -1, "offset": 0}',
            "partition",
        ),
        (b'{"format": "uss-stream/kafka-checkpoint/v1", "topic": "t", "partition": 0, "offset": 0}', "state"),
    ],
)
def test_invalid_checkpoints_are_named(value, message):
    with pytest.raises(ValueError, match=message):
        Checkpoint.from_record(None, value)


def test_a_checkpoint_under_the_wrong_key_is_refused():
    checkpoint = Checkpoint("events", 1, 10, {"policy": "USSUCB"})
    with pytest.raises(ValueError, match="stored under key"):
        Checkpoint.from_record(b"events/2", checkpoint.to_bytes())


def test_checkpoint_parser_never_raises_anything_but_value_error() -> None:
    for value in (NESTED, DEEPER, b"\xff", b"[]", b'{"format": 1}'):
        with pytest.raises(ValueError):
            Checkpoint.from_record(None, value)


@pytest.mark.parametrize("labels_offset", [-1, 1.5, "7", True])
def test_a_checkpoint_with_an_invalid_labels_offset_is_not_read(labels_offset):
    document = json.loads(Checkpoint(topic="in", partition=0, offset=3, state={}, labels_offset=2).to_bytes())
    document["labels_offset"] = labels_offset
    with pytest.raises(ValueError, match="'labels_offset' must be an integer >= 0"):
        Checkpoint.from_record(b"in/0", json.dumps(document).encode())


def test_security_settings_reach_every_client():
    config = ClientConfig(
        "a:9093,b:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="svc",
        sasl_password="pw",
        ssl_cafile="/ca.pem",
        ssl_check_hostname=False,
        options={"request_timeout_ms": 60_000},
    )
    for role in ("consumer", "producer", "admin", "state-reader"):
        kwargs = config.kafka_kwargs(role)
        assert kwargs["bootstrap_servers"] == ["a:9093", "b:9093"]
        assert (kwargs["sasl_mechanism"], kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == (
            "SCRAM-SHA-256",
            "svc",
            "pw",
        )
        assert (kwargs["ssl_cafile"], kwargs["ssl_check_hostname"], kwargs["request_timeout_ms"]) == (
            "/ca.pem",
            False,
            60_000,
        )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"security_protocol": "SASL_SSL"}, "needs a sasl_mechanism"),
        ({"sasl_mechanism": "PLAIN"}, "needs security_protocol SASL"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}, "needs sasl_username"),
        ({"options": {"enable_auto_commit": True}}, "set by the service"),
        ({"bootstrap_servers": " , "}, "at least one host:port"),
    ],
)
def test_inconsistent_client_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        ClientConfig(**{"bootstrap_servers": "b:9092", **settings})


RUN = [
    "kafka", "run", "--bootstrap-servers", "127.0.0.1:9092", "--input-topic", "IN", "--output-topic", "OUT",
    "--dlq-topic", "DLQ", "--state-topic", "STATE", "--group-id", "G", "--stage-costs", "0,0.15,0.2",
]  # fmt: skip


def test_the_documented_command_line_parses():
    args = build_parser().parse_args([*RUN, "--alpha", "0.51", "--exit-when-idle", "5"])
    assert (args.command, args.kafka_command, args.mode) == ("kafka", "run", "outputs")
    assert (args.stage_costs, args.alpha, args.exit_when_idle) == ([0.0, 0.15, 0.2], 0.51, 5.0)
    assert (args.input_topic, args.output_topic, args.dlq_topic, args.state_topic, args.group_id) == (
        "IN",
        "OUT",
        "DLQ",
        "STATE",
        "G",
    )


def test_options_fall_back_to_the_environment(monkeypatch):
    monkeypatch.setenv("USS_KAFKA_GROUP_ID", "from-env")
    monkeypatch.setenv("USS_KAFKA_SASL_PASSWORD", "secret")
    monkeypatch.setenv("USS_KAFKA_COMMIT_INTERVAL", "2.5")
    without_group = [a for a in RUN if a not in ("--group-id", "G")]
    args = build_parser().parse_args(without_group)
    assert (args.group_id, args.sasl_password, args.commit_interval) == ("from-env", "secret", 2.5)
    assert build_parser().parse_args([*without_group, "--group-id", "flag"]).group_id == "flag"
    assert ENVIRONMENT["group_id"] == "USS_KAFKA_GROUP_ID"


def test_bad_environment_values_are_reported_when_the_command_runs(monkeypatch, capsys):
    monkeypatch.setenv("USS_KAFKA_MODE", "telepathy")
    with pytest.raises(SystemExit):
        build_parser().parse_args(RUN)
    assert "must be one of outputs, features" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--stage-costs", "0,x"], "comma-separated numbers"),
        (["--alpha", "0"], "must be > 0"),
        (["--security-protocol", "SSH"], "must be one of"),
    ],
)
def test_bad_options_are_rejected_by_the_parser(extra, message, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*RUN, *extra])
    assert message in capsys.readouterr().err


def test_weighted_quantiles_of_the_latency_histogram():
    histogram = LatencyHistogram("h_seconds", "h", window=1000)
    histogram.observe_ns([1_000, 100_000], weights=[99, 1])
    assert histogram.quantile(0.5) == pytest.approx(1e-6)
    assert histogram.quantile(0.995) == pytest.approx(1e-4)
    assert histogram.count == 100


class _ClosableProducer:
    """Stands in for the transactional producer: only ``close`` is called on a replaced one."""

    closed = 0

    def close(self, timeout: float | None = None) -> None:
        _ClosableProducer.closed += 1


def _exactly_once_app(monkeypatch) -> Application:
    """An exactly-once Application (never started) whose producers are :class:`_ClosableProducer`."""
    from uss_stream_kafka import Topics
    from uss_stream_kafka.operations.metrics import ServiceMetrics

    app = Application(
        ClientConfig("127.0.0.1:1"), group_id="g", topics=Topics("i", "o", "d", "s"),
        guarantee="exactly-once", group_instance_id="w1", http_port=None,
    )  # fmt: skip
    app.metrics = ServiceMetrics(3)
    committer = app._committer  # the commit / transaction protocol (checkpointing.py)
    monkeypatch.setattr(_ClosableProducer, "closed", 0)  # a class counter: restored after the test
    committer.producer = _ClosableProducer()
    monkeypatch.setattr(committer, "new_producer", _ClosableProducer)
    return app


def test_producers_replaced_after_timeouts_are_not_taken_for_another_instance(monkeypatch):
    from kafka.errors import ProducerFencedError

    from uss_stream_kafka.clients import ClientError
    from uss_stream_kafka.exceptions import DeliveryError
    from uss_stream_kafka.runtime.commit import MAX_REPLACEMENTS

    app = _exactly_once_app(monkeypatch)
    committer = app._committer
    # A broker restart: flushes time out again and again before the next commit.
    for _ in range(MAX_REPLACEMENTS + 1):
        committer.replace_producer(ClientError("flush: 9 record(s) not delivered", timeout=True))
    assert app.summary.producer_replacements == MAX_REPLACEMENTS + 1
    # A fenced producer after them is still one replacement; fenced again before a commit is fatal.
    committer.replace_producer(ProducerFencedError())
    with pytest.raises(DeliveryError, match="after 1 replacement"):
        committer.replace_producer(ProducerFencedError())


def test_a_producer_that_fails_again_before_a_commit_is_fatal(monkeypatch):
    from kafka.errors import ProducerFencedError

    from uss_stream_kafka.exceptions import DeliveryError
    from uss_stream_kafka.runtime.commit import MAX_REPLACEMENTS

    app = _exactly_once_app(monkeypatch)
    committer = app._committer
    fenced = ProducerFencedError()
    # (The limit of MAX_REPLACEMENTS within the window, with commits in between, is tested on a real
    # broker in test_exactly_once.py.) Two failures with no commit in between are fatal at once.
    committer.replace_producer(fenced)
    assert app.summary.producer_replacements == 1 == _ClosableProducer.closed < MAX_REPLACEMENTS
    with pytest.raises(DeliveryError, match=r"'uss-stream\.g\.w1'.*after 1 replacement.*another instance"):
        committer.replace_producer(fenced)
