"""Orchestration as a processor of the one runtime: decide each request now, learn from later reports.

In orchestration mode the service does not receive the stage outputs with the event: it receives a
*request* ``{"id": ..., "context": ...}`` (context optional) on the input topic, decides how many
stages to run with :meth:`~uss_stream.pending.PendingDecisions.decide` and produces the
*decision* ``{"id", "depth", "stages", "cost"}`` (plus the request's ``context``, if any). The
sensor systems run the stages and answer, later and in any order, with a *report*
``{"id", "outputs": [...]}`` on the reports topic, which the
:class:`~uss_stream_kafka.runtime.app.Application` treats as its labels topic: co-partitioned with the
requests (key both by id), partition ``p`` of the reports reaches the learner of requests
partition ``p``, which joins the report to its pending decision by id
(:meth:`~uss_stream.pending.PendingDecisions.report`).

With a label-asking policy (``--policy audited``) a report may ask for the event's label: the
learner then produces ``{"id": ..., "label_requested": true}`` to the decisions topic, in the
report's transaction, and the sensor side answers on the reports topic with ``{"id": ...,
"label": ...}``, applied by :meth:`~uss_stream.pending.PendingDecisions.report_label` (formats:
:mod:`uss_stream_kafka.processing.reports`).

:class:`OrchestrationProcessor` builds one :class:`OrchestrationLearner` per requests partition.
Its state (the checkpoint) holds the policy's counts, the pending decisions, the labels awaited
and the ids already reported or expired: after a restart a duplicate report is dead-lettered
``report_duplicate`` (a duplicate label ``report_label_duplicate``), never applied twice. The
runtime gives it the delivery guarantees (``exactly-once``: decisions, label requests, dead
letters, checkpoints and the offsets of both topics in one transaction), metrics, health and
scale-out by partition. See ``docs/orchestration.md``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from uss_stream.pending import PendingDecisions, RejectedReport
from uss_stream.policies import Policy
from uss_stream_kafka.clients.limits import BROKER_DEFAULT_MAX_MESSAGE_BYTES, MARGIN, STATE_ENVELOPE_BYTES
from uss_stream_kafka.clients.topics import Topics, create_topics
from uss_stream_kafka.processing.events import InvalidEvent
from uss_stream_kafka.processing.processors import BatchResult, check_recorded, service_policy
from uss_stream_kafka.processing.reports import label_request, parse_feedback, parse_report, parse_request
from uss_stream_kafka.processing.state_budget import StateBudget

__all__ = [
    "MAX_STATE_BYTES",
    "OrchestrationLearner",
    "OrchestrationProcessor",
    "OrchestrationSummary",
    "OrchestrationTopics",
    "create_orchestration_topics",
    "parse_feedback",
    "parse_report",
    "parse_request",
]

#: Report delays a learner keeps for the metrics between two refreshes.
REPORT_DELAYS_KEPT = 100_000

#: The largest learner state a checkpoint may hold by default: the broker's default record limit,
#: less the record batch's margin and room for the checkpoint's envelope (key, offsets, processor).
MAX_STATE_BYTES = BROKER_DEFAULT_MAX_MESSAGE_BYTES - MARGIN - STATE_ENVELOPE_BYTES


@dataclass(frozen=True)
class OrchestrationTopics:
    """Topics of orchestration mode (all distinct; names checked like :class:`Topics`).

    Examples
    --------
    >>> topics = OrchestrationTopics(requests="req", reports="rep", decisions="dec", dead_letter="dlq",
    ...                              state="state")
    >>> topics.all()
    ('req', 'rep', 'dec', 'dlq', 'state')
    >>> topics.as_topics().labels
    'rep'
    >>> OrchestrationTopics(requests="req", reports="req", decisions="dec", dead_letter="dlq", state="s")
    Traceback (most recent call last):
    ...
    ValueError: topic 'req' is used for both input and labels; every role needs its own topic

    """

    requests: str
    reports: str
    decisions: str
    dead_letter: str
    state: str

    def __post_init__(self) -> None:
        self.as_topics()

    def as_topics(self) -> Topics:
        """The runtime's :class:`Topics`: requests as input, decisions as output, reports as labels."""
        return Topics(
            input=self.requests,
            output=self.decisions,
            dead_letter=self.dead_letter,
            state=self.state,
            labels=self.reports,
        )

    def all(self) -> tuple[str, ...]:
        """Every topic name."""
        return (self.requests, self.reports, self.decisions, self.dead_letter, self.state)


