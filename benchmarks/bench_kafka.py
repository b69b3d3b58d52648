"""End-to-end throughput of the Kafka decision service on both clients against bare passthroughs.

Run: ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 python -m benchmarks.bench_kafka``.

**What a user sees** (first, :func:`_end_to_end`): every contender is a cold process started on an
input topic that already holds the events (``uss-stream kafka run`` at its default flags, with the
compiled kernels where ``uss-stream[fast]`` is installed and once more on the pure Python path
(``USS_STREAM_PURE=1``), the same with ``--client kafka-python`` and with ``--policy uss-kl-ucb``,
bare passthroughs of both clients
with the service's default client settings, and a Quix Streams application doing the service's job
with USS-KL-UCB; :mod:`benchmarks.kafka_contenders`), timed by its output's broker append times:
throughput = records / span of the output's ``LogAppendTime``, and "cold" = records / (last
append time − launch), and "stalled" = seconds of the output's span in gaps of 200 ms or more.
Every contender starts with its modules' bytecode cached, as after ``pip install``
(:func:`~benchmarks.kafka_contenders.warm_bytecode`); every other round runs them in reverse order.
Ratios are those of one round, medians over the rounds.

**The loop** (then, unless ``--no-loop``): the figures below, of services started in-process on a
prefetched input.

Two input topics (one partition each, outputs mode) are written once: the easiest case (K = 3,
USS-UCB) and a hard one (K = 5, USS-KL-UCB, whose KL bound costs more per event). Then, per round,
on the same broker:

* **service, per case, client and guarantee**: :class:`uss_stream_kafka.Application` with
  :class:`OutputsProcessor` (decode, validate, select/update, encode, per-batch metrics, flush +
  commit every second, checkpoints every five seconds) on ``client_library="kafka-python"`` and
  ``"confluent"``, at-least-once and exactly-once (transactions; read back ``read_committed``);
* **bare passthrough, per client**, after the services: a consumer → producer loop that copies each
  record of the K = 3 topic to an output topic (no decoding, no commits; one flush at the end),
  with the service's own client settings: bare kafka-python and bare confluent-kafka (librdkafka),
  the loop of ``/work/shared/tools/passthrough.py``, each in a process of its own as the services
  are. The confluent loop serves delivery reports and retries when librdkafka's queue is full
  (``BufferError``), as librdkafka's documentation says to;
* **with** ``--ceiling``: a service deciding the K = 3 stream at a fixed depth (confluent,
  at-least-once; :data:`CEILING`), what the service costs besides its policy.
* **with** ``--learning-off``: the K = 3 at-least-once services of both clients once more with the
  learning metrics off (``Application(learning_metrics=False)``; :data:`NO_LEARNING`), so that the
  rounds' ratios "learning metrics on / off" (target >= 0.95) compare runs of the same round.
  Every other round runs the cases in reverse order. ``--learning-only`` runs only these pairs
  (the K = 3 at-least-once services with and without the learning metrics, no end-to-end
  contenders, no passthroughs; ``--client`` picks the clients): shorter rounds, so more of them
  interleave in the same time.

**Keyed** (``--keyed``, :mod:`benchmarks.kafka_keyed`): instead of the above, the keyed service
(``--key-from record-key``) against the un-keyed one end to end on an input of ``--keys`` keys
with Zipf-distributed traffic, interleaved rounds; then the resident memory per key.

**Same start condition.** A service pauses its new partition while it restores it (about a second),
then fetches; a passthrough could copy from its first fetch on. So each passthrough idles after its
assignment for as long as its client's at-least-once K = 3 service of the same round took from its
assignment to its first decided batch (measured in the service's process), and only then consumes:
both start on what the client fetched by then (with librdkafka, its first fetch whole: about 180 000
of these records, ``max.partition.fetch.bytes`` = 8 MiB). Records a passthrough's joining
``poll``/``consume`` returned are held, not copied, until then.

**Not limited by fetching.** With librdkafka's defaults, a partition's next fetch waits while its
local queue holds over ``queued.min.messages`` (100 000) records, rechecked every
``fetch.queue.backoff.ms`` (1 s): the bare confluent passthrough copied the first fetch's 180 000
records in about 0.6 s, then waited up to a second for the rest, so its rate (120-200k events/s)
measured when librdkafka's timer fired, not the loop (its CPU time per event, about 2 µs, allows
several times that rate), and idling after its assignment made it slower, not faster. Both the
confluent passthrough and the confluent services therefore run with ``queued.min.messages`` =
1 000 000 (:data:`PREFETCH`; the services through ``consumer_options``, the bytes stay capped by
``queued.max.messages.kbytes``): librdkafka fetches the whole input while they start, and the
ratio compares the loops. kafka-python fetches only inside ``poll()``: its passthrough's idle time
changes nothing but the symmetry.

All are timed the same way, from the output topic, whose records carry the broker's append time
(``message.timestamp.type=LogAppendTime``): events / (append time of the last output record −
append time of the first), so start-up (group join, restore, the passthroughs' idle time) is
excluded for all, and delivery is included. Each round's line gives the 1-minute load average at
its start. Every service's decisions are checked against the policy's own ``run`` on the same
stream. Reported: medians over the rounds and the medians of the rounds' ratios (each ratio's
numerator and denominator measured in the same round): confluent service / bare confluent
passthrough (target >= 0.8), confluent service / kafka-python service (target >= 3) and
exactly-once / at-least-once per client (target >= 0.5).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
import uuid
from typing import Any, NamedTuple

import numpy as np

from benchmarks.kafka_contenders import Timing, events, launch, output_topics, timed, warm_bytecode
from uss_stream.core.compiled import PURE_VARIABLE, status
from uss_stream.policies.specs import serving_policy
from uss_stream_kafka import Application, ClientConfig, OutputsProcessor, Topics, clients, create_topics
from uss_stream_kafka.clients import CLIENTS, TopicSpec, resolve
from uss_stream_kafka.runtime.commit import PRODUCER_DEFAULTS
from uss_stream_kafka.runtime.startup import CONSUMER_DEFAULTS, freeze_startup_heap

STAGE_COSTS = [0.0, 0.15, 0.2]
#: librdkafka keeps fetching until a partition's local queue holds this many records (its default,
#: 100 000, is about half a fetch of these records here; see the module's notes), for the confluent
#: passthrough and the confluent services alike.
PREFETCH = {"queued.min.messages": 1_000_000}


def _outputs(n: int, seed: int, stages: int = 3) -> np.ndarray:
    """A BSC-like stream: stage k < K errs with probability 0.2 / k, stage K is the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    noisy = [truth ^ (rng.random(n) < 0.2 / k) for k in range(1, stages)]
    return np.stack([*noisy, truth], axis=1).astype(int)


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


