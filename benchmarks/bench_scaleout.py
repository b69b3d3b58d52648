"""Scale-out of the Kafka decision service: 2 worker processes against 1 on a 4-partition input.

Run: ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 python -m benchmarks.bench_scaleout``.

Each run starts ``uss-stream kafka run`` workers as separate OS processes (outputs mode, K = 3,
stage costs 0,0.15,0.2, ``--guarantee`` as given, no metrics endpoint, ``--exit-when-idle``) in a
fresh consumer group with fresh topics of 4 partitions; each round runs 1 worker, then 2 workers
in one group (the range assignor gives each 2 partitions). With exactly-once every worker gets its
own ``--group-instance-id``, from which its transactional id derives.

**Starting gate.** The broker starts a new group's first rebalance at once
(``group.initial.rebalance.delay.ms=0`` in ``deploy/kafka/broker.sh``), so the first worker to join
would take all 4 partitions and consume before the second joins. Hence each run's input topic is
written by a transactional producer whose transaction stays open: the service reads with
``read_committed``, so it sees nothing of it. The workers are started and the benchmark waits until
their logs (stderr) show every input partition restored by exactly one worker, each worker holding
some (the group is stable); only then is the transaction committed, which makes the whole input
visible at once. The input (events spread round-robin over the partitions, values serialised once)
is on the broker before the gate opens, so the producer's speed plays no part in the figures and
it takes no CPU from the workers while they run.

Both runs are timed the same way, from the output topic: events / (CreateTime of the last output
record − CreateTime of the first, over all partitions), so process start-up, group join and
restore are excluded. The figure of merit is the ratio 2 workers / 1 worker per round (the two
runs of a round are back to back) and its median over the rounds. Every run is checked: each event
has exactly one decision (``read_committed``), input partition ``p``'s decisions are in output
partition ``p`` with the depths of ``USSUCB.run`` on that partition's events, and no partition
changed hands (a ``revoked`` or ``lost`` line in a worker's log) between the gate's opening and the
last decision. Also reported: how the 2-worker run's events split between the workers.

With ``--shared-learning`` each round also runs 2 workers with ``--shared-learning
--checkpoint-interval 1`` (each commit point reads the state topic and merges the other
partitions' counts) and reports its throughput as a ratio of the 2 workers without sharing; its
depths depend on when the counts arrived, so only the one-decision-per-event check applies.

The machine has 2 cores shared by the workers and the broker (and any neighbours' load), so the
ratio is bounded well below 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from typing import Any

import numpy as np

from uss_stream.policies import USSUCB
from uss_stream_kafka import Topics, create_topics
from uss_stream_kafka.runtime.startup import CONSUMER_DEFAULTS

STAGE_COSTS = [0.0, 0.15, 0.2]
PARTITIONS = 4
#: The first worker to join restores all 4 partitions and learns of the second one's join only at its
#: next heartbeat (3 s): it must not stop idle before the group settles and the gate opens.
IDLE_SECONDS = 10.0
_RESTORED = re.compile(r"uss_stream_kafka: restored (\S+)/(\d+):")
_MOVED = re.compile(r"uss_stream_kafka: (?:revoked|lost) (.+?)(?: \(group membership expired\).*)?$")
_EVENTS = re.compile(r"^kafka run: (\d+) events")


def _outputs(n: int, seed: int) -> np.ndarray:
    """A BSC-like stream: stage 1 errs 20%, stage 2 10%, stage 3 is the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    return np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1).astype(int)


def _log_time(line: str) -> float:
    """Epoch seconds of a service log line (``%(asctime)s``: local time, milliseconds)."""
    return time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000.0


