"""The end-to-end contenders of ``bench_kafka``: each one a cold process, timed by the broker.

Every contender is started as a new process on an input topic that already holds the events, and
writes to an output topic whose records carry the broker's append time
(``message.timestamp.type=LogAppendTime``). :func:`timed` reads the output back and gives

* **throughput**: records / (append time of the last output record − that of the first): the
  steady rate, start-up excluded, every contender timed by the same clock;
* **cold**: records / (append time of the last output record − the moment the process was
  launched): what a user waits for, start-up (interpreter, imports, group join, restore) included.

The contenders (``python -m benchmarks.kafka_contenders KIND BOOTSTRAP SOURCE TARGET N``):

* ``service``: ``uss-stream kafka run`` at its default flags (``--client auto``), with the given
  extra flags (e.g. ``--client kafka-python``); it exits once idle;
* ``passthrough-confluent`` / ``passthrough-kafka-python``: a bare consume → produce loop copying
  each record, with the service's default client settings (:func:`consumer_settings`), asynchronous
  commits after each batch; it exits after ``N`` records;
* ``quix``: a Quix Streams application doing the service's job: JSON in, this project's USS-KL-UCB
  ``select``/``update`` per event, JSON out (the bench extra: ``pip install 'uss-stream[bench]'``).

Examples
--------
>>> decide = _decider((0.0, 0.15, 0.2))
>>> decide({"id": "e1", "outputs": [1, 1, 1]})  # round 1 queries every stage
{'id': 'e1', 'depth': 3, 'prediction': 1, 'cost': 0.35}
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from uss_stream_kafka.runtime.commit import PRODUCER_DEFAULTS
from uss_stream_kafka.runtime.startup import CONSUMER_DEFAULTS

__all__ = ["KINDS", "Timing", "consumer_settings", "launch", "timed", "warm_bytecode"]

#: The contenders this module runs.
KINDS = ("service", "passthrough-confluent", "passthrough-kafka-python", "quix")
#: The cascade of the events (three stages) and the policy every contender decides with.
STAGE_COSTS = (0.0, 0.15, 0.2)
POLICY = "uss-kl-ucb"


#: A gap of at least this many seconds between consecutive output records counts as a stall.
STALL = 0.2


class Timing(NamedTuple):
    """A contender's figures, from its output's broker append times.

    ``stalled``: the seconds of the output's span spent in gaps of at least :data:`STALL` seconds
    between consecutive records (a fetch that waited, a commit that blocked).
    """

    throughput: float
    cold: float
    startup: float
    stalled: float


def consumer_settings(library: str) -> dict[str, Any]:
    """The service's default consumer settings for ``library`` (kafka-python names)."""
    from uss_stream_kafka.runtime.startup import library_defaults

    return {**CONSUMER_DEFAULTS, **library_defaults(library)}


#: What the contenders import (``uss-stream``'s parser imports every subcommand).
_IMPORTS = (
    "import uss_stream.commands.cli as cli; cli.build_parser(); import uss_stream_kafka.runtime.app, kafka;"
    "import uss_stream_kafka.clients.kafka_python, uss_stream_kafka.clients.confluent, confluent_kafka;"
    "import importlib.util as u; u.find_spec('quixstreams') and __import__('quixstreams')"
)