class _WarmUp:
    """A passthrough's idle time after its assignment: the service's, from assignment to first decision.

    The service pauses its new partitions while it restores them and fetches once they are resumed;
    a passthrough that copied as soon as its first fetch landed would start under another
    condition. Idle for the service's measured warm-up, it starts, like the service, on what its
    client fetched meanwhile.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.assigned_at: float | None = None

    def assigned(self, *_: Any) -> None:
        """The rebalance callback (either client's signature)."""
        if self.assigned_at is None:
            self.assigned_at = time.monotonic()

    def wait(self) -> None:
        time.sleep(max(0.0, self.assigned_at + self.seconds - time.monotonic()))


def _passthrough(
    bootstrap: str,
    source: str,
    target: str,
    n: int,
    max_poll_records: int,
    warm_up: float,
    cpu: Any = None,
) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"bench-pass-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=max_poll_records,
        **CONSUMER_DEFAULTS,
    )
    warm = _WarmUp(warm_up)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            warm.assigned()

    consumer.subscribe([source], listener=Listener())
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, **PRODUCER_DEFAULTS
    )
    held: list = []  # records returned by the poll that joined the group
    while warm.assigned_at is None:
        held += consumer.poll(timeout_ms=500).items()
    warm.wait()
    copied, started = 0, None
    while copied < n:
        for tp, records in held or consumer.poll(timeout_ms=500).items():
            started = started or time.process_time()
            send = producer.send
            for record in records:
                send(target, record.value, key=record.key, partition=tp.partition)
            copied += len(records)
        held = []
    producer.flush()
    _report_cpu(cpu, started)
    producer.close()
    consumer.close()


