"""End-to-end throughput of the Kafka decision service against a bare consume→produce passthrough.

Run: ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 python -m benchmarks.bench_kafka``.

The input topic (one partition, outputs mode, K = 3) is written once with a fast producer. Then,
alternately, in the same process and on the same broker:

* **passthrough, per client**: a consumer → producer loop that copies each record to an output
  topic (no decoding, no commits; one flush at the end), with the service's own client settings:
  bare kafka-python, bare confluent-kafka (librdkafka), and each through the client seam
  (:mod:`uss_stream_kafka.clients`), whose overhead over the bare library is reported;
* **decide loop, per client**: the seam passthrough with the service's decision kernel in the
  middle (``OutputsLearner.process_batch``: decode, decide, encode), without checkpoints or
  metrics: the most a service on that client could reach with today's kernel; also exactly-once
  (decisions and consumed offsets in one transaction a second), read back ``read_committed``;
* **service**: :class:`uss_stream_kafka.Application` with :class:`OutputsProcessor` (decode,
  validate, USS-UCB select/update, encode, per-batch metrics, flush + commit every second,
  checkpoints every five seconds), on kafka-python (the only client it runs on so far).

All are timed the same way, from the output topic, whose records carry the broker's append time
(``message.timestamp.type=LogAppendTime``): events / (append time of the last output record −
append time of the first), so start-up (group join, restore) is excluded for all, and delivery is
included (the time a record was created is not: librdkafka creates records far ahead of their
delivery). The figure of merit is the ratio service / passthrough of the same client (median of
the rounds' ratios); every decision output is checked against ``USSUCB.run`` on the same stream.
Also reported: p50/p99 of the per-event decide latency (raw bytes → encoded decision) and whether
kafka-python uses the C ``crc32c``.

Each round also runs the service with ``guarantee="exactly-once"`` (transactions, offsets and
checkpoints committed in them every second) and reports its throughput as a ratio of the
at-least-once service's (target >= 0.5); its output is read with ``read_committed``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import threading
import time
import uuid
from typing import Any

import numpy as np

from uss_stream.policies import USSUCB
from uss_stream_kafka import Application, ClientConfig, OutputsProcessor, Topics, create_topics
from uss_stream_kafka.app import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS

STAGE_COSTS = [0.0, 0.15, 0.2]


def _outputs(n: int, seed: int) -> np.ndarray:
    """A BSC-like stream: stage 1 errs 20%, stage 2 10%, stage 3 is the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    return np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1).astype(int)


def _produce_input(bootstrap: str, topic: str, outputs: np.ndarray) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1024 * 1024)
    for i, row in enumerate(outputs.tolist()):
        producer.send(topic, json.dumps({"id": f"e{i}", "outputs": row}).encode(), partition=0)
    producer.flush()
    producer.close()


def _read_output(bootstrap: str, topic: str, n: int, timeout: float = 300.0) -> list:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **CONSUMER_DEFAULTS,
    )
    consumer.assign([TopicPartition(topic, 0)])
    records: list = []
    deadline = time.monotonic() + timeout
    while len(records) < n and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500, max_records=50_000).values():
            records.extend(batch)
    consumer.close()
    if len(records) < n:
        raise RuntimeError(f"{topic}: only {len(records)} of {n} records after {timeout}s")
    return records


def _output_topic(admin: Any, name: str) -> None:
    """Create topic ``name`` (one partition) with the broker's append time as its records' timestamp."""
    spec = {
        "num_partitions": 1,
        "replication_factor": 1,
        "configs": {"message.timestamp.type": "LogAppendTime"},
    }
    admin.create_topics({name: spec}, wait_for_metadata=True)


def _rate(records: list) -> float:
    span_ms = records[-1].timestamp - records[0].timestamp
    return len(records) / max(span_ms / 1000.0, 1e-3)


def _passthrough(bootstrap: str, source: str, target: str, n: int, max_poll_records: int) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    consumer = KafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=f"bench-pass-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=max_poll_records,
        **CONSUMER_DEFAULTS,
    )
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, **PRODUCER_DEFAULTS
    )
    copied = 0
    while copied < n:
        for tp, records in consumer.poll(timeout_ms=500).items():
            send = producer.send
            for record in records:
                send(target, record.value, key=record.key, partition=tp.partition)
            copied += len(records)
    producer.flush()
    producer.close()
    consumer.close()


