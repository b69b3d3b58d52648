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

The package is in layers, each a subpackage; imports run from the command line down:

- :mod:`~uss_stream_kafka.cli`: ``uss-stream kafka ...``, its one settings table (every setting as
  a flag and an environment variable), ``kafka status``, the demo cascade and the exit codes;
- :mod:`~uss_stream_kafka.runtime`: the :class:`Application` loop, its frozen ``ServiceConfig`` and
  what it delegates to: commits and transactions, checkpoints and recovery, dispatch, shared learning;
- :mod:`~uss_stream_kafka.operations`: Prometheus metrics (records and learning), ``/healthz`` and
  the dashboard generator;
- :mod:`~uss_stream_kafka.processing`: processors and learners, wire formats and Schema Registry
  payloads, orchestration, dead letters;
- :mod:`~uss_stream_kafka.clients`: the kafka-python and confluent-kafka seam, connection and
  security settings, topics and their record limits;
- :mod:`~uss_stream_kafka.exceptions`: every exception of the service.

The names below are imported on first use, so ``uss-stream kafka status`` does not pay for the
runtime. See ``docs/kafka.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "REASONS": "uss_stream_kafka.processing.events",
    "InvalidEvent": "uss_stream_kafka.processing.events",
    "Application": "uss_stream_kafka.runtime.app",
    "RunSummary": "uss_stream_kafka.runtime.app",
    "ServiceConfig": "uss_stream_kafka.runtime.config",
    "Checkpoint": "uss_stream_kafka.runtime.checkpoint",
    "RestorePlan": "uss_stream_kafka.runtime.checkpoint",
    "plan_restore": "uss_stream_kafka.runtime.checkpoint",
    "CheckpointError": "uss_stream_kafka.exceptions",
    "DeliveryError": "uss_stream_kafka.exceptions",
    "RegistryError": "uss_stream_kafka.exceptions",
    "ClientConfig": "uss_stream_kafka.clients.config",
    "Topics": "uss_stream_kafka.clients.topics",
    "create_topics": "uss_stream_kafka.clients.topics",
    "DeadLetter": "uss_stream_kafka.processing.deadletter",
    "OrchestrationProcessor": "uss_stream_kafka.processing.orchestration",
    "OrchestrationTopics": "uss_stream_kafka.processing.orchestration",
    "FeaturesProcessor": "uss_stream_kafka.processing.processors",
    "Learner": "uss_stream_kafka.processing.processors",
    "OutputsProcessor": "uss_stream_kafka.processing.processors",
    "Processor": "uss_stream_kafka.processing.processors",
    "KafkaSettings": "uss_stream_kafka.cli.settings",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'uss_stream_kafka' has no attribute {name!r}")
