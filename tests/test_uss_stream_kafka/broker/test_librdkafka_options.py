"""librdkafka's own properties in ``--consumer-option`` and ``--producer-option`` (``--client confluent``).

The options' keys used to be read as kafka-python names only (``queued.min.messages`` became
``queued_min_messages`` and was refused as no kafka-python setting), so a confluent user could not
pass a librdkafka property such as ``debug`` or ``queued.min.messages`` from the command line.
"""

from __future__ import annotations

import re
import signal
import subprocess
import uuid

import pytest
from conftest import COSTS, decisions_of, produce, read_all, stream
from test_cli import Service, wait_for_outputs

from tests import needs
from tests.test_uss_stream_kafka.helpers import NATIVE, command, last_line
from uss_stream.policies import USSUCB

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.timeout(240),
]


def test_the_confluent_service_passes_librdkafka_properties_to_librdkafka(bootstrap_servers, make_topics):
    """``debug=cgrp`` reaches librdkafka (its group-coordination debug lines appear in the log) and the
    service decides as usual; an unknown property is one line and exit 2."""
    needs.module("confluent_kafka")
    topics = make_topics()
    values, outputs = stream(2_000)
    produce(bootstrap_servers, topics.input, values)
    service = Service(bootstrap_servers, topics, f"native-{uuid.uuid4().hex[:8]}", "--client", "confluent",
                      *NATIVE)  # fmt: skip
    try:
        wait_for_outputs(bootstrap_servers, topics.output, 2_000, service, timeout=120)
        service.process.send_signal(signal.SIGTERM)
        log = service.finish(timeout=60)
    finally:
        if service.process.poll() is None:
            service.process.kill()
            service.process.wait(10)
    # librdkafka's debug lines of the group coordination: "%7|<time>|CGRPSTATE|...".
    assert re.search(r"^%7\|[\d.]+\|CGRP\w*\|", log, re.MULTILINE), log[-3000:]
    decisions = read_all(bootstrap_servers, topics.output)
    assert [d["depth"] for d in decisions_of(decisions)] == USSUCB(COSTS).run(outputs).tolist()

    misspelt = command(bootstrap_servers, topics, "--client", "confluent", "--consumer-option", "debg=cgrp",
                       "--metrics-port", "-1")  # fmt: skip
    done = subprocess.run(misspelt, capture_output=True, text=True, timeout=150)
    assert done.returncode == 2, done.stderr[-3000:]
    assert 'consumer settings: No such configuration property: "debg"' in last_line(done.stderr)