def _passthrough_confluent(bootstrap: str, source: str, target: str, n: int, max_poll_records: int) -> None:
    """The same loop on bare confluent-kafka: ``consume()`` batches, one ``produce()`` per record."""
    from confluent_kafka import Consumer, Producer

    from uss_stream_kafka.clients.confluent import librdkafka_config

    consumer = Consumer(
        {
            **librdkafka_config({**CONSUMER_DEFAULTS, "bootstrap_servers": bootstrap}),
            "group.id": f"bench-pass-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([source])
    producer = Producer(
        librdkafka_config(
            {**PRODUCER_DEFAULTS, "bootstrap_servers": bootstrap, "acks": "all", "enable_idempotence": True}
        )
    )
    copied = 0
    while copied < n:
        messages = consumer.consume(max_poll_records, 0.5)
        produce = producer.produce
        for message in messages:
            produce(target, message.value(), message.key(), message.partition())
        copied += len(messages)
        producer.poll(0)
    producer.flush()
    consumer.close()


def _passthrough_seam(
    client: str, bootstrap: str, source: str, target: str, n: int, max_poll_records: int
) -> None:
    """The same loop through the client seam: a column batch per partition, ``send_many``."""
    from uss_stream_kafka import clients

    consumer = clients.consumer(
        client,
        bootstrap_servers=bootstrap,
        group_id=f"bench-pass-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        max_poll_records=max_poll_records,
        **CONSUMER_DEFAULTS,
    )
    consumer.subscribe([source])
    producer = clients.producer(
        client, bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, **PRODUCER_DEFAULTS
    )
    copied = 0
    while copied < n:
        for tp, records in consumer.poll(0.5).items():
            producer.send_many(target, records.values, records.keys, tp.partition)
            copied += len(records)
    producer.flush()
    if producer.take_errors():
        raise SystemExit(f"{client} seam passthrough: records not delivered")
    producer.close()
    consumer.close()


def _decide_loop_seam(
    client: str,
    bootstrap: str,
    source: str,
    target: str,
    n: int,
    max_poll_records: int,
    exactly_once: bool = False,
) -> None:
    """The passthrough through the seam with the service's decision kernel in the middle.

    Decode, decide and encode (``OutputsLearner.process_batch``) per polled batch, decisions sent
    with ``send_many``; no checkpoints or metrics. Not the service: the most a service on this
    client could reach with today's kernel. With ``exactly_once``, a transactional producer
    commits the decisions and the consumed offsets once a second, as the service does.
    """
    from uss_stream_kafka import clients

    learner = OutputsProcessor(STAGE_COSTS, alpha=0.51).new_learner()
    consumer = clients.consumer(
        client,
        bootstrap_servers=bootstrap,
        group_id=f"bench-decide-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        max_poll_records=max_poll_records,
        **CONSUMER_DEFAULTS,
    )
    consumer.subscribe([source])
    transactional = {"transactional_id": f"bench-tx-{uuid.uuid4().hex[:8]}"} if exactly_once else {}
    producer = clients.producer(
        client,
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        **PRODUCER_DEFAULTS,
        **transactional,
    )
    if exactly_once:
        producer.init_transactions(60)
    decided, offsets, open_since = 0, {}, None
    while decided < n or offsets:
        if exactly_once and offsets and (decided >= n or time.monotonic() - open_since >= 1.0):
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata(), 60)
            producer.commit_transaction(60)
            offsets, open_since = {}, None
            continue
        for tp, records in consumer.poll(0.5).items():
            if exactly_once and open_since is None:
                producer.begin_transaction()
                open_since = time.monotonic()
            payloads, _, errors = learner.process_batch(records.values, 256 * 1024)
            if any(errors):
                raise SystemExit(f"{client} decide loop: invalid events in the benchmark's input")
            producer.send_many(target, payloads, records.keys, tp.partition)
            decided += len(records)
            if exactly_once:
                offsets[tp] = records.next_offset
    producer.flush()
    if producer.take_errors():
        raise SystemExit(f"{client} decide loop: decisions not delivered")
    producer.close()
    consumer.close()


def _service(
    bootstrap: str, topics: Topics, n: int, max_poll_records: int, guarantee: str = "at-least-once"
) -> Application:
    group = f"bench-svc-{uuid.uuid4().hex[:8]}"
    app = Application(
        ClientConfig(bootstrap),
        group_id=group,
        topics=topics,
        max_poll_records=max_poll_records,
        guarantee=guarantee,
        group_instance_id=group,
        http_port=None,
    )
    thread = threading.Thread(target=app.run, args=(OutputsProcessor(STAGE_COSTS, alpha=0.51),), daemon=True)
    thread.start()
    while app.summary.events < n and thread.is_alive():
        time.sleep(0.05)
    app.stop()
    thread.join()
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-poll-records", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        sys.exit("set KAFKA_BOOTSTRAP_SERVERS (e.g. KAFKA_PORT=29092 bash deploy/kafka/broker.sh start)")

    from kafka import KafkaAdminClient
    from kafka.record import util as record_util

    crc = "C crc32c" if record_util._crc32c is not record_util.crc32c_py else "pure-Python crc32c"
    n = args.events
    outputs = _outputs(n, args.seed)
    expected = USSUCB(STAGE_COSTS).run(outputs)
    run_id = uuid.uuid4().hex[:8]
    source = f"bench-in-{run_id}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics({source: {"num_partitions": 1, "replication_factor": 1}}, wait_for_metadata=True)
    made = [source]
    started = time.perf_counter()
    _produce_input(bootstrap, source, outputs)
    print(
        f"kafka-python with {crc}; {n} events (K = 3) written in {time.perf_counter() - started:.1f}s",
        flush=True,
    )

    passthroughs = {
        "kafka-python": lambda target: _passthrough(bootstrap, source, target, n, args.max_poll_records),
        "confluent": lambda target: _passthrough_confluent(
            bootstrap, source, target, n, args.max_poll_records
        ),
        "kafka-python seam": lambda target: _passthrough_seam(
            "kafka-python", bootstrap, source, target, n, args.max_poll_records
        ),
        "confluent seam": lambda target: _passthrough_seam(
            "confluent", bootstrap, source, target, n, args.max_poll_records
        ),
    }
    decide_loops = {
        f"{client}{suffix}": lambda target, client=client, eos=eos: _decide_loop_seam(
            client, bootstrap, source, target, n, args.max_poll_records, exactly_once=eos
        )
        for client in ("kafka-python", "confluent")
        for suffix, eos in (("", False), (" exactly-once", True))
    }
    pass_rates: dict[str, list[float]] = {name: [] for name in passthroughs}
    decide_rates: dict[str, list[float]] = {name: [] for name in decide_loops}
    service_rates, eos_rates, latencies = [], [], []
    for r in range(args.rounds):
        for i, (name, copy) in enumerate(passthroughs.items()):
            target = f"bench-pass-{run_id}-{r}-{i}"
            _output_topic(admin, target)
            made.append(target)
            copy(target)
            pass_rates[name].append(_rate(_read_output(bootstrap, target, n)))
            gc.collect()  # the records read back must not slow the next run's garbage collections
        passthrough_rates = pass_rates["kafka-python"]
        for i, (name, decide) in enumerate(decide_loops.items()):
            target = f"bench-decide-{run_id}-{r}-{i}"
            _output_topic(admin, target)
            made.append(target)
            decide(target)
            decisions = _read_output(bootstrap, target, n)
            depths = np.array([json.loads(record.value)["depth"] for record in decisions])
            if not np.array_equal(depths, expected):
                raise SystemExit(f"{name} decide loop: decisions differ from USSUCB.run on the same stream")
            decide_rates[name].append(_rate(decisions))
            del decisions
            gc.collect()

        # Each round's service is a new group, so it gets its own topics (checkpoints are keyed by
        # input partition: a shared state topic would hand it the previous round's learner).
        topics = Topics(
            input=source,
            output=f"bench-out-{run_id}-{r}",
            dead_letter=f"bench-dlq-{run_id}-{r}",
            state=f"bench-st-{run_id}-{r}",
        )
        _output_topic(admin, topics.output)
        create_topics(admin, topics)
        made += [topics.output, topics.dead_letter, topics.state]
        app = _service(bootstrap, topics, n, args.max_poll_records)
        decisions = _read_output(bootstrap, topics.output, n)
        depths = np.array([json.loads(record.value)["depth"] for record in decisions])
        if not np.array_equal(depths, expected):
            raise SystemExit("service decisions differ from USSUCB.run on the same stream")
        service_rates.append(_rate(decisions))
        metrics = app.metrics
        latencies.append(
            (
                metrics.latency.quantile(0.5),
                metrics.latency.quantile(0.99),
                metrics.batch_time.quantile(0.5),
                metrics.batch_time.quantile(0.99),
            )
        )
        del decisions, app
        gc.collect()

        topics = Topics(
            input=source,
            output=f"bench-eos-out-{run_id}-{r}",
            dead_letter=f"bench-eos-dlq-{run_id}-{r}",
            state=f"bench-eos-st-{run_id}-{r}",
        )
        _output_topic(admin, topics.output)
        create_topics(admin, topics)
        made += [topics.output, topics.dead_letter, topics.state]
        _service(bootstrap, topics, n, args.max_poll_records, guarantee="exactly-once")
        decisions = _read_output(bootstrap, topics.output, n)  # read_committed (CONSUMER_DEFAULTS)
        depths = np.array([json.loads(record.value)["depth"] for record in decisions])
        if not np.array_equal(depths, expected):
            raise SystemExit("exactly-once decisions differ from USSUCB.run on the same stream")
        eos_rates.append(_rate(decisions))
        del decisions
        gc.collect()
        print(
            f"round {r + 1}: passthrough "
            + "  ".join(f"{name} {rates[-1]:7.0f}" for name, rates in pass_rates.items())
            + " ev/s | decide loop "
            + "  ".join(f"{name} {rates[-1]:7.0f}" for name, rates in decide_rates.items())
            + f" ev/s | service (kafka-python) {service_rates[-1]:7.0f} ev/s"
            f" ({service_rates[-1] / passthrough_rates[-1]:.2f}x its passthrough)"
            f" | exactly-once {eos_rates[-1]:7.0f} ev/s ({eos_rates[-1] / service_rates[-1]:.2f}x)",
            flush=True,
        )
    admin.delete_topics(made)
    admin.close()

    print()
    for name, rates in pass_rates.items():
        print(f"passthrough {name:18s} (median): {statistics.median(rates):9.0f} events/s")
    for client in ("kafka-python", "confluent"):
        overhead = [seam / bare for seam, bare in zip(pass_rates[f"{client} seam"], pass_rates[client])]
        median, lowest = statistics.median(overhead), min(overhead)
        print(f"seam / bare passthrough, {client}: {median:.2f} (lowest {lowest:.2f})")
    for client in ("kafka-python", "confluent"):
        rates, eos = decide_rates[client], decide_rates[f"{client} exactly-once"]
        ratio = [d / p for d, p in zip(rates, pass_rates[client])]
        eos_ratio = [e / d for e, d in zip(eos, rates)]
        print(
            f"decide loop on the seam, {client} (median): {statistics.median(rates):9.0f} events/s,"
            f" {statistics.median(ratio):.2f}x the bare {client} passthrough; exactly-once"
            f" {statistics.median(eos):9.0f} events/s, {statistics.median(eos_ratio):.2f}x"
            " (not the service: no checkpoints or metrics)"
        )
    speedup = [c / k for c, k in zip(pass_rates["confluent"], pass_rates["kafka-python"])]
    print(f"bare passthrough confluent / kafka-python: {statistics.median(speedup):.2f}")
    service = statistics.median(service_rates)
    p50, p99, batch50, batch99 = (statistics.median(values) for values in zip(*latencies))
    print(f"service on kafka-python (median): {service:9.0f} events/s   (target >= 20000)")
    ratios = [s / p for s, p in zip(service_rates, passthrough_rates)]
    print(
        "ratio service / kafka-python passthrough (median of the rounds' ratios):"
        f" {statistics.median(ratios):.2f}"
        f"   (lowest {min(ratios):.2f}; target >= 0.80)"
    )
    to_confluent = [s / c for s, c in zip(service_rates, pass_rates["confluent"])]
    print(
        f"ratio service (kafka-python) / confluent passthrough: {statistics.median(to_confluent):.2f}"
        "   (issue 14's target for the service on confluent: >= 0.80)"
    )
    eos_ratios = [e / s for e, s in zip(eos_rates, service_rates)]
    print(
        f"exactly-once (median): {statistics.median(eos_rates):9.0f} events/s; ratio exactly-once /"
        f" at-least-once {statistics.median(eos_ratios):.2f} (lowest {min(eos_ratios):.2f}; target >= 0.5)"
    )
    print(f"decide time per event: p50 {p50 * 1e6:.1f} us, p99 {p99 * 1e6:.1f} us")
    print(
        f"batch time (<= {args.max_poll_records} records): p50 {batch50 * 1e3:.1f} ms,"
        f" p99 {batch99 * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
