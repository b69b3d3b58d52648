"""Fixtures of the Kafka tests: a real broker, unique topics, and helpers to produce and read.

The broker is, in this order: ``KAFKA_BOOTSTRAP_SERVERS`` if set (``make test`` sets it, starting
``deploy/kafka/broker.sh`` if needed); a testcontainers ``KafkaContainer`` if a Docker engine
answers; otherwise the tests that need it FAIL, saying how to get one. They never skip and never
fake the broker.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from clients_param import kafka_client  # noqa: F401 (the client library under test: a fixture)
from payloads import payloads, registry_url, value_format  # noqa: F401 (the value format under test: fixtures)
from waiting import wait_until

from tests.test_uss_stream_kafka.helpers import COSTS, CUMULATIVE, stream  # noqa: F401 (re-exported)
from uss_stream.policies import USSUCB
from uss_stream_kafka import (
    Application,
    Checkpoint,
    ClientConfig,
    Processor,
    RunSummary,
    Topics,
    create_topics,
)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every test in this folder talks to a broker: it carries the ``kafka`` mark, set here once."""
    item.add_marker(pytest.mark.kafka)


def decisions_of(records: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(record.value) for record in records]


def checkpoints_of(bootstrap: str, topic: str, isolation_level: str = "read_committed") -> list[Checkpoint]:
    """The checkpoints in the state topic, as the service reads them (``read_committed``)."""
    records = read_all(bootstrap, topic, isolation_level=isolation_level)
    return [Checkpoint.from_record(r.key, r.value) for r in records if r.value is not None]


def policy_after(outputs: np.ndarray) -> USSUCB:
    policy = USSUCB(COSTS)
    policy.run(outputs)
    return policy


#: Every subprocess and in-process service a test starts; killed / stopped when the test ends.
PROCESSES: list[Any] = []
RUNNING: list[Running] = []


@pytest.fixture(autouse=True)
def _kafka_python_unless_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Services started without ``--client`` run on kafka-python, as these tests were written for.

    The command line's default is ``auto`` (confluent-kafka when installed): what it chooses is
    tested in ``test_client_choice.py``; a test that runs both clients passes ``--client``.
    """
    if "USS_KAFKA_CLIENT" not in os.environ:
        monkeypatch.setenv("USS_KAFKA_CLIENT", "kafka-python")


@pytest.fixture(autouse=True)
def _stop_leftover_services() -> Iterator[None]:
    """Kill every service subprocess (and stop every in-process service) the test left running.

    A test that fails midway leaves them behind otherwise, still consuming, and the next test's
    timing with them.
    """
    yield
    while PROCESSES:
        process = PROCESSES.pop()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    while RUNNING:
        running = RUNNING.pop()
        running.app.stop()
        running.join_quietly()


def private_port_range() -> range:
    """Where a private broker of this xdist worker picks its ports: a slice of 20000-32000 per worker.

    Below Linux's ephemeral range (32768+), so that no client socket takes a port while its broker
    is down; one slice per worker (``gw0``, ``gw1``, ...), so that two workers never race for one port.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    width = 12_000 // count
    low = 20_000 + (index % count) * width
    return range(low, low + width - 1)  # p and p + 1 (the controller's) both inside the slice


NO_BROKER = (
    "The Kafka tests need a real broker and none was found. Either\n"
    "  * run `make test` (it starts the local KRaft broker of deploy/kafka/broker.sh), or\n"
    "  * start one yourself: `KAFKA_PORT=29092 bash deploy/kafka/broker.sh start`, run the tests with\n"
    "    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:29092,\n"
    "    and stop it with `KAFKA_PORT=29092 bash deploy/kafka/broker.sh stop`,\n"
    "  * or start a Docker engine, so that testcontainers can run confluentinc/cp-kafka."
)


def _docker_answers() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=3)
        client.ping()
    except Exception:
        return False
    return True