def create_orchestration_topics(
    admin: Any, topics: OrchestrationTopics, partitions: int = 1, replication_factor: int = 1
) -> dict[str, str]:
    """Create the topics with a ``KafkaAdminClient`` (state compacted); see :func:`create_topics`."""
    return create_topics(
        admin, topics.as_topics(), partitions=partitions, replication_factor=replication_factor
    )


class OrchestrationProcessor:
    """Orchestration mode: decide requests, learn from the sensors' reports (and requested labels).

    Parameters
    ----------
    stage_costs
        ``c_1, ..., c_K`` (the cost of each stage).
    stage_names
        Names of the stages in the decisions (default ``stage1`` ... ``stageK``).
    alpha
        Shorthand for ``policy="uss-ucb:alpha=A"``; give it or ``policy``, not both.
    policy
        A label-free or label-asking policy's spec (:mod:`uss_stream.policies.specs`), e.g.
        ``"uss-ucb:alpha=0.51"`` or ``"audited"`` (``supervised`` is refused: it needs every
        label); the checkpoints record it and a restart with another one is refused. With
        neither: the library's default (USS-KL-UCB), as on the command line.
    max_age_decisions, max_age_seconds
        A pending decision expires after that many later decisions / seconds (``None``: never); its
        late report is then dead-lettered ``report_expired``.
    max_state_bytes
        The largest learner state a checkpoint holds: at half of it a warning, past 90% the oldest
        pending decisions and awaited labels expire (:mod:`uss_stream_kafka.processing.state_budget`). Keep it
        below the state topic's ``max.message.bytes``.

    Examples
    --------
    >>> processor = OrchestrationProcessor([0.0, 0.1, 0.2], stage_names=["xray", "ct", "manual"])
    >>> learner = processor.new_learner()
    >>> value, depth = learner.process(b'{"id": "bag-1", "context": {"lane": 2}}')
    >>> depth, json.loads(value)   # round 1 queries every stage
    (3, {'id': 'bag-1', 'depth': 3, 'stages': ['xray', 'ct', 'manual'], 'cost': 0.3...,
         'context': {'lane': 2}})
    >>> learner.learn(b'{"id": "bag-1", "outputs": [1, 0, 0]}') is None   # no label to ask for
    True
    >>> learner.book.policy.stats.queried
    [1, 1, 1]
    >>> learner.learn(b'{"id": "bag-1", "outputs": [1]}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: report_duplicate: decision 'bag-1' was already reported

    The reported ids are part of the state: a restored learner rejects the duplicate as well.

    >>> restored = processor.new_learner()
    >>> restored.load_state_dict(json.loads(json.dumps(learner.state_dict())))
    >>> restored.learn(b'{"id": "bag-1", "outputs": [1]}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: report_duplicate: decision 'bag-1' was already reported

    A label-asking policy asks for the label of an event whose outputs disagree; :meth:`learn`
    returns that request (the runtime produces it to the decisions topic), and the label that
    answers it is learned from:

    >>> audited = OrchestrationProcessor([0.0, 0.5], policy="audited").new_learner()
    >>> audited.process(b'{"id": 1}')[1]
    2
    >>> audited.learn(b'{"id": 1, "outputs": ["cat", "dog"]}')
    b'{"id":1,"label_requested":true}'
    >>> audited.learn(b'{"id": 1, "label": "dog"}')
    >>> audited.book.policy.labels_received
    1
    >>> audited.learn(b'{"id": 1, "label": "dog"}')
    Traceback (most recent call last):
    ...
    uss_stream_kafka.InvalidEvent: report_label_duplicate: the label of decision 1 was already applied

    """

    mode = "orchestration"
    #: The learner's state holds what it learned from the reports (the labels topic): a restore
    #: positions the reports partition at the checkpoint's ``labels_offset``, nothing is re-learned.
    labels_in_state = True
    #: After an assignment, the reports wait until the requests are read to their end offsets.
    labels_after_inputs = True

    def __init__(
        self,
        stage_costs: Sequence[float],
        stage_names: Sequence[str] | None = None,
        alpha: float | None = None,
        policy: str | Policy | None = None,
        max_age_decisions: int | None = None,
        max_age_seconds: float | None = None,
        max_state_bytes: int = MAX_STATE_BYTES,
    ) -> None:
        template, canonical = service_policy(policy, alpha, stage_costs, "orchestration", labels="requested")
        self.stage_costs = [float(c) for c in stage_costs]
        k = len(self.stage_costs)
        self.stage_names = (
            list(stage_names) if stage_names is not None else [f"stage{i + 1}" for i in range(k)]
        )
        if len(self.stage_names) != k or len(set(self.stage_names)) != k:
            raise ValueError(f"stage_names must be {k} distinct names, got {self.stage_names!r}")
        if isinstance(max_state_bytes, bool) or not isinstance(max_state_bytes, int) or max_state_bytes < 1:
            raise ValueError(f"max_state_bytes must be an integer >= 1, got {max_state_bytes!r}")
        self.alpha = alpha
        self.policy = canonical
        self.max_age_decisions = max_age_decisions
        self.max_age_seconds = max_age_seconds
        self.max_state_bytes = max_state_bytes
        self.n_stages = k
        self._template = template
        self._cumulative = [sum(self.stage_costs[: d + 1]) for d in range(k)]
        self.new_learner()  # checks the expiry settings now, not at the first assignment

    def new_learner(self) -> OrchestrationLearner:
        book = PendingDecisions(
            self._template.clone(),
            max_age_decisions=self.max_age_decisions,
            max_age_seconds=self.max_age_seconds,
        )
        return OrchestrationLearner(book, self.stage_names, self._cumulative, self.max_state_bytes)

    def describe(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "stage_costs": self.stage_costs,
            "stage_names": self.stage_names,
            "policy": self.policy,
        }

    def check_checkpoint(self, description: dict[str, Any]) -> None:
        """Raise ``ValueError`` if a checkpoint was written for other stages or another policy.

        >>> processor = OrchestrationProcessor([0, 0.1], policy="uss-ts:seed=2")
        >>> processor.check_checkpoint(processor.describe())
        >>> processor.check_checkpoint({**processor.describe(), "policy": "fixed:depth=1"})
        Traceback (most recent call last):
        ...
        ValueError: it was written with --policy fixed:depth=1, the service runs --policy uss-ts:seed=2...

        """
        if description.get("mode", self.mode) != self.mode:
            raise ValueError(f"it was written in {description.get('mode')} mode, not orchestration")
        check_recorded(description, self.stage_costs, self.policy, "", who="the service")


