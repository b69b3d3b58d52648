"""A broker outage longer than kafka-python's bootstrap timeout, in exactly-once mode.

Found by the soak (``test_soak.py``): a transaction aborted by the outage replaces the producer,
and creating the new producer while the broker is still down raised ``KafkaTimeoutError: Unable to
bootstrap`` after 30 s and ended the service. Here the broker stays down until the service has
been waiting for it longer than that timeout; then every event must have exactly one committed
decision, with the depth of an uninterrupted run, and the last checkpoint must be the policy that
saw each event once. This is also the suite's exactly-once broker restart (``test_broker_restart.py``
restarts the broker under at-least-once).
"""

from __future__ import annotations

import json
import signal
import time

import pytest
from conftest import COSTS, checkpoints_of, end_offsets, policy_after, produce, read_all, stream
from test_broker_restart import restartable_broker  # noqa: F401  (the private broker fixture)
from test_cli import Service, output_count
from waiting import wait_until

from uss_stream.policies import USSUCB
from uss_stream_kafka import Topics, create_topics

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(600),
]


#: What the clients log again and again while the broker is down (librdkafka several lines a
#: second): left out of a failure's log, where they would bury what the service did.
_OUTAGE_NOISE = (
    "Connection refused",
    "ECONNREFUSED",
    "No node available for metadata refresh",
    "Got an exception when trying to find a node",
)


def quiet_log(service: Service, chars: int = 8000) -> str:
    """The end of ``service``'s log without the lines a client writes per failed connection
    (:data:`_OUTAGE_NOISE`), then where each of its threads waits now (:meth:`Service.stacks`)."""
    try:
        stacks = service.stacks()
    except AssertionError as error:  # it exited, or does not answer the signal
        stacks = f"(no stacks: {error})"
    log = "".join(line for line in service.lines if not any(noise in line for noise in _OUTAGE_NOISE))
    return f"{log[-chars:]}\n-- its threads now --\n{stacks}"


@pytest.fixture
def kafka_client() -> str:
    """kafka-python here: ``test_long_outage_confluent.py`` runs the test on confluent-kafka, in a
    file of its own so that ``--dist loadfile`` runs the two (each with a private broker and a 40 s
    outage) on two workers at once."""
    return "kafka-python"


def test_a_producer_replaced_during_a_long_outage_waits_for_the_broker(kafka_client, restartable_broker):  # noqa: F811
    from kafka import KafkaAdminClient

    bootstrap = restartable_broker.bootstrap
    topics = Topics(input="events", output="decisions", dead_letter="dead-letters", state="state")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    create_topics(admin, topics, partitions=1)
    admin.close()
    # A group leader without the input's metadata assigns nothing.
    wait_until(lambda: end_offsets(bootstrap, topics.input), "the input topic served", timeout=60, every=0.2)
    n = 60_000
    values, outputs = stream(n)
    # A backlog (produced before the outage, so that no test producer has to ride it out). The
    # service must be mid-transaction when the broker goes: it decides the backlog in a few seconds,
    # and with commits every 5 s it had sometimes committed all of it before the broker stopped (no
    # open transaction, so nothing to abort and no replacement: a CI run timed out waiting for one).
    # A commit (and checkpoint) every 30 s keeps the first transaction open for over 20 s after the
    # first decisions; the transaction timeout (60 s, which the broker enforces) must exceed that,
    # and a flush gives up after half of it.
    produce(bootstrap, topics.input, values)
    options = ["--guarantee", "exactly-once", "--group-instance-id", "outage-1", "--commit-interval", "30",
               "--checkpoint-interval", "30", "--max-poll-records", "500",
               "--producer-option", "transaction_timeout_ms=60000", "--client", kafka_client]  # fmt: skip
    service = Service(bootstrap, topics, "outage-group", *options)
    try:
        wait_until(
            lambda: output_count(bootstrap, topics.output) >= 2_000,
            "2000 decisions",
            timeout=120,
            alive=service.alive,
            every=0.1,
        )

        restartable_broker.stop()
        # Down for longer than kafka-python's 30 s bootstrap timeout after the replacement began: the
        # outage's length is the condition under test, so here (only) time is waited for.
        wait_until(
            lambda: "replacing the transactional producer" in service.log,
            lambda: f"the producer's replacement; the service's log ends:\n{quiet_log(service)}",
            timeout=180,  # the commit point (30 s), then its flush and offsets (30 s each) time out
            alive=service.alive,
            every=0.1,
        )
        down_until = time.monotonic() + 40  # the scenario's length: the service must live through it
        wait_until(lambda: time.monotonic() >= down_until, "the outage's end", timeout=60,
                   alive=service.alive, every=0.5)  # fmt: skip
        restartable_broker.start()
        wait_until(
            lambda: len(read_all(bootstrap, topics.output, isolation_level="read_committed")) >= n,
            lambda: (
                "a committed decision for every event after the restart (committed: "
                f"{len(read_all(bootstrap, topics.output, isolation_level='read_committed'))} of {n}); "
                f"the service's log (no connection-refused lines) ends:\n{quiet_log(service)}"
            ),
            timeout=180,
            alive=service.alive,
            every=0.5,
        )
        service.process.send_signal(signal.SIGTERM)
        service.finish(timeout=120)
    finally:
        if service.process.poll() is None:  # the test failed: never leave the service running
            service.process.kill()
            service.process.wait(10)

    decisions = [
        json.loads(r.value) for r in read_all(bootstrap, topics.output, isolation_level="read_committed")
    ]
    assert [d["id"] for d in decisions] == [f"e{i}" for i in range(n)]
    assert [d["depth"] for d in decisions] == USSUCB(COSTS).run(outputs).tolist()
    # The last committed checkpoint is the policy that saw every event once.
    assert checkpoints_of(bootstrap, topics.state)[-1].state == policy_after(outputs).state_dict()
