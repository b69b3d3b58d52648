"""``bench_kafka --keyed``: the keyed service (``--key-from record-key``) against the un-keyed one.

**Throughput, end to end** (:func:`keyed_end_to_end`): one input partition holds ``n`` events whose
record keys are ``keys`` distinct keys: every key once first (in a shuffled order), then keys drawn
from a Zipf law of exponent ``zipf`` over the keys (rank ``r`` with probability ``∝ r^-s``), as a
fleet whose few devices send most of the traffic. Both contenders are cold ``uss-stream kafka
run`` processes at the default flags (the default client and policy; checkpoints every 5 s), the
keyed one with ``--key-from record-key``, timed like every end-to-end contender by their output's
broker append times (:func:`benchmarks.kafka_contenders.timed`), in the same round, their order
alternating between rounds. Reported per round: events/s over the whole output, and over the
events after every key is live (the Zipf part: ``keys`` active keys), and the keyed / un-keyed
ratio of each (target >= 0.7 on the second), with the 1-minute load average.

**Memory per key** (:func:`key_memory`): a keyed learner of the service in a fresh process fed events
of ``N`` distinct keys, ``N`` growing; the resident set size (``/proc/self/statm``) after each step and
its growth per key between the steps (target <= 2 KB), a checkpoint's worth of the keys' records
written (and dropped) and committed at each step, as the service does; at-least-once, then
exactly-once (whose learner keeps its committed keys' records).
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import statistics
import uuid
from typing import Any

import numpy as np

from benchmarks.kafka_contenders import launch, output_topics, timed
from uss_stream_kafka import clients
from uss_stream_kafka.clients import TopicSpec

__all__ = ["key_memory", "keyed_end_to_end", "keyed_events"]

KEYED_FLAGS = ("--key-from", "record-key")


def keyed_events(n: int, keys: int, zipf: float, seed: int = 0) -> tuple[list[bytes], list[bytes]]:
    """``(record keys, values)``: every key once (shuffled), then ``n - keys`` Zipf draws over them."""
    rng = np.random.default_rng(seed)
    names = [f"device-{i:06d}".encode() for i in range(keys)]
    first = rng.permutation(keys)
    ranks = np.arange(1, keys + 1, dtype=np.float64) ** -zipf
    drawn = rng.choice(keys, size=max(0, n - keys), p=ranks / ranks.sum())
    order = np.concatenate([first, rng.permutation(keys)[drawn]])
    truth = rng.integers(0, 2, n)
    flip = rng.random(n) < 0.05 + 0.3 * (order % 3 == 0)  # a third of the devices' stage 1 is poor
    rows = np.stack([truth ^ flip, truth ^ (rng.random(n) < 0.1), truth], axis=1).tolist()
    values = [json.dumps({"id": f"e{i}", "outputs": row}).encode() for i, row in enumerate(rows)]
    return [names[k] for k in order.tolist()], values


def keyed_end_to_end(
    bootstrap: str, n: int, keys: int, zipf: float, rounds: int, variants: list[str] | None = None
) -> None:
    """The keyed and the un-keyed service, cold, ``rounds`` times on one keyed input (module docstring).

    ``variants``: more keyed services, each with these flags besides ``--key-from record-key``.
    """
    admin = clients.admin("kafka-python", bootstrap_servers=bootstrap)
    run_id = uuid.uuid4().hex[:8]
    source = f"keyed-in-{run_id}"
    admin.create_topics({source: TopicSpec()})
    made = [source]
    record_keys, values = keyed_events(n, keys, zipf)
    producer = clients.producer("kafka-python", bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20)
    producer.send_many(source, values, record_keys, partition=0)
    producer.flush()
    producer.close()
    del record_keys, values
    print(
        f"keyed: {n} events of {keys} keys in one partition (each key once, then Zipf s={zipf})", flush=True
    )
    contenders = [("un-keyed", ()), ("keyed --key-from record-key", KEYED_FLAGS)]
    contenders += [(f"keyed {flags}", (*KEYED_FLAGS, *flags.split())) for flags in variants or ()]
    whole: dict[str, list[float]] = {name: [] for name, _ in contenders}
    active: dict[str, list[float]] = {name: [] for name, _ in contenders}
    for r in range(rounds):
        line = [f"round {r + 1} (load {os.getloadavg()[0]:.1f})"]
        for c, (name, flags) in list(enumerate(contenders))[:: 1 if r % 2 == 0 else -1]:
            target = f"keyed-out-{run_id}-{r}-{c}"
            made += output_topics(admin, target)
            launched = launch("service", bootstrap, source, target, n, flags)
            timing = timed(bootstrap, target, n, launched)
            whole[name].append(timing.throughput)
            active[name].append(timed(bootstrap, target, n, launched, skip=keys).throughput)
            line.append(f"{name} {whole[name][-1]:.0f} / {active[name][-1]:.0f} with every key live")
        print(" | ".join(line) + " ev/s", flush=True)
    admin.delete_topics(made)
    admin.close()
    for label, figures in (("whole output", whole), (f"{keys} keys live (Zipf part)", active)):
        plain = figures[contenders[0][0]]
        for name, _ in contenders[1:]:
            ratios = [a / b for a, b in zip(figures[name], plain)]
            rounds_text = " ".join(f"{x:.2f}" for x in ratios)
            print(
                f"{label}: {name} {statistics.median(figures[name]):,.0f} ev/s, un-keyed "
                f"{statistics.median(plain):,.0f} ev/s; ratio {statistics.median(ratios):.2f}x (rounds: "
                f"{rounds_text})" + ("   (target >= 0.7)" if figures is active else ""),
                flush=True,
            )


def key_memory(steps: tuple[int, ...] = (0, 50_000, 100_000, 200_000)) -> None:
    """RSS growth per key of a keyed learner in a fresh process (module docstring), at-least-once
    and exactly-once (which keeps the committed keys' records to rewind to)."""
    context = multiprocessing.get_context("spawn")
    for guarantee in ("at-least-once", "exactly-once"):
        queue = context.Queue()
        process = context.Process(target=_measure_memory, args=(steps, queue, guarantee == "exactly-once"))
        process.start()
        rss = queue.get(timeout=900)
        process.join(60)
        print(
            f"{guarantee}: keys -> RSS (MiB): "
            + ", ".join(f"{k}: {v / 2**20:.1f}" for k, v in zip(steps, rss))
        )
        slopes = [(b - a) / (kb - ka) for (ka, a), (kb, b) in zip(zip(steps, rss), zip(steps[1:], rss[1:]))]
        print(
            f"{guarantee}: RSS growth per key between the steps: "
            + ", ".join(f"{s:.0f} B" for s in slopes)
            + f"; overall {(rss[-1] - rss[0]) / (steps[-1] - steps[0]):.0f} B/key   (target <= 2048)",
            flush=True,
        )


def _measure_memory(steps: tuple[int, ...], queue: Any, transactional: bool) -> None:
    from uss_stream_kafka.processing.keyed import KeyedOutputsProcessor

    learner = KeyedOutputsProcessor([0.0, 0.15, 0.2], key_from="record-key").new_learner()
    learner.transactional = transactional
    page = os.sysconf("SC_PAGE_SIZE")
    rss = []
    made = 0
    for step in steps:
        while made < step:
            count = min(5000, step - made)
            record_keys = [f"device-{made + i:06d}".encode() for i in range(count)]
            values = [b'{"id": %d, "outputs": [1, 0, 1]}' % (made + i) for i in range(count)]
            learner.process_values(values, record_keys, None, 1 << 20)
            made += count
        for _ in learner.changed_states():  # a checkpoint's records, built and dropped
            pass
        learner.checkpointed()
        learner.committed()
        gc.collect()
        with open("/proc/self/statm") as statm:
            rss.append(int(statm.read().split()[1]) * page)
    queue.put(rss)
