"""What the service's tests share whether or not they need a broker: streams, policies, a command line.

The layer tests (``runtime/``, ``processing/``, ``clients/``, ``operations/``, ``cli/``) run without
a broker; the broker tests (``broker/``, whose ``conftest.py`` re-exports the streams) run the same
streams and policies on a real one. Nothing here connects to anything.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from uss_stream.policies import UEEUCB, USSKLUCB, USSTS, USSUCB, FixedDepth, Hanawal2017WD, Policy
from uss_stream.policies.specs import parse_spec

COSTS = [0.0, 0.15, 0.2]
CUMULATIVE = [0.0, 0.15, 0.35]
#: The probe's value: 2 KB of nesting, past the JSON decoder's recursion limit.
NESTED = b"[" * 1000 + b"]" * 1000
#: The same past any stack a test runner adds.
DEEPER = b'{"id": "x", "outputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def stream(n: int, seed: int = 0, start: int = 0) -> tuple[list[bytes], np.ndarray]:
    """``n`` outputs-mode events ``e<start>..``: stage 1 errs 20%, stage 2 10%, stage 3 is right.

    >>> values, outputs = stream(2, start=5)
    >>> json.loads(values[1])["id"], outputs.shape
    ('e6', (2, 3))
    """
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    outputs = np.stack([truth ^ (rng.random(n) < 0.2), truth ^ (rng.random(n) < 0.1), truth], axis=1)
    values = [
        json.dumps({"id": f"e{start + i}", "outputs": row}).encode() for i, row in enumerate(outputs.tolist())
    ]
    return values, outputs


def drifting(n: int, seed: int = 0) -> np.ndarray:
    """Outputs whose stage error rates change halfway: a discount makes a difference."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    first = np.where(np.arange(n) < n // 2, 0.05, 0.4)
    return np.stack([truth ^ (rng.random(n) < first), truth ^ (rng.random(n) < 0.1), truth], axis=1)


#: One spec per policy family, and the policy its class builds (the in-process reference).
FAMILIES: dict[str, Callable[[], Policy]] = {
    "uss-ucb:alpha=0.8": lambda: USSUCB(COSTS, alpha=0.8),
    "uss-kl-ucb": lambda: USSKLUCB(COSTS),
    "uss-ts:seed=3": lambda: USSTS(COSTS, seed=3),
    "fixed:depth=2": lambda: FixedDepth(2, COSTS),
    "uee-ucb": lambda: UEEUCB(COSTS),
    "alg2": lambda: Hanawal2017WD(COSTS),
}
#: The discounted specs, and their references.
DISCOUNTED: dict[str, Callable[[], Policy]] = {
    "uss-kl-ucb:discount=0.99": lambda: USSKLUCB(COSTS, discount=0.99),
    "uss-ts:seed=1,discount=0.995": lambda: USSTS(COSTS, seed=1, discount=0.995),
    "uss-ucb:discount=0.98": lambda: USSUCB(COSTS, discount=0.98),
}


def assert_decided_as_without_crashes(
    decisions: list[dict[str, Any]], reports: list[tuple[str, list[int]]]
) -> None:
    """Each decision (in request order) is USS-UCB's (``alpha=0.51``, :data:`COSTS`) on the reports
    applied before it: what a crash-free orchestration decides.

    The reports are applied in their topic's order, each once; the number applied before each
    decision is unknown from outside, so it is the smallest that explains the decision (a larger
    one stays reachable for the next decisions), and only reports of earlier decisions count.
    """
    policy = parse_spec("uss-ucb:alpha=0.51").build(COSTS)
    applied = 0
    decided: set[str] = set()
    for t, decision in enumerate(decisions, start=1):
        policy.stats.decisions = t - 1
        while policy._decide(t) != decision["depth"]:
            assert applied < len(reports) and reports[applied][0] in decided, (
                f"decision {decision} (round {t}) is not USS-UCB's after any number of the "
                f"reports of earlier decisions (tried up to {applied})"
            )
            policy.stats.record(reports[applied][1])
            applied += 1
        decided.add(decision["id"])


#: librdkafka properties among kafka-python names, as ``--client confluent`` takes them.
NATIVE = ["--consumer-option", "queued.min.messages=1000", "--consumer-option", "debug=cgrp",
          "--consumer-option", "fetch_max_wait_ms=50", "--producer-option", "linger.ms=5"]  # fmt: skip


# -- the command line, as a subprocess ------------------------------------------------------------
class ServiceTopics:
    """Topic names for a command line that never reaches a broker."""

    input, output, dead_letter, state = "in", "out", "dlq", "state"


def command(bootstrap: str, topics: Any, *extra: str) -> list[str]:
    """``uss-stream kafka run`` on ``topics`` (outputs mode, three stages), exiting when idle for 1 s."""
    return [
        sys.executable, "-m", "uss_stream", "kafka", "run", "--bootstrap-servers", bootstrap,
        "--input-topic", topics.input, "--output-topic", topics.output, "--dlq-topic", topics.dead_letter,
        "--state-topic", topics.state, "--group-id", f"g-{uuid.uuid4().hex[:8]}",
        "--stage-costs", "0,0.15,0.2",
        "--exit-when-idle", "1", *extra,
    ]  # fmt: skip


def run_to_exit(arguments: list[str], timeout: float = 150) -> tuple[int, str]:
    """Run ``arguments`` to their exit: the exit code and stderr."""
    done = subprocess.run(arguments, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stderr


def last_line(stderr: str) -> str:
    """The service's one error line (kafka-python's own log lines may follow it)."""
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("uss-stream kafka run: error:")]
    if not lines:  # argparse's usage errors
        return stderr.strip().splitlines()[-1]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def free_port() -> int:
    """A TCP port nothing listens on (now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
