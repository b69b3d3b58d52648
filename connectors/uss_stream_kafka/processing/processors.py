"""The processing functions: what the service does with one event, one learner per input partition.

A :class:`Processor` describes the job and builds a fresh :class:`Learner` for each input
partition. A learner turns an input value into a decision value (:meth:`Learner.process`),
optionally learns from a labelled value (:meth:`Learner.learn`), and exposes its learned state as
JSON (:meth:`Learner.state_dict` / :meth:`Learner.load_state_dict`) for the checkpoints.

* :class:`OutputsProcessor` — the stage outputs arrive with the event; a label-free policy given by
  its spec (:mod:`uss_stream.policies.specs`, e.g. USS-UCB or USS-KL-UCB) decides the depth and
  learns from the first ``depth`` outputs.
* :class:`FeaturesProcessor` — the event carries features; a :class:`uss_stream.CascadeClassifier`
  built by a user factory (``"package.module:function"``, code, never a pickle) queries its stages
  and learns from a labels topic.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from uss_stream.core.compiled import kernels
from uss_stream.core.stats import DisagreementStats
from uss_stream.policies import Policy
from uss_stream.policies.batch import decide_batch, next_window
from uss_stream.policies.kernel import Counts
from uss_stream.policies.learning_state import learning_state
from uss_stream.policies.specs import check_serving, parse_spec, policy_spec, serving_policy, spec_of
from uss_stream_kafka.processing.events import FeaturesCodec, InvalidEvent, OutputsCodec, oversize
from uss_stream_kafka.processing.feature_guard import FeatureGuard

__all__ = [
    "BatchResult",
    "FeaturesProcessor",
    "Learner",
    "OutputsProcessor",
    "Processor",
    "load_factory",
    "service_policy",
    "check_recorded",
]


class BatchResult(NamedTuple):
    """What :meth:`Learner.process_batch` returns: three lists aligned with the input values.

    For event ``i``: ``payloads[i]`` is the decision value and ``depths[i]`` its depth, or
    ``payloads[i]`` is ``None``, ``depths[i]`` is 0 and ``errors[i]`` says why it was rejected.
    (Parallel lists of bytes and ints, rather than a tuple per event, keep a batch's results out of
    the garbage collector's way.)
    """

    payloads: list[bytes | None]
    depths: list[int]
    errors: list[InvalidEvent | None]

    @classmethod
    def spread(
        cls,
        count: int,
        positions: list[int],
        payloads: list[bytes],
        depths: list[int],
        errors: list[InvalidEvent | None],
    ) -> BatchResult:
        """The result of ``count`` events of which those at ``positions`` were decided (``payloads``
        and ``depths`` aligned with ``positions``), the others rejected (``errors``) or not answered.

        >>> BatchResult.spread(3, [0, 2], [b"a", b"c"], [1, 2], [None, None, None])
        BatchResult(payloads=[b'a', None, b'c'], depths=[1, 0, 2], errors=[None, None, None])
        """
        if len(positions) == count:
            return cls(payloads, depths, errors)
        every: list[bytes | None] = [None] * count
        spread = [0] * count
        for position, payload, depth in zip(positions, payloads, depths):
            every[position] = payload
            spread[position] = depth
        return cls(every, spread, errors)


@runtime_checkable
class Learner(Protocol):
    """The per-partition state machine of a processor."""

    def process(self, value: bytes | None) -> tuple[bytes, int]:
        """Decide one event: ``(decision value, depth)``; raises :class:`~.events.InvalidEvent`."""

    def process_batch(self, values: Sequence[bytes | None], max_bytes: int) -> BatchResult:
        """Decide a batch of events in order, as many :meth:`process` calls would.

        Values longer than ``max_bytes`` are rejected as ``oversize``; a rejected event does not
        change the learner.
        """

    def learn(self, value: bytes | None) -> None:
        """Learn from one labelled event; raises :class:`~.events.InvalidEvent`."""

    def state_dict(self) -> dict[str, Any]:
        """The learned state as a JSON-serialisable document."""

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; raises ``ValueError`` if it does not fit."""

    def learning_state(self) -> dict[str, Any]:
        """What it has learned, under the metrics' names (:mod:`uss_stream.policies.learning_state`)."""


@runtime_checkable
class Processor(Protocol):
    """Builds learners and describes itself in checkpoints."""

    mode: str
    n_stages: int

    def new_learner(self) -> Learner:
        """A fresh learner for one input partition."""

    def describe(self) -> dict[str, Any]:
        """The configuration recorded with every checkpoint (JSON)."""

    def check_checkpoint(self, description: dict[str, Any]) -> None:
        """Raise ``ValueError`` if a checkpoint written with ``description`` must not be restored."""


class OutputsProcessor:
    """Outputs mode: decide depths with a policy from the stage outputs carried by each event.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K`` (cheapest stage first).
    alpha
        Shorthand for ``policy="uss-ucb:alpha=A"`` (USS-UCB's exploration parameter, as
        ``--alpha``); give it or ``policy``, not both.
    policy
        A ``--policy`` spec (:mod:`uss_stream.policies.specs`), e.g. ``"uss-ucb:alpha=0.51"``,
        ``"uss-ts:seed=0"``, ``"fixed:depth=2"`` or ``"uss-kl-ucb:discount=0.999"``. Any policy
        that decides without labels; label-asking (``audited``) and supervised policies are
        refused, since the events carry no labels. With neither ``alpha`` nor ``policy``: the
        library's default, :data:`~uss_stream.policies.specs.DEFAULT_POLICY` (USS-KL-UCB), as
        on the command line.
    codec
        ``(n_stages, cumulative_costs) -> codec`` of the events and decisions: JSON's
        :class:`~uss_stream_kafka.processing.events.OutputsCodec` by default, or a Schema Registry format's
        (:meth:`uss_stream_kafka.processing.formats.PayloadFormat.outputs_codec`). Every learner shares it.

    Examples
    --------
    >>> OutputsProcessor([0, 0.15, 0.2]).policy  # the library's and the command line's default
    'uss-kl-ucb:alpha=1.0'
    >>> processor = OutputsProcessor([0, 0.15, 0.2], alpha=0.51)
    >>> learner = processor.new_learner()
    >>> learner.process(b'{"id": "e1", "outputs": [1, 0, 1]}')   # round 1 queries every stage
    (b'{"id":"e1","depth":3,"prediction":1,"cost":0.35}', 3)
    >>> learner.state_dict()["stats"]["queried"]
    [1, 1, 1]

    The decisions are exactly those of :meth:`USSUCB.run` over the same outputs:

    >>> import json
    >>> from uss_stream.policies import USSUCB
    >>> rows = [[1, 0, 1], [0, 0, 0], [1, 1, 0], [1, 1, 1]] * 5
    >>> learner = processor.new_learner()
    >>> values = [json.dumps({"id": i, "outputs": r}).encode() for i, r in enumerate(rows)]
    >>> depths = [learner.process(value)[1] for value in values]
    >>> depths == USSUCB([0, 0.15, 0.2], alpha=0.51).run(rows).tolist()
    True

    Any policy by its spec; the checkpoints record it:

    >>> OutputsProcessor([0, 0.15, 0.2], policy="uss-ts").describe()["policy"]
    'uss-ts:seed=0'
    >>> OutputsProcessor([0, 0.15, 0.2], policy="audited")
    Traceback (most recent call last):
    ...
    ValueError: --policy 'audited': AuditedUSS asks for labels; outputs mode has none (use a label-free one)

    """

    mode = "outputs"

    def __init__(
        self,
        stage_costs: Sequence[float],
        alpha: float | None = None,
        policy: str | Policy | None = None,
        codec: Callable[[int, Sequence[float]], OutputsCodec] = OutputsCodec,
    ) -> None:
        template, canonical = service_policy(policy, alpha, stage_costs, "outputs mode")
        self._template = template
        self._codec = codec(template.n_stages, template.cumulative_costs)
        self.stage_costs = [float(c) for c in stage_costs]
        self.alpha = alpha
        self.n_stages = template.n_stages
        self.policy = canonical

    def new_learner(self) -> OutputsLearner:
        return OutputsLearner(self._template.clone(), self._codec)

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode, "stage_costs": self.stage_costs, "policy": self.policy}

    def check_checkpoint(self, description: dict[str, Any]) -> None:
        """Raise ``ValueError`` if a checkpoint's processor ``description`` names another policy.

        Checkpoints written before the policy was recorded name USS-UCB by its ``alpha``.

        >>> processor = OutputsProcessor([0, 0.15, 0.2], policy="uss-kl-ucb")
        >>> processor.check_checkpoint({"mode": "outputs", "policy": "uss-kl-ucb:alpha=1.0"})
        >>> processor.check_checkpoint({"mode": "outputs", "alpha": 0.51})
        Traceback (most recent call last):
        ...
        ValueError: it was written with --policy uss-ucb:alpha=0.51, this service runs --policy uss-kl-ucb...
        >>> processor.check_checkpoint({"mode": "outputs", "stage_costs": [0, 0.1, 0.2]})
        Traceback (most recent call last):
        ...
        ValueError: it is for stage costs [0, 0.1, 0.2], the service has [0.0, 0.15, 0.2]: ...

        """
        check_recorded(
            description,
            self.stage_costs,
            self.policy,
            "a restart must keep --stage-costs (use a new state topic)",
        )
        if description.get("key_from") is not None:
            raise ValueError(
                f"it was written with --key-from {description['key_from']}, this service runs without: "
                "a restart must keep the keys (use a new state topic to change them)"
            )


