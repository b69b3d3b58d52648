"""Compressed topics on a real broker: every codec, from kafka-python and from librdkafka, is decided.

Upstream producers choose their compression, not the service: gzip, snappy, lz4 and zstd input is
decided like uncompressed input (the codec libraries are dependencies of the package). Output is
compressed with ``--compression``. A batch that still cannot be decoded (here: a service process
started without the zstd library, its import blocked) is dead-lettered whole, raw, and skipped:
the service does not die and the decisions around it are those of a learner that never saw it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from conftest import COSTS, committed_offsets, new_app, read_all, run_app, stream
from kafka import TopicPartition
from test_cli import topic_options
from waiting import wait_until

from uss_stream.policies import USSUCB
from uss_stream_kafka import DeadLetter, OutputsProcessor, Topics, clients

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(180),
]

CODECS = ["gzip", "snappy", "lz4", "zstd"]
N = 3_000


def produce_compressed(bootstrap: str, topic: str, values: list[bytes], codec: str, client: str) -> None:
    """Send ``values`` to partition 0 of ``topic``, compressed with ``codec`` by ``client``'s library.

    ``client`` is one of :data:`uss_stream_kafka.clients.CLIENTS`: kafka-python, or confluent-kafka
    (librdkafka, the library of most upstream producers).
    """
    producer = clients.producer(
        client,
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        # Every record in one batch, sent at the flush: librdkafka sends a batch that compression
        # does not shrink (a lone record) uncompressed, which a slow send loop would otherwise make.
        linger_ms=30_000,
        batch_size=64 * 1024,
    )
    producer.send_many(topic, values, partition=0)
    producer.flush(30)
    assert producer.take_errors() == [], f"{client} did not deliver every record"
    producer.close(10)


def stored_bytes(admin: Any, topic: str) -> int:
    """Bytes the broker stores for ``topic`` (all partitions, from DescribeLogDirs)."""
    total = 0
    for broker in admin.describe_log_dirs([topic]):
        for log_dir in broker["log_dirs"]:
            for described in log_dir["topics"]:
                if described["name"] == topic:
                    total += sum(p["partition_size"] for p in described["partitions"])
    return total


@pytest.mark.parametrize("client", clients.CLIENTS)
@pytest.mark.parametrize("codec", CODECS)
def test_compressed_input_is_decided(kafka_client, codec, client, bootstrap_servers, make_topics, admin):
    topics = make_topics()
    values, outputs = stream(N, seed=3)
    produce_compressed(bootstrap_servers, topics.input, values, codec, client)
    # The broker really holds compressed batches: far fewer bytes than the values themselves.
    raw = sum(map(len, values))
    assert stored_bytes(admin, topics.input) < raw / 2

    summary = run_app(
        new_app(bootstrap_servers, topics, client_library=kafka_client), OutputsProcessor(COSTS, alpha=0.51)
    )

    assert summary.events == N and sum(summary.dead_letters.values()) == 0
    decisions = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.output)]
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(N)]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _kill_leftover_services() -> Iterator[None]:
    """Every service process a test started is killed, even when the test fails."""
    yield
    while _STARTED:
        process = _STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait(10)


class CliService:
    """``uss-stream kafka run`` in a subprocess, optionally with some modules' import blocked."""

    def __init__(
        self, bootstrap: str, topics: Topics, *extra: str, group: str = "", blocked: tuple[str, ...] = ()
    ) -> None:
        code = (
            "import sys\n"
            f"for name in {list(blocked)!r}:\n"
            "    sys.modules[name] = None  # import fails: as if the library were not installed\n"
            "from uss_stream.commands.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        command = [
            sys.executable, "-c", code, "kafka", "run", "--bootstrap-servers", bootstrap,
            *topic_options(topics), "--group-id", group or f"g-{uuid.uuid4().hex[:10]}",
            "--stage-costs", ",".join(map(str, COSTS)), "--policy", "uss-ucb:alpha=0.51",
            "--metrics-port", "-1", *extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _STARTED.append(self.process)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.process.stderr), daemon=True)
        self._reader.start()

    def finish_at(
        self, admin: Any, group: str, tp: Any, offset: int, timeout: float = 90.0
    ) -> tuple[int, str]:
        """SIGTERM once ``group`` committed ``offset`` on ``tp``; the exit code and the log.

        A service that exits by itself first ends the wait too (its exit code and log tell why).
        """

        def committed_or_exited() -> bool:
            if self.process.poll() is not None:
                return True
            return committed_offsets(admin, group, [tp])[tp] >= offset

        wait_until(committed_or_exited, f"offset {offset} committed by {group}", timeout=timeout, every=0.2)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.finish()

    def finish(self, timeout: float = 90.0) -> tuple[int, str]:
        try:
            self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(10)
        return self.process.returncode, "".join(self.lines)


