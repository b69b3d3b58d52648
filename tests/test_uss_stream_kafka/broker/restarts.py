"""The first run of a restart scenario: a service decides the start of a stream and leaves a checkpoint.

Tests of what a restarted service makes of its state topic (a checkpoint forged, corrupt, or
written a billion events later) begin alike: the first events of a stream are decided by a
service of a new group until it committed them, which leaves the partition's checkpoint at that
offset, and the rest of the stream is produced for the run under test. :func:`first_run` is that
beginning; the test then changes the state topic and starts the second run in the same group.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
from conftest import COSTS, checkpoints_of, new_app, produce, run_app, stream

from uss_stream_kafka import Checkpoint, OutputsProcessor, Topics


@dataclass(frozen=True)
class FirstRun:
    """What the first run leaves: its group, the whole stream's outputs and its last checkpoint."""

    group: str
    outputs: np.ndarray
    checkpoint: Checkpoint


def processor() -> OutputsProcessor:
    """The processor of both runs: outputs mode, USS-UCB with ``alpha=0.51`` on :data:`COSTS`."""
    return OutputsProcessor(COSTS, alpha=0.51)


def first_run(bootstrap_servers: str, topics: Topics, client: str, total: int, first: int) -> FirstRun:
    """Decide events ``[0, first)`` of ``stream(total)`` in a new group; then produce the others.

    The run ends when its group committed offset ``first``; its last checkpoint on the state topic
    is checked to be at ``first``. Events ``[first, total)`` are on the input when this returns.
    """
    values, outputs = stream(total)
    group = f"g-{uuid.uuid4().hex[:10]}"
    produce(bootstrap_servers, topics.input, values[:first])
    run_app(new_app(bootstrap_servers, topics, group, client_library=client), processor())
    checkpoint = checkpoints_of(bootstrap_servers, topics.state)[-1]
    assert checkpoint.offset == first
    produce(bootstrap_servers, topics.input, values[first:])
    return FirstRun(group, outputs, checkpoint)
