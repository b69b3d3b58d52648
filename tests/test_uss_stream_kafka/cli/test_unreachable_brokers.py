"""A service that cannot reach its brokers: exit 3 in one line, SIGTERM and SIGUSR1 answered while it tries.

Nothing listens on the address these services are given; the tests need no broker.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.test_uss_stream_kafka.helpers import ServiceTopics, command, free_port, last_line, run_to_exit

pytestmark = pytest.mark.timeout(120)


@contextlib.contextmanager
def starting(port: int) -> Iterator[subprocess.Popen]:
    """A service connecting to ``127.0.0.1:port`` (nothing listens there), once it says so; killed
    when the block ends."""
    process = subprocess.Popen(
        command(f"127.0.0.1:{port}", ServiceTopics, "--metrics-port", "-1", "--client", "kafka-python"),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in process.stderr:
            if "starting: connecting to" in line:
                break
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.mark.timeout(240)
def test_unreachable_brokers_exit_3_and_sigterm_during_the_start_exits_at_once():
    port = free_port()  # nothing listens there
    # kafka-python gives up bootstrapping after bootstrap_timeout_ms (30 s by default): its length
    # is not under test, so 3 s here.
    arguments = command(
        f"127.0.0.1:{port}", ServiceTopics, "--metrics-port", "-1",
        "--client", "kafka-python", "--kafka-option", "bootstrap_timeout_ms=3000",
    )  # fmt: skip
    code, stderr = run_to_exit(arguments)
    assert code == 3
    assert last_line(stderr).startswith(
        f"uss-stream kafka run: error: cannot reach the Kafka brokers at 127.0.0.1:{port}"
    )

    with starting(port) as process:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 128 + signal.SIGTERM  # not after the 30 s bootstrap timeout
        assert "SIGTERM while starting" in last_line(process.stderr.read())


def test_sigusr1_writes_every_threads_stack_and_the_service_goes_on():
    """The dump an operator (or a broker test) asks of a service that looks stuck: here one that
    waits for unreachable brokers; after it, the service still answers SIGTERM (a service killed
    by the signal would have exited -10)."""
    with starting(free_port()) as process:
        process.send_signal(signal.SIGUSR1)
        dump = []
        for line in process.stderr:
            dump.append(line)
            if "most recent call first" in line:
                break
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 128 + signal.SIGTERM, "".join(dump)
        dump.append(process.stderr.read())
    dump = "".join(dump)
    assert "Current thread" in dump and "uss_stream_kafka" in dump, dump  # the service's own frames