def test_output_compression_option(bootstrap_servers, make_topics, admin):
    topics = make_topics()
    values, outputs = stream(N, seed=4)
    produce_compressed(bootstrap_servers, topics.input, values, "gzip", "kafka-python")
    group = f"compressed-out-{uuid.uuid4().hex[:10]}"
    service = CliService(bootstrap_servers, topics, "--compression", "zstd", group=group)
    code, log = service.finish_at(admin, group, TopicPartition(topics.input, 0), N)
    assert code == 0, log[-3000:]
    records = read_all(bootstrap_servers, topics.output)
    assert [json.loads(r.value)["depth"] for r in records] == USSUCB(COSTS).run(outputs).tolist()
    assert stored_bytes(admin, topics.output) < sum(len(r.value) for r in records) / 2


def test_the_same_decisions_uncompressed_stored_in_full(bootstrap_servers, make_topics, admin):
    """The control of the size checks above: without compression the broker stores every byte."""
    topics = make_topics()
    values, _ = stream(N, seed=4)
    produce_compressed(bootstrap_servers, topics.input, values, "none", "kafka-python")
    group = f"plain-out-{uuid.uuid4().hex[:10]}"
    service = CliService(bootstrap_servers, topics, group=group)
    code, log = service.finish_at(admin, group, TopicPartition(topics.input, 0), N)
    assert code == 0, log[-3000:]
    assert stored_bytes(admin, topics.input) > sum(map(len, values))
    records = read_all(bootstrap_servers, topics.output)
    assert stored_bytes(admin, topics.output) > sum(len(r.value) for r in records)


def test_an_unknown_compression_is_refused_by_name(bootstrap_servers, make_topics):
    code, log = CliService(bootstrap_servers, make_topics(), "--compression", "brotli").finish()
    assert code == 2
    assert "--compression: must be one of none, gzip, snappy, lz4, zstd, got 'brotli'" in log


