"""The compiled kernels in the service, on the real broker and through a restart, on both clients.

The service decides one partition's events on one decision path, stops, and a new service decides
the rest on the other path from the checkpoint the first one wrote: every decision record is the
one ``OutputsCodec`` writes for the depth of the policy's own ``select``/``update`` loop over the
whole stream, and the last checkpoint holds the loop's counts. (The paths' equality on many more
streams is tested without a broker: ``processing/test_compiled_codec.py``.) About 10 s per client.
"""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

import pytest
from conftest import COSTS, checkpoints_of, new_app, produce, read_all, run_app

from tests.decision_paths import on_path
from tests.test_uss_stream_kafka.helpers import drifting
from uss_stream.policies import USSKLUCB
from uss_stream_kafka import OutputsProcessor
from uss_stream_kafka.processing import processors
from uss_stream_kafka.processing.events import OutputsCodec


def _count_compiled_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the batches the kernels decided (the service's learners call them through ``kernels``)."""
    counter = [0]
    real = processors.kernels

    def kernels():
        module = real()
        if module is None:
            return None

        def decide_outputs(*args):
            decided = module.decide_outputs(*args)
            counter[0] += decided is not None
            return decided

        return SimpleNamespace(decide_outputs=decide_outputs)

    monkeypatch.setattr(processors, "kernels", kernels)
    return counter


@pytest.mark.kafka
@pytest.mark.timeout(300)
def test_the_compiled_and_the_pure_path_continue_each_others_stream(
    bootstrap_servers, make_topics, kafka_client, monkeypatch
):
    decided_batches = _count_compiled_batches(monkeypatch)
    first_path, second_path = ("compiled", "pure") if kafka_client == "kafka-python" else ("pure", "compiled")
    topics = make_topics()
    outputs = drifting(6_000, seed=21)
    values = [json.dumps({"id": f"e{i}", "outputs": row}).encode() for i, row in enumerate(outputs.tolist())]
    group = f"g-{uuid.uuid4().hex[:10]}"
    for path, part in ((first_path, values[:3_500]), (second_path, values[3_500:])):
        produce(bootstrap_servers, topics.input, part)
        with on_path(path):
            app = new_app(
                bootstrap_servers, topics, group, client_library=kafka_client, max_poll_records=1_000
            )
            before = decided_batches[0]
            run_app(app, OutputsProcessor(COSTS))  # the default policy, USS-KL-UCB
            assert (decided_batches[0] > before) == (path == "compiled")
    reference = USSKLUCB(COSTS)
    depths = reference.run(outputs).tolist()
    codec = OutputsCodec(len(COSTS), reference.cumulative_costs)
    expected = [codec.encode(f"e{i}", d, int(outputs[i, d - 1])) for i, d in enumerate(depths)]
    decided = {}
    for record in read_all(bootstrap_servers, topics.output, expected=6_000):
        decided.setdefault(json.loads(record.value)["id"], record.value)  # at-least-once: first copy
    assert [decided[f"e{i}"] for i in range(6_000)] == expected
    assert read_all(bootstrap_servers, topics.dead_letter) == []
    assert checkpoints_of(bootstrap_servers, topics.state)[-1].state == reference.state_dict()
