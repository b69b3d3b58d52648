"""``uss-stream kafka status``: what a group's learners have learned, read from its last checkpoints.

The state topic holds, per input partition, the last checkpoint of the group's learner
(:mod:`uss_stream_kafka.runtime.checkpoint`). :func:`group_status` reads it to its end (a consumer without
group: it works while the service runs and after it stopped), rebuilds each partition's learner
from its checkpoint with the processor the checkpoint describes, and reports the quantities of
the learning metrics (``docs/metrics.md``) under the same names: ``policy_round``,
``depth_mix`` (the rounds the policy learned from, by depth), ``chosen_depth``,
``disagreement_ratio``, ``wd_verdict``, the label counters and ``pending_decisions`` where they
apply, plus the checkpoint's ``offset`` and ``checkpoint_age_seconds``.

A state record is data, never code: ``status`` does not import or call what a record names (a
features-mode checkpoint names its cascade factory), does not rebuild a learner of more than
:data:`MAX_STAGES` stages, and escapes the control characters of what it prints. Where it does not
rebuild the learner, the row holds what the counts alone say (no chosen depth) and ``note`` says
why.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from uss_stream.core.stats import DisagreementStats
from uss_stream.policies.learning_state import depth_mix, disagreement_ratio
from uss_stream_kafka.clients.config import ClientConfig
from uss_stream_kafka.runtime.checkpoint import Checkpoint, CheckpointStore

__all__ = ["MAX_STAGES", "format_table", "group_status", "partition_status", "printable"]

#: The most stages of a learner ``status`` rebuilds from a checkpoint (the time and memory it takes grow
#: with stages²); a record that names more is reported by its counts alone.
MAX_STAGES = 256


class _NotRebuilt(ValueError):
    """A checkpoint whose learner ``status`` does not rebuild (the reason is the row's note)."""


def group_status(
    client: ClientConfig,
    state_topic: str,
    group_id: str,
    library: str = "kafka-python",
    timeout: float = 30.0,
) -> list[dict[str, Any]]:
    """One row per input partition with a checkpoint of ``group_id`` in ``state_topic`` (empty: none).

    Raises ``ValueError`` if the state topic does not exist, ``TimeoutError`` if it cannot be read
    to its end within ``timeout`` seconds.
    """
    store = CheckpointStore(state_topic, client.kafka_kwargs("status-reader"), timeout, library)
    try:
        store.refresh()
        checkpoints = [c for c in store.checkpoints() if c.group_id == group_id]
    finally:
        store.close()
    now = time.time()
    processors: dict[str, Any] = {}
    checkpoints.sort(key=lambda c: (c.topic, c.partition))
    return [partition_status(checkpoint, now, processors) for checkpoint in checkpoints]


def partition_status(
    checkpoint: Checkpoint, now: float, processors: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The row of one checkpoint (see the module docstring); ``processors`` caches the rebuilt ones.

    Examples
    --------
    >>> from uss_stream_kafka.processing.processors import OutputsProcessor
    >>> processor = OutputsProcessor([0.0, 0.25, 0.5], policy="fixed:depth=2")
    >>> learner = processor.new_learner()
    >>> for i in range(4):
    ...     _ = learner.process(b'{"id": %d, "outputs": [1, 0, 1]}' % i)
    >>> checkpoint = Checkpoint(topic="events", partition=3, offset=4, state=learner.state_dict(),
    ...                         group_id="g", processor=processor.describe(), written_at=100.0)
    >>> row = partition_status(checkpoint, now=102.5)
    >>> row["partition"], row["policy_round"], row["depth_mix"], row["chosen_depth"]
    (3, 4, [0, 4, 0], 2)
    >>> row["disagreement_ratio"], row["checkpoint_age_seconds"], row["policy"]
    ({'1-2': 1.0}, 2.5, 'fixed:depth=2')

    """
    description = checkpoint.processor
    row: dict[str, Any] = {
        "topic": checkpoint.topic,
        "partition": checkpoint.partition,
        "offset": checkpoint.offset,
        "checkpoint_age_seconds": round(max(0.0, now - checkpoint.written_at), 3),
        "mode": description.get("mode"),
        "policy": description.get("policy") or description.get("factory"),
    }
    cache = {} if processors is None else processors
    key = json.dumps(description, sort_keys=True)
    try:
        if key not in cache:
            cache[key] = _processor(description)
        learner = cache[key].new_learner()
        learner.load_state_dict(checkpoint.state)
        row.update(learner.learning_state())
    except Exception as error:  # an unusable checkpoint is reported, not fatal to the others
        row.update(_counts_only(checkpoint.state))
        row["note"] = str(error) if isinstance(error, _NotRebuilt) else f"{type(error).__name__}: {error}"
    return row


def _processor(description: dict[str, Any]) -> Any:
    """The processor a checkpoint's ``processor`` description was written by (outputs, orchestration).

    Raises :class:`_NotRebuilt` for a features-mode one (its cascade factory is code the record
    names) and for more than :data:`MAX_STAGES` stage costs.
    """
    from uss_stream_kafka.processing.processors import OutputsProcessor

    mode = description.get("mode")
    policy, alpha = description.get("policy"), description.get("alpha")
    if mode == "features":
        raise _NotRebuilt(
            "features mode: status does not import the cascade factory a state record names; counts only"
        )
    costs = description.get("stage_costs")
    if isinstance(costs, list) and len(costs) > MAX_STAGES:
        raise _NotRebuilt(
            f"{len(costs)} stage costs: status rebuilds learners of at most {MAX_STAGES} stages"
        )
    if mode == "outputs":
        return OutputsProcessor(description["stage_costs"], alpha=None if policy else alpha, policy=policy)
    if mode == "orchestration":
        from uss_stream_kafka.processing.orchestration import OrchestrationProcessor

        return OrchestrationProcessor(
            description["stage_costs"],
            stage_names=description.get("stage_names"),
            alpha=None if policy else alpha,
            policy=policy,
        )
    raise ValueError(f"unknown mode {mode!r}")


def _counts_only(state: dict[str, Any]) -> dict[str, Any]:
    """What the disagreement counts of a state say without its policy: round, depth mix, rates."""
    document = state.get("policy") if isinstance(state.get("policy"), dict) else state
    try:
        stats = DisagreementStats.from_dict(document.get("stats"))
    except (ValueError, AttributeError):
        return {}
    return {
        "policy_round": stats.decisions,
        "depth_mix": depth_mix(stats),
        "disagreement_ratio": disagreement_ratio(stats),
    }


#: The table's columns: heading and how a row shows it.
_COLUMNS = (
    ("partition", lambda r: f"{r['topic']}/{r['partition']}"),
    ("offset", lambda r: str(r["offset"])),
    ("round", lambda r: _shown(r.get("policy_round"))),
    ("depth mix", lambda r: _mix(r.get("depth_mix"))),
    ("chosen", lambda r: _shown(r.get("chosen_depth"))),
    ("disagreement", lambda r: _rates(r.get("disagreement_ratio"))),
    ("WD", lambda r: _shown(r.get("wd_verdict"))),
    ("labels req/ans/exp", lambda r: _labels(r)),
    ("pending", lambda r: _shown(r.get("pending_decisions"))),
    ("age", lambda r: f"{r['checkpoint_age_seconds']:.1f}s"),
)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a plain-text table (one line per partition), notes below it.

    >>> print(format_table([{"topic": "in", "partition": 0, "offset": 10, "policy_round": 10,
    ...     "depth_mix": [5, 0, 5], "chosen_depth": 1, "disagreement_ratio": {"1-2": 0.2},
    ...     "wd_verdict": None, "checkpoint_age_seconds": 1.25}]))
    partition  offset  round  depth mix    chosen  disagreement  WD  labels req/ans/exp  pending  age
    in/0       10      10     50%/0%/50%   1       1-2=0.200     -   -                   -        1.2s

    """
    cells = [[heading for heading, _ in _COLUMNS]]
    cells += [[printable(show(r)) for _, show in _COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]
    lines += [printable(f"{r['topic']}/{r['partition']}: {r['note']}") for r in rows if r.get("note")]
    return "\n".join(lines)


def printable(text: str) -> str:
    r"""``text`` with its unprintable characters (control characters, escapes) as Python escapes.

    A state record is anyone's with write access to the state topic: what it holds must not move the
    terminal's cursor, clear it or forge a line.

    >>> print(printable("events\x1b[2J\nFAKE line, café"))
    events\x1b[2J\nFAKE line, café
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _shown(value: Any) -> str:
    return "-" if value is None else str(value)


def _mix(mix: Sequence[float] | None) -> str:
    total = sum(mix or ())
    return "-" if not total else "/".join(f"{100 * n / total:.0f}%" for n in mix)


def _rates(rates: dict[str, float] | None) -> str:
    return " ".join(f"{pair}={rate:.3f}" for pair, rate in (rates or {}).items()) or "-"


def _labels(row: dict[str, Any]) -> str:
    names = ("labels_requested_total", "labels_answered_total", "labels_expired_total")
    return "-" if names[0] not in row else "/".join(str(row[name]) for name in names)
