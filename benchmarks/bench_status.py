"""How long ``uss-stream kafka status`` takes for a group of 16 partitions on a real broker (target < 2 s).

Run: ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 python -m benchmarks.bench_status``.

A state topic is filled as a service of 16 input partitions fills it: each partition's learner
(outputs mode, USS-KL-UCB, K = 3) decides its events and is checkpointed ``--versions`` times along
the way (compaction has not run yet, so the command reads every version and keeps the last). Then
the command runs, per client, ``--repeats`` times as a person runs it: a new process
(``python -m uss_stream kafka status ... --json``), timed from its start to its exit, Python's
start and imports included. Reported: the median and the slowest, the median CPU seconds of the
process (on a loaded machine the wall time is mostly waiting for a core), and the same for the
in-process :func:`~uss_stream_kafka.cli.status.group_status` (what the command spends besides starting
Python); the line above them gives the 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid

import numpy as np

from uss_stream_kafka import Checkpoint, ClientConfig, OutputsProcessor
from uss_stream_kafka.cli.status import group_status
from uss_stream_kafka.clients import CLIENTS

STAGE_COSTS = [0.0, 0.15, 0.2]


def _fill(bootstrap: str, topic: str, group: str, partitions: int, events: int, versions: int) -> None:
    """``versions`` checkpoints per partition of ``partitions`` learners deciding ``events`` events each."""
    from kafka import KafkaProducer

    processor = OutputsProcessor(STAGE_COSTS)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    rng = np.random.default_rng(0)
    for partition in range(partitions):
        learner = processor.new_learner()
        truth = rng.integers(0, 2, events)
        noisy = [truth ^ (rng.random(events) < rate) for rate in (0.2, 0.1)]
        rows = np.stack([*noisy, truth], axis=1).tolist()
        values = [json.dumps({"id": i, "outputs": row}).encode() for i, row in enumerate(rows)]
        step = events // versions
        for version in range(versions):
            learner.process_batch(values[version * step : (version + 1) * step], 1 << 20)
            checkpoint = Checkpoint(
                topic="events",
                partition=partition,
                offset=(version + 1) * step,
                state=learner.state_dict(),
                group_id=group,
                processor=processor.describe(),
                written_at=time.time(),
            )
            producer.send(topic, checkpoint.to_bytes(), key=checkpoint.key)
    producer.flush()
    producer.close()


def _command(bootstrap: str, topic: str, group: str, client: str) -> tuple[float, float, int]:
    """Seconds the command takes in a new process, the CPU seconds it spent, and how many
    partitions it reported."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "uss_stream", "kafka", "status", "--bootstrap-servers", bootstrap,
         "--state-topic", topic, "--group-id", group, "--client", client, "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, len(json.loads(result.stdout)["partitions"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--events", type=int, default=20_000, help="per partition")
    parser.add_argument("--versions", type=int, default=20, help="checkpoints per partition")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        sys.exit("set KAFKA_BOOTSTRAP_SERVERS (e.g. KAFKA_PORT=29092 bash deploy/kafka/broker.sh start)")
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    topic, group = f"bench-status-{uuid.uuid4().hex[:8]}", "bench-status-group"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    try:
        _fill(bootstrap, topic, group, args.partitions, args.events, args.versions)
        print(
            f"state topic: {args.partitions} partitions x {args.versions} checkpoints "
            f"(load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
        for client in CLIENTS:
            command, cpu, in_process = [], [], []
            for _ in range(args.repeats):
                seconds, spent, reported = _command(bootstrap, topic, group, client)
                if reported != args.partitions:
                    sys.exit(f"{client}: the command reported {reported} partitions, not {args.partitions}")
                command.append(seconds)
                cpu.append(spent)
                started = time.perf_counter()
                group_status(ClientConfig(bootstrap), topic, group, client)
                in_process.append(time.perf_counter() - started)
            print(
                f"{client:12s} kafka status, new process: median {statistics.median(command):.2f} s, "
                f"slowest {max(command):.2f} s (target < 2 s), CPU {statistics.median(cpu):.2f} s; "
                f"in process: median "
                f"{statistics.median(in_process):.2f} s, slowest {max(in_process):.2f} s",
                flush=True,
            )
    finally:
        admin.delete_topics([topic])
        admin.close()


if __name__ == "__main__":
    main()
