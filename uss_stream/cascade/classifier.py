"""A River classifier that runs a cost-ordered cascade of classifiers only as deep as a policy says.

Each event is one step of a depth-selection policy (USS-KL-UCB by default): the policy picks a depth
``d``, stages ``1..d`` are queried on their own feature views, the policy learns from their
outputs (never from labels), and the deepest queried stage answers.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

import numpy as np
from river import base

from uss_stream.cascade.feature_costs import FeatureCosts
from uss_stream.cascade.feedback import LabelFeedback
from uss_stream.cascade.memo import EventMemo
from uss_stream.cascade.querying import (
    ABSTAINED,
    both_classes,
    for_policy,
    learn,
    make_plan,
    query,
    query_sequential,
)
from uss_stream.cascade.stage import Stage
from uss_stream.cascade.summary import CascadeSummary, summarise
from uss_stream.core.units import in_error_units
from uss_stream.core.validation import check_stage_costs
from uss_stream.policies import FixedDepth, Policy
from uss_stream.policies.specs import DEFAULT_POLICY, parse_spec

__all__ = ["ABSTAINED", "CascadeClassifier", "CascadeSummary", "Decision"]


class Decision(NamedTuple):
    """The outcome of one event.

    Attributes
    ----------
    depth
        Number of stages queried, ``1..K``.
    prediction
        The deepest queried stage's label (argmax of its probabilities), ``None`` if it abstained.
    proba
        The deepest queried stage's class probabilities (for a binary cascade always with both
        ``False`` and ``True`` keys, see :class:`CascadeClassifier`).
    outputs
        The label of each queried stage, in stage order (``None`` where a stage abstained).
    cost
        ``C_depth = c_1 + ... + c_depth``, the acquisition cost of the event.
    warm_up
        ``True`` if the event was answered during the warm-up, without a policy step.
    stopped
        Why the event stopped at ``depth``: ``"fixed depth"`` (the policy chose the depth before
        any stage answered), ``"warm-up"``, or for a sequential policy ``"cost test"`` (the context
        of the last stage found no deeper stage worth its cost:
        :class:`~uss_stream.policies.SequentialKLUCB`), ``"threshold"`` (the last stage was sure
        enough for a threshold rule such as :class:`~uss_stream.policies.ConfidenceThreshold`) or
        ``"last stage"``.
    """

    depth: int
    prediction: Any
    proba: dict[Any, float]
    outputs: tuple[Any, ...]
    cost: float
    warm_up: bool
    stopped: str = "fixed depth"


#: Builds a Decision without the Python-level ``__new__`` of a NamedTuple (the per-event hot path).
_new_decision = tuple.__new__


class CascadeClassifier(base.Classifier):
    """Query a cost-ordered cascade of incremental classifiers only as deep as needed, without labels.

    Stages are ordered cheapest first. For every event the policy (by default
    :class:`~uss_stream.policies.USSKLUCB`, the set test of Verma et al., AISTATS 2019, with KL
    confidence bounds) picks a depth ``d``; stages ``1..d`` are queried, each on its own view of the
    event (the features of stages ``d+1..K`` are never looked up), the policy learns from how often
    the queried stages disagree, and the deepest queried stage answers. The event costs
    ``C_d = c_1 + ... + c_d``. Labels are only used by :meth:`learn_one` to train the stages.

    **One event, one policy step.** :meth:`decide_one` always steps the policy. The decision is
    remembered until the next decision or :meth:`learn_one`, and the prediction methods reuse it
    on the same event, so that the policy steps and the event's cost is spent once. "The same
    event" is (:class:`~uss_stream.cascade.memo.EventMemo`):

    * the very object that was decided, unchanged since: ``predict_one(x)`` three times, or
      ``predict_one(x)`` then ``predict_proba_one(x)`` (or either after ``decide_one(x)``), is one
      step;
    * an equal but distinct plain ``dict``, once per method: a pipeline hands every call a fresh,
      equal dict, so its ``predict_one`` and ``predict_proba_one`` on one event are one step, while
      a stream of equal events (repeated readings, or events an unfitted scaler maps to the same
      values) is one step per event. Through a pipeline, call each method once per event, as
      River's evaluation does.

    A different event, a dict changed in place or a :meth:`learn_one` in between starts a new step.
    The cascade never reads a mapping beyond the queried stages' features.

    **Warm-up.** A stage that has not learned yet answers with a constant or with nothing, and the
    disagreements it causes would persist in the policy's counts. Until every stage has learned
    from ``warm_up`` labelled samples, events are answered by querying all ``K`` stages (cost
    ``C_K``) without stepping the policy; from then on the policy decides. Every stage learns from
    every labelled sample, so all stages leave the warm-up together. A stage that still abstains
    after the warm-up (``None``) is reported to the policy as disagreeing with every stage that
    answers.

    **Sequential policies** (``policy.sequential``, e.g.
    :class:`~uss_stream.policies.SequentialKLUCB` or the threshold rules
    :class:`~uss_stream.policies.ConfidenceThreshold`, :class:`~uss_stream.policies.EntropyThreshold`
    and :class:`~uss_stream.policies.ThresholdBandit`) decide after each stage instead of before the
    first: stage 1 is queried, its label, confidence (its largest class probability; ``None`` if
    it abstained, ``1.0`` for a stage without ``predict_proba_one``) and probabilities go to the
    policy, which says whether stage 2 is worth asking, and so on. :attr:`Decision.stopped` says why an event
    stopped, and :meth:`summary` lists the depth mix per context.

    **Policies that ask for labels** (``policy.asks_for_labels``, e.g.
    :class:`~uss_stream.policies.AuditedUSS`) request some events' labels: :attr:`label_requested`
    says whether the last decided event asked, the next :meth:`learn_one` delivers its label to the
    policy, and :meth:`summary` counts the labels the policy used. The stages still learn from every
    label :meth:`learn_one` gets. To follow River's active-learning convention instead
    (``predict_one(x)`` returns ``(y_pred, ask)``, and :func:`river.evaluate.progressive_val_score`
    learns only from the labels asked for and reports how many it used), use
    :class:`~uss_stream.cascade.active.ActiveCascadeClassifier`, the same cascade with that interface.

    **Costs.** The policy minimises the error probability plus the cost, so costs are in units of
    one error: a stage cost of 0.05 is worth paying if the stage removes one error in 20 events.
    Costs in any other unit (a currency, milliseconds) need ``price_of_error``, the price of one
    error in that unit: the cascade then works with ``c_j / price_of_error``
    (:mod:`uss_stream.core.units`), and warns (:class:`~uss_stream.core.units.CostScaleWarning`)
    when the costs make a depth unreachable (its cost above stage 1 exceeds one error, which no error
    rate can repay). ``Stage(cost=...)`` gives ``c_j`` directly. With ``cost=None`` it is derived
    from ``feature_costs`` as the incremental cost of the features the stage adds over stages
    ``1..j-1``: features bought by an earlier stage are free, and a feature group opened by an
    earlier stage gives the discount. :meth:`learn_one` trains every stage and so reads every
    stage's features; only decisions are cost-accounted. :attr:`stage_costs`, the decisions' costs
    and :meth:`summary` are in error units; :meth:`summary` also shows the mean cost in the
    costs' own unit.

    **Binary cascades** (not every stage handles more than two classes) return both ``False`` and
    ``True`` in :meth:`predict_proba_one` from the first event, as River's binary classifiers do:
    a class the deepest stage leaves out gets probability 0, and an abstaining stage gets 0.5/0.5
    (its :meth:`predict_one` stays ``None``).

    Parameters
    ----------
    stages
        The :class:`~uss_stream.cascade.stage.Stage` objects, cheapest first, with distinct names.
    policy
        A depth-selection policy from :mod:`uss_stream.policies` that learns without labels
        (e.g. ``FixedDepth(2)``) or asks for some (``AuditedUSS``), used as a template: the
        cascade builds its own untrained copy for its stage costs. Its ``stage_costs`` must be
        ``None`` or equal to the stages' costs. ``None``
        means ``USSKLUCB(stage_costs)``: on the paper's instances it has well under half of
        USS-UCB's regret wherever USS-UCB's exceeds 10 (``docs/evidence/results.md``, "Beyond the paper");
        ``USSUCB(stage_costs, alpha=0.51)`` is the paper's algorithm and was the default before.
        The default does not forget, which suits stages that keep learning online; when the stages'
        relative quality can change (a stage is retrained or swapped, a sensor degrades), pass a
        discounted template, e.g. ``USSKLUCB(stage_costs, discount=DRIFT_DISCOUNT)``
        (:mod:`uss_stream.core.forgetting`).
    feature_costs
        Per-feature acquisition costs for the stages whose ``cost`` is ``None``.
    warm_up
        Labelled samples every stage learns from before the policy starts deciding (``>= 0``).
    price_of_error
        The price of one error in the unit of the stages' costs and of ``feature_costs`` (e.g. 250
        for costs in dollars where a wrong answer costs 250 dollars); ``None``: the costs are in
        units of one error already.

    Examples
    --------
    On Phishing, a logistic regression on three features is nearly as good as the models that
    see all nine, and querying them costs more than the disagreement they resolve:

    >>> from river import datasets, evaluate, linear_model, metrics, preprocessing, tree
    >>> from uss_stream import CascadeClassifier, Stage

    >>> model = preprocessing.StandardScaler() | CascadeClassifier(stages=[
    ...     Stage(linear_model.LogisticRegression(), cost=0.0,
    ...           features=("empty_server_form_handler", "popup_window", "https")),
    ...     Stage(linear_model.LogisticRegression(), cost=0.2),
    ...     Stage(tree.HoeffdingTreeClassifier(), cost=0.3),
    ... ])
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    Accuracy: 89.11%

    The depth histogram (the first 50 events are the warm-up, at depth 3) and the mean cost per
    event, against ``C_3 = 0.5`` for always querying every stage (with the paper's USS-UCB as the
    policy: 88.31%, ``[799, 360, 91]`` and 0.094):

    >>> summary = model["CascadeClassifier"].summary()
    >>> summary.stages["answered"].tolist()
    [1055, 132, 63]
    >>> round(summary.mean_cost, 3)
    0.046

    Two stages whose costs come from Turney's heart-disease test prices, in CAD, where a wrong
    diagnosis is priced at 1000 CAD:

    >>> from uss_stream.datasets.heart import heart_feature_costs
    >>> from uss_stream.cascade.feature_costs import FeatureCosts
    >>> prices = FeatureCosts.from_frame(heart_feature_costs())
    >>> cascade = CascadeClassifier(stages=[
    ...     Stage(linear_model.LogisticRegression(), features=("age", "sex", "cp")),
    ...     Stage(linear_model.LogisticRegression(), features=("age", "sex", "cp", "chol", "fbs")),
    ... ], feature_costs=prices, price_of_error=1000)
    >>> [round(c, 5) for c in cascade.stage_costs]   # (3 x 1.00; then 7.27 + 3.10 CAD) / 1000
    [0.003, 0.01037]

    """

    def __init__(
        self,
        stages: Sequence[Stage],
        policy: Policy | None = None,
        feature_costs: FeatureCosts | None = None,
        warm_up: int = 50,
        price_of_error: float | None = None,
    ) -> None:
        self.stages = stages
        self.policy = policy
        self.feature_costs = feature_costs
        self.warm_up = warm_up
        self.price_of_error = price_of_error
        self._names = _check_stages(stages)
        if isinstance(warm_up, bool) or not isinstance(warm_up, (int, np.integer)) or warm_up < 0:
            raise ValueError(f"warm_up must be an integer >= 0, got {warm_up!r}")
        given = _resolve_costs(stages, self._names, feature_costs)
        costs = in_error_units(given, price_of_error, stacklevel=3)
        self._stage_costs = tuple(costs)
        self._cumulative = tuple(check_stage_costs(costs))
        self._policy = _build_policy(policy, costs)
        self._plan = make_plan(stages, self._names)
        self._all_multiclass = all(stage.model._multiclass for stage in stages)
        self._n_learned = 0
        self._n_events = 0
        self._n_warm_up_events = 0
        self._depth_counts = [0] * len(stages)
        self._total_cost = 0.0
        self._memo = EventMemo()  # the last decided event (see "One event, one policy step")
        self._feedback = LabelFeedback(self._policy, self._cumulative)

    @property
    def _multiclass(self) -> bool:
        return self._all_multiclass

    # -- introspection ---------------------------------------------------------------------------
    @property
    def stage_names(self) -> tuple[str, ...]:
        """The stages' names (``"stage<j>"`` for unnamed ones)."""
        return self._names

    @property
    def stage_costs(self) -> tuple[float, ...]:
        """``c_1..c_K`` in error units, the costs the policy trades off (explicit or derived from
        features, divided by ``price_of_error`` if given)."""
        return self._stage_costs

    @property
    def label_requested(self) -> bool:
        """Whether the last decided event asked for its label (a label-asking policy such as
        :class:`~uss_stream.policies.AuditedUSS`); the next :meth:`learn_one` on it delivers it."""
        return self._feedback.requested

    @property
    def total_cost(self) -> float:
        """Sum of ``C_depth`` over every decided event."""
        return self._total_cost

    def policy_state(self) -> dict[str, Any]:
        """The learned policy's state: its counts as a JSON-serialisable document.

        The stages' River models are not part of it (see :meth:`load_policy_state`).

        Examples
        --------
        >>> from river import linear_model
        >>> from uss_stream import CascadeClassifier, Stage
        >>> model = CascadeClassifier([Stage(linear_model.LogisticRegression(), cost=0.0),
        ...                            Stage(linear_model.LogisticRegression(), cost=0.2)])
        >>> model.policy_state()["stats"]["decisions"]
        0
        >>> twin = model.clone()
        >>> twin.load_policy_state(model.policy_state())

        """
        return self._policy.state_dict()

    def load_policy_state(self, document: dict[str, Any]) -> None:
        """Restore :meth:`policy_state` (e.g. from a checkpoint); ``ValueError`` if it does not fit."""
        self._policy.load_state_dict(document)

    def learning_state(self) -> dict[str, Any]:
        """What the policy has learned, under the names of the Kafka service's metrics.

        :func:`~uss_stream.policies.learning_state.learning_state` of the policy, its WD verdict from the
        labels :meth:`learn_one` gave for the stepped events; for a label-asking policy also
        ``labels_requested_total``, ``labels_answered_total`` and ``labels_expired_total`` (requests
        whose label did not come with the next :meth:`learn_one`). Cheaper than :meth:`summary`,
        which holds the same numbers (``docs/metrics.md``).

        Examples
        --------
        >>> from river import linear_model
        >>> from uss_stream import CascadeClassifier, Stage
        >>> model = CascadeClassifier([Stage(linear_model.LogisticRegression(), cost=0.0),
        ...                            Stage(linear_model.LogisticRegression(), cost=0.5)], warm_up=0)
        >>> _ = model.decide_one({"x": 1.0})
        >>> model.learn_one({"x": 1.0}, True)
        >>> state = model.learning_state()
        >>> state["policy_round"], state["chosen_depth"], state["wd_verdict"]
        (1, 1, 'undecided')

        """
        return self._feedback.learning_state()

    def summary(self) -> CascadeSummary:
        """Depth histogram, acquisition cost and the share of the whole cascade's cost saved,
        accuracy on the labels :meth:`learn_one` gave, disagreement rates, ``B^l``/``B^h``
        membership, the WD monitor's verdict and, where the labels contradict the label-free choice
        with confidence, advice (:class:`~uss_stream.cascade.summary.CascadeSummary`)."""
        return summarise(
            self._policy,
            names=self._names,
            models=[str(model) for model, _ in self._plan],
            stage_costs=self._stage_costs,
            cumulative=self._cumulative,
            answered=self._depth_counts,
            counters=(self._n_events, self._n_warm_up_events, self._n_learned, self._feedback.used),
            total_cost=self._total_cost,
            monitor=self._feedback.monitor,
            evidence=self._feedback.evidence,
            learning=self.learning_state(),
            scored=(self._feedback.scored, self._feedback.correct),
            price_of_error=self.price_of_error,
        )

    # -- inference -------------------------------------------------------------------------------
    def decide_one(self, x: dict[Hashable, Any]) -> Decision:
        """Decide the depth for event ``x``, query stages ``1..depth``, step the policy once.

        During the warm-up every stage is queried and the policy is not stepped. A queried stage
        whose probabilities are not finite (NaN, infinite) raises ``ValueError``, the policy not
        stepped: a broken model's answer is not counted, whichever stage gave it.
        """
        decision = self._step(x)
        self._memo.remember(x, decision)
        return decision

    def predict_proba_one(self, x: dict[Hashable, Any]) -> dict[Any, float]:
        """The deepest queried stage's probabilities (see "One event, one policy step")."""
        return dict(self._decision_for(x, "proba").proba)

    def predict_one(self, x: dict[Hashable, Any]) -> Any:
        """The deepest queried stage's label (see "One event, one policy step")."""
        return self._decision_for(x, "label").prediction

    def learn_one(self, x: dict[Hashable, Any], y: Any, **kwargs: Any) -> None:
        """Train every stage on its view of ``x``; ``kwargs`` (e.g. ``w``) go to each stage.

        The first ``learn_one`` after a decision is taken as the label of the decided event (River's
        progressive validation predicts, then learns the same event; inside a pipeline the event
        arrives transformed anew, so it is matched by its feature names, not its values). If that
        decision asked for its label (:attr:`label_requested`), ``y`` also goes to the policy; a
        label of a stepped event is counted for the WD monitor (:meth:`summary`), and the label scores
        the decided event's answer (the accuracy in :meth:`summary`). Nothing else of the selection
        sees labels.
        """
        decision = self._memo.decision
        if decision is not None and y is not None and self._memo.same_keys(x):
            self._feedback.learn(y, decision.prediction)
        else:
            self._feedback.forget()
        learn(self._plan, x, y, **kwargs)
        self._n_learned += 1
        self._memo.forget()

    def _decision_for(self, x: dict[Hashable, Any], method: str) -> Decision:
        """The last decision if ``x`` is its event and ``method`` has not served it yet, else a new one."""
        decision = self._memo.take(x, method)
        if decision is None:
            decision = self.decide_one(x)
            self._memo.served.add(method)
        return decision

    def _step(self, x: dict[Hashable, Any]) -> Decision:
        stepped = self._n_learned >= self.warm_up
        policy = self._policy
        if stepped and policy.sequential:
            labels, label, proba = query_sequential(self._plan, x, policy)
            return self._answer(len(labels), label, proba, labels, False, policy.reason)
        depth = policy.select() if stepped else len(self._plan)
        try:
            labels, label, proba, abstained = query(self._plan, x, depth)
        except BaseException:
            if stepped:  # the policy is not left waiting for this step's outputs
                policy.cancel()
            raise
        self._feedback.forget()
        if stepped:
            seen = [for_policy(label) for label in labels] if abstained else labels
            policy.update(seen)
            self._feedback.stepped(seen)
        else:
            self._n_warm_up_events += 1
        return self._answer(depth, label, proba, labels, not stepped, "fixed depth" if stepped else "warm-up")

    def _answer(
        self, depth: int, label: Any, proba: dict[Any, float], labels: list[Any], warm_up: bool, stopped: str
    ) -> Decision:
        """Count an event queried to ``depth`` and its cost; its decision, answered by ``label``."""
        if len(proba) < 2 and not self._all_multiclass:
            proba = both_classes(proba)
        cost = self._cumulative[depth - 1]
        self._n_events += 1
        self._depth_counts[depth - 1] += 1
        self._total_cost += cost
        return _new_decision(Decision, (depth, label, proba, tuple(labels), cost, warm_up, stopped))

    # -- River conventions -----------------------------------------------------------------------
    def clone(
        self, new_params: dict[str, Any] | None = None, include_attributes: bool = False
    ) -> CascadeClassifier:
        """A fresh cascade with untrained stages, or with ``include_attributes`` a full copy.

        River deep-copies list parameters, trained state included, so the stages are cloned
        explicitly.
        """
        new_params = dict(new_params or {})
        if "stages" not in new_params:
            stages = self.stages
            new_params["stages"] = (
                copy.deepcopy(stages) if include_attributes else [stage.clone() for stage in stages]
            )
        clone = super().clone(new_params, include_attributes)
        if include_attributes:  # River copied the plan apart from the stages: query the stages' models
            clone._plan = make_plan(clone.stages, clone._names)
        return clone

    @classmethod
    def _unit_test_params(cls):
        from river import linear_model, naive_bayes, preprocessing, tree

        phishing_cheap = ("empty_server_form_handler", "popup_window", "https")
        # Binary stages, one of them a pipeline; the policy steps from the 11th event on.
        yield {
            "stages": [
                Stage(linear_model.LogisticRegression(), features=phishing_cheap, cost=0.0),
                Stage(preprocessing.StandardScaler() | linear_model.LogisticRegression(), cost=0.1),
            ],
            "warm_up": 10,
        }
        # Mixed binary/multiclass stages, costs from features (and one given), no warm-up: the
        # untrained naive Bayes and tree stages abstain ({}) on the first events.
        yield {
            "stages": [
                Stage(naive_bayes.GaussianNB(), features=phishing_cheap[:2]),
                Stage(linear_model.LogisticRegression(), features=phishing_cheap),
                Stage(tree.HoeffdingTreeClassifier(), cost=0.05),
            ],
            "feature_costs": FeatureCosts(
                costs={"empty_server_form_handler": 0.01, "popup_window": 0.02, "https": 0.03},
                discount_costs={"popup_window": 0.01, "https": 0.02},
                groups={"popup_window": "page", "https": "page"},
            ),
            "warm_up": 0,
        }
        # Multiclass stages.
        yield {
            "stages": [
                Stage(naive_bayes.GaussianNB(), cost=0.0, name="nb"),
                Stage(tree.HoeffdingTreeClassifier(), cost=0.05, name="tree"),
            ],
            "warm_up": 5,
        }
        # A fixed-depth policy.
        yield {
            "stages": [
                Stage(linear_model.LogisticRegression(), features=phishing_cheap, cost=0.0),
                Stage(linear_model.LogisticRegression(), cost=0.2),
            ],
            "policy": FixedDepth(1),
        }


