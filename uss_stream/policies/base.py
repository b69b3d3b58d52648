"""The protocol every depth-selection policy follows, and the checks shared by all of them.

A policy sees one event at a time: :meth:`Policy.select` returns how many stages to query,
:meth:`Policy.update` receives the outputs of those stages. Its learned state is a
:class:`~uss_stream.core.stats.DisagreementStats` (plain counts, JSON, mergeable). For the replay engine
each policy also exposes :meth:`Policy.decide_many`, the same decision rule evaluated on many
states at once (a :class:`CountStates`; a policy implements :meth:`Policy._decide_many`); it must
return exactly what :meth:`Policy.select` returns on each state.

What a policy needs is said by public capability flags, read instead of its class:
:attr:`Policy.sequential` (decides stage by stage), :attr:`Policy.vectorised` (the batch decider
may speculate), :attr:`Policy.asks_for_labels` (requests some labels) and :attr:`Policy.supervised`
(learns from every label).

A randomised policy keys its random numbers on a 64-bit *stream key* and the round number
(:mod:`uss_stream.rules.counter_rng`), so its decision is still a function of the state:
:meth:`Policy.stream_keys` gives the replay engine one key per repetition, passed to
``decide_many(..., streams=...)``, and :meth:`Policy.for_repetition` the streaming policy that makes
repetition ``r``'s decisions. Deterministic policies return ``None`` and ignore ``streams``.
"""

from __future__ import annotations

import abc
import contextlib
import copy
import inspect
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from uss_stream.core.forgetting import check_discount
from uss_stream.core.schema import MAX_COUNT
from uss_stream.core.stats import DisagreementStats
from uss_stream.core.validation import check_outputs, check_stage_costs

__all__ = ["CountStates", "Policy"]


class CountStates(NamedTuple):
    """``M`` states of a policy, as :meth:`Policy.decide_many` takes them (one row per state).

    Attributes
    ----------
    rounds
        ``M`` round numbers ``t`` (``>= 1``).
    queried
        ``M x K`` counts ``n_j`` of the rounds before ``t`` (floats if discounted).
    disagreements
        ``M x K x K`` counts ``D_ij`` (only ``i < j`` read).
    errors
        ``M x K`` counts of rounds in which stage ``j`` was queried and wrong; read only by
        policies that learn from labels (:attr:`Policy.supervised`).
    streams
        ``M`` ``uint64`` stream keys, read by randomised policies only (``None``: the policy's own
        stream, the one :meth:`Policy.select` uses).
    evidence
        ``M x 3 x P`` label counts ``(m, w⁺, w⁻)`` per pair, read only by label-asking policies
        (:attr:`Policy.asks_for_labels`; ``None``: no labels).
    requested
        ``M`` counts of the labels requested before each state's round, read only by label-asking
        policies (``None``: none).
    """

    rounds: np.ndarray
    queried: np.ndarray
    disagreements: np.ndarray
    errors: np.ndarray | None = None
    streams: np.ndarray | None = None
    evidence: np.ndarray | None = None
    requested: np.ndarray | None = None


