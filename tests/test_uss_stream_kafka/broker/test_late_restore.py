"""A service restored from a checkpoint written late in its life decides from it, in bounded memory.

A service that ran for a billion events checkpoints counts whose round is 10^9; at its next start
it restores them and decides its first batch through the policy's ``decide_many`` at that round.
That call used to tabulate ``log t`` from round 1: a list of 10^9 floats, so the restarted service
ran out of memory before its first decision, and again at every restart. Here the service runs as
``uss-stream kafka run`` in a process whose address space is capped (as a container's memory limit
would), restores such a checkpoint (the counts of a stream 10^9 events long, written to the state
topic as the service writes its own) and must decide the next events exactly as USS-UCB's
select/update loop does from those counts.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import pytest
from conftest import (
    COSTS,
    PROCESSES,
    decisions_of,
    read_all,
    send_keyed,
)
from restarts import first_run

from uss_stream.policies import USSUCB
from uss_stream_kafka.runtime.checkpoint import Checkpoint

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(240),
]

FAR = 10**9
#: The service's address space: far more than it needs, far less than 10^9 tabulated logarithms.
ADDRESS_SPACE = 4 << 30


def _far_state(decisions: int) -> dict:
    """USS-UCB's counts after ``decisions`` events of this module's stream (rates of ``stream``)."""
    queried = [decisions, decisions // 3, decisions // 4]
    disagreements = [
        [0, int(0.2 * queried[1]), int(0.2 * queried[2])],
        [0, 0, int(0.1 * queried[2])],
        [0, 0, 0],
    ]
    stats = {
        "format": "uss-stream/disagreement-stats/v1",
        "n_stages": 3,
        "decisions": decisions,
        "queried": queried,
        "disagreements": disagreements,
    }
    return {"policy": "USSUCB", "stats": stats}


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def test_a_checkpoint_a_billion_events_old_is_restored_and_decided_from(
    kafka_client, bootstrap_servers, make_topics
):
    topics = make_topics()
    run = first_run(bootstrap_servers, topics, kafka_client, total=520, first=20)
    written = run.checkpoint
    # The same partition's checkpoint, as the service writes it, after a billion events.
    late = Checkpoint(
        topic=written.topic,
        partition=written.partition,
        offset=written.offset,
        state=_far_state(FAR),
        group_id=written.group_id,
        processor=written.processor,
        written_at=time.time(),
    )
    send_keyed(bootstrap_servers, topics.state, late.key, late.to_bytes())

    command = [
        sys.executable, "-m", "uss_stream", "kafka", "run", "--bootstrap-servers", bootstrap_servers,
        "--input-topic", topics.input, "--output-topic", topics.output, "--dlq-topic", topics.dead_letter,
        "--state-topic", topics.state, "--group-id", run.group, "--stage-costs", ",".join(map(str, COSTS)),
        "--policy", "uss-ucb:alpha=0.51", "--metrics-port", "-1", "--client", kafka_client,
        "--exit-when-idle", "2",
    ]  # fmt: skip
    service = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_capped
    )
    PROCESSES.append(service)
    _, log = service.communicate(timeout=180)
    assert service.returncode == 0, log[-3000:]

    decisions = decisions_of(read_all(bootstrap_servers, topics.output, expected=520))
    expected = USSUCB(COSTS, alpha=0.51)
    expected.load_state_dict(json.loads(json.dumps(late.state)))
    assert [d["depth"] for d in decisions[20:]] == expected.run(run.outputs[20:]).tolist()
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(520)]