class OrchestrationLearner:
    """The pending decisions of one requests partition (see :class:`OrchestrationProcessor`).

    :meth:`process` decides a request, :meth:`learn` applies a report or a label; a report that
    cannot be applied raises :class:`~uss_stream_kafka.processing.events.InvalidEvent` with reason
    ``report_<why>``, a label ``report_label_<why>`` (the runtime dead-letters it), and changes
    nothing but the rejection counters.
    """

    __slots__ = ("_budget", "_cumulative", "_stage_names", "book", "report_delays")

    def __init__(
        self, book: PendingDecisions, stage_names: list[str], cumulative: list[float], max_state_bytes: int
    ) -> None:
        self.book = book
        self._stage_names = stage_names
        self._cumulative = cumulative
        self._budget = StateBudget(book, max_state_bytes)
        #: Seconds from decision to report of the reports applied since the metrics last drained
        #: them (:mod:`uss_stream_kafka.operations.learning_metrics`); the newest REPORT_DELAYS_KEPT are kept.
        self.report_delays: deque[float] = deque(maxlen=REPORT_DELAYS_KEPT)

    def decision(self, decision_id: str | int, depth: int, context: Any) -> dict[str, Any]:
        """The decision document for ``depth`` (``cost`` is the cumulative cost of the stages run)."""
        document: dict[str, Any] = {
            "id": decision_id,
            "depth": depth,
            "stages": self._stage_names[:depth],
            "cost": self._cumulative[depth - 1],
        }
        if context is not None:
            document["context"] = context
        return document

    def process(self, value: bytes | None, max_bytes: int = 1 << 20) -> tuple[bytes, int]:
        decision_id, context = parse_request(value, max_bytes)
        try:
            depth = self.book.decide(decision_id)
        except ValueError as error:
            raise InvalidEvent("duplicate_request", str(error)) from None
        document = self.decision(decision_id, depth, context)
        return json.dumps(document, separators=(",", ":")).encode(), depth

    def process_batch(self, values: Sequence[bytes | None], max_bytes: int) -> BatchResult:
        count = len(values)
        payloads: list[bytes | None] = [None] * count
        depths = [0] * count
        errors: list[InvalidEvent | None] = [None] * count
        process = self.process
        for position, value in enumerate(values):
            try:
                payloads[position], depths[position] = process(value, max_bytes)
            except InvalidEvent as error:
                errors[position] = error
        return BatchResult(payloads, depths, errors)

    def withdraw(self, decision: bytes) -> None:
        """Forget the pending decision of ``decision`` (a document of :meth:`process`), not delivered."""
        self.book.withdraw(json.loads(decision)["id"])

    def learn(self, value: bytes | None) -> bytes | None:
        """Apply a report or a label; returns the label request to produce, if the report asks."""
        decision_id, outputs, label = parse_feedback(value)
        book = self.book
        try:
            if outputs is None:
                book.report_label(decision_id, label)
                return None
            age = book.age_of(decision_id)
            book.report(decision_id, outputs)
            self.report_delays.append(age)
        except RejectedReport as error:
            kind = "report" if outputs is not None else "report_label"
            raise InvalidEvent(f"{kind}_{error.reason}", str(error)) from None
        return label_request(decision_id) if book.label_requested(decision_id) else None

    def state_dict(self) -> dict[str, Any]:
        """The pending decisions' state, kept within ``max_state_bytes`` (see :class:`StateBudget`)."""
        return self._budget.fit(self.book.state_dict)

    def learning_state(self) -> dict[str, Any]:
        """The book's :meth:`~uss_stream.pending.PendingDecisions.summary`."""
        return self.book.summary()

    def load_state_dict(self, document: dict[str, Any]) -> None:
        try:
            self.book.load_state_dict(document)
        except (TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"the orchestration state does not fit: {error!r}") from None


