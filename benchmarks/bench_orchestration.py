"""Orchestration mode on a real broker: decisions/s and the time from request to decision.

Run with a broker: ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 python -m benchmarks.bench_orchestration``.
A burst of requests measures throughput (and the p99 latency of requests queued behind the
burst); requests paced below the throughput measure the latency of an unloaded service. Latency is
the decision record's broker timestamp minus the request's.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid

import numpy as np
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from uss_stream_kafka import Application, ClientConfig
from uss_stream_kafka.processing.orchestration import (
    OrchestrationProcessor,
    OrchestrationTopics,
    create_orchestration_topics,
)

COSTS = [0.0, 0.15, 0.2]


def _read(bootstrap: str, topic: str, expected: int, timeout: float = 120.0) -> list:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    records: list = []
    deadline = time.monotonic() + timeout
    while len(records) < expected and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    consumer.close()
    if len(records) < expected:
        raise RuntimeError(f"read {len(records)} of {expected} records from {topic}")
    return records


def run(bootstrap: str, n_requests: int, rate: float) -> dict[str, float]:
    """Decisions/s and latency percentiles for ``n_requests`` sent at ``rate``/s (0: a burst)."""
    tag = uuid.uuid4().hex[:8]
    topics = OrchestrationTopics(
        f"b-{tag}-req", f"b-{tag}-rep", f"b-{tag}-dec", f"b-{tag}-dlq", f"b-{tag}-st"
    )
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    create_orchestration_topics(admin, topics)
    # What `uss-stream kafka orchestrate` runs: commits at the checkpoints, linger 2 ms.
    app = Application(
        ClientConfig(bootstrap),
        group_id=f"bench-{tag}",
        topics=topics.as_topics(),
        commit_interval=float("inf"),
        checkpoint_every=10_000,
        max_input_bytes=1 << 20,
        producer_options={"linger_ms": 2},
        http_port=None,
    )
    thread = threading.Thread(target=app.run, args=(OrchestrationProcessor(COSTS, alpha=0.51),), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not app.learners():
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the orchestrator did not get its partitions")
            time.sleep(0.02)
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        started = time.monotonic()
        for i in range(n_requests):
            if rate:
                wait = started + i / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            producer.send(topics.requests, json.dumps({"id": i}).encode())
        producer.flush()
        producer.close()
        decisions = _read(bootstrap, topics.decisions, n_requests)
        requests = _read(bootstrap, topics.requests, n_requests)
    finally:
        app.stop()
        thread.join(30)
        admin.delete_topics(list(topics.all()))
        admin.close()
    sent = {json.loads(r.value)["id"]: r.timestamp for r in requests}
    decided = {json.loads(r.value)["id"]: r.timestamp for r in decisions}
    latency = np.array([decided[i] - sent[i] for i in sent], dtype=float)
    span = (max(decided.values()) - min(sent.values())) / 1000.0
    return {
        "requests": n_requests,
        "rate": rate,
        "decisions_per_s": n_requests / span,
        "p50_ms": float(np.percentile(latency, 50)),
        "p99_ms": float(np.percentile(latency, 99)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=1000.0, help="paced run, requests/s")
    args = parser.parse_args()
    if not args.bootstrap_servers:
        parser.error("set KAFKA_BOOTSTRAP_SERVERS or --bootstrap-servers")
    print("| run | requests | decisions/s | p50 request->decision (ms) | p99 (ms) |")
    print("|---|---|---|---|---|")
    for label, rate in (("burst", 0.0), (f"paced at {args.rate:.0f}/s", args.rate)):
        r = run(args.bootstrap_servers, args.requests, rate)
        cells = [label, str(r["requests"]), f"{r['decisions_per_s']:,.0f}", f"{r['p50_ms']:.0f}"]
        print("| " + " | ".join([*cells, f"{r['p99_ms']:.0f}"]) + " |")


if __name__ == "__main__":
    main()
