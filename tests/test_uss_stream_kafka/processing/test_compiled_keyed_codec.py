"""Keyed outputs mode (``--key-from record-key``) through the compiled codec: the kernels decode the
events and encode the decisions, the keyed policy decides; the records, depths, rejections and every
key's learned state are those of the pure path, and a batch the kernels cannot be sure of (a value
that is not a plain event, a record key that is refused) is left to it whole.

The expectation is always the pure path (``USS_STREAM_PURE=1``: the Python codec, itself tested
against ``json.loads``); a missing kernel fails these tests in CI (``tests/decision_paths.py``).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.decision_paths import on_path, require_kernels
from tests.test_uss_stream_kafka.processing.test_compiled_codec import NOT_PLAIN, _value, layouts, plain_ids
from uss_stream.core import compiled
from uss_stream_kafka.processing.events import OutputsCodec
from uss_stream_kafka.processing.keyed import KeyedOutputsProcessor
from uss_stream_kafka.processing.keys import MAX_KEY_BYTES

COSTS = [0.0, 0.15, 0.2]
SPECS = ["uss-kl-ucb", "uss-ucb:alpha=0.51", "fixed:depth=2", "uss-ucb:discount=0.99"]
#: Record keys the service refuses (each alone makes a batch the Python path's).
REFUSED_KEYS = [None, b"", b"\xff\xfe", b"k" * (MAX_KEY_BYTES + 1)]


def _records(keys):
    return SimpleNamespace(keys=keys, offsets=list(range(len(keys))))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from([b"site-a", b"site-b", "sité-c".encode(), b"d"]),
            plain_ids,
            st.lists(st.integers(0, 255), min_size=3, max_size=3),
            layouts,
        ),
        min_size=1,
        max_size=60,
    ),
    stream_seed=st.integers(0, 10**6),
    spec=st.sampled_from(SPECS),
    repeat=st.integers(1, 20),
    odd_value=st.none() | st.sampled_from(NOT_PLAIN),
    odd_key=st.none() | st.sampled_from(range(len(REFUSED_KEYS))),
)
def test_both_paths_write_the_same_records_and_learn_the_same_keys(
    events, stream_seed, spec, repeat, odd_value, odd_key
):
    """A labelled stream over four keys so that their learners settle, then batches of plain events
    (any keys, ids, outputs, layouts), optionally one value or record key the kernels leave to
    Python: the records, depths, rejections and learned state (the pool and every key's document)
    are the pure path's."""
    require_kernels()
    rng = np.random.default_rng(stream_seed)
    truth = rng.integers(0, 2, 2_000)
    stream = np.stack([truth ^ (rng.random(2_000) < 0.2), truth ^ (rng.random(2_000) < 0.1), truth], 1)
    warm = [json.dumps({"id": i, "outputs": row}).encode() for i, row in enumerate(stream.tolist())]
    warm_keys = [b"site-%d" % (i % 4) for i in range(len(warm))]
    batch = [_value(event_id, outputs, layout) for _, event_id, outputs, layout in events] * repeat
    batch_keys = [key for key, *_ in events] * repeat
    if odd_value is not None:
        batch.insert(len(batch) // 2, odd_value)
        batch_keys.insert(len(batch_keys) // 2, b"site-a")
    if odd_key is not None:
        batch.insert(0, b'{"id": "k", "outputs": [1, 0, 1]}')
        batch_keys.insert(0, REFUSED_KEYS[odd_key])
    results = {}
    for path in ("pure", "compiled"):
        learner = KeyedOutputsProcessor(COSTS, policy=spec, key_from="record-key").new_learner()
        with on_path(path):
            first = learner.process_records(_records(warm_keys), warm, 1 << 20)
            second = learner.process_records(_records(batch_keys), batch, 1 << 20)
        keys = dict(learner.changed_states())
        results[path] = (first.payloads, first.depths, second.payloads, second.depths,
                         [str(e) for e in second.errors], learner.state_dict(), keys)  # fmt: skip
    assert results["compiled"] == results["pure"]


@pytest.fixture
def learner():
    require_kernels()
    return KeyedOutputsProcessor(COSTS, key_from="record-key").new_learner()


PLAIN = [b'{"id": "e1", "outputs": [1, 0, 1]}', b'{"id": 2, "outputs": [0, 0, 1]}']


def test_the_kernels_take_a_plain_batch_with_valid_keys(learner):
    with on_path("compiled"):
        result = learner._compiled_batch(PLAIN, [b"a", b"b"], 1 << 20)
    codec = OutputsCodec(3, [0.0, 0.15, 0.35])
    # Each key's first event queries every stage (depth 3, answered by stage 3, cost C_3).
    assert result.payloads == [codec.encode("e1", 3, 1), codec.encode(2, 3, 1)]
    assert (result.depths, result.errors) == ([3, 3], [None, None])


@pytest.mark.parametrize("key", REFUSED_KEYS, ids=["none", "empty", "not-utf8", "too-long"])
def test_a_refused_record_key_leaves_the_batch_to_python(learner, key):
    with on_path("compiled"):
        assert learner._compiled_batch(PLAIN, [b"a", key], 1 << 20) is None
        result = learner.process_records(_records([b"a", key]), PLAIN, 1 << 20)
    assert result.depths[0] == 3 and result.payloads[1] is None
    assert result.errors[1].reason == ("missing_key" if key is None else "invalid_key")


def test_a_value_over_the_limit_leaves_the_batch_to_python(learner):
    with on_path("compiled"):
        assert learner._compiled_batch(PLAIN, [b"a", b"b"], len(PLAIN[0]) - 1) is None


def test_the_encoder_refuses_what_the_decoder_did_not_give():
    require_kernels()
    kernels = compiled._load()
    outputs, ids = kernels.decode_outputs(PLAIN, 3, 1 << 20)
    tails = OutputsCodec(3, [0.0, 0.15, 0.35]).encoded_costs
    assert kernels.encode_outputs(PLAIN, ids, outputs, [1, 2], 3, tails) == [
        b'{"id":"e1","depth":1,"prediction":1,"cost":0.0}',
        b'{"id":2,"depth":2,"prediction":0,"cost":0.15}',
    ]
    with pytest.raises(ValueError, match=r"depth 0 is not in 1\.\.=3"):
        kernels.encode_outputs(PLAIN, ids, outputs, [1, 0], 3, tails)
    with pytest.raises(ValueError, match=r"depth 4 is not in 1\.\.=3"):
        kernels.encode_outputs(PLAIN, ids, outputs, [4, 1], 3, tails)
    with pytest.raises(ValueError, match="disagree"):
        kernels.encode_outputs(PLAIN, ids, outputs, [1], 3, tails)
    with pytest.raises(ValueError, match="not within its value"):
        kernels.encode_outputs([b"{}", b"{}"], ids, outputs, [1, 1], 3, tails)
