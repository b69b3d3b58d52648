"""Smoke check of the dev/CI broker with kafka-python (>= 3.0.12).

    bash deploy/kafka/broker.sh start
    python deploy/kafka/smoke.py   # $KAFKA_BOOTSTRAP_SERVERS, else 127.0.0.1:$KAFKA_PORT (default 9092)

Checks: admin create/list/delete topic, plain produce/consume, topic auto-creation,
transactions (committed data visible and aborted data hidden under read_committed),
and a consume-transform-produce step with send_offsets_to_transaction (exactly-once).
Prints one line per check and 'N passed, N failed' at the end; exit 1 on any failure.
"""
import os
import sys
import time
import traceback
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata

BOOTSTRAP = (os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
             or "127.0.0.1:{}".format(os.environ.get("KAFKA_PORT", "9092")))
RUN = uuid.uuid4().hex[:8]


def consume_all(topic, expected, isolation_level="read_uncommitted", group_id=None, timeout_s=20.0):
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=BOOTSTRAP,
        group_id=group_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level=isolation_level,
        consumer_timeout_ms=1000,
    )
    got = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and len(got) < expected:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in batch)
        # linger a little to catch anything beyond `expected` (e.g. aborted records leaking)
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            for batch in consumer.poll(timeout_ms=300).values():
                got.extend(r.value for r in batch)
    finally:
        consumer.close()
    return got


def check_admin_and_plain():
    topic = "smoke-plain-" + RUN
    admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    try:
        admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}}, wait_for_metadata=True)
        assert topic in admin.list_topics()
        producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)
        for i in range(5):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
        producer.flush()
        producer.close()
        got = consume_all(topic, 5, group_id="smoke-g-" + RUN)
        assert sorted(got) == [b"v%d" % i for i in range(5)], got
        admin.delete_topics([topic])
    finally:
        admin.close()


def check_auto_create():
    topic = "smoke-auto-" + RUN
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)
    producer.send(topic, b"auto").get(timeout=30)
    producer.close()
    assert consume_all(topic, 1) == [b"auto"]


def check_transactions():
    topic = "smoke-txn-" + RUN
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, transactional_id="smoke-txn-" + RUN)
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(3):
        producer.send(topic, b"committed-%d" % i)
    producer.commit_transaction()
    producer.begin_transaction()
    for i in range(2):
        producer.send(topic, b"aborted-%d" % i)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    committed = consume_all(topic, 3, isolation_level="read_committed")
    assert committed == [b"committed-%d" % i for i in range(3)], committed
    everything = consume_all(topic, 5, isolation_level="read_uncommitted")
    assert sorted(everything) == sorted([*committed, b"aborted-0", b"aborted-1"]), everything


def check_exactly_once_step():
    src, dst, group = "smoke-eos-in-" + RUN, "smoke-eos-out-" + RUN, "smoke-eos-g-" + RUN
    p = KafkaProducer(bootstrap_servers=BOOTSTRAP)
    for i in range(4):
        p.send(src, b"%d" % i)
    p.flush()
    p.close()

    consumer = KafkaConsumer(src, bootstrap_servers=BOOTSTRAP, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             isolation_level="read_committed")
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, transactional_id="smoke-eos-" + RUN)
    producer.init_transactions()
    seen, deadline = 0, time.monotonic() + 30
    try:
        while seen < 4 and time.monotonic() < deadline:
            records = consumer.poll(timeout_ms=500)
            if not records:
                continue
            producer.begin_transaction()
            offsets = {}
            for tp, batch in records.items():
                for r in batch:
                    producer.send(dst, b"x" + r.value)
                    seen += 1
                offsets[tp] = OffsetAndMetadata(batch[-1].offset + 1, "", -1)
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            producer.commit_transaction()
    finally:
        producer.close()
        consumer.close()
    assert seen == 4, seen
    out = consume_all(dst, 4, isolation_level="read_committed")
    assert sorted(out) == [b"x%d" % i for i in range(4)], out
    admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    try:
        committed = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    offs = {tp.partition: om.offset for tp, om in committed.items() if tp.topic == src}
    assert offs == {0: 4}, committed


def main():
    checks = [check_admin_and_plain, check_auto_create, check_transactions, check_exactly_once_step]
    passed = failed = 0
    for check in checks:
        t0 = time.monotonic()
        try:
            check()
        except Exception:
            failed += 1
            print(f"FAIL {check.__name__} ({time.monotonic() - t0:.1f}s)")
            traceback.print_exc()
        else:
            passed += 1
            print(f"ok   {check.__name__} ({time.monotonic() - t0:.1f}s)")
    print(f"smoke: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
