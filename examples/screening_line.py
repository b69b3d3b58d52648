"""A screening line on a real Kafka broker: requests, the orchestrator, and a simulated sensor service.

Each event of the bundled BSC generator (case 2 costs) is a bag entering the line: its request goes
to the requests topic; the service (:class:`~uss_stream_kafka.runtime.app.Application` running an
:class:`~uss_stream_kafka.processing.orchestration.OrchestrationProcessor`) decides how many sensors scan
it; a simulated sensor service (a thread) reads the decisions and, after a random delay, reports
the first ``depth`` sensor outputs (1% of the reports are lost). At the end the script prints the
depth distribution, the mean cost and the regret against the best fixed depth.

Run (a broker must be up, e.g. ``KAFKA_PORT=39092 bash deploy/kafka/broker.sh start``)::

    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:39092 python examples/screening_line.py --events 20000 --rate 2000
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import threading
import time
import uuid

import numpy as np
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from uss_stream.datasets.bsc import bsc_instance, generate_bsc
from uss_stream_kafka import Application, ClientConfig
from uss_stream_kafka.processing.orchestration import (
    OrchestrationProcessor,
    OrchestrationSummary,
    OrchestrationTopics,
    create_orchestration_topics,
)


def sensor_service(
    bootstrap: str,
    topics: OrchestrationTopics,
    outputs: np.ndarray,
    expected: int,
    depths: dict[int, int],
    max_delay: float,
    loss: float,
    seed: int,
) -> None:
    """Read ``expected`` decisions; answer each after a random delay with its first ``depth`` outputs."""
    rng = random.Random(seed)
    consumer = KafkaConsumer(
        topics.decisions, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    due: list[tuple[float, int]] = []  # (time the sensors finish, event index)
    while len(depths) < expected or due:
        for records in consumer.poll(timeout_ms=20).values():
            for record in records:
                decision = json.loads(record.value)
                depths[decision["id"]] = decision["depth"]
                heapq.heappush(due, (time.monotonic() + rng.uniform(0, max_delay), decision["id"]))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, event = heapq.heappop(due)
            if rng.random() >= loss:
                report = {"id": event, "outputs": outputs[event, : depths[event]].tolist()}
                producer.send(topics.reports, json.dumps(report).encode(), key=b"%d" % event)
    producer.flush()
    producer.close()
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--max-delay", type=float, default=0.5, help="sensor delay, seconds (uniform)")
    parser.add_argument("--loss", type=float, default=0.01, help="fraction of reports lost")
    parser.add_argument("--rate", type=float, default=2000.0, help="bags per second (0: no pacing)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not args.bootstrap_servers:
        parser.error("give --bootstrap-servers or set KAFKA_BOOTSTRAP_SERVERS")
    instance = bsc_instance(2)
    outputs, _ = generate_bsc(args.events, seed=args.seed)
    run = uuid.uuid4().hex[:8]
    topics = OrchestrationTopics(
        requests=f"screening-{run}-requests",
        reports=f"screening-{run}-reports",
        decisions=f"screening-{run}-decisions",
        dead_letter=f"screening-{run}-dlq",
        state=f"screening-{run}-state",
    )
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_servers)
    create_orchestration_topics(admin, topics)
    processor = OrchestrationProcessor(
        instance.stage_costs.tolist(),
        stage_names=["xray", "ct", "trace"],
        alpha=0.51,  # USS-UCB, as measured in docs/orchestration.md (the default is USS-KL-UCB)
        max_age_seconds=max(5.0, 10 * args.max_delay),
    )
    app = Application(
        ClientConfig(args.bootstrap_servers),
        group_id=f"screening-{run}",
        topics=topics.as_topics(),
        commit_interval=float("inf"),  # as `uss-stream kafka orchestrate`: commits at the checkpoints
        exit_when_idle=3.0,
        producer_options={"linger_ms": 2},
        http_port=None,
    )
    serving = threading.Thread(target=app.run, args=(processor,))
    serving.start()
    depths: dict[int, int] = {}
    sensors = threading.Thread(
        target=sensor_service,
        args=(
            args.bootstrap_servers,
            topics,
            outputs,
            args.events,
            depths,
            args.max_delay,
            args.loss,
            args.seed,
        ),
    )
    sensors.start()
    deadline = time.monotonic() + 60
    while not app.learners() and time.monotonic() < deadline:  # the requests partition is assigned
        time.sleep(0.05)
    started = time.monotonic()
    producer = KafkaProducer(bootstrap_servers=args.bootstrap_servers, linger_ms=5)
    for event in range(args.events):
        if args.rate > 0:
            time.sleep(max(0.0, started + event / args.rate - time.monotonic()))
        producer.send(topics.requests, json.dumps({"id": event}).encode(), key=b"%d" % event)
    producer.flush()
    producer.close()
    sensors.join()
    serving.join()
    admin.delete_topics(list(topics.all()))
    admin.close()

    chosen = np.array([depths[event] for event in range(args.events)])
    counts = np.bincount(chosen, minlength=instance.n_stages + 1)[1:]
    summary = OrchestrationSummary.of(app)
    print(f"{instance.name}: {args.events} bags in {time.monotonic() - started:.1f}s")
    print("depth distribution:", {d + 1: int(c) for d, c in enumerate(counts)})
    print(f"mean cost (sensors run): {instance.cumulative_costs[chosen - 1].mean():.4f}")
    print(
        f"regret vs the best fixed depth {instance.optimal_depth}: {instance.gaps[chosen - 1].sum():.1f} "
        f"({instance.gaps[chosen - 1].mean():.4f} per bag)"
    )
    print(
        f"reports applied {summary.applied}, dead letters "
        f"{ {r: n for r, n in summary.dead_letters.items() if n} }, "
        f"still pending {summary.pending}, expired {summary.expired}"
    )


if __name__ == "__main__":
    main()