class OutputsLearner:
    """One policy fed with the outputs carried by the events (see :class:`OutputsProcessor`).

    :meth:`process_batch` decides a batch's valid events with :func:`~.batching.decide_batch`
    (exactly the ``select``/``update`` loop: vectorised by the library's kernel where that pays).

    Shared learning: :meth:`share` adds the other partitions' counts to the policy's, which then
    decides on the pooled counts; :meth:`state_dict` (the checkpoint) keeps holding this
    partition's own counts only, so that no count is ever shared twice.

    >>> import json
    >>> processor = OutputsProcessor([0, 0.15, 0.2])
    >>> learner, other = processor.new_learner(), processor.new_learner()
    >>> for i in range(300):
    ...     _ = other.process(json.dumps({"id": i, "outputs": [1, 1, 1]}).encode())
    >>> learner.process(b'{"id": "a", "outputs": [1, 1, 1]}')[1]   # alone: round 1 queries everything
    3
    >>> learner.share(other.own_stats())
    >>> learner.process(b'{"id": "b", "outputs": [1, 1, 1]}')[1]   # pooled: stage 1 has been right
    1
    >>> learner.own_stats().decisions, learner.policy.stats.decisions
    (2, 302)

    """

    __slots__ = ("_codec", "_foreign", "_last_depth", "_policy", "_window")

    def __init__(self, policy: Policy, codec: OutputsCodec | None = None) -> None:
        self._policy = policy
        self._codec = codec or OutputsCodec(policy.n_stages, policy.cumulative_costs)
        self._last_depth = policy.n_stages
        self._window: int | None = None  # the speculation's first window (batching.next_window)
        self._foreign: DisagreementStats | None = None

    @property
    def policy(self) -> Policy:
        """The learner's policy."""
        return self._policy

    def process(self, value: bytes | None) -> tuple[bytes, int]:
        codec = self._codec
        event_id, outputs = codec.decode(value)
        policy = self._policy
        depth = policy.select()
        revealed = outputs[:depth]
        policy.update(revealed)
        self._last_depth = depth
        return codec.encode(event_id, depth, revealed[-1]), depth

    def process_batch(self, values: Sequence[bytes | None], max_bytes: int) -> BatchResult:
        compiled = self._compiled_batch(values, max_bytes)
        if compiled is not None:
            return compiled
        positions, ids, outputs, errors = self._codec.decode_many(values, max_bytes)
        count = len(values)
        if not positions:
            return BatchResult([None] * count, [0] * count, errors)
        steps: list[int] = []
        decided = decide_batch(
            self._policy, outputs, guess=self._last_depth, window=self._window, on_step=steps.append
        )
        self._last_depth = decided[-1]
        self._window = next_window(len(decided), len(steps)) if steps else self._window
        return BatchResult.spread(
            count, positions, self._codec.encode_many(ids, decided, outputs), decided, errors
        )

    def _compiled_batch(self, values: Sequence[bytes | None], max_bytes: int) -> BatchResult | None:
        """The batch decoded, decided and encoded by the compiled kernels
        (:mod:`uss_stream.core.compiled`), exactly as below; ``None`` where they do not take it (not
        installed, a format other than JSON, a policy without a compiled rule or with discounted
        counts, or a value other than a plain event: then the Python path decides it)."""
        module = kernels()
        policy = self._policy
        if module is None or type(self._codec) is not OutputsCodec or policy.discount is not None:
            return None
        rule = policy._compiled_rule() if policy.vectorised else None
        if rule is None or not values or type(values) is not list:
            return None
        counts = Counts.of_stats(policy.stats)
        decided = module.decide_outputs(
            values,
            policy.n_stages,
            max_bytes,
            self._codec.encoded_costs,
            rule[0],
            rule[1],
            list(policy.cumulative_costs),
            counts.values,
            counts.rounds,
        )
        if decided is None:
            return None
        payloads, depths = decided
        policy.load_stats(counts.to_stats(0, discount=None))
        self._last_depth = depths[-1]
        return BatchResult(payloads, depths, [None] * len(values))

    def learn(self, value: bytes | None) -> None:
        raise InvalidEvent(
            "processing_error", "outputs mode learns from the stage outputs; it takes no labels"
        )

    def own_stats(self) -> DisagreementStats:
        """This partition's own counts: the policy's without what :meth:`share` added."""
        stats = self._policy.stats
        return stats.copy() if self._foreign is None else stats.subtract(self._foreign)

    def share(self, foreign: DisagreementStats) -> None:
        """Decide from now on with ``foreign`` (the other partitions' counts) added to the own counts."""
        pooled = self.own_stats().merge(foreign)
        self._policy.load_stats(pooled)
        self._foreign = foreign

    def state_dict(self) -> dict[str, Any]:
        if self._foreign is None:
            return self._policy.state_dict()
        return {"policy": type(self._policy).__name__, "stats": self.own_stats().to_dict()}

    def load_state_dict(self, document: dict[str, Any]) -> None:
        self._policy.load_state_dict(document)
        self._foreign = None

    def learning_state(self) -> dict[str, Any]:
        """The policy's :func:`~uss_stream.policies.learning_state.learning_state`
        (pooled counts when shared)."""
        return learning_state(self._policy)


