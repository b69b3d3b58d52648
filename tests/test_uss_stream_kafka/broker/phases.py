"""Features-mode streams with a defined order of labels and events, and their in-process reference.

Two topics have no order between them: a consumer of both interleaves them as its fetches come
back. The tests give the order a meaning by producing in *phases*: a batch of labels, which the
service must have consumed (observed) before the phase's events are produced, then the events. An
uninterrupted run therefore learns the labels of phases ``1..j`` before deciding the events of phase
``j``, and :func:`reference_decisions` is that run, in process, with the library's cascade.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from uss_stream_kafka.cli.demo import demo_records, pima_cascade


@dataclass
class Phase:
    labels: list[bytes]
    events: list[bytes]


def phases(count: int, labels: int, events: int, seed: int = 0) -> list[Phase]:
    """``count`` phases of ``labels`` labelled PIMA rows, then ``events`` (other) rows to decide.

    Event ids are unique across the phases (``pima-<n>``).
    """
    records = list(demo_records("features", count * (labels + events), seed=seed))
    result = []
    for k in range(count):
        chunk = records[k * (labels + events) : (k + 1) * (labels + events)]
        result.append(
            Phase(labels=[labelled for _, labelled in chunk[:labels]], events=[e for e, _ in chunk[labels:]])
        )
    return result


def _features(value: bytes) -> dict[str, Any]:
    return {k: v for k, v in json.loads(value)["features"].items() if v is not None}


def reference_decisions(stream: list[Phase]) -> list[dict[str, Any]]:
    """The decisions of one cascade that learns each phase's labels, then decides its events.

    Written against the library (``CascadeClassifier.learn_one`` / ``decide_one``), not the service.
    """
    cascade = pima_cascade()
    decisions = []
    for phase in stream:
        for value in phase.labels:
            cascade.learn_one(_features(value), json.loads(value)["label"])
        for value in phase.events:
            decision = cascade.decide_one(_features(value))
            document = {
                "id": json.loads(value)["id"],
                "depth": decision.depth,
                "prediction": decision.prediction,
                "outputs": list(decision.outputs),
                "proba": {_key(label): p for label, p in decision.proba.items()},
                "warm_up": decision.warm_up,
            }
            decisions.append(json.loads(json.dumps(document)))  # as a JSON reader sees it
    return decisions


def _key(label: Any) -> str:
    """A class label as a JSON object key: strings as they are, anything else as its JSON text."""
    return label if isinstance(label, str) else json.dumps(label)


def comparable(decision: dict[str, Any]) -> dict[str, Any]:
    """A decision record without its cost (a function of the depth, compared elsewhere)."""
    return {key: value for key, value in decision.items() if key != "cost"}