@pytest.fixture(scope="session")
def bootstrap_servers() -> Iterator[str]:
    """``host:port`` of a real Kafka broker (see the module docstring)."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    if _docker_answers():
        from testcontainers.community.kafka import KafkaContainer

        with KafkaContainer("confluentinc/cp-kafka:7.6.0").with_kraft() as container:
            yield container.get_bootstrap_server()
        return
    pytest.fail(NO_BROKER, pytrace=False)


@pytest.fixture(scope="session")
def admin(bootstrap_servers: str) -> Iterator[Any]:
    from kafka import KafkaAdminClient

    # Requests may wait two minutes: a broker starved by a loaded machine answered after 30 s.
    client = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=120_000)
    yield client
    client.close()


@pytest.fixture
def make_topics(admin: Any) -> Iterator[Callable[..., Topics]]:
    """``make_topics(partitions=1, labels=False) -> Topics`` with unique names, deleted afterwards."""
    created: list[str] = []

    def make(partitions: int = 1, labels: bool = False) -> Topics:
        run = uuid.uuid4().hex[:10]
        topics = Topics(
            input=f"t-{run}-in",
            output=f"t-{run}-out",
            dead_letter=f"t-{run}-dlq",
            state=f"t-{run}-state",
            labels=f"t-{run}-labels" if labels else None,
        )
        from kafka.errors import KafkaTimeoutError

        with contextlib.suppress(KafkaTimeoutError):  # kafka-python waits 10 s for them; we wait longer
            create_topics(admin, topics, partitions=partitions)
        created.extend(topics.all())
        expected = {name: 1 if name == topics.state else partitions for name in topics.all()}
        wait_for_metadata(admin.config["bootstrap_servers"], expected)
        return topics

    yield make
    if created:
        admin.delete_topics(created)


def wait_for_metadata(bootstrap_servers: Any, expected: Mapping[str, int], timeout: float = 120.0) -> None:
    """Wait until the broker's metadata lists ``expected[name]`` partitions of every new topic.

    A consumer group that joins before that is assigned nothing ("No partition metadata") and
    waits for its next metadata refresh, minutes later.
    """
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers)
    seen: dict[str, int] = {}

    def complete() -> bool:
        consumer.topics()  # a metadata request for every topic
        seen.update({name: len(consumer.partitions_for_topic(name) or ()) for name in expected})
        return all(seen[name] >= count for name, count in expected.items())

    try:
        wait_until(complete, lambda: f"the topics' complete metadata (seen {seen})", timeout=timeout)
    finally:
        consumer.close()


def produce(
    bootstrap_servers: str, topic: str, values: Sequence[bytes | None], partition: int | None = 0
) -> None:
    """Send ``values`` in order (to one partition unless ``partition`` is None) and flush.

    A null value (which Kafka only takes with a key) is sent with the key ``b"null"``.
    """
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5, batch_size=256 * 1024)
    for value in values:
        producer.send(topic, value, key=None if value is not None else b"null", partition=partition)
    producer.flush()
    producer.close()


def send_keyed(bootstrap_servers: str, topic: str, key: bytes, value: bytes | None) -> None:
    """Send one keyed record to partition 0 and wait for it (e.g. a checkpoint under its key)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, max_request_size=8 << 20)
    producer.send(topic, value, key=key, partition=0).get(30)
    producer.close()


def trickle(
    bootstrap_servers: str,
    topic: str,
    values: Mapping[int, Sequence[bytes]],
    per_second: float,
    flowing: threading.Event | None = None,
) -> threading.Thread:
    """Produce ``values[p]`` to partition ``p`` in the background, ``per_second`` events a second in all.

    One idempotent producer for the whole stream, so that it buffers and retries through a broker's
    absence; the partitions advance together, a chunk of each per step. With ``flowing``, the
    stream pauses while the event is clear (e.g. while the service under test is down).
    """

    def run() -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5, enable_idempotence=True)
        chunk = max(1, int(per_second / 20 / len(values)))
        for start in range(0, max(map(len, values.values())), chunk):
            if flowing is not None:
                flowing.wait()
            sent = 0
            for partition, stream_values in values.items():
                for value in stream_values[start : start + chunk]:
                    producer.send(topic, value, partition=partition)
                    sent += 1
            producer.flush()
            time.sleep(sent / per_second)  # the rate is the scenario (a live stream), not a wait
        producer.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """The end offset of each partition of ``topic``."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    try:  # closed even when the broker is down: a leaked client keeps retrying in this process
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        ends = consumer.end_offsets(partitions)
    finally:
        consumer.close()
    return {tp.partition: offset for tp, offset in ends.items()}


def open_transaction_records(bootstrap_servers: str, topic: str) -> int:
    """Records of ``topic`` in transactions still open: end offsets minus last stable offsets."""
    from kafka import KafkaConsumer, TopicPartition

    consumers = [
        KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False, isolation_level=level)
        for level in ("read_uncommitted", "read_committed")
    ]
    partitions = [TopicPartition(topic, p) for p in sorted(consumers[0].partitions_for_topic(topic) or ())]
    ends, stable = (consumer.end_offsets(partitions) for consumer in consumers)
    for consumer in consumers:
        consumer.close()
    return sum(ends[tp] - stable[tp] for tp in partitions)


def read_all(
    bootstrap_servers: str,
    topic: str,
    expected: int | None = None,
    timeout: float = 120.0,
    isolation_level: str = "read_uncommitted",
) -> list[Any]:
    """Every record of ``topic`` (all partitions, each in offset order), as ``isolation_level`` sees it.

    With ``expected``, reads until that many arrived (fails after ``timeout``); without, reads to
    the current end of each partition (for ``read_committed``: to the last stable offset).
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers, enable_auto_commit=False, isolation_level=isolation_level
    )
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    end = consumer.end_offsets(partitions)
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while True:
        if expected is not None and len(records) >= expected:
            break
        if expected is None and all(consumer.position(tp) >= end[tp] for tp in partitions):
            break
        if time.monotonic() > deadline:
            consumer.close()
            raise AssertionError(f"{topic}: {len(records)} records after {timeout}s, expected {expected}")
        for batch in consumer.poll(timeout_ms=200, max_records=20_000).values():
            records.extend(batch)
    consumer.close()
    records.sort(key=lambda r: (r.partition, r.offset))
    return records


