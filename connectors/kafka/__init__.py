"""Kafka connector: a decision service that consumes events, decides, and produces decisions.

The public surface, in the style of Quix Streams (an application object, a topics config and a
processing function)::

    from connectors.kafka import Application, ClientConfig, OutputsProcessor, Topics

    app = Application(
        ClientConfig("127.0.0.1:9092"),
        group_id="uss",
        topics=Topics(input="events", output="decisions", dead_letter="events-dlq", state="uss-state"),
    )
    app.run(OutputsProcessor(stage_costs=[0, 0.15, 0.2], alpha=0.51))

One module per concept: :mod:`~connectors.kafka.app` (the service loop),
:mod:`~connectors.kafka.topics`, :mod:`~connectors.kafka.config` (connection, security),
:mod:`~connectors.kafka.processing` (processors and learners), :mod:`~connectors.kafka.events`
(wire formats), :mod:`~connectors.kafka.deadletter`, :mod:`~connectors.kafka.checkpoint`,
:mod:`~connectors.kafka.metrics`, :mod:`~connectors.kafka.http`, :mod:`~connectors.kafka.demo` and
:mod:`~connectors.kafka.cli` (``uss-stream kafka ...``). See ``docs/kafka.md``.
"""

from __future__ import annotations

from connectors.kafka.app import Application, DeliveryError, RunSummary
from connectors.kafka.checkpoint import Checkpoint, CheckpointError, RestorePlan, plan_restore
from connectors.kafka.config import ClientConfig
from connectors.kafka.deadletter import DeadLetter
from connectors.kafka.events import REASONS, InvalidEvent
from connectors.kafka.processing import FeaturesProcessor, Learner, OutputsProcessor, Processor
from connectors.kafka.topics import Topics, create_topics

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
    "Learner",
    "OutputsProcessor",
    "Processor",
    "RestorePlan",
    "RunSummary",
    "Topics",
    "create_topics",
    "plan_restore",
]
