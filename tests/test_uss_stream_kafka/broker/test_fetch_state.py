"""kafka-python's fetch state, read for the stall warning (``runtime/test_stall_watch.py``), on a real broker.

The bookkeeping is private to kafka-python: this test shows the installed version still has it.
"""

from __future__ import annotations

from conftest import produce
from waiting import wait_until


def test_kafka_python_reports_its_fetch_state(bootstrap_servers, make_topics):
    """The private bookkeeping read for the warning exists in the installed kafka-python."""
    from uss_stream_kafka.clients import TopicPartition, consumer

    topics = make_topics()
    produce(bootstrap_servers, topics.input, [b"{}"] * 3)
    client = consumer(
        "kafka-python",
        bootstrap_servers=bootstrap_servers,
        group_id=f"stall-{topics.input}",
        auto_offset_reset="earliest",
    )
    tp = TopicPartition(topics.input, 0)
    try:
        client.subscribe([topics.input])
        wait_until(lambda: client.poll(0.2), "a record")
        state = client.fetch_state([tp])
    finally:
        client.close()
    assert "unavailable" not in state, state
    assert state[str(tp)]["fetchable"] is True
    assert state[str(tp)]["awaiting_reset"] is False
    assert isinstance(state["nodes_with_a_fetch_in_flight"], list)
    group = state["group"]
    assert group["coordinator"] is not None and group["generation"] >= 1 and group["state"] == "<stable>"
    assert group["rejoin_needed"] is False and group["join_in_flight"] is False