def _environment() -> dict[str, str]:
    """The contenders' environment: bytecode is cached, as after ``pip install``."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def warm_bytecode() -> None:
    """Import what the contenders import once, so that none compiles its modules at its start.

    With ``PYTHONDONTWRITEBYTECODE`` set (or a fresh environment without ``.pyc`` files), each
    cold start compiled every module from source: 20 s of the service's start-up on a loaded
    machine, which a user's installed package does not pay.
    """
    subprocess.run([sys.executable, "-c", _IMPORTS], env=_environment(), check=True, capture_output=True)


def launch(
    kind: str,
    bootstrap: str,
    source: str,
    target: str,
    n: int,
    flags: Sequence[str] = (),
    variables: dict[str, str] | None = None,
) -> float:
    """Run contender ``kind`` as a new process (with the environment ``variables`` besides the
    benchmark's) until it is done; the wall-clock time it was launched."""
    if kind == "service":
        command = [
            sys.executable, "-m", "uss_stream", "kafka", "run", "--bootstrap-servers", bootstrap,
            "--input-topic", source, "--output-topic", target, "--dlq-topic", f"{target}-dlq",
            "--state-topic", f"{target}-state", "--group-id", f"bench-{uuid.uuid4().hex[:8]}",
            "--stage-costs", ",".join(map(str, STAGE_COSTS)),
            "--metrics-port", "-1", "--exit-when-idle", "1", "--log-level", "WARNING", *flags,
        ]  # fmt: skip
    else:
        command = [sys.executable, "-m", "benchmarks.kafka_contenders", kind, bootstrap, source, target]
        command.append(str(n))
    launched = time.time()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env={**_environment(), **(variables or {})}
    )
    if done.returncode != 0:
        raise SystemExit(f"{kind} {' '.join(flags)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return launched


def output_topics(admin: Any, target: str) -> list[str]:
    """Create a contender's output topic ``target`` (stamped with the broker's append time), its
    dead-letter topic and its compacted state topic; returns their names."""
    from uss_stream_kafka.clients import TopicSpec

    names = [target, f"{target}-dlq", f"{target}-state"]
    admin.create_topics(
        {
            target: TopicSpec(configs={"message.timestamp.type": "LogAppendTime"}),
            names[1]: TopicSpec(),
            names[2]: TopicSpec(configs={"cleanup.policy": "compact"}),
        }
    )
    return names


def timed(bootstrap: str, topic: str, n: int, launched: float, skip: int = 0) -> Timing:
    """The :class:`Timing` of the ``n`` records of ``topic`` (one partition), written from ``launched`` on
    (``skip``: of the records after the first ``skip`` only)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    consumer.assign([TopicPartition(topic, 0)])
    stamps: list[int] = []
    deadline = time.monotonic() + 120
    while len(stamps) < n and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500, max_records=50_000).values():
            stamps += [record.timestamp for record in records]
    consumer.close()
    if len(stamps) < n:
        raise SystemExit(f"{topic}: {len(stamps)} of {n} records")
    stamps = stamps[skip:n]
    n = len(stamps)
    first, last = stamps[0] / 1000.0, stamps[-1] / 1000.0
    gaps = [(b - a) / 1000.0 for a, b in itertools.pairwise(stamps)]
    stalled = sum(gap for gap in gaps if gap >= STALL)
    return Timing(n / max(last - first, 1e-3), n / (last - launched), first - launched, stalled)


def _passthrough_confluent(bootstrap: str, source: str, target: str, n: int) -> None:
    from confluent_kafka import Consumer, Producer

    from uss_stream_kafka.clients.librdkafka_config import librdkafka_config

    consumer = Consumer(
        {
            **librdkafka_config({**consumer_settings("confluent"), "bootstrap_servers": bootstrap}),
            "group.id": f"bench-pass-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([source])
    producer = Producer(
        librdkafka_config({**PRODUCER_DEFAULTS, "bootstrap_servers": bootstrap, "enable_idempotence": True})
    )
    copied = 0
    while copied < n:
        messages = consumer.consume(5000, 0.5)
        for message in messages:
            while True:
                try:
                    producer.produce(target, message.value(), message.key(), message.partition())
                    break
                except BufferError:  # librdkafka's queue is full: serve delivery reports (its docs)
                    producer.poll(0.05)
        copied += len(messages)
        producer.poll(0)
        if messages:
            consumer.commit(asynchronous=True)
    producer.flush()
    consumer.close()


def _passthrough_kafka_python(bootstrap: str, source: str, target: str, n: int) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    consumer = KafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=f"bench-pass-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=5000,
        **consumer_settings("kafka-python"),
    )
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, **PRODUCER_DEFAULTS)
    copied = 0
    while copied < n:
        for tp, records in consumer.poll(timeout_ms=500).items():
            for record in records:
                producer.send(target, record.value, key=record.key, partition=tp.partition)
            copied += len(records)
            consumer.commit_async()
    producer.flush()
    producer.close()
    consumer.close()


def _decider(stage_costs: Sequence[float]) -> Any:
    """The per-event job of the Quix application: USS-KL-UCB ``select``, ``update`` on what it revealed."""
    from uss_stream.policies.specs import serving_policy

    policy = serving_policy(POLICY, stage_costs, "outputs")[0]
    cumulative = [round(sum(stage_costs[: k + 1]), 12) for k in range(len(stage_costs))]

    def decide(event: dict[str, Any]) -> dict[str, Any]:
        depth = policy.select()
        revealed = event["outputs"][:depth]
        policy.update(revealed)
        return {"id": event["id"], "depth": depth, "prediction": revealed[-1], "cost": cumulative[depth - 1]}

    return decide


def _quix(bootstrap: str, source: str, target: str, n: int) -> None:
    from quixstreams import Application

    with tempfile.TemporaryDirectory() as state_dir:
        app = Application(
            broker_address=bootstrap,
            consumer_group=f"bench-quix-{uuid.uuid4().hex[:8]}",
            auto_offset_reset="earliest",
            state_dir=state_dir,
            loglevel="WARNING",
            use_changelog_topics=False,
        )
        events = app.topic(source, value_deserializer="json")
        decisions = app.topic(target, value_serializer="json")
        frame = app.dataframe(events).apply(_decider(STAGE_COSTS))
        frame.to_topic(decisions)
        app.run(count=n, collect=False)


_LOOPS = {
    "passthrough-confluent": _passthrough_confluent,
    "passthrough-kafka-python": _passthrough_kafka_python,
    "quix": _quix,
}


def events(n: int, seed: int = 0) -> list[bytes]:
    """``n`` JSON events of three stage outputs (stage k < 3 errs with probability 0.2 / k)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    rows = np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1).tolist()
    return [json.dumps({"id": f"e{i}", "outputs": row}).encode() for i, row in enumerate(rows)]


if __name__ == "__main__":
    kind, bootstrap_servers, source_topic, target_topic, count = sys.argv[1:6]
    _LOOPS[kind](bootstrap_servers, source_topic, target_topic, int(count))