def test_the_service_decides_every_codec_of_both_clients(kafka_client, bootstrap_servers, make_topics, admin):
    """``uss-stream kafka run`` on one topic holding batches of every codec from both libraries."""
    topics = make_topics()
    values, outputs = stream(2_400, seed=7)
    segments = [(codec, client) for codec in CODECS for client in clients.CLIENTS]
    size = len(values) // len(segments)
    for i, (codec, client) in enumerate(segments):
        produce_compressed(bootstrap_servers, topics.input, values[i * size : (i + 1) * size], codec, client)
    assert stored_bytes(admin, topics.input) < sum(map(len, values)) / 2

    group = f"every-codec-{uuid.uuid4().hex[:10]}"
    service = CliService(bootstrap_servers, topics, "--client", kafka_client, group=group)
    code, log = service.finish_at(admin, group, TopicPartition(topics.input, 0), len(values))
    assert code == 0, log[-3000:]
    assert "Traceback" not in log and "0 dead letters" in log
    decisions = [json.loads(r.value) for r in read_all(bootstrap_servers, topics.output)]
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(len(values))]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
    assert read_all(bootstrap_servers, topics.dead_letter) == []


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_batch_that_cannot_be_decoded_is_dead_lettered_and_skipped(
    guarantee, bootstrap_servers, make_topics, admin, record_property
):
    from kafka.record.default_records import DefaultRecordBatch

    topics = make_topics()
    values, outputs = stream(1_000, seed=5)
    before, zstd, after = values[:300], values[300:800], values[800:]
    produce_compressed(bootstrap_servers, topics.input, before, "none", "kafka-python")
    produce_compressed(bootstrap_servers, topics.input, zstd, "zstd", "confluent")
    produce_compressed(bootstrap_servers, topics.input, after, "none", "kafka-python")

    group = f"undecodable-{uuid.uuid4().hex[:10]}"
    started = time.monotonic()
    service = CliService(
        bootstrap_servers, topics, "--guarantee", guarantee, group=group, blocked=("zstandard",)
    )
    code, log = service.finish_at(admin, group, TopicPartition(topics.input, 0), 1_000)
    seconds = time.monotonic() - started
    assert code == 0, log[-3000:]
    assert "cannot be decoded: UnsupportedCodecError" in log and "Traceback" not in log

    # Every plain event is decided, as by a learner that never saw the skipped ones.
    kept = np.concatenate([outputs[:300], outputs[800:]])
    decisions = [
        json.loads(r.value)
        for r in read_all(bootstrap_servers, topics.output, isolation_level="read_committed")
    ]
    assert [d["id"] for d in decisions] == [f"e{i}" for i in [*range(300), *range(800, 1_000)]]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(kept).tolist()

    # The zstd batches are dead letters that hold them: their offsets tile 300..799, and their raw
    # bytes decode (here, where zstd is installed) to exactly the skipped events.
    letters = [
        DeadLetter.from_record(r.value)
        for r in read_all(bootstrap_servers, topics.dead_letter, isolation_level="read_committed")
    ]
    assert letters and {letter.reason for letter in letters} == {"undecodable_batch"}
    recovered = []
    next_offset = 300
    for letter in letters:
        assert letter.offset == next_offset and not letter.value_truncated
        batch = DefaultRecordBatch(letter.value)
        recovered.extend(record.value for record in batch)
        next_offset = batch.next_offset
    assert next_offset == 800
    assert recovered == zstd
    # The skipped offsets are committed: a restart does not meet them again.
    tp = TopicPartition(topics.input, 0)
    assert committed_offsets(admin, group, [tp])[tp] == 1_000
    assert f"{len(letters)} dead letters" in log
    report = (
        f"{guarantee}: 1000 events, 500 zstd-compressed ones in {len(letters)} batch(es) undecodable "
        f"(zstd library blocked): {len(decisions)} decisions, {len(letters)} dead letters, exit 0 "
        f"{seconds:.1f}s after the start"
    )
    record_property(f"undecodable_{guarantee}", report)
    print(report)


def test_the_batch_behind_a_decoding_error_is_found(bootstrap_servers, make_topics, monkeypatch):
    """Unit level, in-process: a corrupt payload is simulated by a gzip decoder that raises.

    (The only patch in this module: a broker validates what it stores, so corrupt compressed data
    cannot be produced to it.) The error names no partition; the batch is found in its traceback.
    """
    import kafka.record.default_records as default_records
    from kafka import KafkaConsumer

    from uss_stream_kafka.clients.undecodable import undecodable_batch

    topics = make_topics()
    values, _ = stream(400, seed=6)
    produce_compressed(bootstrap_servers, topics.input, values[:100], "none", "kafka-python")
    produce_compressed(bootstrap_servers, topics.input, values[100:], "gzip", "confluent")

    def corrupt(payload: bytes) -> bytes:
        raise OSError("Not a gzipped file (b'\\x00\\x01')")

    monkeypatch.setattr(default_records, "gzip_decode", corrupt)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    tp = TopicPartition(topics.input, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    seen: list[Any] = []
    try:
        with pytest.raises(OSError) as caught:
            for _ in range(50):  # the plain batch first, then the error
                for batch in consumer.poll(timeout_ms=500).values():
                    seen.extend(batch)
        found = undecodable_batch(caught.value)
        assert found is not None and found.tp == tp
        assert [r.value for r in seen] == values[:100] and found.base_offset == 100
        assert found.codec == "gzip" and found.error == "OSError: Not a gzipped file (b'\\x00\\x01')"
        # Seeking past each batch, the consumer goes on; the batches found tile the gzip offsets.
        covered = found.next_offset
        consumer.seek(tp, covered)
        while covered < 400:
            try:
                assert consumer.poll(timeout_ms=500) == {}  # every later batch is gzip too
            except OSError as error:
                found = undecodable_batch(error)
                assert found is not None and found.base_offset == covered
                covered = found.next_offset
                consumer.seek(tp, covered)
        assert covered == 400
    finally:
        consumer.close()
    assert undecodable_batch(ValueError("not from a fetch")) is None