class _Worker:
    """One ``uss-stream kafka run`` process; its log (stderr) is collected as it comes."""

    def __init__(
        self, bootstrap: str, topics: Topics, group: str, guarantee: str, instance: str, shared: bool
    ) -> None:
        command = [
            sys.executable, "-m", "uss_stream", "kafka", "run", "--bootstrap-servers", bootstrap,
            "--input-topic", topics.input, "--output-topic", topics.output,
            "--dlq-topic", topics.dead_letter, "--state-topic", topics.state, "--group-id", group,
            "--stage-costs", ",".join(map(str, STAGE_COSTS)), "--policy", "uss-ucb:alpha=0.51",
            "--guarantee", guarantee,
            "--metrics-port", "-1", "--exit-when-idle", str(IDLE_SECONDS),
        ]  # fmt: skip
        if guarantee == "exactly-once":
            command += ["--group-instance-id", instance]
        if shared:
            command += ["--shared-learning", "--checkpoint-interval", "1"]
        self.topic = topics.input
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def log_tail(self) -> str:
        return "\n".join(self.lines[-40:])

    def held(self) -> set[int]:
        """The input partitions this worker has restored and not given up since, per its log."""
        partitions: set[int] = set()
        for line in list(self.lines):
            restored = _RESTORED.search(line)
            if restored and restored.group(1) == self.topic:
                partitions.add(int(restored.group(2)))
                continue
            moved = _MOVED.search(line)
            if moved:
                for name in moved.group(1).split(", "):
                    topic, _, partition = name.rpartition("/")
                    if topic == self.topic:
                        partitions.discard(int(partition))
        return partitions

    def moves_between(self, start: float, end: float) -> list[str]:
        """Log lines of partitions revoked or lost between epoch seconds ``start`` and ``end``."""
        return [
            line
            for line in self.lines
            if _MOVED.search(line) and line[:4].isdigit() and start <= _log_time(line) <= end
        ]

    def finish(self, timeout: float = 300.0) -> int:
        """Wait for a clean exit; returns the events it processed."""
        self.process.wait(timeout=timeout)
        self._reader.join(10)
        if self.process.returncode != 0:
            raise RuntimeError(f"a worker exited with {self.process.returncode}:\n{self.log_tail()}")
        for line in self.lines:
            match = _EVENTS.match(line)
            if match:
                return int(match.group(1))
        raise RuntimeError(f"no summary line in the worker's log:\n{self.log_tail()}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _write_gated_input(bootstrap: str, topic: str, values: list[bytes]) -> Any:
    """Write ``values`` round-robin over the partitions in a transaction left open; returns the producer."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=f"bench-scaleout-gate-{topic}",
        transaction_timeout_ms=600_000,
        linger_ms=50,
        batch_size=1024 * 1024,
    )
    producer.init_transactions()
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.send(topic, value, partition=i % PARTITIONS)
    producer.flush()
    return producer


def _wait_until_stable(workers: list[_Worker], timeout: float = 120.0) -> None:
    """Wait until every input partition is restored by exactly one worker and each worker has some."""
    deadline = time.monotonic() + timeout
    while True:
        for worker in workers:
            if worker.process.poll() is not None:
                raise RuntimeError(f"a worker exited before the input was released:\n{worker.log_tail()}")
        held = [worker.held() for worker in workers]
        if all(held) and sum(map(len, held)) == PARTITIONS and set().union(*held) == set(range(PARTITIONS)):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the group did not settle in {timeout}s (partitions per worker: {held})")
        time.sleep(0.05)


def _read_output(bootstrap: str, topic: str, n: int, timeout: float = 300.0) -> list:
    """Every record of the output topic (``read_committed``): until ``n`` and then one empty poll."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **CONSUMER_DEFAULTS,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    records: list = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fetched = consumer.poll(timeout_ms=1000, max_records=50_000)
        for batch in fetched.values():
            records.extend(batch)
        if not fetched and len(records) >= n:
            break
    consumer.close()
    if len(records) < n:
        raise RuntimeError(f"{topic}: only {len(records)} of {n} records after {timeout}s")
    return records


def _check(records: list, n: int, expected: list[np.ndarray] | None) -> None:
    """Exactly one decision per event; partition p's decisions in output partition p, depths of USSUCB.run.

    ``expected=None`` (shared learning: the depths depend on when the counts arrived) skips the depths.
    """
    ids: Counter[str] = Counter()
    depths: list[list[int]] = [[] for _ in range(PARTITIONS)]
    for record in records:
        decision = json.loads(record.value)
        ids[decision["id"]] += 1
        if int(decision["id"][1:]) % PARTITIONS != record.partition:
            raise SystemExit(f"decision {decision['id']} in output partition {record.partition}")
        depths[record.partition].append(decision["depth"])
    if len(ids) != n or set(ids.values()) != {1} or set(ids) != {f"e{i}" for i in range(n)}:
        repeated = sum(count - 1 for count in ids.values())
        raise SystemExit(f"{len(ids)} of {n} events decided, {repeated} decided more than once")
    for p in range(PARTITIONS if expected is not None else 0):
        if not np.array_equal(np.array(depths[p]), expected[p]):
            raise SystemExit(f"partition {p}: decisions differ from USSUCB.run on the partition's stream")


def _run(
    bootstrap: str,
    admin: Any,
    values: list[bytes],
    expected: list[np.ndarray],
    workers: int,
    guarantee: str,
    shared: bool = False,
) -> tuple[float, list[int]]:
    """One run with ``workers`` processes: (events/s from the output's CreateTime, events per worker)."""
    tag = uuid.uuid4().hex[:8]
    topics = Topics(
        input=f"bench-so-in-{tag}",
        output=f"bench-so-out-{tag}",
        dead_letter=f"bench-so-dlq-{tag}",
        state=f"bench-so-st-{tag}",
    )
    create_topics(admin, topics, partitions=PARTITIONS)
    group = f"bench-so-{tag}"
    gate = _write_gated_input(bootstrap, topics.input, values)
    procs: list[_Worker] = []
    try:
        procs = [
            _Worker(bootstrap, topics, group, guarantee, f"{group}-w{j}", shared) for j in range(workers)
        ]
        _wait_until_stable(procs)
        opened = time.time()
        gate.commit_transaction()
        counts = [worker.finish() for worker in procs]
    finally:
        gate.close()
        for worker in procs:
            worker.kill()
    n = len(values)
    records = _read_output(bootstrap, topics.output, n)
    admin.delete_topics(list(topics.all()))
    _check(records, n, None if shared else expected)
    first = min(record.timestamp for record in records)
    last = max(record.timestamp for record in records)
    if first < opened * 1000.0:
        raise SystemExit("a decision predates the opening of the gate: the input leaked")
    moves = [line for worker in procs for line in worker.moves_between(opened, last / 1000.0)]
    if moves:
        raise SystemExit("partitions changed hands while the input was consumed:\n" + "\n".join(moves))
    return n / max((last - first) / 1000.0, 1e-3), counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--guarantee", choices=("at-least-once", "exactly-once"), default="at-least-once")
    parser.add_argument(
        "--shared-learning",
        action="store_true",
        help="also run 2 workers with --shared-learning (checkpoints every second) and report its cost",
    )
    args = parser.parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        sys.exit("set KAFKA_BOOTSTRAP_SERVERS (e.g. KAFKA_PORT=29092 bash deploy/kafka/broker.sh start)")

    from kafka import KafkaAdminClient

    n = args.events
    outputs = _outputs(n, 0)
    values = [json.dumps({"id": f"e{i}", "outputs": row}).encode() for i, row in enumerate(outputs.tolist())]
    expected = [USSUCB(STAGE_COSTS).run(outputs[p::PARTITIONS]) for p in range(PARTITIONS)]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    print(
        f"{n} events (K = 3) over {PARTITIONS} partitions, {args.guarantee}, {os.cpu_count()} CPUs",
        flush=True,
    )

    one_rates, two_rates, shared_rates = [], [], []
    for r in range(args.rounds):
        one, _ = _run(bootstrap, admin, values, expected, 1, args.guarantee)
        two, split = _run(bootstrap, admin, values, expected, 2, args.guarantee)
        one_rates.append(one)
        two_rates.append(two)
        line = (
            f"round {r + 1}: 1 worker {one:9.0f} ev/s   2 workers {two:9.0f} ev/s"
            f" (events per worker {'/'.join(map(str, split))})   ratio {two / one:.2f}"
        )
        if args.shared_learning:
            shared, _ = _run(bootstrap, admin, values, expected, 2, args.guarantee, shared=True)
            shared_rates.append(shared)
            line += f"   2 workers sharing {shared:9.0f} ev/s ({shared / two:.2f} of not sharing)"
        print(line, flush=True)
    admin.close()

    ratios = [t / o for t, o in zip(two_rates, one_rates)]
    print(f"\n1 worker  (median): {statistics.median(one_rates):9.0f} events/s")
    print(f"2 workers (median): {statistics.median(two_rates):9.0f} events/s")
    print(
        f"ratio 2 workers / 1 worker (median of the rounds' ratios): {statistics.median(ratios):.2f}"
        f"   (lowest {min(ratios):.2f}, highest {max(ratios):.2f})"
    )
    if shared_rates:
        costs = [s / t for s, t in zip(shared_rates, two_rates)]
        print(
            f"2 workers sharing / not sharing (median of the rounds' ratios): {statistics.median(costs):.2f}"
            f"   (lowest {min(costs):.2f}, highest {max(costs):.2f})"
        )


if __name__ == "__main__":
    main()