def _passthrough_confluent(
    bootstrap: str,
    source: str,
    target: str,
    n: int,
    max_poll_records: int,
    warm_up: float,
    cpu: Any = None,
) -> None:
    """The same loop on bare confluent-kafka: ``consume()`` batches, one ``produce()`` per record."""
    from confluent_kafka import Consumer, Producer

    from uss_stream_kafka.clients.librdkafka_config import librdkafka_config

    consumer = Consumer(
        {
            **librdkafka_config({**CONSUMER_DEFAULTS, **PREFETCH, "bootstrap_servers": bootstrap}),
            "group.id": f"bench-pass-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    warm = _WarmUp(warm_up)
    consumer.subscribe([source], on_assign=warm.assigned)
    producer = Producer(
        librdkafka_config(
            {**PRODUCER_DEFAULTS, "bootstrap_servers": bootstrap, "acks": "all", "enable_idempotence": True}
        )
    )
    held: list = []  # messages returned by the consume() that joined the group
    while warm.assigned_at is None:
        held += consumer.consume(max_poll_records, 0.5)
    warm.wait()  # librdkafka fetches meanwhile, on its own threads
    copied, started = 0, None
    while copied < n:
        messages = held or consumer.consume(max_poll_records, 0.5)
        held = []
        started = started or (time.process_time() if messages else None)
        produce = producer.produce
        for message in messages:
            try:
                produce(target, message.value(), message.key(), message.partition())
            except BufferError:
                _produce_when_room(producer, target, message)
        copied += len(messages)
        producer.poll(0)
    producer.flush()
    _report_cpu(cpu, started)
    consumer.close()


def _produce_when_room(producer: Any, target: str, message: Any) -> None:
    """librdkafka's queue is full: serve delivery reports until it takes ``message`` (its docs' advice)."""
    while True:
        producer.poll(0.05)
        try:
            producer.produce(target, message.value(), message.key(), message.partition())
            return
        except BufferError:
            continue


def _report_cpu(cpu: Any, started: float | None) -> None:
    """Store the process's CPU seconds (every thread: librdkafka's too) since ``started`` in ``cpu``."""
    if cpu is not None and started is not None:
        cpu.value = time.process_time() - started


def _in_process(loop: Any, *args: Any) -> float:
    """Run a bare passthrough ``loop(*args)`` in a process of its own, as the services run.

    Measured in the benchmark's own process, the passthrough shared its interpreter (the GIL, the
    garbage collector's view of the records read back) with the benchmark's clients: it ran
    slower than the service it is the baseline of.
    """
    context = multiprocessing.get_context("spawn")
    cpu = context.Value("d", float("nan"))
    process = context.Process(target=loop, args=(*args, cpu))
    process.start()
    process.join(timeout=600)
    if process.exitcode != 0:
        process.kill()
        raise SystemExit(f"passthrough {loop.__name__} failed (exit {process.exitcode})")
    return cpu.value


def _service(
    bootstrap: str, topics: Topics, n: int, max_poll_records: int, client: str, guarantee: str, case: Case
) -> float:
    """Run a service in a process of its own until it decided ``n`` events, then stop it.

    Returns the CPU seconds the process spent (every thread) from its first decided batch to its
    ``n``-th event: with the passthroughs', a cost per event that the machine's load changes less
    than the throughput; and its warm-up, the seconds from its partition's assignment to its first
    decided batch (the restore, then the first fetch), which the passthroughs then idle for.

    A new process per service: kafka-python's clients share process-wide state (its IO thread), and
    a group consumer made after many others in one process was seen to wait for its coordinator forever.
    """
    context = multiprocessing.get_context("spawn")
    cpu, warm_up = context.Value("d", float("nan")), context.Value("d", float("nan"))
    process = context.Process(
        target=_serve, args=(bootstrap, topics, n, max_poll_records, client, guarantee, case, cpu, warm_up)
    )
    process.start()
    process.join(timeout=600)
    if process.exitcode != 0:
        process.kill()
        raise SystemExit(f"{case.name}, {client} {guarantee}: the service failed (exit {process.exitcode})")
    return cpu.value, warm_up.value


def _serve(
    bootstrap: str,
    topics: Topics,
    n: int,
    max_poll_records: int,
    client: str,
    guarantee: str,
    case: Case,
    cpu: Any = None,
    warm_up: Any = None,
) -> None:
    group = f"bench-svc-{uuid.uuid4().hex[:8]}"
    app = Application(
        ClientConfig(bootstrap),
        group_id=group,
        topics=topics,
        max_poll_records=max_poll_records,
        guarantee=guarantee,
        group_instance_id=group,
        http_port=None,
        client_library=client,
        consumer_options=PREFETCH if client == "confluent" else None,
        learning_metrics=case.learning_metrics,
    )
    processor = OutputsProcessor(case.stage_costs, policy=case.policy)
    freeze_startup_heap()  # as the command line does before its loop
    thread = threading.Thread(target=app.run, args=(processor,), daemon=True)
    thread.start()
    started = assigned_at = None
    while app.summary.events < n and thread.is_alive():
        if assigned_at is None and app._recovery is not None and app._recovery.assigned_once:
            assigned_at = time.monotonic()
        if started is None and app.summary.events:
            started = time.process_time()
            if warm_up is not None and assigned_at is not None:
                warm_up.value = time.monotonic() - assigned_at
        time.sleep(0.01)
    _report_cpu(cpu, started)
    app.stop()
    thread.join()
    if app.summary.events < n:
        raise SystemExit(f"the service stopped after {app.summary.events} of {n} events")


class Case(NamedTuple):
    """A workload: the cascade's stage costs and the policy deciding it."""

    name: str
    stage_costs: tuple[float, ...]
    policy: str
    learning_metrics: bool = True


#: The easiest case (K = 3, USS-UCB) and a hard one (K = 5, USS-KL-UCB: a KL bound per stage).
CASES = (
    Case("K=3 uss-ucb", tuple(STAGE_COSTS), "uss-ucb:alpha=0.51"),
    Case("K=5 uss-kl-ucb", (0.0, 0.05, 0.1, 0.15, 0.2), "uss-kl-ucb"),
)
#: The services measured per case: (client, guarantee).
SERVICES = [(client, guarantee) for client in CLIENTS for guarantee in ("at-least-once", "exactly-once")]
#: ``--ceiling``: the K = 3 stream at a fixed depth, on confluent at-least-once only. The policy
#: learns nothing and decides in one vectorised step per batch, so this service costs what every
#: outputs-mode service costs besides its policy (decode, validate, encode, produce, commit): the
#: most any policy's service can reach against the bare passthrough.
CEILING = Case("K=3 fixed depth (no learning)", tuple(STAGE_COSTS), "fixed:depth=3")
#: ``--learning-off``: the easiest case without the learning metrics, at-least-once on both clients.
NO_LEARNING = Case("K=3 uss-ucb, learning metrics off", *CASES[0][1:3], learning_metrics=False)


def _services(
    case: Case, learning_only: bool = False, clients: list[str] | None = None
) -> list[tuple[str, str]]:
    if case is NO_LEARNING or learning_only:
        return [(client, "at-least-once") for client in clients or CLIENTS]
    return [("confluent", "at-least-once")] if case is CEILING else SERVICES


def _median_ratio(numerators: list[float], denominators: list[float]) -> str:
    ratios = [a / b for a, b in zip(numerators, denominators)]
    return f"{statistics.median(ratios):.2f}x (lowest {min(ratios):.2f})"


#: The environment of a contender on the pure Python/NumPy decision path (no compiled kernels).
PURE = {PURE_VARIABLE: "1"}
#: The end-to-end contenders: (label, kind of :mod:`benchmarks.kafka_contenders`, service flags,
#: environment variables). The default service runs with the compiled kernels where they are
#: installed (``uss-stream[fast]``), and once more on the pure path.
END_TO_END = (
    ("service, default flags", "service", (), {}),
    ("service, default flags, pure Python (USS_STREAM_PURE=1)", "service", (), PURE),
    ("service --client kafka-python", "service", ("--client", "kafka-python"), {}),
    ("service --policy uss-kl-ucb", "service", ("--policy", "uss-kl-ucb"), {}),
    ("bare passthrough confluent", "passthrough-confluent", (), {}),
    ("bare passthrough kafka-python", "passthrough-kafka-python", (), {}),
    ("Quix Streams, USS-KL-UCB per event", "quix", (), {}),
)
#: End-to-end ratios reported: (numerator, denominator, target).
E2E_RATIOS = (
    ("service, default flags", "bare passthrough confluent", 0.85),
    ("service, default flags, pure Python (USS_STREAM_PURE=1)", "bare passthrough confluent", 0.75),
    ("service --policy uss-kl-ucb", "Quix Streams, USS-KL-UCB per event", 5.0),
    ("service, default flags", "service --client kafka-python", None),
)


def _end_to_end(bootstrap: str, n: int, rounds: int, variants: list[str]) -> None:
    """Each contender of :data:`END_TO_END` from a cold start, ``rounds`` times (see the module).

    ``variants``: more services, each with these flags besides the defaults (``--variant``).
    """
    contenders = [c for c in END_TO_END if c[1] != "quix" or importlib.util.find_spec("quixstreams")]
    contenders += [(f"service {flags}", "service", tuple(flags.split()), {}) for flags in variants]
    if len(contenders) < len(END_TO_END):
        print("quixstreams is not installed (pip install 'uss-stream[bench]'): no Quix contender")
    admin = clients.admin("kafka-python", bootstrap_servers=bootstrap)
    run_id = uuid.uuid4().hex[:8]
    source = f"e2e-in-{run_id}"
    admin.create_topics({source: TopicSpec()})
    made = [source]
    producer = clients.producer("kafka-python", bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20)
    producer.send_many(source, events(n), partition=0)
    producer.flush()
    producer.close()
    print(f"end to end: {n} events in one partition; --client auto is {resolve('auto')}", flush=True)
    print(f"decision path of the services: {status()}", flush=True)
    warm_bytecode()
    figures: dict[str, list[Any]] = {label: [] for label, _, _, _ in contenders}
    for r in range(rounds):
        line = [f"round {r + 1} (load {os.getloadavg()[0]:.1f})"]
        order = list(enumerate(contenders))
        if r % 2:  # every other round in reverse order: no contender always runs first or last
            order.reverse()
        for c, (label, kind, flags, variables) in order:
            target = f"e2e-out-{run_id}-{r}-{c}"
            made += output_topics(admin, target)
            launched = launch(kind, bootstrap, source, target, n, flags, variables)
            figures[label].append(timed(bootstrap, target, n, launched))
            timing = figures[label][-1]
            line.append(f"{label} {timing.throughput:.0f} (stalled {timing.stalled:.1f} s)")
        print(" | ".join(line) + " ev/s", flush=True)
    admin.delete_topics(made)
    admin.close()
    print("\n| contender | events/s (output span) | events/s from launch | start-up s | stalled s |")
    print("| --- | --- | --- | --- | --- |")
    for label, timings in figures.items():
        rates = [statistics.median(getattr(t, field) for t in timings) for field in Timing._fields]
        print(f"| {label} | {rates[0]:,.0f} | {rates[1]:,.0f} | {rates[2]:.1f} | {rates[3]:.1f} |")
    print()
    for numerator, denominator, target in E2E_RATIOS:
        if numerator in figures and denominator in figures:
            rates = [[t.throughput for t in figures[name]] for name in (numerator, denominator)]
            wanted = "" if target is None else f"   (target >= {target})"
            print(f"{numerator} / {denominator}: {_median_ratio(*rates)}{wanted}", flush=True)
    print()


def _parse_args() -> argparse.Namespace:
    """The command line; ``--learning-only`` implies ``--easy-only --learning-off --e2e-rounds 0``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-poll-records", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--easy-only", action="store_true", help="only the K = 3 USS-UCB case")
    parser.add_argument(
        "--ceiling", action="store_true", help="also a fixed-depth service: the cost besides the policy"
    )
    parser.add_argument(
        "--learning-off", action="store_true", help="also the K = 3 services without the learning metrics"
    )
    parser.add_argument(
        "--learning-only",
        action="store_true",
        help="only the K = 3 at-least-once services with and without the learning metrics",
    )
    parser.add_argument(
        "--client",
        action="append",
        choices=CLIENTS,
        help="with --learning-only: only this client's services (repeatable; default: both)",
    )
    parser.add_argument("--e2e-rounds", type=int, default=2, help="rounds of the end-to-end contenders")
    parser.add_argument(
        "--keyed",
        action="store_true",
        help="only the keyed service (--key-from record-key) against the un-keyed one, end to end, "
        "--e2e-rounds rounds on --events events of --keys Zipf keys (--variant: more keyed services); "
        "then the memory per key",
    )
    parser.add_argument("--keys", type=int, default=100_000, help="--keyed: distinct keys")
    parser.add_argument("--zipf", type=float, default=1.1, help="--keyed: the keys' Zipf exponent")
    parser.add_argument("--no-loop", action="store_true", help="only the end-to-end contenders")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="also a service with these flags, end to end (repeatable), e.g. "
        "'--consumer-option fetch.queue.backoff.ms=1000'",
    )
    args = parser.parse_args()
    if args.learning_only:
        args.easy_only = args.learning_off = True
        args.e2e_rounds = 0
    return args


def main() -> None:
    args = _parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        sys.exit("set KAFKA_BOOTSTRAP_SERVERS (e.g. KAFKA_PORT=29092 bash deploy/kafka/broker.sh start)")
    if args.keyed:
        from benchmarks.kafka_keyed import key_memory, keyed_end_to_end

        keyed_end_to_end(bootstrap, args.events, args.keys, args.zipf, args.e2e_rounds, args.variant)
        key_memory()
        return
    if args.e2e_rounds:
        _end_to_end(bootstrap, args.events, args.e2e_rounds, args.variant)
    if args.no_loop:
        return
    _loop(args, bootstrap)


def _write_inputs(
    admin: Any, bootstrap: str, cases: tuple[Case, ...], n: int, seed: int, run_id: str, made: list[str]
) -> tuple[dict[Case, str], dict[Case, np.ndarray]]:
    """One input topic per case holding ``n`` events, and the depths its policy decides on them."""
    sources, expected = {}, {}
    for c, case in enumerate(cases):
        outputs = _outputs(n, seed, len(case.stage_costs))
        expected[case] = serving_policy(case.policy, case.stage_costs, "bench")[0].run(outputs)
        sources[case] = f"bench-in-{run_id}-{c}"
        admin.create_topics(
            {sources[case]: {"num_partitions": 1, "replication_factor": 1}}, wait_for_metadata=True
        )
        made.append(sources[case])
        started = time.perf_counter()
        _produce_input(bootstrap, sources[case], outputs)
        print(f"{case.name}: {n} events written in {time.perf_counter() - started:.1f}s", flush=True)
    return sources, expected


def _loop(args: argparse.Namespace, bootstrap: str) -> None:
    """The loop benchmark: services started in-process on prefetched inputs, then the passthroughs."""
    from kafka import KafkaAdminClient
    from kafka.record import util as record_util

    crc = "C crc32c" if record_util._crc32c is not record_util.crc32c_py else "pure-Python crc32c"
    n = args.events
    cases = (CASES[:1] if args.easy_only else CASES) + ((CEILING,) if args.ceiling else ())
    cases += (NO_LEARNING,) if args.learning_off else ()
    run_id = uuid.uuid4().hex[:8]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    made: list[str] = []
    sources, expected = _write_inputs(admin, bootstrap, cases, n, args.seed, run_id, made)
    print(f"kafka-python with {crc}", flush=True)
    rates, cpu, pass_rates, pass_cpu = _loop_rounds(
        args, bootstrap, admin, run_id, cases, sources, expected, made
    )
    admin.delete_topics(made)
    admin.close()

    print()
    if args.learning_only:
        _print_learning_ratios(rates, cpu)
        return
    _print_loop_summary(cases, rates, cpu, pass_rates, pass_cpu)


def _loop_rounds(
    args: argparse.Namespace,
    bootstrap: str,
    admin: Any,
    run_id: str,
    cases: tuple[Case, ...],
    sources: dict[Case, str],
    expected: dict[Case, np.ndarray],
    made: list[str],
) -> tuple[dict, dict, dict[str, list[float]], dict[str, list[float]]]:
    """Every round's services and passthroughs: events/s and CPU microseconds per event of each."""
    n = args.events
    easy = sources[cases[0]]
    loops = {"kafka-python": _passthrough, "confluent": _passthrough_confluent}
    pass_rates: dict[str, list[float]] = {name: [] for name in loops}
    services = {case: _services(case, args.learning_only, args.client) for case in cases}
    rates: dict[tuple[Case, str, str], list[float]] = {(c, *s): [] for c in cases for s in services[c]}
    # CPU microseconds per event, every thread of the process (see _service).
    pass_cpu: dict[str, list[float]] = {name: [] for name in loops}
    cpu: dict[tuple[Case, str, str], list[float]] = {key: [] for key in rates}
    for r in range(args.rounds):
        line = [f"round {r + 1} (load {os.getloadavg()[0]:.1f})"]
        warm_ups = {}  # seconds from assignment to first decision, per (case, client, guarantee)
        # Every other round runs the cases in reverse order: a case is not always measured first.
        for c, case in list(enumerate(cases))[:: 1 if r % 2 == 0 else -1]:
            for s, (client, guarantee) in enumerate(services[case]):
                # A new group per service, so new topics (checkpoints are keyed by input partition).
                tag = f"{run_id}-{r}-{c}-{s}"
                topics = Topics(sources[case], f"bench-out-{tag}", f"bench-dlq-{tag}", f"bench-st-{tag}")
                _output_topic(admin, topics.output)
                create_topics(admin, topics)
                made += [topics.output, topics.dead_letter, topics.state]
                seconds, warm_ups[case, client, guarantee] = _service(
                    bootstrap, topics, n, args.max_poll_records, client, guarantee, case
                )
                cpu[case, client, guarantee].append(seconds / n * 1e6)
                decisions = _read_output(bootstrap, topics.output, n)  # read_committed
                depths = np.array([json.loads(record.value)["depth"] for record in decisions])
                if not np.array_equal(depths, expected[case]):
                    raise SystemExit(
                        f"{case.name}, {client} {guarantee}: decisions differ from the policy's run"
                    )
                rates[case, client, guarantee].append(_rate(decisions))
                line.append(
                    f"{case.name} {client} {guarantee} {rates[case, client, guarantee][-1]:.0f}"
                    f" ({cpu[case, client, guarantee][-1]:.2f} us)"
                )
                del decisions
                gc.collect()
        # Each passthrough idles after its assignment as long as its client's at-least-once service
        # on the same topic (K = 3) took from assignment to first decision in this round.
        for i, (name, loop) in enumerate(loops.items() if not args.learning_only else ()):
            target = f"bench-pass-{run_id}-{r}-{i}"
            _output_topic(admin, target)
            made.append(target)
            warm_up = warm_ups[cases[0], name, "at-least-once"]
            seconds = _in_process(loop, bootstrap, easy, target, n, args.max_poll_records, warm_up)
            pass_cpu[name].append(seconds / n * 1e6)
            pass_rates[name].append(_rate(_read_output(bootstrap, target, n)))
            line.append(
                f"passthrough {name} {pass_rates[name][-1]:.0f} ({pass_cpu[name][-1]:.2f} us,"
                f" idle {warm_up:.2f} s)"
            )
            gc.collect()  # the records read back must not slow the next run's garbage collections
        print(" | ".join(line) + " ev/s (CPU per event)", flush=True)
    return rates, cpu, pass_rates, pass_cpu


def _print_loop_summary(
    cases: tuple[Case, ...],
    rates: dict,
    cpu: dict,
    pass_rates: dict[str, list[float]],
    pass_cpu: dict[str, list[float]],
) -> None:
    """The rounds' medians: passthroughs, then per case its services and their ratios to the targets."""
    for name, values in pass_rates.items():
        print(
            f"bare passthrough {name:12s} (median): {statistics.median(values):9.0f} events/s,"
            f" {statistics.median(pass_cpu[name]):.2f} us CPU per event"
        )
    for case in cases:
        if case is NO_LEARNING:
            _print_learning_ratios(rates, cpu)
            continue
        print(f"\n{case.name}:")
        for client, guarantee in _services(case):
            values = rates[case, client, guarantee]
            print(
                f"  service {client:12s} {guarantee:13s} (median): {statistics.median(values):9.0f} events/s,"
                f" {_median_ratio(values, pass_rates[client])} the bare {client} passthrough;"
                f" {statistics.median(cpu[case, client, guarantee]):.2f} us CPU per event"
            )
        print(
            "  confluent service / bare confluent passthrough: "
            f"{_median_ratio(rates[case, 'confluent', 'at-least-once'], pass_rates['confluent'])}"
            "   (target >= 0.80)"
        )
        print(
            "  same by CPU per event (bare confluent passthrough's / the service's): "
            f"{_median_ratio(pass_cpu['confluent'], cpu[case, 'confluent', 'at-least-once'])}"
        )
        if case is CEILING:
            continue
        alo = {client: rates[case, client, "at-least-once"] for client in CLIENTS}
        print(
            "  confluent service / kafka-python service: "
            f"{_median_ratio(alo['confluent'], alo['kafka-python'])}   (target >= 3)"
        )
        for client in CLIENTS:
            print(
                f"  exactly-once / at-least-once, {client}: "
                f"{_median_ratio(rates[case, client, 'exactly-once'], alo[client])}   (target >= 0.5)"
            )


def _print_learning_ratios(rates: dict, cpu: dict) -> None:
    """The K = 3 at-least-once services with the learning metrics against without, per client."""
    print(f"\n{NO_LEARNING.name}:")
    for client, guarantee in _services(NO_LEARNING):
        on, off = (CASES[0], client, guarantee), (NO_LEARNING, client, guarantee)
        if not rates.get(off):
            continue
        print(
            f"  {client:12s} learning metrics on / off: {_median_ratio(rates[on], rates[off])} events/s"
            f"   (target >= 0.95); CPU per event off / on: {_median_ratio(cpu[off], cpu[on])}"
        )
        rounds = " ".join(f"{a / b:.2f}" for a, b in zip(rates[on], rates[off]))
        print(f"    per round, events/s on / off: {rounds}")
        rounds = " ".join(f"{a / b:.2f}" for a, b in zip(cpu[off], cpu[on]))
        print(f"    per round, CPU per event off / on: {rounds}")


if __name__ == "__main__":
    main()
