"""Fault soak: exactly-once workers with shared learning through SIGKILLs and broker restarts.

Three ``uss-stream kafka run`` workers (exactly-once, shared learning) in one group over six
partitions decide a stream produced in real time, while random workers are SIGKILLed or stopped
with SIGTERM (a clean exit, 0) and restarted (every other SIGKILLed one only after the survivors
took its partitions over: a rebalance each way) and the broker is stopped and restarted on its
data (the next fault waits until the workers commit again on every partition). Every worker's
resident memory is sampled each second and must stay under ``SOAK_MAX_RSS_MIB``. Then the
``read_committed`` output must hold exactly one decision per event, in order per partition; the
last checkpoint of each partition must hold exactly the counts of its committed decisions
(recomputed here from the events' outputs and the decided depths: nothing learned twice or lost);
with shared learning off
(``SOAK_SHARED=0``) the depths must equal an uninterrupted ``USSUCB.run`` of the partition. With
shared learning on they depend on when the other partitions' checkpoints arrived, so no
uninterrupted run reproduces them; the count check is what holds them to the events.

Sizes come from the environment; CI runs the defaults (20 000 events, 2 kills, 1 SIGTERM, 1 broker
restart). ``make soak`` runs the full size:
``SOAK_EVENTS=1000000 SOAK_KILLS=20 SOAK_TERMS=5 SOAK_BROKER_RESTARTS=3``.
The broker is a private ``deploy/kafka/broker.sh`` on a free port, destroyed at the end (kept,
stopped, with ``SOAK_KEEP_BROKER=1``). The faults' order and the workers they hit come from the
run's chaos seed (printed in the header; ``USS_CHAOS_SEED`` repeats them: ``tests/chaos.py``), the
events from ``SOAK_SEED``.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, checkpoints_of, committed_offsets, end_offsets, read_all, stream, trickle
from test_broker_restart import RestartableBroker
from test_cli import Service
from test_scale_out import owned_partitions
from waiting import wait_until

from uss_stream.policies import USSUCB
from uss_stream_kafka import Topics, create_topics

EVENTS = int(os.environ.get("SOAK_EVENTS", "20000"))
KILLS = int(os.environ.get("SOAK_KILLS", "2"))
TERMS = int(os.environ.get("SOAK_TERMS", "1"))
MAX_RSS_MIB = float(os.environ.get("SOAK_MAX_RSS_MIB", "400"))
BROKER_RESTARTS = int(os.environ.get("SOAK_BROKER_RESTARTS", "1"))
RATE = float(os.environ.get("SOAK_RATE", "2000"))  # events per second produced
SHARED = os.environ.get("SOAK_SHARED", "1") == "1"
SEED = int(os.environ.get("SOAK_SEED", "0"))  # the events' outputs
PARTITIONS = 6
WORKERS = 3
STRIDE = 10_000_000  # event ids of partition p: e<p * STRIDE + i>

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(int(os.environ.get("SOAK_TIMEOUT", "600"))),
]


def counts_of(outputs: np.ndarray, depths: list[int]) -> dict[str, Any]:
    """The USS-UCB counts of events decided at ``depths``: computed here, by the definitions.

    A decision counts once; stage ``k`` is queried when the depth exceeds ``k``; a pair of queried
    stages disagrees when their outputs differ.
    """
    k = outputs.shape[1]
    queried = [0] * k
    disagreements = [[0] * k for _ in range(k)]
    for row, depth in zip(outputs.tolist(), depths):
        for i in range(depth):
            queried[i] += 1
            for j in range(i + 1, depth):
                disagreements[i][j] += row[i] != row[j]
    return {"decisions": len(depths), "queried": queried, "disagreements": disagreements}


class LagSampler:
    """Samples, every ``interval`` seconds, how far the group's commits are behind the input's end."""

    def __init__(self, bootstrap: str, topic: str, group: str, interval: float = 1.0) -> None:
        self.bootstrap, self.topic, self.group, self.interval = bootstrap, topic, group, interval
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

        partitions = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        while not self._stop.wait(self.interval):
            try:
                ends = consumer.end_offsets(partitions)
                committed = admin.list_group_offsets({self.group: partitions})[self.group]
            except Exception:  # the broker is restarting: no sample
                continue
            lag = sum(
                ends[tp] - max(0, committed[tp].offset if committed.get(tp) is not None else 0)
                for tp in partitions
            )
            self.peak = max(self.peak, lag)
            self.samples += 1
        consumer.close()
        admin.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def rss_mib(pid: int) -> float | None:
    """The resident memory of process ``pid`` in MiB (``None``: it ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), None)
    return None if kib is None else kib / 1024