class FeaturesProcessor:
    """Features mode: run a :class:`uss_stream.CascadeClassifier` on each event's features.

    Parameters
    ----------
    factory
        A zero-argument callable returning a new ``CascadeClassifier``, or its import path
        ``"package.module:function"``. It is called once per input partition (and once here, to
        check it).
    guard
        The feature-range guard every learner checks events and labels with
        (:class:`~uss_stream_kafka.processing.feature_guard.FeatureGuard`; default: learned ranges
        only). An :class:`~uss_stream_kafka.runtime.app.Application` sets its configured one
        (:meth:`guarded`).

    Notes
    -----
    Checkpoints hold the cascade's policy counts and the guard's learned ranges (JSON). The stages'
    River models are not serialised (no pickle): a restored learner is rebuilt by re-learning the
    labels log up to the position its checkpoint records (see :mod:`uss_stream_kafka.runtime.relearn`).

    Examples
    --------
    >>> processor = FeaturesProcessor("uss_stream_kafka.cli.demo:pima_cascade")
    >>> processor.n_stages
    3
    >>> learner = processor.new_learner()
    >>> value, depth = learner.process(b'{"id": 1, "features": {"age": 50, "bmi": 33.6, "glucose": 148}}')
    >>> depth   # warm-up: every stage is queried until the stages have learned
    3
    >>> learner.learn(b'{"id": 1, "features": {"age": 50, "bmi": 33.6, "glucose": 148}, "label": 1}')

    """

    mode = "features"

    def __init__(self, factory: str | Callable[[], Any], guard: FeatureGuard | None = None) -> None:
        self.guard = FeatureGuard() if guard is None else guard
        self.factory_path = factory if isinstance(factory, str) else _qualified_name(factory)
        self._factory = load_factory(factory) if isinstance(factory, str) else factory
        if not callable(self._factory):
            raise ValueError(f"cascade factory must be callable, got {self._factory!r}")
        probe = self._build()
        self.n_stages = len(probe.stage_costs)
        self.stage_costs = [float(c) for c in probe.stage_costs]

    def _build(self) -> Any:
        try:
            cascade = self._factory()
        except (Exception, SystemExit) as error:  # a factory's exit() must not end the service with 0
            raise ValueError(
                f"cascade factory {self.factory_path} failed: {type(error).__name__}: {error}"
            ) from error
        for method in ("decide_one", "learn_one"):
            if not callable(getattr(cascade, method, None)):
                raise ValueError(
                    f"cascade factory {self.factory_path} must return a CascadeClassifier, "
                    f"got {type(cascade).__name__} (no {method}())"
                )
        if not callable(getattr(cascade, "policy_state", None)):
            raise ValueError(
                f"cascade factory {self.factory_path} must return a uss_stream.CascadeClassifier"
            )
        return cascade

    def new_learner(self) -> FeaturesLearner:
        return FeaturesLearner(self._build(), self.guard.new())

    def guarded(self, guard: FeatureGuard) -> FeaturesProcessor:
        """This processor with ``guard`` (see the ``guard`` parameter); the factory is not called again."""
        twin = copy.copy(self)
        twin.guard = guard
        return twin

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode, "factory": self.factory_path, "stage_costs": self.stage_costs}

    def check_checkpoint(self, description: dict[str, Any]) -> None:
        """Nothing to check here: the cascade's own policy refuses counts that do not fit it."""


