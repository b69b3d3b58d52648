"""Where the decision service's per-event time goes, beside the bare passthrough's, in one process.

Run: ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 python -m benchmarks.bench_service_split [--events N]
[--rounds R]``.

The end-to-end ratio of ``bench_kafka`` (service / bare confluent passthrough) is set by the
Python thread that polls, decides and produces: librdkafka's own threads fetch and send for both
alike. This benchmark measures that thread's CPU time per event (``time.thread_time``), per round,
on one input topic of ``N`` outputs-mode events (``benchmarks.kafka_contenders.events``, K = 3)
that librdkafka prefetches whole before the clock starts:

* **passthrough**: ``consume(5000)`` and one ``produce`` per record, as the bare passthrough of
  ``bench_kafka`` (the service's default client settings);
* **service loop**: the same, with the default policy's ``OutputsLearner.process_batch`` (decode,
  decide, encode) between them;
* **its parts**, on the same events in batches of 5000 without the broker, with a fresh learner:
  ``OutputsCodec.decode_many``, ``decide_batch`` and ``OutputsCodec.encode_many``, what
  ``process_batch`` is made of.

The service's Dispatcher adds its own bookkeeping per batch (keys, headers, depth counts) on top of
the service loop here. Reported per round: the CPU microseconds per event of each, and the ratio
passthrough / service loop, the most the end-to-end ratio can reach while the Python thread is
the bottleneck.

Example (no broker needed): the parts of ``process_batch`` on a few events.

>>> parts = split([b'{"id": "e1", "outputs": [1, 0, 1]}'] * 40, batch=20)
>>> sorted(parts)
['decide', 'decode', 'encode']
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Sequence

from benchmarks.kafka_contenders import POLICY, STAGE_COSTS, consumer_settings, events
from uss_stream.policies.batch import decide_batch, next_window
from uss_stream.policies.specs import serving_policy
from uss_stream_kafka import OutputsProcessor, clients
from uss_stream_kafka.clients import TopicSpec
from uss_stream_kafka.clients.librdkafka_config import librdkafka_config
from uss_stream_kafka.processing.events import OutputsCodec
from uss_stream_kafka.runtime.commit import PRODUCER_DEFAULTS

#: Records per ``consume`` and per batch, the service's ``max_poll_records`` default.
BATCH = 5000


def split(values: Sequence[bytes], batch: int = BATCH) -> dict[str, float]:
    """CPU seconds per event of decoding, deciding and encoding ``values`` in batches of ``batch``."""
    policy = serving_policy(POLICY, STAGE_COSTS, "outputs")[0]
    codec = OutputsCodec(policy.n_stages, policy.cumulative_costs)
    spent = {"decode": 0.0, "decide": 0.0, "encode": 0.0}
    window = last = None
    for start in range(0, len(values), batch):
        began = time.thread_time()
        _, ids, outputs, _ = codec.decode_many(values[start : start + batch], 1 << 20)
        decoded = time.thread_time()
        steps: list[int] = []
        depths = decide_batch(policy, outputs, guess=last, window=window, on_step=steps.append)
        decided = time.thread_time()
        codec.encode_many(ids, depths, outputs)
        spent["decode"] += decoded - began
        spent["decide"] += decided - decoded
        spent["encode"] += time.thread_time() - decided
        last, window = depths[-1], next_window(len(depths), len(steps)) if steps else window
    return {part: seconds / len(values) for part, seconds in spent.items()}


def loop(bootstrap: str, topic: str, n: int, decide: bool) -> float:
    """CPU seconds per event of the polling thread copying (or deciding) ``n`` prefetched records."""
    from confluent_kafka import Consumer, Producer

    consumer = Consumer(
        {
            **librdkafka_config({**consumer_settings("confluent"), "bootstrap_servers": bootstrap}),
            "group.id": f"split-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "queued.min.messages": 1_000_000,
        }
    )
    consumer.subscribe([topic])
    producer = Producer(
        librdkafka_config({**PRODUCER_DEFAULTS, "bootstrap_servers": bootstrap, "enable_idempotence": True})
    )
    learner = OutputsProcessor(list(STAGE_COSTS), policy=POLICY).new_learner()
    messages = consumer.consume(BATCH, 30)
    while consumer.get_watermark_offsets(consumer.assignment()[0], cached=True)[1] < n:
        time.sleep(0.1)  # until librdkafka knows the end of the input
    time.sleep(2)  # and has fetched it
    target, copied = f"{topic}-copy", 0
    began = time.thread_time()
    while copied < n:
        copied += len(messages)
        if decide:
            result = learner.process_batch([m.value() for m in messages], 1 << 20)
            for value in result.payloads:
                producer.produce(target, value, None, 0)
        else:
            for message in messages:
                producer.produce(target, message.value(), message.key(), message.partition())
        producer.poll(0)
        if copied < n:
            messages = consumer.consume(BATCH, 1.0)
    spent = time.thread_time() - began
    producer.flush()
    consumer.close()
    return spent / copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        raise SystemExit(
            "set KAFKA_BOOTSTRAP_SERVERS (e.g. KAFKA_PORT=29092 bash deploy/kafka/broker.sh start)"
        )
    n = args.events
    values = events(n)
    admin = clients.admin("confluent", bootstrap_servers=bootstrap)
    topic = f"split-in-{uuid.uuid4().hex[:8]}"
    admin.create_topics({topic: TopicSpec(), f"{topic}-copy": TopicSpec()})
    producer = clients.producer("confluent", bootstrap_servers=bootstrap, linger_ms=50)
    producer.send_many(topic, values, partition=0)
    producer.flush()
    producer.close()
    ratios = []
    print("CPU µs per event of the polling thread | passthrough | service loop | decode | decide | encode")
    for r in range(args.rounds):
        passthrough = loop(bootstrap, topic, n, decide=False)
        service = loop(bootstrap, topic, n, decide=True)
        parts = split(values)
        ratios.append(passthrough / service)
        figures = [passthrough, service, parts["decode"], parts["decide"], parts["encode"]]
        print(
            f"round {r + 1} (load {os.getloadavg()[0]:.1f}) | "
            + " | ".join(f"{1e6 * f:.2f}" for f in figures)
            + f" | passthrough / service {ratios[-1]:.2f}",
            flush=True,
        )
    print(f"median passthrough / service loop: {statistics.median(ratios):.2f}")
    admin.delete_topics([topic, f"{topic}-copy"])
    admin.close()


if __name__ == "__main__":
    main()
