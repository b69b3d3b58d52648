"""Orchestration services for the broker tests: the runtime's Application with an orchestration processor.

:func:`orchestrator` builds what ``uss-stream kafka orchestrate`` runs (commits at the checkpoints
only, linger 2 ms), without an HTTP endpoint; :class:`Serving` runs it in a thread and reads its
:class:`~uss_stream_kafka.processing.orchestration.OrchestrationSummary` while it runs.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from conftest import RUNNING
from waiting import wait_until

from uss_stream_kafka import Application, ClientConfig
from uss_stream_kafka.processing.orchestration import (
    OrchestrationProcessor,
    OrchestrationSummary,
    OrchestrationTopics,
)

#: The processor's settings; the others go to the Application.
PROCESSOR_SETTINGS = ("stage_names", "alpha", "policy", "max_age_decisions", "max_age_seconds")


class Orchestrator:
    """An orchestration Application and its processor: ``run()`` serves and returns the summary."""

    def __init__(self, app: Application, processor: OrchestrationProcessor) -> None:
        self.app = app
        self.processor = processor

    def run(self) -> OrchestrationSummary:
        self.app.run(self.processor)
        return self.summary

    def stop(self) -> None:
        self.app.stop()

    @property
    def summary(self) -> OrchestrationSummary:
        return OrchestrationSummary.of(self.app)

    def ready(self) -> bool:
        """Whether every requests partition has its learner (assigned and restored)."""
        return bool(self.app.learners())


def orchestrator(
    bootstrap: str, topics: OrchestrationTopics, group: str, stage_costs: list[float], **settings: Any
) -> Orchestrator:
    processor = OrchestrationProcessor(
        stage_costs, **{k: settings.pop(k) for k in PROCESSOR_SETTINGS if k in settings}
    )
    settings.setdefault("http_port", None)
    settings.setdefault("checkpoint_every", 10_000)
    producer_options = {"linger_ms": 2, **settings.pop("producer_options", {})}
    app = Application(
        ClientConfig(bootstrap),
        group_id=group,
        topics=topics.as_topics(),
        commit_interval=float("inf"),
        max_input_bytes=settings.pop("max_input_bytes", 1 << 20),
        producer_options=producer_options,
        **settings,
    )
    return Orchestrator(app, processor)


class Serving:
    """An orchestrator running in a thread."""

    def __init__(self, orchestrator: Orchestrator) -> None:
        self.orchestrator = orchestrator
        self.app = orchestrator.app  # stopped by conftest's teardown if the test fails
        self.result: OrchestrationSummary | BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        RUNNING.append(self)

    def _run(self) -> None:
        try:
            self.result = self.orchestrator.run()
        except BaseException as error:
            self.result = error

    def alive(self) -> bool:
        return self._thread.is_alive()

    def join_quietly(self, timeout: float = 30.0) -> None:
        self._thread.join(timeout)

    def _check_alive(self) -> None:
        assert self._thread.is_alive(), f"the orchestrator stopped: {self.result!r}"

    def wait_for(self, condition: Callable[[OrchestrationSummary], bool], timeout: float = 40.0) -> None:
        wait_until(
            lambda: condition(self.orchestrator.summary),
            lambda: f"the condition (summary {self.orchestrator.summary})",
            timeout=timeout,
            alive=self._check_alive,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the requests partitions are assigned and restored."""
        wait_until(self.orchestrator.ready, self._not_ready, timeout=timeout, alive=self._check_alive)

    def _not_ready(self) -> str:
        health = self.orchestrator.app.health()
        return f"a restored partition (health {health}, its thread at:\n{self._stack()})"

    def _stack(self) -> str:
        frame = sys._current_frames().get(self._thread.ident)
        return "".join(traceback.format_stack(frame)) if frame is not None else "(ended)"

    def stop(self) -> OrchestrationSummary:
        self.orchestrator.stop()
        self._thread.join(30)
        assert not self._thread.is_alive()
        assert isinstance(self.result, OrchestrationSummary), self.result
        return self.result