class FeaturesLearner:
    """One cascade (see :class:`FeaturesProcessor`)."""

    __slots__ = ("_cascade", "_codec", "_guard")

    #: The key of the guard's learned ranges in :meth:`state_dict`, beside the policy's state.
    RANGES_KEY = "feature_ranges"

    def __init__(self, cascade: Any, guard: FeatureGuard | None = None) -> None:
        self._cascade = cascade
        self._codec = FeaturesCodec()
        self._guard = FeatureGuard() if guard is None else guard

    @property
    def cascade(self) -> Any:
        """The learner's cascade."""
        return self._cascade

    def process(self, value: bytes | None) -> tuple[bytes, int]:
        event_id, features = self._codec.decode(value)
        self._guard.check(features)
        cascade = self._cascade
        # Restored if the decision cannot be encoded: a rejected event never changes the learner.
        before = cascade.policy_state()
        try:
            decision = cascade.decide_one(features)
        except Exception as error:
            raise InvalidEvent(
                "processing_error", f"cascade failed on event {event_id!r}: {type(error).__name__}: {error}"
            ) from error
        try:
            encoded = self._codec.encode(event_id, decision)
        except (ValueError, TypeError, OverflowError) as error:
            cascade.load_policy_state(before)
            raise InvalidEvent(
                "processing_error",
                f"the decision of event {event_id!r} cannot be encoded as JSON "
                f"(proba {decision.proba!r}, prediction {decision.prediction!r}): {error}",
            ) from error
        self._guard.observe(features)
        return encoded, int(decision.depth)

    def process_batch(self, values: Sequence[bytes | None], max_bytes: int) -> BatchResult:
        result = BatchResult([], [], [])
        for value in values:
            payload, depth, error = None, 0, None
            if value is not None and len(value) > max_bytes:
                error = oversize(value, max_bytes)
            else:
                try:
                    payload, depth = self.process(value)
                except InvalidEvent as rejected:
                    error = rejected
            result.payloads.append(payload)
            result.depths.append(depth)
            result.errors.append(error)
        return result

    def learn(self, value: bytes | None) -> None:
        features, label = self._codec.decode_label(value)
        self._guard.check(features)
        try:
            self._cascade.learn_one(features, label)
        except Exception as error:
            raise InvalidEvent(
                "processing_error", f"cascade failed to learn: {type(error).__name__}: {error}"
            ) from error
        self._guard.observe(features)

    def state_dict(self) -> dict[str, Any]:
        """The cascade's policy state, with the guard's learned ranges under :attr:`RANGES_KEY`."""
        return {**self._cascade.policy_state(), self.RANGES_KEY: self._guard.state_dict()}

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a state without ranges, as before the guard, leaves none learned)."""
        if not isinstance(document, dict):
            raise ValueError(f"state document must be a JSON object, got {type(document).__name__}")
        policy = {key: value for key, value in document.items() if key != self.RANGES_KEY}
        guard = self._guard.new()
        guard.load_state_dict(document.get(self.RANGES_KEY, {}))
        self._cascade.load_policy_state(policy)
        self._guard = guard

    def learning_state(self) -> dict[str, Any]:
        """The cascade's :meth:`~uss_stream.CascadeClassifier.learning_state`."""
        return self._cascade.learning_state()