class Policy(abc.ABC):
    """Base class of depth-selection policies over a cost-ordered cascade.

    ``clone``, ``_get_params`` and ``_unit_test_params`` follow River's estimator conventions
    (:class:`river.base.Base`), without importing River: the Kafka service's outputs mode starts
    without it. Capability flags (:attr:`sequential`,
    :attr:`vectorised`, :attr:`asks_for_labels`, :attr:`supervised`) say what a policy needs; read
    them instead of checking its class.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``; querying depth ``d`` costs ``C_d = c_1 + ... + c_d``.
    discount
        ``None`` (plain counts) or the per-round discount ``0 < γ < 1`` of the learned counts
        (:mod:`uss_stream.core.forgetting`); policies that learn expose it as a constructor parameter.

    """

    def __init__(self, stage_costs: Sequence[float], discount: float | None = None) -> None:
        self.stage_costs = stage_costs
        self._costs = check_stage_costs(stage_costs)
        self.discount = check_discount(discount)
        self._stats = DisagreementStats(len(self._costs), discount=self.discount)
        self._pending_depth: int | None = None

    # -- read-only views -------------------------------------------------------------------------
    @property
    def n_stages(self) -> int:
        """Number of stages ``K``."""
        return len(self._costs)

    @property
    def cumulative_costs(self) -> tuple[float, ...]:
        """``C_1..C_K``."""
        return tuple(self._costs)

    @property
    def sequential(self) -> bool:
        """Whether the policy decides stage by stage (``begin``/``step``) rather than a depth up front.

        Capability flag read by the cascade and the replay; ``False`` for every fixed-depth policy.
        """
        return False

    @property
    def vectorised(self) -> bool:
        """Whether :meth:`decide_many` makes :meth:`select`'s decision from the round and the
        label-free counts alone, so that the simulation kernel (:func:`uss_stream.policies.kernel.speculate`)
        can decide a stream's rounds in batches.

        Capability flag read by the service's batch decider; ``False`` for sequential policies,
        policies that learn from labels and label-asking ones (they step event by event).
        """
        return not (self.sequential or self.supervised)

    @property
    def asks_for_labels(self) -> bool:
        """Whether the policy asks for some events' labels (``label_request``, ``learn_label``).

        Capability flag read by the cascade, the pending decisions and the replay; ``True`` only for
        label-asking policies such as :class:`~uss_stream.policies.AuditedUSS`.
        """
        return False

    def upper_bounds(self) -> np.ndarray | None:
        """The ``K x K`` optimistic disagreement bounds of the paper's set test for the next step.

        ``None`` for a policy that does not decide by that test; USS-UCB and USS-KL-UCB (and the
        policies built on them) return the matrix their next :meth:`select` will use, from which
        the cascade's summary shows each stage's membership of ``B^l`` and ``B^h``.
        """
        return None

    @property
    def stats(self) -> DisagreementStats:
        """The learned counts (a live reference: do not modify)."""
        return self._stats

    def load_stats(self, stats: DisagreementStats) -> None:
        """Decide from now on with (a copy of) ``stats`` as the learned counts.

        The in-process way to hand counts to a policy (a batch decider, pooled workers' counts):
        no JSON document. The counts must have the policy's ``K`` and ``discount`` and lie in
        ``0..2**53`` (:data:`~uss_stream.core.schema.MAX_COUNT`, the bound :meth:`load_state_dict`
        applies); a pending decision is dropped, as by :meth:`load_state_dict`. All or nothing:
        refused counts leave the policy as it was.

        Examples
        --------
        >>> from uss_stream.policies import USSUCB
        >>> from uss_stream.core.schema import MAX_COUNT
        >>> from uss_stream.core.stats import DisagreementStats
        >>> stats = DisagreementStats(2)
        >>> stats.record([0, 1])
        >>> stats.decisions = 1
        >>> policy = USSUCB([0.0, 0.5])
        >>> policy.load_stats(stats)
        >>> policy.stats.queried
        [1, 1]
        >>> policy.load_stats(DisagreementStats(3))
        Traceback (most recent call last):
        ...
        ValueError: stats has 3 stages, the policy has 2
        """
        if not isinstance(stats, DisagreementStats):
            raise TypeError(f"stats must be a DisagreementStats, got {type(stats).__name__}")
        if stats.n_stages != self.n_stages:
            raise ValueError(f"stats has {stats.n_stages} stages, the policy has {self.n_stages}")
        if stats.discount != self.discount:
            raise ValueError(f"stats has discount {stats.discount!r}, the policy has {self.discount!r}")
        if not 0 <= stats.decisions <= MAX_COUNT:
            raise ValueError(f"stats.decisions must be in 0..2**53 (MAX_COUNT), got {stats.decisions!r}")
        for name, counts in (
            ("queried", stats.queried),
            ("disagreements", [count for row in stats.disagreements for count in row]),
        ):
            bad = [count for count in counts if not 0 <= count <= MAX_COUNT]  # also refuses NaN
            if bad:
                raise ValueError(f"stats.{name} must hold counts in 0..2**53 (MAX_COUNT), got {bad[0]!r}")
        copy = DisagreementStats(stats.n_stages, discount=stats.discount)
        copy.decisions = stats.decisions
        copy.queried = list(stats.queried)
        copy.disagreements = [list(row) for row in stats.disagreements]
        self._stats = copy
        self._pending_depth = None

    @property
    def supervised(self) -> bool:
        """Whether the policy learns from every event's label (``update(outputs, label=y)``, the
        ``errors`` of :meth:`decide_many`).

        Capability flag read by the cascade, the replay and the service; ``True`` only for
        :class:`~uss_stream.policies.SupervisedUCB`.
        """
        return False

    @property
    def _supervised(self) -> bool:
        """River's name of :attr:`supervised` (``river.base.Estimator._supervised``)."""
        return self.supervised

    # -- the streaming protocol ------------------------------------------------------------------
    def select(self) -> int:
        """Decide how many stages (``1..K``) to query for the next event."""
        if self._pending_depth is not None:
            raise RuntimeError(
                "select() called again before update(): report the outputs of the previous "
                f"decision (depth {self._pending_depth}) first"
            )
        stats = self._stats
        t = stats.decisions + 1
        depth = self._decide(t)
        stats.decisions = t
        self._pending_depth = depth
        return depth

    def update(self, outputs: Sequence[Any]) -> None:
        """Learn from the outputs of stages ``1..depth`` of the last :meth:`select`."""
        depth = self._pending_depth
        values = check_outputs(outputs, self._pending() if depth is None else depth)
        self._stats.record(values)
        self._pending_depth = None

    def cancel(self) -> None:
        """Withdraw the pending decision of :meth:`select` (e.g. its stages failed): the round
        counter goes back and nothing is learned."""
        self._pending("cancel")
        self._stats.decisions -= 1
        self._pending_depth = None

    def run(self, outputs: Any) -> np.ndarray:
        """Run the select/update loop over a ``T x K`` array of all stages' outputs.

        Row ``t`` is the event of round ``t``; only its first ``depth`` entries are revealed to the
        policy. Returns the ``T`` depths; identical to calling :meth:`select` and :meth:`update`.
        All or nothing: if a revealed output is refused, the policy keeps the state it had.
        """
        rows = _as_rows(outputs, self.n_stages)
        depths = np.empty(len(rows), dtype=np.int64)
        with self._all_or_nothing():
            for t, row in enumerate(rows):
                depth = self.select()
                try:
                    self.update(row[:depth])
                except ValueError as error:
                    raise ValueError(f"row {t}: {error}") from None
                depths[t] = depth
        return depths

    @abc.abstractmethod
    def _decide(self, t: int) -> int:
        """The depth for round ``t`` given the counts of rounds ``1..t-1``."""

    def decide_many(
        self,
        rounds: np.ndarray,
        queried: np.ndarray,
        disagreements: np.ndarray,
        errors: np.ndarray | None = None,
        *,
        streams: np.ndarray | None = None,
        evidence: np.ndarray | None = None,
        requested: np.ndarray | None = None,
    ) -> np.ndarray:
        """The depths :meth:`select` would return for ``M`` states at once.

        The arguments are the fields of :class:`CountStates` (read there what each holds and which
        policies read it); a policy implements :meth:`_decide_many` on them.

        Examples
        --------
        >>> from uss_stream.policies import USSUCB
        >>> policy = USSUCB([0.0, 0.3])
        >>> policy.decide_many(np.array([1, 50]), np.array([[0, 0], [49, 49]]),
        ...                    np.array([[[0, 0], [0, 0]], [[0, 1], [0, 0]]])).tolist()
        [2, 1]
        """
        return self._decide_many(
            CountStates(rounds, queried, disagreements, errors, streams, evidence, requested)
        )

    @abc.abstractmethod
    def _decide_many(self, states: CountStates) -> np.ndarray:
        """The ``M`` depths of :meth:`decide_many` for ``states``."""

    def certify_many(
        self,
        rounds: np.ndarray,
        queried: np.ndarray,
        disagreements: np.ndarray,
        depths: np.ndarray,
        widths: np.ndarray,
    ) -> np.ndarray:
        """Whether each of ``M`` states decides ``depths`` at its round and the next ``widths - 1``
        rounds, whatever the stages' outputs, when each of those rounds queries ``depths`` stages.

        ``rounds``, ``queried`` and ``disagreements`` are the states' fields of :class:`CountStates`
        (the window's first round and the counts before it); ``widths`` holds one width per state
        (``M``), or several (``M x L``: one answer per width, the state's work shared). ``True`` is
        a certificate: the window's decisions are all ``depths`` and its counts follow by sums, so
        the batch deciders (:func:`uss_stream.policies.kernel.speculate`) skip evaluating them.
        ``False`` says nothing. The certificate bounds every value the rule computes inside the
        window (:mod:`uss_stream.rules.certificates`), so it never certifies a window whose
        decisions would differ from :meth:`select`'s. Policies with discounted counts, randomised
        ones and those that are not :attr:`vectorised` certify nothing (``False``); a policy
        implements :meth:`_certify_many`.

        Examples
        --------
        >>> from uss_stream.policies import USSUCB
        >>> policy = USSUCB([0.0, 0.3])
        >>> # stage 2 disagreed with stage 1 in 5 of 100 rounds: depth 1 for the next 1000 rounds,
        >>> # not for the next 10**9 (log t grows too far)
        >>> policy.certify_many(np.array([101]), np.array([[100, 100]]), np.array([[[0, 5], [0, 0]]]),
        ...                     np.array([1]), np.array([[1000, 10**9]])).tolist()
        [[True, False]]
        """
        rounds, depths, widths = np.asarray(rounds), np.asarray(depths), np.asarray(widths)
        if widths.size and (widths.min() < 1 or depths.min() < 1 or depths.max() > self.n_stages):
            raise ValueError(f"widths must be >= 1 and depths in 1..{self.n_stages}")
        if widths.shape[:1] != rounds.shape or widths.ndim not in (1, 2):
            raise ValueError(f"widths must be M or M x L for M = {len(rounds)} states, got {widths.shape}")
        if not self.vectorised or self.discount is not None:
            return np.zeros(widths.shape, dtype=bool)
        ladder = widths.reshape(len(rounds), -1)
        states = CountStates(rounds, queried, disagreements)
        return self._certify_many(states, depths, ladder).reshape(widths.shape)

    def _certify_many(self, states: CountStates, depths: np.ndarray, widths: np.ndarray) -> np.ndarray:
        """:meth:`certify_many` for a vectorised policy with plain counts, ``widths`` ``M x L``:
        nothing certified by default (a policy whose rule has a certificate overrides this)."""
        return np.zeros(widths.shape, dtype=bool)

    def _compiled_rule(self) -> tuple[str, tuple[float, bool, bool]] | None:
        """The rule of the compiled kernels (:mod:`uss_stream.core.compiled`) that decides as
        :meth:`select` with plain counts: ``(name, (parameter, strict, lower))``; ``None`` (the
        default) when there is none, and the pure path decides."""
        return None

    def stream_keys(self, reps: int) -> np.ndarray | None:
        """The ``uint64`` stream key of each of ``reps`` replay repetitions; ``None`` if deterministic."""
        return None

    def for_repetition(self, repetition: int) -> Policy:
        """A fresh, untrained copy that decides as repetition ``repetition`` of a replay does.

        For a deterministic policy this is :meth:`clone`; a randomised one also takes the
        repetition's stream key (:meth:`stream_keys`).
        """
        return self.clone()

    def _pending(self, method: str = "update") -> int:
        """The depth of the decision awaiting its outputs (it stays pending until they are valid);
        ``RuntimeError`` naming ``method()`` if there is none."""
        depth = self._pending_depth
        if depth is None:
            raise RuntimeError(f"{method}() called without a preceding select()")
        return depth

    @contextlib.contextmanager
    def _all_or_nothing(self) -> Iterator[None]:
        """Restore the learned state of before the block if it raises: a :meth:`run` that meets a
        refused row (a NaN output, say) leaves the policy as it found it, with no decision pending."""
        snapshot = self.state_dict()
        try:
            yield
        except BaseException:
            self.load_state_dict(snapshot)
            raise

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The learned state as a JSON-serialisable document (counts only)."""
        return {"policy": type(self).__name__, "stats": self._stats.to_dict()}

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Restore the learned state from :meth:`state_dict`; validates before replacing.

        All or nothing: an invalid document raises ``ValueError`` naming the field, and the policy
        keeps its state (including a pending decision).
        """
        self._stats = self._checked_stats(document)
        self._pending_depth = None

    def _checked_stats(self, document: Any) -> DisagreementStats:
        """The counts of a :meth:`state_dict` document, validated for this policy (nothing replaced)."""
        if not isinstance(document, dict):
            raise ValueError(f"state document must be a JSON object, got {type(document).__name__}")
        name = document.get("policy")
        if name != type(self).__name__:
            shown = repr(name) if len(repr(name)) <= 60 else f"{repr(name)[:40]}..."
            raise ValueError(f"state document is for policy {shown}, not {type(self).__name__!r}")
        stats = DisagreementStats.from_dict(document.get("stats"))
        if stats.n_stages != self.n_stages:
            raise ValueError(f"state document has {stats.n_stages} stages, the policy has {self.n_stages}")
        if stats.discount != self.discount:
            raise ValueError(
                f"state document has discount {stats.discount!r}, the policy has {self.discount!r}"
            )
        return stats

    def clone(self, new_params: dict[str, Any] | None = None, include_attributes: bool = False) -> Policy:
        """A fresh, untrained policy with the same parameters, except those in ``new_params``.

        River's signature (:meth:`river.base.Base.clone`); names that are no parameter are refused.
        With ``include_attributes`` the other attributes (the learned state) are deep-copied too.

        >>> from uss_stream.policies import USSUCB
        >>> USSUCB(stage_costs=[0.0, 1.0], alpha=0.7).clone({"stage_costs": [0.0, 0.5, 0.5]})
        USSUCB(stage_costs=[0.0, 0.5, 0.5], alpha=0.7, f=None, discount=None)

        """
        params = self._get_params()
        unknown = set(new_params or {}) - set(params)
        if unknown:
            raise ValueError(f"{type(self).__name__} has no parameter(s) {sorted(unknown)}")
        params.update(new_params or {})
        clone = type(self)(**params)
        if include_attributes:
            for name, value in vars(self).items():
                if name not in params:
                    setattr(clone, name, copy.deepcopy(value))
        return clone

    def _get_params(self) -> dict[str, Any]:
        """The constructor arguments, read back from the attributes stored under their names."""
        signature = inspect.signature(type(self).__init__)
        return {
            name: getattr(self, name)
            for name, param in signature.parameters.items()
            if name != "self" and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
        }

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._get_params().items())
        return f"{type(self).__name__}({params})"


def _as_rows(outputs: Any, n_stages: int) -> list[list[Any]]:
    if hasattr(outputs, "to_numpy"):
        outputs = outputs.to_numpy()
    rows = outputs.tolist() if isinstance(outputs, np.ndarray) else [list(r) for r in outputs]
    for t, row in enumerate(rows):
        if len(row) != n_stages:
            raise ValueError(f"outputs must have {n_stages} columns (one per stage), row {t} has {len(row)}")
    return rows