def new_app(
    bootstrap_servers: str, topics: Topics, group_id: str | None = None, **settings: Any
) -> Application:
    """An :class:`Application` for tests: no HTTP endpoint, no idle exit (tests stop it on a condition)."""
    settings.setdefault("exit_when_idle", None)
    settings.setdefault("http_port", None)
    return Application(
        ClientConfig(bootstrap_servers),
        group_id=group_id or f"g-{uuid.uuid4().hex[:10]}",
        topics=topics,
        **settings,
    )


class Running:
    """An application running in a thread (``join()`` returns its :class:`RunSummary`)."""

    def __init__(self, app: Application, processor: Processor) -> None:
        self.app = app
        self.summary: RunSummary | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(processor,), daemon=True)
        self._thread.start()
        RUNNING.append(self)

    def _run(self, processor: Processor) -> None:
        try:
            self.summary = self.app.run(processor)
        except BaseException as error:
            self.error = error

    def wait_for(self, condition: Callable[[Application], bool], timeout: float = 120.0) -> None:
        wait_until(lambda: condition(self.app), "the condition", timeout=timeout, alive=self._check_alive)

    def _check_alive(self) -> None:
        if not self._thread.is_alive():
            raise AssertionError(f"the application stopped early: {self.error!r}")

    def alive(self) -> bool:
        """Whether the application is still running."""
        return self._thread.is_alive()

    def where(self) -> str:
        """Where the application's thread is now and what its run holds (for a failure's message)."""
        frame = sys._current_frames().get(self._thread.ident)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(not running)\n"
        try:
            return f"the application's thread:\n{stack}its run: {self._held()}"
        except Exception as error:  # the message must not hide the failure it explains
            return f"the application's thread:\n{stack}its run: unreadable ({error!r})"

    def _held(self) -> dict[str, Any]:
        context = self.app._context
        recovery = getattr(self.app, "_recovery", None)
        consumer = context.consumer
        return {
            "partitions": {str(tp): state.next_offset for tp, state in context.partitions.items()},
            "assignment": sorted(map(str, consumer.assignment())) if consumer is not None else None,
            "pending": sorted(map(str, recovery.pending)) if recovery is not None else None,
            "rebalancing": getattr(recovery, "rebalancing", None),
            "restoring_since": getattr(recovery, "restoring_since", None),
            "events": context.summary.events,
            "commits": context.summary.commits,
        }

    def join_quietly(self, timeout: float = 30.0) -> None:
        """Wait for the thread to end, whatever the outcome (teardown)."""
        self._thread.join(timeout)

    def join(self, timeout: float = 120.0) -> RunSummary:
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.app.stop()
            self._thread.join(10)
            raise AssertionError("the application did not stop in time")
        if self.error is not None:
            raise self.error
        assert self.summary is not None
        return self.summary


def committed_offsets(
    admin: Any, group: str, partitions: Sequence[Any], timeout: float = 60.0
) -> dict[Any, int]:
    """The group's committed offset of each partition (``-1``: none).

    A retriable answer (the group's coordinator is loading or moved: ``NOT_COORDINATOR``,
    ``COORDINATOR_LOAD_IN_PROGRESS`` on a loaded broker) is asked again until ``timeout``.
    """
    from kafka.errors import KafkaError

    found: dict[Any, Any] = {}

    def answered() -> bool:
        try:
            found.update(admin.list_group_offsets({group: list(partitions)})[group])
        except KafkaError as error:
            if not error.retriable:
                raise
            return False
        return True

    wait_until(answered, f"an answer for {group}'s committed offsets", timeout=timeout, every=0.1)
    return {tp: -1 if found.get(tp) is None else found[tp].offset for tp in partitions}


def run_app(app: Application, processor: Processor, timeout: float = 120.0) -> RunSummary:
    """Run ``app`` until its group committed every record its input (and labels) topics hold now; stop it.

    The condition is observed (committed offsets), not an idle window. An application that stops
    by itself (an error, its own ``exit_when_idle``) ends the wait too; its error is raised.
    """
    from kafka import KafkaAdminClient, TopicPartition

    bootstrap = app.client.bootstrap_servers
    ends = {
        TopicPartition(topic, partition): end
        for topic in (app.topics.input, app.topics.labels)
        if topic is not None
        for partition, end in end_offsets(bootstrap, topic).items()
        if end > 0
    }
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    running = Running(app, processor)
    committed: dict[Any, int] = {}

    def done() -> bool:
        if not running.alive():  # stopped by itself: join() below raises its error
            return True
        committed.update(committed_offsets(admin, app.group_id, list(ends)) if ends else {})
        return all(committed[tp] >= end for tp, end in ends.items())

    try:
        wait_until(
            done,
            lambda: f"the group's commit of {ends} (committed {committed}); {running.where()}",
            timeout=timeout,
        )
    finally:
        admin.close()
        app.stop()
    return running.join(timeout)