@dataclass
class OrchestrationSummary:
    """What an orchestration :class:`~uss_stream_kafka.runtime.app.Application` did, in orchestration terms.

    ``requests``, ``reports``, ``decisions``, ``dead_letters``, ``checkpoints`` and ``seconds`` are
    the run's (:class:`~uss_stream_kafka.runtime.context.RunSummary`: records of an aborted transaction
    are counted again when processed again); ``applied``, ``pending`` and ``expired`` are the
    counts of the assigned partitions' learners, restored state included, and so are
    ``labels_requested``, ``labels_applied`` and ``labels_awaited`` (a label-asking policy's:
    label requests produced, labels learned from, requests still unanswered); ``restored`` says
    whether a learner was restored from a checkpoint (in the latest restores the run summary
    keeps). Rejected labels are dead letters (``report_label_<why>``).
    """

    requests: int = 0
    reports: int = 0
    decisions: int = 0
    applied: int = 0
    pending: int = 0
    expired: int = 0
    labels_requested: int = 0
    labels_applied: int = 0
    labels_awaited: int = 0
    depth_counts: list[int] = field(default_factory=list)
    dead_letters: dict[str, int] = field(default_factory=dict)
    checkpoints: int = 0
    restored: bool = False
    seconds: float = 0.0

    @classmethod
    def of(cls, app: Any) -> OrchestrationSummary:
        """The summary of ``app`` (running or stopped) that runs an :class:`OrchestrationProcessor`."""
        run = app.summary
        books = [learner.book for learner in app.learners().values()]
        return cls(
            requests=run.events,
            reports=run.labels,
            decisions=run.decisions,
            applied=sum(book.counters["applied"] for book in books),
            pending=sum(book.pending for book in books),
            expired=sum(book.counters["expired"] for book in books),
            labels_requested=sum(book.label_counters["requested"] for book in books),
            labels_applied=sum(book.label_counters["applied"] for book in books),
            labels_awaited=sum(book.awaiting_labels for book in books),
            depth_counts=list(run.depth_counts),
            dead_letters=dict(run.dead_letters),
            checkpoints=run.checkpoints,
            restored=any("checkpoint @" in line for line in run.restored),
            seconds=run.seconds,
        )