def service_policy(
    policy: str | Policy | None,
    alpha: float | None,
    stage_costs: Sequence[float],
    mode: str,
    labels: str = "none",
) -> tuple[Policy, str]:
    """A processor's policy template and its canonical spec: built from ``policy`` / ``alpha`` (a spec,
    :func:`~uss_stream.policies.specs.serving_policy`), or ``policy`` itself when it is already built
    (the command line builds it once, with its settings), checked as the library checks a service's.

    >>> from uss_stream.policies import USSTS
    >>> service_policy(USSTS([0, 0.1], seed=1), None, [0, 0.1], "outputs mode")[1]
    'uss-ts:seed=1'
    >>> service_policy(USSTS([0, 0.1]), None, [0, 0.2], "outputs mode")
    Traceback (most recent call last):
    ...
    ValueError: the policy is built for stage costs [0.0, 0.1], the processor has [0.0, 0.2]

    """
    if not isinstance(policy, Policy):
        return serving_policy(policy_spec(policy, alpha), stage_costs, mode, labels)
    if alpha is not None:
        raise ValueError(f"give policy or alpha, not both: got {policy!r} and {alpha!r}")
    costs, built = [float(c) for c in stage_costs], [float(c) for c in policy.stage_costs]
    if built != costs:
        raise ValueError(f"the policy is built for stage costs {built}, the processor has {costs}")
    check_serving(policy, mode, labels)
    return policy, spec_of(policy)


