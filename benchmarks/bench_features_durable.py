"""Features mode with durable stage models (re-learning the labels log) against without.

Run: ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 python -m benchmarks.bench_features_durable``.

The PIMA demo cascade (``uss_stream_kafka.cli.demo:pima_cascade``) runs in the service; its input topic
holds ``--events`` events and its labels topic ``--labels`` labelled events (one partition each),
written once. Then, per round and in alternating order, on the same broker and the same topics:

* **durable** (``rebuild_models=True``, the default): checkpoints record the labels position, and
* **not durable** (``rebuild_models=False``, the behaviour before): the stages start untrained.

Each run is a fresh consumer group over the same records, timed from the output topic (events /
(CreateTime of the last decision - CreateTime of the first)), so start-up is excluded. The figure
of merit is the ratio durable / not durable (median of the rounds). Steady state should cost
nothing: the only extra work is a labels offset in each checkpoint.

What durability costs is paid at a restore: each round then restarts the durable group (its
checkpoint covers every label) and measures the seconds from the start of ``run`` to the restore
(which re-learns every label), against the same restart without re-learning.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from typing import Any

from uss_stream_kafka import Application, ClientConfig, FeaturesProcessor, Topics, create_topics
from uss_stream_kafka.cli.demo import demo_records

FACTORY = "uss_stream_kafka.cli.demo:pima_cascade"


def _produce(bootstrap: str, topics: Topics, events: int, labels: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1024 * 1024)
    records = list(demo_records("features", max(events, labels), seed=11))
    for event, _ in records[:events]:
        producer.send(topics.input, event, partition=0)
    for _, labelled in records[:labels]:
        producer.send(topics.labels, labelled, partition=0)
    producer.flush()
    producer.close()


def _output_rate(bootstrap: str, topic: str, n: int, timeout: float = 600.0) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < n and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500, max_records=50_000).values():
            records.extend(batch)
    consumer.close()
    if len(records) < n:
        raise RuntimeError(f"{topic}: only {len(records)} of {n} decisions after {timeout}s")
    span = (records[n - 1].timestamp - records[0].timestamp) / 1000.0
    return n / max(span, 1e-3)


def _run(bootstrap: str, topics: Topics, group: str, rebuild: bool, until: Any) -> tuple[Application, float]:
    """Run a service until ``until(app)``; returns it and the seconds from start to its restore."""
    app = Application(
        ClientConfig(bootstrap),
        group_id=group,
        topics=topics,
        rebuild_models=rebuild,
        checkpoint_interval=1.0,
        http_port=None,
    )
    started = time.monotonic()
    thread = threading.Thread(target=app.run, args=(FeaturesProcessor(FACTORY),), daemon=True)
    thread.start()
    restored_at = None
    while thread.is_alive() and not until(app):
        if restored_at is None and app.summary.restored:
            restored_at = time.monotonic() - started
        time.sleep(0.01)
    if restored_at is None:
        restored_at = time.monotonic() - started
    app.stop()
    thread.join()
    return app, restored_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--labels", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap-servers", default=None)
    args = parser.parse_args()
    import os

    from kafka import KafkaAdminClient

    bootstrap = args.bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    run = uuid.uuid4().hex[:8]
    shared = Topics(
        input=f"bfd-{run}-in", output=f"bfd-{run}-unused", dead_letter=f"bfd-{run}-dlq",
        state=f"bfd-{run}-unused-state", labels=f"bfd-{run}-labels",
    )  # fmt: skip
    create_topics(admin, shared)
    created = list(shared.all())
    _produce(bootstrap, shared, args.events, args.labels)
    print(
        f"features mode, PIMA cascade: {args.events} events, {args.labels} labels, one partition", flush=True
    )
    ratios, rates = [], {True: [], False: []}
    restores: dict[bool, list[float]] = {True: [], False: []}
    try:
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            round_rates = {}
            for rebuild in order:
                name = f"bfd-{run}-{r}-{'on' if rebuild else 'off'}"
                topics = Topics(
                    input=shared.input, output=f"{name}-out", dead_letter=f"{name}-dlq",
                    state=f"{name}-state", labels=shared.labels,
                )  # fmt: skip
                create_topics(admin, topics)
                created += [topics.output, topics.dead_letter, topics.state]
                group = f"{name}-group"
                _run(
                    bootstrap, topics, group, rebuild,
                    lambda a: a.summary.events >= args.events and a.summary.labels >= args.labels,
                )  # fmt: skip
                round_rates[rebuild] = _output_rate(bootstrap, topics.output, args.events)
                rates[rebuild].append(round_rates[rebuild])
                # The restart: everything is checkpointed; the durable group re-learns every label.
                app, seconds = _run(bootstrap, topics, group, rebuild, lambda a: bool(a.summary.restored))
                restores[rebuild].append(seconds)
                print(
                    f"round {r + 1}, {'durable    ' if rebuild else 'not durable'}: "
                    f"{round_rates[rebuild]:8.0f} events/s; restart restored in {seconds:5.2f} s "
                    f"({app.summary.restored[0] if app.summary.restored else '-'})",
                    flush=True,
                )
            ratios.append(round_rates[True] / round_rates[False])
    finally:
        admin.delete_topics(created)
        admin.close()
    print(
        f"\nthroughput durable / not durable (median of {args.rounds} rounds): "
        f"{statistics.median(ratios):.2f} (rounds {', '.join(f'{x:.2f}' for x in ratios)}); "
        f"medians {statistics.median(rates[True]):.0f} vs {statistics.median(rates[False]):.0f} events/s"
    )
    relearn = statistics.median(restores[True]) - statistics.median(restores[False])
    print(
        f"restart to restored: durable {statistics.median(restores[True]):.2f} s, not durable "
        f"{statistics.median(restores[False]):.2f} s: re-learning {args.labels} labels costs "
        f"{relearn:.2f} s ({args.labels / max(relearn, 1e-3):.0f} labels/s)"
    )


if __name__ == "__main__":
    main()
