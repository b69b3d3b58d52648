"""The layers of one run of the service, built and wired together from its :class:`ServiceConfig`.

The :class:`~uss_stream_kafka.runtime.app.Application` owns the poll loop; :func:`wire` builds
what the loop calls: the checkpoint store (read ``read_committed``, so checkpoints of aborted
transactions are never restored), the labels log that re-learns the stage models (features mode),
shared learning, the dispatcher that decides or dead-letters records, the recovery that restores
assigned partitions, and the consumer whose rebalance callbacks are the recovery's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uss_stream_kafka.clients.limits import STATE_ENVELOPE_BYTES
from uss_stream_kafka.runtime.checkpoint import CheckpointStore
from uss_stream_kafka.runtime.dispatch import Dispatcher
from uss_stream_kafka.runtime.progress import IdleGate, RejoinWatch
from uss_stream_kafka.runtime.recovery import Recovery
from uss_stream_kafka.runtime.relearn import LabelsLog
from uss_stream_kafka.runtime.shared import SharedLearning
from uss_stream_kafka.runtime.startup import new_consumer

if TYPE_CHECKING:
    from uss_stream_kafka.clients.config import ClientConfig
    from uss_stream_kafka.clients.limits import RecordLimits
    from uss_stream_kafka.runtime.commit import Committer
    from uss_stream_kafka.runtime.config import ServiceConfig
    from uss_stream_kafka.runtime.context import RunContext

log = logging.getLogger("uss_stream_kafka")


@dataclass
class Layers:
    """What the poll loop of one run calls (see :func:`wire`)."""

    store: CheckpointStore
    dispatcher: Dispatcher
    recovery: Recovery
    labels_log: LabelsLog | None
    sharing: SharedLearning | None

    def close(self) -> None:
        """Close the readers the layers opened (the consumer and producer are closed by their owners)."""
        self.store.close()
        if self.labels_log is not None:
            self.labels_log.close()


def wire(
    config: ServiceConfig,
    client: ClientConfig,
    context: RunContext,
    committer: Committer,
    idle_gate: IdleGate,
    partitions: dict[str, int],
    limits: RecordLimits,
) -> Layers:
    """Build the layers of a run of ``config`` and subscribe its consumer (``context.consumer``).

    ``client``: every client's connection; ``context``: the run's shared state (its processor set).
    ``partitions``: the partition count of every topic; ``limits``: the largest record each topic
    the service writes accepts (both from :func:`~uss_stream_kafka.runtime.startup.check_topics`).
    """
    topics = config.topics
    library = config.library
    processor: Any = context.processor
    store = CheckpointStore(
        topics.state,
        {**client.kafka_kwargs("state-reader"), "isolation_level": "read_committed"},
        library=library,
    )
    labels_log = None
    if topics.labels is not None and config.rebuild_models and processor.mode == "features":
        labels_log = LabelsLog(
            client.kafka_kwargs("labels-reader"),
            config.max_input_bytes,
            library=library,
            max_labels=config.relearn_max_labels,
        )
    sharing = SharedLearning(context, store, partitions[topics.input]) if config.shared_learning else None
    budget = getattr(processor, "max_state_bytes", None)
    if budget is not None and budget > limits.state - STATE_ENVELOPE_BYTES:
        # Orchestration: its checkpoints must fit the state topic's own limit, not the default one.
        processor.max_state_bytes = limits.state - STATE_ENVELOPE_BYTES
    dispatcher = Dispatcher(
        context,
        committer,
        config.max_input_bytes,
        limits.dead_letter,
        output_bytes=limits.output,
        propagate=config.propagate_headers,
    )
    recovery = Recovery(
        context,
        committer,
        store,
        labels_log,
        sharing,
        idle_gate,
        auto_offset_reset=config.auto_offset_reset,
        n_output=partitions[topics.output],
        n_dlq=partitions[topics.dead_letter],
        max_ahead=config.max_poll_records,
        rejoin=RejoinWatch() if config.group_instance_id else None,
    )
    subscribed = [topics.input] if topics.labels is None else [topics.input, topics.labels]
    settings = {
        **config.consumer_options,
        "group_id": config.group_id,
        "group_instance_id": config.group_instance_id,
        "auto_offset_reset": config.auto_offset_reset,
        "max_poll_records": config.max_poll_records,
    }
    recovery.new_consumer = lambda: new_consumer(library, client, subscribed, recovery.callbacks(), settings)
    context.consumer = recovery.new_consumer()
    log.info(
        "%s mode, %s client, group %r: %s -> %s (dead letters %s, state %s)",
        processor.mode,
        library,
        config.group_id,
        "+".join(subscribed),
        topics.output,
        topics.dead_letter,
        topics.state,
    )
    return Layers(store, dispatcher, recovery, labels_log, sharing)