def check_recorded(
    description: dict[str, Any], stage_costs: list[float], policy: str, hint: str, who: str = "this service"
) -> None:
    """Raise ``ValueError`` if a checkpoint's processor ``description`` is for other ``stage_costs``
    or another ``policy`` (its canonical spec); ``hint`` ends the stage costs' message, ``who`` names
    the service in the policy's.

    Checkpoints written before the policy was recorded name USS-UCB by its ``alpha``.

    >>> check_recorded({"alpha": 0.51}, [0.0, 0.1], "uss-ucb:alpha=0.51", "")
    >>> check_recorded({"policy": "fixed:depth=1"}, [0.0, 0.1], "uss-ucb:alpha=0.51", "")
    Traceback (most recent call last):
    ...
    ValueError: it was written with --policy fixed:depth=1, this service runs --policy uss-ucb:alpha=0.51: ...

    """
    if description.get("stage_costs", stage_costs) != stage_costs:
        raise ValueError(
            f"it is for stage costs {description.get('stage_costs')}, the service has {stage_costs}"
            + (f": {hint}" if hint else "")
        )
    recorded = description.get("policy")
    if recorded is None and "alpha" in description:
        recorded = spec_of(parse_spec(f"uss-ucb:alpha={description['alpha']!r}").build(stage_costs))
    if recorded is not None and recorded != policy:
        raise ValueError(
            f"it was written with --policy {recorded}, {who} runs --policy {policy}: "
            "a restart must keep the policy (use a new state topic to change it)"
        )


def load_factory(path: str) -> Callable[[], Any]:
    """Import ``"package.module:function"`` and return the function (code is imported, never unpickled).

    >>> load_factory("uss_stream_kafka.cli.demo:pima_cascade").__name__
    'pima_cascade'
    >>> load_factory("uss_stream_kafka.cli.demo")
    Traceback (most recent call last):
    ...
    ValueError: cascade factory must look like 'package.module:function', got 'uss_stream_kafka.cli.demo'
    >>> load_factory("../../etc:passwd")
    Traceback (most recent call last):
    ...
    ValueError: cascade factory must look like 'package.module:function' (a module's import name, ...

    """
    module_name, sep, attribute = str(path).partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"cascade factory must look like 'package.module:function', got {path!r}")
    if not all(part.isidentifier() for part in (*module_name.split("."), *attribute.split("."))):
        raise ValueError(
            "cascade factory must look like 'package.module:function' (a module's import name, "
            f"not a file), got {path!r}"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import cascade factory module {module_name!r}: {error}") from error
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(target):
        raise ValueError(f"cascade factory {path!r} is not callable")
    return target


def _qualified_name(function: Callable[..., Any]) -> str:
    module = getattr(function, "__module__", None) or "?"
    return f"{module}:{getattr(function, '__qualname__', repr(function))}"