def _check_stages(stages: Any) -> tuple[str, ...]:
    if isinstance(stages, (str, bytes, dict)) or not isinstance(stages, Sequence):
        raise TypeError(f"stages must be a list of Stage objects, got {type(stages).__name__}")
    if not stages:
        raise ValueError("stages must hold at least one Stage, got an empty list")
    names: list[str] = []
    for j, stage in enumerate(stages):
        if not isinstance(stage, Stage):
            hint = (
                f"; wrap it: Stage({type(stage).__name__}(...), cost=...)"
                if isinstance(stage, base.Classifier)
                else ""
            )
            raise TypeError(f"stages[{j}] must be a Stage, got {type(stage).__name__}{hint}")
        name = stage.name if stage.name is not None else f"stage{j + 1}"
        if name in names:
            raise ValueError(
                f"stages: duplicate stage name {name!r} (stages[{names.index(name)}] and stages[{j}])"
            )
        names.append(name)
    return tuple(names)


def _resolve_costs(
    stages: Sequence[Stage], names: Sequence[str], feature_costs: FeatureCosts | None
) -> list[float]:
    if feature_costs is not None and not isinstance(feature_costs, FeatureCosts):
        raise TypeError(
            f"feature_costs must be a FeatureCosts table or None, got {type(feature_costs).__name__}"
        )
    costs = []
    bought: set[Hashable] = set()
    for j, stage in enumerate(stages):
        features = stage.features
        if features is None and feature_costs is not None:
            features = feature_costs.features
        if stage.cost is not None:
            costs.append(float(stage.cost))
        elif feature_costs is None:
            raise ValueError(
                f"stages[{j}] ({names[j]}) has cost=None and the cascade has no feature_costs: "
                "give the stage a cost or the cascade a FeatureCosts table"
            )
        else:
            try:
                costs.append(feature_costs.cost_of(features, already_bought=bought))
            except ValueError as error:
                raise ValueError(f"stages[{j}] ({names[j]}): {error}") from error
        bought.update(features or ())
    return costs


def _build_policy(policy: Policy | None, stage_costs: list[float]) -> Policy:
    if policy is None:
        return parse_spec(DEFAULT_POLICY).build(stage_costs)
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a uss_stream.policies.Policy or None, got {type(policy).__name__}")
    if policy.supervised:
        raise TypeError(
            f"policy: {type(policy).__name__} learns from labels; the cascade decides without them"
        )
    given = policy.stage_costs
    if given is not None and (
        len(given) != len(stage_costs)
        or not all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(given, stage_costs))
    ):
        raise ValueError(
            f"policy has stage_costs={list(given)} but the stages cost {stage_costs}; "
            "give the policy the stages' costs or stage_costs=None"
        )
    try:
        return policy.clone({"stage_costs": list(stage_costs)})
    except ValueError as error:
        raise ValueError(f"policy: {error}") from error
