"""Kafka connector: a decision service that consumes events, decides, and produces decisions.

The public surface, in the style of Quix Streams (an application object, a topics config and a
processing function)::

    from uss_stream_kafka import Application, ClientConfig, OutputsProcessor, Topics

    app = Application(
        ClientConfig("127.0.0.1:9092"),
        group_id="uss",
        topics=Topics(input="events", output="decisions", dead_letter="events-dlq", state="uss-state"),
    )
    app.run(OutputsProcessor(stage_costs=[0, 0.15, 0.2], alpha=0.51))

One module per concept: :mod:`~uss_stream_kafka.app` (the service loop over the layers
:mod:`~uss_stream_kafka.wiring` builds: :mod:`~uss_stream_kafka.checkpointing`,
:mod:`~uss_stream_kafka.recovery`, :mod:`~uss_stream_kafka.dispatch` and
:mod:`~uss_stream_kafka.shared`), :mod:`~uss_stream_kafka.settings` (every setting, as a flag and an
environment variable), :mod:`~uss_stream_kafka.clients` (the kafka-python and confluent-kafka
seam), :mod:`~uss_stream_kafka.exceptions`,
:mod:`~uss_stream_kafka.topics`, :mod:`~uss_stream_kafka.config` (connection, security),
:mod:`~uss_stream_kafka.processing` (processors and learners),
:mod:`~uss_stream_kafka.orchestrating` (the orchestration processor), :mod:`~uss_stream_kafka.events`
(wire formats), :mod:`~uss_stream_kafka.deadletter`, :mod:`~uss_stream_kafka.checkpoint`,
:mod:`~uss_stream_kafka.metrics`, :mod:`~uss_stream_kafka.http`, :mod:`~uss_stream_kafka.demo` and
:mod:`~uss_stream_kafka.cli` (``uss-stream kafka ...``). See ``docs/kafka.md``.
"""

from __future__ import annotations

from uss_stream_kafka.app import Application, DeliveryError, RunSummary
from uss_stream_kafka.checkpoint import Checkpoint, CheckpointError, RestorePlan, plan_restore
from uss_stream_kafka.config import ClientConfig
from uss_stream_kafka.deadletter import DeadLetter
from uss_stream_kafka.events import REASONS, InvalidEvent
from uss_stream_kafka.orchestrating import OrchestrationProcessor, OrchestrationTopics
from uss_stream_kafka.processing import FeaturesProcessor, Learner, OutputsProcessor, Processor
from uss_stream_kafka.settings import KafkaSettings
from uss_stream_kafka.topics import Topics, create_topics

__all__ = [
    "REASONS",
    "Application",
    "Checkpoint",
    "CheckpointError",
    "ClientConfig",
    "DeadLetter",
    "DeliveryError",
    "FeaturesProcessor",
    "InvalidEvent",
    "KafkaSettings",
    "Learner",
    "OrchestrationProcessor",
    "OrchestrationTopics",
    "OutputsProcessor",
    "Processor",
    "RestorePlan",
    "RunSummary",
    "Topics",
    "create_topics",
    "plan_restore",
]
