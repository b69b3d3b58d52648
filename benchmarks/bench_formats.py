"""Avro against JSON payloads: the decision service's throughput in each format, in the same run.

Run: ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 SCHEMA_REGISTRY_URL=http://127.0.0.1:8081/apis/ccompat/v7
python -m benchmarks.bench_formats [--events N] [--rounds R]`` (``make test`` starts both servers with
``deploy/kafka/with-broker.sh`` and ``deploy/registry/with-registry.sh``).

Per round, for JSON and for Avro (events written with a registered schema, decisions written with
the service's registered ``Decision`` schema): N outputs-mode events (K = 3, one partition) are
written to a fresh input topic, then ``uss-stream kafka run --client confluent --value-format ...``
decides them in a process of its own and exits once idle. Throughput = events / (broker append time
of the last decision − that of the first), so start-up is excluded and both formats are timed by
the same clock; librdkafka prefetches the whole input (``queued.min.messages``, as in
``bench_kafka``), so the rate is the service's loop, not the fetch back-off. Every decision is
checked against the policy's own ``run``. Reported: each round's two rates and their ratio
(Avro / JSON, target >= 0.5), and the median ratio over the rounds.

Besides, without the broker: the codec alone (``decode_many`` + ``encode_many`` of a 5 000-event
batch), per event, in both formats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

import numpy as np

from uss_stream.policies import USSUCB
from uss_stream_kafka.processing.formats import EVENT_AVRO, PayloadFormat

STAGE_COSTS = [0.0, 0.15, 0.2]
CUMULATIVE = [0.0, 0.15, 0.35]


def _events(n: int, seed: int = 0) -> tuple[list[dict[str, Any]], np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    outputs = np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1)
    return [{"id": f"e{i}", "outputs": row} for i, row in enumerate(outputs.tolist())], outputs


def _values(payloads: PayloadFormat, topic: str, events: list[dict[str, Any]]) -> list[bytes]:
    if not payloads.registry:
        return [json.dumps(event).encode() for event in events]
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = payloads.serializer(payloads.client(), EVENT_AVRO)
    context = SerializationContext(topic, MessageField.VALUE)
    return [serialize(event, context) for event in events]


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "queue.buffering.max.messages": 2_000_000}
    )
    for value in values:
        producer.produce(topic, value, partition=0)
    producer.flush(120)


def _read(bootstrap: str, topic: str, n: int, timeout: float = 300.0) -> list[Any]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < n and time.monotonic() < deadline:
        records.extend(m for m in consumer.consume(10_000, 0.5) if m.error() is None)
    consumer.close()
    if len(records) < n:
        raise RuntimeError(f"{topic}: only {len(records)} of {n} decisions after {timeout}s")
    return records


def _topics(bootstrap: str, run: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, NewTopic

    names = {kind: f"bench-formats-{run}-{kind}" for kind in ("in", "out", "dlq", "state")}
    config = {"out": {"message.timestamp.type": "LogAppendTime"}, "state": {"cleanup.policy": "compact"}}
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures are done
    futures = admin.create_topics(
        [NewTopic(name, 1, 1, config=config.get(kind, {})) for kind, name in names.items()]
    )
    for future in futures.values():
        future.result(60)
    return names


def _service_rate(
    bootstrap: str, payloads: PayloadFormat, events: list[dict[str, Any]], depths: list[int]
) -> float:
    """Decide ``events`` with the service in ``payloads``' format; its decisions per second."""
    topics = _topics(bootstrap, uuid.uuid4().hex[:8])
    _produce(bootstrap, topics["in"], _values(payloads, topics["in"], events))
    registry = ["--value-format", payloads.value_format, "--schema-registry-url", str(payloads.registry_url)]
    command = [
        sys.executable, "-m", "uss_stream", "kafka", "run", "--bootstrap-servers", bootstrap,
        "--input-topic", topics["in"], "--output-topic", topics["out"], "--dlq-topic", topics["dlq"],
        "--state-topic", topics["state"], "--group-id", f"bench-{topics['in']}",
        "--stage-costs", ",".join(map(str, STAGE_COSTS)), "--policy", "uss-ucb:alpha=0.51",
        "--client", "confluent",
        "--consumer-option", "queued.min.messages=1000000", "--metrics-port", "-1", "--exit-when-idle", "3",
        "--log-level", "WARNING", *(registry if payloads.registry else []),
    ]  # fmt: skip
    subprocess.run(command, check=True, timeout=600)
    records = _read(bootstrap, topics["out"], len(events))
    reader = payloads.outputs_codec(3, CUMULATIVE, topics["in"], topics["out"])
    decode = reader.decode_decision if payloads.registry else json.loads
    decided = [decode(record.value())["depth"] for record in records]
    if decided != depths:
        raise AssertionError(f"{payloads.value_format}: the service's depths differ from the policy's run")
    first, last = records[0].timestamp()[1], records[-1].timestamp()[1]
    return len(records) / max((last - first) / 1000.0, 1e-3)


def _codec_seconds_per_event(
    payloads: PayloadFormat, events: list[dict[str, Any]], depths: list[int]
) -> float:
    codec = payloads.outputs_codec(3, CUMULATIVE, "bench-codec-in", "bench-codec-out")
    values = _values(payloads, "bench-codec-in", events)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        _, ids, outputs, _ = codec.decode_many(values, 1 << 20)
        codec.encode_many(ids, depths, outputs)
        best = min(best, time.perf_counter() - started)
    return best / len(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    registry = os.environ.get("SCHEMA_REGISTRY_URL")
    if not bootstrap or not registry:
        sys.exit("bench_formats needs KAFKA_BOOTSTRAP_SERVERS and SCHEMA_REGISTRY_URL")
    formats = {"json": PayloadFormat(), "avro": PayloadFormat("avro", registry)}

    events, outputs = _events(5_000)
    depths = USSUCB(STAGE_COSTS, alpha=0.51).run(outputs).tolist()
    codec = {name: _codec_seconds_per_event(p, events, depths) for name, p in formats.items()}
    print(
        f"codec alone (decode_many + encode_many, 5000 events): json {codec['json'] * 1e6:.2f} µs/event, "
        f"avro {codec['avro'] * 1e6:.2f} µs/event ({codec['json'] / codec['avro']:.2f}x)",
        flush=True,
    )
    events, outputs = _events(args.events, seed=1)
    depths = USSUCB(STAGE_COSTS, alpha=0.51).run(outputs).tolist()
    ratios = []
    for round_ in range(1, args.rounds + 1):
        load = os.getloadavg()[0]
        rates = {name: _service_rate(bootstrap, p, events, depths) for name, p in formats.items()}
        ratios.append(rates["avro"] / rates["json"])
        print(
            f"round {round_} (load {load:.1f}): service json {rates['json']:,.0f} events/s, "
            f"avro {rates['avro']:,.0f} events/s, avro/json {ratios[-1]:.2f}",
            flush=True,
        )
    print(f"median avro/json over {args.rounds} rounds: {statistics.median(ratios):.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()