class MemorySampler:
    """Samples, every ``interval`` seconds, the resident memory of every live worker process."""

    def __init__(self, soak: Soak, interval: float = 1.0) -> None:
        self.soak, self.interval = soak, interval
        self.samples: dict[int, list[float]] = {}  # pid -> MiB, in time order
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for worker in list(self.soak.workers.values()):
                mib = rss_mib(worker.process.pid)
                if mib is not None:
                    self.samples.setdefault(worker.process.pid, []).append(mib)

    def peak(self) -> float:
        return max((max(s) for s in self.samples.values()), default=0.0)

    def describe(self) -> str:
        """Per worker process: its first, peak and last sample."""
        return "; ".join(f"{s[0]:.0f}/{max(s):.0f}/{s[-1]:.0f}" for s in self.samples.values() if s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


class Soak:
    """The workers, their restarts and the figures of one soak run."""

    def __init__(self, broker: RestartableBroker, topics: Topics, group: str) -> None:
        self.broker, self.topics, self.group = broker, topics, group
        self.options = [
            "--guarantee", "exactly-once", "--commit-interval", "1", "--checkpoint-interval", "2",
            "--max-poll-records", "2000", "--session-timeout-ms", "6000",
            "--consumer-option", "heartbeat_interval_ms=1000",
            # An outage of the broker shorter than half of this does not abort a transaction.
            "--producer-option", "transaction_timeout_ms=30000",
            *(["--shared-learning"] if SHARED else []),
        ]  # fmt: skip
        self.workers: dict[int, Service] = {}
        self.retired: list[Service] = []
        self.restore_seconds: list[float] = []
        self.takeover_seconds: list[float] = []
        self.broker_down_seconds: list[float] = []
        self.recovery_seconds: list[float] = []
        self.crashes: list[str] = []
        self.timeline: list[str] = []
        self._t0 = time.monotonic()

    def note(self, text: str) -> None:
        self.timeline.append(f"{time.monotonic() - self._t0:7.1f}s {text}")

    def launch(self, k: int) -> Service:
        worker = Service(self.broker.bootstrap, self.topics, self.group, *self.options,
                         "--group-instance-id", f"soak-w{k}")  # fmt: skip
        self.workers[k] = worker
        return worker

    def start(self, k: int) -> float:
        """Start worker ``k``; returns the seconds until it restored its partitions.

        A worker that does not restore in time fails the test with what the broker says of the
        group's transactions (an open one holds the committed offsets it wrote unstable, and a
        restore waits for them) and the worker's log without its repeated lines.
        """
        started = time.monotonic()
        worker = self.launch(k)
        try:
            wait_until(
                lambda: "restored" in worker.log, "'restored' in the log", timeout=120, alive=worker.alive
            )
        except AssertionError as error:
            lines = list(dict.fromkeys(line.split(" ", 2)[-1] for line in worker.log.splitlines()))
            raise AssertionError(
                f"{error}\n{transactions(self.broker.bootstrap)}\nworker {k}'s log, each line once:\n"
                + "\n".join(lines[-60:])
            ) from None
        return time.monotonic() - started

    def alive(self) -> None:
        """Restart a worker that died unasked, as a supervisor would; the crash is recorded."""
        for k, worker in list(self.workers.items()):
            if worker.process.poll() is not None:
                self.crashes.append(f"worker {k} exited {worker.process.returncode}: {worker.log[-1500:]}")
                self.note(f"worker {k} exited {worker.process.returncode} unasked: restarted")
                self.retired.append(self.workers.pop(k))
                self.launch(k)

    def owned(self) -> dict[int, set[int]]:
        return {k: owned_partitions(w, self.topics.input) for k, w in self.workers.items()}

    def wait(self, condition: Any, what: str, timeout: float = 180, every: float = 0.1) -> float:
        return wait_until(condition, what, timeout=timeout, alive=self.alive, every=every)

    def kill(self, k: int, wait_for_takeover: bool) -> None:
        """SIGKILL worker ``k`` and restart it (after the survivors took its partitions over)."""
        victim = self.workers.pop(k)
        self.note(f"SIGKILL worker {k} (restart {'after the take-over' if wait_for_takeover else 'at once'})")
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(timeout=10)
        self.retired.append(victim)
        if wait_for_takeover and self.workers:
            self.takeover_seconds.append(
                self.wait(
                    lambda: set().union(*self.owned().values()) == set(range(PARTITIONS)),
                    "the survivors' take-over",
                )
            )
        self.restore_seconds.append(self.start(k))
        self.note(f"worker {k} restored after {self.restore_seconds[-1]:.1f}s")

    def term(self, k: int) -> None:
        """SIGTERM worker ``k`` (a clean exit, 0) and restart it."""
        victim = self.workers.pop(k)
        self.note(f"SIGTERM worker {k}")
        victim.process.send_signal(signal.SIGTERM)
        self.retired.append(victim)
        victim.finish(timeout=120)
        self.restore_seconds.append(self.start(k))
        self.note(f"worker {k} restored after {self.restore_seconds[-1]:.1f}s")

    def restart_broker(self, sizes: list[int]) -> None:
        """Stop and restart the broker, then wait until the workers commit again on every partition
        (or have committed all of its input): the next fault meets a group that rode this one out."""
        from kafka import KafkaAdminClient, TopicPartition

        self.note("broker stop")
        stopped = self.broker.stop()
        started = self.broker.start()
        self.broker_down_seconds.append(stopped + started)
        self.note(f"broker up again after {stopped + started:.1f}s")
        partitions = [TopicPartition(self.topics.input, p) for p in range(PARTITIONS)]
        admin = KafkaAdminClient(bootstrap_servers=self.broker.bootstrap)
        try:
            before = committed_offsets(admin, self.group, partitions)  # what was committed before the stop

            def recovered() -> bool:
                now = committed_offsets(admin, self.group, partitions)
                return all(now[tp] > before[tp] or now[tp] >= sizes[tp.partition] for tp in partitions)

            self.recovery_seconds.append(
                self.wait(recovered, "commits on every partition after the restart", every=0.5)
            )
        finally:
            admin.close()
        self.note(f"every partition committed again {self.recovery_seconds[-1]:.1f}s later")

    def stop(self) -> list[str]:
        for worker in self.workers.values():
            worker.process.send_signal(signal.SIGTERM)
        return [worker.finish(timeout=120) for worker in self.workers.values()]

    def kill_all(self) -> None:
        for worker in [*self.workers.values(), *self.retired]:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait(10)


def transactions(bootstrap: str) -> str:
    """The broker's transactions (the ongoing ones described) and the producers known to the group
    offsets' partitions (one with ``current_transaction_start_offset >= 0`` has an open
    transaction there), for a post-mortem; what could not be asked is said instead."""
    from kafka import KafkaAdminClient, TopicPartition

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    except Exception as error:  # the broker itself may be what failed
        return f"transactions: the broker did not answer ({error!r})"
    try:
        listed = [t for found in admin.list_transactions().values() for t in found]
        done = {"Empty", "CompleteCommit", "CompleteAbort"}
        ongoing = [t.transactional_id for t in listed if getattr(t.state, "value", t.state) not in done]
        described = admin.describe_transactions(ongoing) if ongoing else {}
        partitions = next(iter(admin.describe_topics(["__consumer_offsets"])))["partitions"]
        offsets = [TopicPartition("__consumer_offsets", p["partition_index"]) for p in partitions]
        producers = admin.describe_producers(offsets)
        return f"transactions: {listed}\nongoing: {described}\nproducers on __consumer_offsets: {producers}"
    except Exception as error:
        return f"transactions: could not be described ({error!r})"
    finally:
        admin.close()


@pytest.fixture
def soak_broker() -> Iterator[RestartableBroker]:
    """The private broker; ``SOAK_KEEP_BROKER=1`` stops it but keeps its data for a post-mortem."""
    broker = RestartableBroker()
    broker.start()
    try:
        yield broker
    finally:
        if os.environ.get("SOAK_KEEP_BROKER") == "1":
            broker.stop()
            print(f"broker data kept: KAFKA_PORT={broker.port} KAFKA_KEEP_DATA=1 broker.sh start")
        else:
            broker.destroy()


def test_soak(soak_broker, record_property, tmp_path, chaos_random):
    from kafka import KafkaAdminClient, TopicPartition

    bootstrap = soak_broker.bootstrap
    topics = Topics(input="soak-in", output="soak-out", dead_letter="soak-dlq", state="soak-state")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    create_topics(admin, topics, partitions=PARTITIONS)
    admin.close()
    # A group leader that finds no metadata for the input assigns nothing: wait until it is served.
    wait_until(lambda: len(end_offsets(bootstrap, topics.input)) >= PARTITIONS,
               "the input's partitions served", timeout=60, every=0.2)  # fmt: skip
    sizes = [EVENTS // PARTITIONS + (p < EVENTS % PARTITIONS) for p in range(PARTITIONS)]
    streams = {p: stream(sizes[p], seed=SEED + p, start=STRIDE * p) for p in range(PARTITIONS)}
    group = "soak-group"
    rng = chaos_random  # the faults' order, and which worker each one hits
    # The faults, spread evenly over the production; broker restarts among the kills.
    faults = ["kill"] * KILLS + ["term"] * TERMS
    rng.shuffle(faults)
    for i in range(BROKER_RESTARTS):
        faults.insert((i + 1) * len(faults) // (BROKER_RESTARTS + 1) + i, "broker")
    thresholds = [EVENTS * (i + 1) // (len(faults) + 1) for i in range(len(faults))]

    log_dir = Path(os.environ.get("SOAK_LOG_DIR") or tmp_path)
    log_dir.mkdir(parents=True, exist_ok=True)
    soak = Soak(soak_broker, topics, group)
    sampler = memory = None
    try:
        started = time.monotonic()
        launched = time.monotonic()
        for k in range(WORKERS):
            soak.launch(k)
        for worker in soak.workers.values():
            worker.wait_for_log("restored", timeout=120)
        first_restore = time.monotonic() - launched
        soak.wait(lambda: all(soak.owned().values()), "three workers sharing the partitions", timeout=60)
        sampler = LagSampler(bootstrap, topics.input, group)
        memory = MemorySampler(soak)
        producing = trickle(bootstrap, topics.input, {p: v for p, (v, _) in streams.items()}, per_second=RATE)
        kills = 0
        for fault, threshold in zip(faults, thresholds):
            soak.wait(
                lambda t=threshold: produced(bootstrap, topics.input) >= t,
                "production",
                timeout=600,
                every=0.5,
            )
            if fault == "broker":
                soak.restart_broker(sizes)
            elif fault == "term":
                soak.term(rng.choice(sorted(soak.workers)))
            else:
                soak.kill(rng.choice(sorted(soak.workers)), wait_for_takeover=kills % 2 == 1)
                kills += 1
        producing.join(timeout=600)
        assert not producing.is_alive(), "the producer did not finish"
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        partitions = [TopicPartition(topics.input, p) for p in range(PARTITIONS)]

        def caught_up() -> bool:
            committed = committed_offsets(admin, group, partitions)
            return all(committed[tp] >= sizes[tp.partition] for tp in partitions)

        soak.wait(caught_up, "every input offset committed", timeout=600, every=0.5)
        admin.close()
        total_seconds = time.monotonic() - started
        logs = soak.stop()
    finally:
        if sampler is not None:
            sampler.stop()
        if memory is not None:
            memory.stop()
        soak.kill_all()
        for i, worker in enumerate([*soak.retired, *soak.workers.values()]):
            (log_dir / f"worker-{i}.log").write_text(worker.log)
        (log_dir / "timeline.txt").write_text("\n".join(soak.timeline) + "\n")
        print(f"worker logs and the fault timeline in {log_dir}")

    records = read_all(bootstrap, topics.output, isolation_level="read_committed", timeout=300)
    everything = read_all(bootstrap, topics.output, timeout=300)
    aborted = len(everything) - len(records)
    produced_anyhow = {json.loads(r.value)["id"] for r in everything}
    del everything
    decisions = [json.loads(r.value) for r in records]
    counts = Counter(d["id"] for d in decisions)
    expected_ids = {f"e{STRIDE * p + i}" for p in range(PARTITIONS) for i in range(sizes[p])}
    missing = sorted(int(i[1:]) for i in expected_ids - set(counts))
    twice = sum(n > 1 for n in counts.values())
    every_log = logs + [w.log for w in soak.retired]
    replacements = sum(log.count("replacing the transactional producer") for log in every_log)
    report = (
        f"soak: {EVENTS} events at {RATE:.0f}/s, {WORKERS} exactly-once workers, {PARTITIONS} partitions, "
        f"shared learning {'on' if SHARED else 'off'}; {KILLS} SIGKILLs, {TERMS} SIGTERMs, "
        f"{BROKER_RESTARTS} broker restarts "
        f"(down {fmt(soak.broker_down_seconds)}, every partition committing again "
        f"{fmt(soak.recovery_seconds)} later); all input committed after {total_seconds:.0f}s; "
        f"restore after a restart {fmt(soak.restore_seconds)} (first start {first_restore:.1f}s), "
        f"take-over after a kill {fmt(soak.takeover_seconds)}; peak lag {sampler.peak} records "
        f"({sampler.samples} samples); read_committed: {len(records)} decisions, {len(missing)} events "
        f"without one{missing_detail(missing, produced_anyhow)}, {twice} with two; {aborted} aborted "
        f"records; {replacements} producer replacements; {len(soak.crashes)} unasked worker exits; "
        f"resident memory per worker process first/peak/last MiB: {memory.describe()}"
    )
    record_property("soak", report)
    print(report)
    log_dir.joinpath("report.txt").write_text(report + "\n" + "\n".join(soak.timeline) + "\n")
    assert not missing, "events without a committed decision"
    assert twice == 0, "events with two committed decisions"
    last = {c.partition: c.state["stats"] for c in checkpoints_of(bootstrap, topics.state)}
    for p, (_, outputs) in streams.items():
        own = [json.loads(r.value) for r in records if r.partition == p]
        assert [d["id"] for d in own] == [f"e{STRIDE * p + i}" for i in range(sizes[p])], f"partition {p}"
        depths = [d["depth"] for d in own]
        if not SHARED:
            assert depths == USSUCB(COSTS).run(outputs).tolist(), f"partition {p}"
        stats = {name: last[p][name] for name in ("decisions", "queried", "disagreements")}
        assert stats == counts_of(outputs, depths), f"partition {p}: checkpoint counts"
    assert read_all(bootstrap, topics.dead_letter) == []
    assert not soak.crashes, "\n\n".join(soak.crashes)
    assert 0 < memory.peak() <= MAX_RSS_MIB, f"a worker's resident memory peaked at {memory.peak():.0f} MiB"


def missing_detail(missing: list[int], produced_anyhow: set[str]) -> str:
    """Where the events without a committed decision are, and whether an aborted decision exists."""
    if not missing:
        return ""
    parts = []
    for p in range(PARTITIONS):
        own = [i - STRIDE * p for i in missing if i // STRIDE == p]
        if own:
            uncommitted = sum(f"e{STRIDE * p + i}" in produced_anyhow for i in own)
            parts.append(f"partition {p}: {len(own)} in {own[0]}..{own[-1]}, {uncommitted} seen uncommitted")
    return f" ({'; '.join(parts)})"


def produced(bootstrap: str, topic: str) -> int:
    try:
        return sum(end_offsets(bootstrap, topic).values())
    except Exception:  # the broker is restarting
        return 0


def fmt(seconds: list[float]) -> str:
    if not seconds:
        return "-"
    return f"median {statistics.median(seconds):.1f}s, max {max(seconds):.1f}s (n={len(seconds)})"
