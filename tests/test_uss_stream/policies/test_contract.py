"""The contract every policy keeps, checked on every policy and each of its ``_unit_test_params``.

* ``decide_many`` returns what ``select`` returns, on states the policy actually reached (a random
  cascade drives the select/update loop; every checkpoint's counts form one row of one batch);
* ``clone`` is an untrained copy with the same parameters and ``repr`` evaluates back to it;
* the learned state survives a JSON round trip: the restored policy decides as the original;
* bad input raises ``ValueError`` naming the offending parameter, and changes nothing.

A *sequential* policy (``policy.sequential``: it decides stage by stage with ``begin``/``step``,
and has no ``select``) keeps the same contract in its own protocol: clone and ``repr``, the JSON
round trip and bad input as above; its batch entry point ``run`` decides as the ``begin``/``step``
loop; and, as it has no vectorised rule to compare with, its decisions on the states it reaches
equal those of an independent implementation of its documented rule, written here
(:data:`SEQUENTIAL_REFERENCES`; a new sequential policy fails until it has one).

New policies are found by walking :class:`~uss_stream.policies.Policy`'s subclasses, so a policy
added to the package is checked without editing this file.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import uss_stream.policies
from uss_stream.core.context_stats import CELL_EDGES
from uss_stream.core.stats import DisagreementStats
from uss_stream.policies import (
    ConfidenceThreshold,
    EntropyThreshold,
    Policy,
    SequentialKLUCB,
    SequentialPolicy,
    SupervisedUCB,
    ThresholdBandit,
)


def _concrete_policies(root: type[Policy] = Policy) -> Iterator[type[Policy]]:
    for cls in root.__subclasses__():
        if not inspect.isabstract(cls) and cls.__module__.startswith("uss_stream."):
            yield cls
        yield from _concrete_policies(cls)


POLICIES = sorted(set(_concrete_policies()), key=lambda cls: cls.__name__)
CASES = [
    pytest.param(cls, params, id=f"{cls.__name__}-{i}")
    for cls in POLICIES
    for i, params in enumerate(cls._unit_test_params() if hasattr(cls, "_unit_test_params") else [None])
]
#: The policies that decide a depth up front (select/update, decide_many), and the sequential ones.
SELECT_CASES = [
    case for case in CASES if case.values[1] is None or not case.values[0](**case.values[1]).sequential
]
SEQUENTIAL_CASES = [case for case in CASES if case not in SELECT_CASES]

#: Bad values per constructor parameter; each must raise a ValueError whose message names it.
BAD_VALUES: dict[str, list[Any]] = {
    "stage_costs": [[], [0.0, -0.1], [0.0, float("nan")], [0.0, float("inf")]],
    "alpha": [0.0, -1.0, float("nan")],
    "discount": [0.0, 1.0, 1.5, -0.5, float("nan")],
    "depth": [0, -1, 1.5],
    "seed": [1.5, "seven", True],
    "error_rates": [[0.1], [1.5, 0.1], [-0.1, 0.1]],
    "n_bins": [0, -1, 1.5, True, 17],
    "explore": [0.0, -1.0, float("nan")],
    "threshold": [0.0, -0.1, float("nan"), float("inf"), True],
    "thresholds": [[], (0.9, 0.8), (0.0, 0.5), (0.5, 1.5), "0.9", (0.5, float("nan"))],
}


def _trajectory(policy: Policy, steps: int, seed: int, flip: float = 0.4) -> tuple[list[tuple], list[int]]:
    """Drive ``policy`` on a random cascade; the state before each decision and the decision made.

    Stage ``j`` flips the label with probability ``flip / (j + 1)``, so disagreements and errors
    both occur. The state is read from the policy's own counts, as the replay engine reads them.
    """
    rng = np.random.default_rng(seed)
    k = policy.n_stages
    states, depths = [], []
    for _ in range(steps):
        stats = policy.stats
        errors = policy.errors if isinstance(policy, SupervisedUCB) else [0] * k
        disagreements = [list(row) for row in stats.disagreements]
        states.append((stats.decisions + 1, list(stats.queried), disagreements, errors))
        depth = policy.select()
        depths.append(depth)
        label = int(rng.integers(0, 2))
        flips = rng.random(k) < flip / np.arange(1, k + 1)
        outputs = [label ^ int(flipped) for flipped in flips][:depth]
        _update(policy, outputs, label)
    return states, depths


def _update(policy: Policy, outputs: list[int], label: int) -> None:
    if isinstance(policy, SupervisedUCB):
        policy.update(outputs, label=label)
    else:
        policy.update(outputs)


def _reached_states(template: Policy) -> tuple[list[tuple], list[int]]:
    """States of fresh clones on cascades from near agreement (shallow is best) to strong disagreement."""
    states, depths = [], []
    for seed, flip in enumerate((0.02, 0.1, 0.4, 0.8)):
        more_states, more_depths = _trajectory(template.clone(), steps=300, seed=seed, flip=flip)
        states += more_states
        depths += more_depths
    return states, depths


def _need_params(params: dict[str, Any] | None) -> dict[str, Any]:
    assert params is not None, "every policy defines _unit_test_params (River style)"
    return params


@pytest.mark.parametrize(("cls", "params"), SELECT_CASES)
def test_decide_many_equals_select_on_reached_states(cls: type[Policy], params: dict | None) -> None:
    policy = cls(**_need_params(params))
    states, depths = _reached_states(policy)
    rounds, queried, disagreements, errors = (np.array(column) for column in zip(*states))
    if cls.__name__ not in ("FixedDepth", "Oracle"):
        assert len(set(depths)) > 1, "the states reached cover more than one decision"
    many = policy.decide_many(rounds, queried, disagreements, errors)
    assert many.tolist() == depths
    for t in (0, len(states) // 2, len(states) - 1):  # a batch of one is the service's case
        row = slice(t, t + 1)
        one = policy.decide_many(rounds[row], queried[row], disagreements[row], errors[row])
        assert one.tolist() == [depths[t]]


@pytest.mark.parametrize(("cls", "params"), SELECT_CASES)
def test_clone_and_repr_round_trip(cls: type[Policy], params: dict | None) -> None:
    params = _need_params(params)
    policy = cls(**params)
    for name, value in params.items():
        assert getattr(policy, name) == value, f"{name} is stored under its init name"
    _trajectory(policy, steps=30, seed=1)
    fresh = policy.clone()
    assert type(fresh) is cls and fresh is not policy
    assert repr(fresh) == repr(policy)
    assert fresh.stats.decisions == 0 and policy.stats.decisions == 30
    namespace = {c.__name__: c for c in POLICIES} | {"inf": math.inf, "nan": math.nan}
    rebuilt = eval(repr(policy), namespace)
    assert type(rebuilt) is cls and repr(rebuilt) == repr(policy)
    # the same decisions from the same events: parameters and nothing else make a policy
    assert _trajectory(rebuilt, 60, seed=2)[1] == _trajectory(fresh, 60, seed=2)[1]


@pytest.mark.parametrize(("cls", "params"), SELECT_CASES)
def test_state_survives_a_json_round_trip(cls: type[Policy], params: dict | None) -> None:
    policy = cls(**_need_params(params))
    _trajectory(policy, steps=150, seed=3)
    document = json.loads(json.dumps(policy.state_dict()))
    restored = policy.clone()
    restored.load_state_dict(document)
    assert restored.state_dict() == policy.state_dict()
    assert _trajectory(restored, 100, seed=4)[1] == _trajectory(policy, 100, seed=4)[1]


@pytest.mark.parametrize(("cls", "params"), SELECT_CASES)
def test_bad_input_raises_value_error_naming_the_parameter(cls: type[Policy], params: dict | None) -> None:
    params = _need_params(params)
    signature = inspect.signature(cls.__init__).parameters
    checked = 0
    for name, bad_values in BAD_VALUES.items():
        if name not in signature:
            continue
        for bad in bad_values:
            with pytest.raises(ValueError, match=name):
                cls(**{**params, name: bad})
            checked += 1
    assert checked, f"{cls.__name__} has none of the parameters checked here: add its bad values"
    policy = cls(**params)
    _trajectory(policy, steps=20, seed=5)
    before = policy.state_dict()
    wrong_policy = {**before, "policy": "NotAPolicy"}
    with pytest.raises(ValueError, match="NotAPolicy"):
        policy.load_state_dict(wrong_policy)
    wrong_shape = {**before, "stats": DisagreementStats(policy.n_stages + 1, policy.discount).to_dict()}
    with pytest.raises(ValueError, match=r"stages|counts"):
        policy.load_state_dict(wrong_shape)
    assert policy.state_dict() == before, "a rejected document changes nothing"
    depth = policy.select()
    with pytest.raises(ValueError, match="outputs"):
        _update(policy, [0] * (depth + 1), label=0)
    with pytest.raises(ValueError, match="no parameter"):
        policy.clone({"not_a_parameter": 1})


def test_every_exported_policy_is_checked() -> None:
    exported = {getattr(uss_stream.policies, name) for name in uss_stream.policies.__all__}
    exported -= {Policy, SequentialPolicy}  # the abstract bases
    assert exported <= set(POLICIES)
    assert len(CASES) >= len(POLICIES)
    sequential = {case.values[0] for case in SEQUENTIAL_CASES}
    assert {SequentialKLUCB, ConfidenceThreshold, EntropyThreshold, ThresholdBandit} <= sequential
    assert sequential <= set(SEQUENTIAL_REFERENCES), "every sequential policy has a reference rule here"


@pytest.mark.parametrize(("cls", "params"), SELECT_CASES)
def test_supervised_capability_says_who_reads_error_counts(cls: type[Policy], params: dict | None) -> None:
    """``_supervised`` (River's capability flag) is what the replay reads, not the policy's class."""
    policy = cls(**_need_params(params))
    assert isinstance(policy._supervised, bool)
    states, depths = _reached_states(policy)
    rounds, queried, disagreements, errors = (np.array(column) for column in zip(*states))
    if policy._supervised:
        with pytest.raises(ValueError, match="error counts"):
            policy.decide_many(rounds, queried, disagreements, None)
    else:
        scrambled = np.random.default_rng(0).integers(0, 50, errors.shape)
        assert policy.decide_many(rounds, queried, disagreements, None).tolist() == depths
        assert policy.decide_many(rounds, queried, disagreements, scrambled).tolist() == depths


# -- sequential policies (begin/step) ----------------------------------------------------------------


def _sequential_stream(k: int, n: int, seed: int, flip: float) -> tuple[list[list[int]], list[list[Any]]]:
    """``n`` events of a ``k``-stage cascade that says how sure it is: outputs and confidences.

    A third of the events are hard: every stage answers with a confidence in ``[0.5, 0.8)`` and
    stage ``j`` errs with probability ``flip / j``; on the others the confidence is in
    ``[0.95, 1)`` and the errors ten times rarer. Three classes, so two wrong stages may still
    disagree. One confidence in 50 is missing (``None`` or NaN: an abstaining stage) and one in 50
    sits exactly on a cell edge.
    """
    rng = np.random.default_rng(seed)
    outputs, confidences = [], []
    for _ in range(n):
        label = int(rng.integers(0, 3))
        hard = rng.random() < 1 / 3
        row, sure = [], []
        for j in range(1, k + 1):
            error = flip / j if hard else flip / (10 * j)
            row.append((label + int(rng.integers(1, 3))) % 3 if rng.random() < error else label)
            special = rng.random()
            if special < 0.01:
                sure.append(None)
            elif special < 0.02:
                sure.append(math.nan)
            elif special < 0.04:
                sure.append(CELL_EDGES[int(rng.integers(len(CELL_EDGES)))])
            else:
                sure.append(float(rng.uniform(0.5, 0.8) if hard else rng.uniform(0.95, 1.0)))
        outputs.append(row)
        confidences.append(sure)
    return outputs, confidences


def _cell(confidence: Any) -> int:
    """The confidence cell by its definition: ``[e_{c-1}, e_c)``; no confidence is cell 0."""
    if confidence is None or confidence != confidence:
        return 0
    return sum(edge <= confidence for edge in CELL_EDGES)


def _bernoulli_kl(p: float, q: float) -> float:
    """``kl(p, q)`` for ``0 <= p < q < 1``."""
    return (p * math.log(p / q) if p > 0 else 0.0) + (1 - p) * math.log((1 - p) / (1 - q))


def _set_test_depths(k: int, beats: Any) -> set[int]:
    """USS-UCB's depth ``min(B^l ∩ B^h ∪ {K})`` from ``beats(i, j)`` (0-based ``i < j``), by the sets.

    ``beats`` may answer ``None`` (too close to call): every depth some resolution gives is returned.
    """
    table = {(i, j): beats(i, j) for j in range(k) for i in range(j)}
    undecided = [pair for pair, outcome in table.items() if outcome is None]
    depths = set()
    for choice in itertools.product((False, True), repeat=len(undecided)):
        outcome = {**table, **dict(zip(undecided, choice))}
        low = {i for i in range(k) if not any(outcome[j, i] for j in range(i))}
        high = {i for i in range(k) if all(outcome[i, j] for j in range(i + 1, k))}
        depths.add(min((low & high) | {k - 1}) + 1)
    return depths


class _SequentialKLUCBReference:
    """:class:`SequentialKLUCB`'s rule, written from its docstring, reading only the learned counts.

    After stage ``s`` (0-based) answered with a confidence: the last stage ends the event; a stage
    before the target is committed; otherwise the context is the bin of the confidence's cell, its
    counts the sums of its cells' counts and ``t`` its events plus one; in the rounds where
    ``floor(explore·ln t)`` steps up (and ``t = 1``) it explores to ``K``; else USS-KL-UCB's set test
    on stages ``s..K`` with costs ``C_j - C_s`` gives the target depth (``s`` itself: stop), kept
    beyond ``s + 1`` only while the context's count of that stage is below ``√t`` (else ``s + 1``,
    whose context decides next). The KL
    test: stage ``i`` beats ``j`` iff ``n_j > 0``, ``gap > p̂`` and ``n_j·kl(p̂, gap) > x`` with
    ``x = α·max(0, ln τ - ln(K'·n_j))``, ``τ`` the (effective) round and ``K' = K - s``.
    """

    def __init__(self, policy: SequentialKLUCB) -> None:
        self.k = policy.n_stages
        self.costs = list(itertools.accumulate(policy.stage_costs))
        self.alpha, self.explore, self.discount = policy.alpha, policy.explore, policy.discount
        self.target = 0
        #: Every kind of decision the states reached must call for.
        self.kinds = ("cost test", "continue", "explore", "last stage") + (
            ("committed",) if self.k > 2 else ()
        )

    def begin(self, policy: SequentialKLUCB) -> bool:
        self.target = 0
        return True

    def check_end(self, policy: SequentialKLUCB, stage: int, kind: str, bin_: int | None) -> None:
        if kind == "cost test":
            assert (policy.reason, policy.stop_context) == ("cost test", (stage + 1, bin_))
        elif kind == "last stage":
            assert policy.reason == "last stage"

    def check_counts(self, policy: SequentialKLUCB, events: list) -> None:
        """The counts the decisions read are the events' counts, by definition."""
        recounted = _recounted_cells(policy.n_stages, events, policy.discount)
        for s, stage_cells in enumerate(policy.context_stats.cells):
            for c, cell in enumerate(stage_cells):
                size = policy.n_stages - s
                expected = recounted.get((s, c), (0, [0] * size, [[0] * size for _ in range(size)]))
                assert (cell.decisions, cell.queried, cell.disagreements) == expected, f"cell ({s}, {c})"

    def step(self, policy: SequentialKLUCB, stage: int, confidence: Any) -> tuple[str, set[int], int | None]:
        """After ``stage``: the kind of decision, the possible targets (``stage``: stop), the bin."""
        contexts = policy.context_stats
        if stage == self.k - 1:
            return "last stage", {stage}, None
        if stage < self.target:
            return "committed", {self.target}, None
        groups = contexts.groups[stage]
        bin_ = groups[_cell(confidence)]
        members = [contexts.cells[stage][c] for c in range(len(groups)) if groups[c] == bin_]
        k = self.k - stage
        n = [sum(cell.queried[j] for cell in members) for j in range(k)]
        d = [[sum(cell.disagreements[i][j] for cell in members) for j in range(k)] for i in range(k)]
        t = sum(cell.decisions for cell in members) + 1
        if t == 1 or math.floor(self.explore * math.log(t)) > math.floor(self.explore * math.log(t - 1)):
            return "explore", {self.k - 1}, bin_
        tau = t if self.discount is None else (1 - self.discount**t) / (1 - self.discount)

        def beats(i: int, j: int) -> bool | None:
            if not n[j] > 0:
                return False
            p_hat = d[i][j] / n[j]
            gap = self.costs[stage + j] - self.costs[stage + i]
            if abs(gap - p_hat) <= 1e-9:
                return None
            if gap < p_hat:
                return False
            if gap >= 1 or tau <= k * n[j]:
                return True  # x = 0 (or U <= 1 <= gap): any gap above p̂ beats
            x = self.alpha * (math.log(tau) - math.log(k * n[j]))
            divergence = n[j] * _bernoulli_kl(p_hat, gap)
            return None if abs(divergence - x) <= 1e-9 * max(1.0, x) else divergence > x

        targets = {stage + depth - 1 for depth in _set_test_depths(k, beats)}
        targets = {j if j <= stage + 1 or n[j - stage] < math.sqrt(t) else stage + 1 for j in targets}
        return ("cost test" if targets == {stage} else "continue"), targets, bin_


def _sure(confidence: Any) -> float | None:
    """A confidence as a number, ``None`` if the stage abstained."""
    return None if confidence is None or confidence != confidence else float(confidence)


class _ThresholdReference:
    """The threshold rules, written from their docstrings.

    Stage ``K`` ends the event; before it, a stage that abstained goes on, and a stage stops iff
    its confidence is at least ``τ`` (:class:`ConfidenceThreshold`; :class:`ThresholdBandit` with
    the arm it plays), or iff the entropy ``-p·ln p - (1-p)·ln(1-p)`` of its confidence ``p`` is
    below ``S`` (:class:`EntropyThreshold` given no probabilities). The bandit's arm: the first
    arm never played, else ``argmax r̄_a + explore·(1 + C_K)·sqrt(2·ln t / n_a)`` (ties: the
    lower threshold), from the plays and reward sums of its state document. Every rule counts the
    events' disagreements; the bandit's arms count plays and sum ``q_d - C_d``.
    """

    kinds = ("threshold", "continue", "last stage")

    def __init__(self, policy: Any) -> None:
        self.policy_class = type(policy)
        self.k = policy.n_stages
        self.costs = list(itertools.accumulate(policy.stage_costs))
        self.threshold = getattr(policy, "threshold", None)
        self.arms = list(getattr(policy, "thresholds", ()))
        self.played: list[int] = []

    def begin(self, policy: Any) -> bool:
        if self.policy_class is not ThresholdBandit:
            return True
        document = policy.state_dict()
        plays, rewards = document["arms"]["plays"], document["arms"]["rewards"]
        if 0 in plays:
            self.threshold = self.arms[plays.index(0)]
            self.played.append(plays.index(0))
            return True
        t = document["stats"]["decisions"] + 1
        width = 1 + self.costs[-1]
        index = [
            r / n + policy.explore * width * math.sqrt(2 * math.log(t) / n) for n, r in zip(plays, rewards)
        ]
        ranked = sorted(index, reverse=True)
        best = index.index(ranked[0])
        self.threshold = self.arms[best]
        self.played.append(best)
        return ranked[0] - ranked[1] > 1e-9  # a near tie is too close to call in floating point

    def step(self, policy: Any, stage: int, confidence: Any) -> tuple[str, set[int], None]:
        if stage == self.k - 1:
            return "last stage", {stage}, None
        p = _sure(confidence)
        if p is None:
            return "continue", {stage + 1}, None
        if self.policy_class is EntropyThreshold:
            entropy = sum(-q * math.log(q) for q in (p, 1 - p) if q > 0)
            stops = entropy < self.threshold
        else:
            stops = p >= self.threshold
        return ("threshold", {stage}, None) if stops else ("continue", {stage + 1}, None)

    def check_end(self, policy: Any, stage: int, kind: str, detail: None) -> None:
        assert policy.reason == kind

    def check_counts(self, policy: Any, events: list) -> None:
        k = self.k
        queried = [sum(len(outputs) > j for outputs, _ in events) for j in range(k)]
        disagreements = [
            [sum(i < j < len(o) and o[i] != o[j] for o, _ in events) for j in range(k)] for i in range(k)
        ]
        stats = policy.stats
        assert (stats.decisions, stats.queried, stats.disagreements) == (len(events), queried, disagreements)
        if self.policy_class is ThresholdBandit:
            plays = [self.played.count(a) for a in range(len(self.arms))]
            rewards = [0.0] * len(self.arms)
            for arm, (outputs, sure) in zip(self.played, events):
                rewards[arm] += (_sure(sure[-1]) or 0.0) - self.costs[len(outputs) - 1]
            arms = policy.state_dict()["arms"]
            assert arms["plays"] == plays
            assert arms["rewards"] == pytest.approx(rewards, abs=1e-9)


#: An independent implementation of each sequential policy's rule.
SEQUENTIAL_REFERENCES: dict[type[Policy], Any] = {
    SequentialKLUCB: _SequentialKLUCBReference,
    ConfidenceThreshold: _ThresholdReference,
    EntropyThreshold: _ThresholdReference,
    ThresholdBandit: _ThresholdReference,
}


def _step_through(
    policy: Any, outputs: list[list[Any]], confidences: list[list[Any]], reference: Any = None
) -> tuple[list, list, Counter]:
    """Decide every event by begin/step, each step checked against the reference on the state it reads.

    Returns the depths, the events as learned (outputs queried, their confidences) and how many
    decisions of each kind the reference made. A decision the reference finds too close to call
    in floating point ends the checks for the rest of its event (counted, not compared).
    """
    if reference is None:
        reference = SEQUENTIAL_REFERENCES[type(policy)](policy)
    depths, events, kinds = [], [], Counter()
    for row, sure in zip(outputs, confidences):
        checking = reference.begin(policy)
        policy.begin()
        if not checking:
            kinds["too close to call"] += 1
        for stage, (output, confidence) in enumerate(zip(row, sure)):
            if checking:
                kind, targets, detail = reference.step(policy, stage, confidence)
            going_on = policy.step(output, confidence)
            if checking and len(targets) > 1:
                kinds["too close to call"] += 1
                checking = False
            elif checking:
                (target,) = targets
                kinds[kind] += 1
                assert going_on == (target > stage), f"event {len(depths)}, stage {stage + 1}: {kind}"
                if not going_on:
                    reference.check_end(policy, stage, kind, detail)
                reference.target = target
            if not going_on:
                depths.append(stage + 1)
                events.append((row[: stage + 1], sure[: stage + 1]))
                break
    return depths, events, kinds


def _recounted_cells(k: int, events: list, discount: float | None) -> dict[tuple[int, int], tuple]:
    """Every cell's counts by their definition, from the events: ``(decisions, n, D)`` per ``(stage, cell)``.

    Cell ``(s, c)`` counts the events whose stage ``s < K`` answered in cell ``c``, over stages
    ``s..K``: ``n_m`` of them queried stage ``s + m``, ``D_ij`` had stages ``s + i`` and ``s + j``
    differ; with a discount every count of the cell is first multiplied by ``γ``.
    """
    gamma = 1 if discount is None else discount
    cells: dict[tuple[int, int], tuple] = {}
    for outputs, sure in events:
        depth = len(outputs)
        for s in range(min(depth, k - 1)):
            size = k - s
            decisions, n, d = cells.get(
                (s, _cell(sure[s])), (0, [0] * size, [[0] * size for _ in range(size)])
            )
            n = [gamma * n[m] + (m < depth - s) for m in range(size)]
            d = [
                [
                    gamma * d[i][j] + (i < j < depth - s and outputs[s + i] != outputs[s + j])
                    for j in range(size)
                ]
                for i in range(size)
            ]
            cells[s, _cell(sure[s])] = (decisions + 1, n, d)
    return cells


@pytest.mark.parametrize(("cls", "params"), SEQUENTIAL_CASES)
def test_sequential_decisions_equal_an_independent_reference_on_reached_states(cls, params) -> None:
    template = cls(**params)
    kinds: Counter = Counter()
    for seed, flip in enumerate((0.05, 0.3, 0.9)):
        policy = template.clone()
        outputs, confidences = _sequential_stream(policy.n_stages, 1_500, seed, flip)
        reference = SEQUENTIAL_REFERENCES[cls](policy)
        depths, events, more = _step_through(policy, outputs, confidences, reference)
        kinds += more
        reference.check_counts(policy, events)
        # the batch entry point (run, which the sequential replay calls) decides as the step loop
        twin = template.clone()
        assert twin.run(np.array(outputs), np.array(confidences, dtype=float)).tolist() == depths
        assert twin.state_dict() == policy.state_dict()
    decided = sum(kinds.values()) - kinds["too close to call"]
    assert kinds["too close to call"] <= 0.01 * decided, kinds
    # the states reached call for every kind of decision the rule makes
    assert min(kinds[kind] for kind in SEQUENTIAL_REFERENCES[cls](template).kinds) > 0, kinds


@pytest.mark.parametrize(("cls", "params"), SEQUENTIAL_CASES)
def test_sequential_clone_and_repr_round_trip(cls, params) -> None:
    policy = cls(**params)
    for name, value in params.items():
        assert getattr(policy, name) == value, f"{name} is stored under its init name"
    outputs, confidences = _sequential_stream(policy.n_stages, 200, seed=1, flip=0.3)
    _step_through(policy, outputs, confidences)
    fresh = policy.clone()
    assert type(fresh) is cls and fresh is not policy
    assert repr(fresh) == repr(policy)
    assert fresh.stats.decisions == 0 and policy.stats.decisions == 200
    namespace = {c.__name__: c for c in POLICIES} | {"inf": math.inf, "nan": math.nan}
    rebuilt = eval(repr(policy), namespace)
    assert type(rebuilt) is cls and repr(rebuilt) == repr(policy)
    outputs, confidences = _sequential_stream(policy.n_stages, 400, seed=2, flip=0.3)
    assert _step_through(rebuilt, outputs, confidences)[0] == _step_through(fresh, outputs, confidences)[0]
    assert rebuilt.state_dict() == fresh.state_dict()
    with pytest.raises(ValueError, match="no parameter"):
        policy.clone({"not_a_parameter": 1})


@pytest.mark.parametrize(("cls", "params"), SEQUENTIAL_CASES)
def test_sequential_state_survives_a_json_round_trip(cls, params) -> None:
    policy = cls(**params)
    outputs, confidences = _sequential_stream(policy.n_stages, 600, seed=3, flip=0.3)
    _step_through(policy, outputs, confidences)
    document = json.loads(json.dumps(policy.state_dict(), allow_nan=False))
    restored = policy.clone()
    restored.load_state_dict(document)
    assert restored.state_dict() == policy.state_dict()
    outputs, confidences = _sequential_stream(policy.n_stages, 400, seed=4, flip=0.3)
    assert _step_through(restored, outputs, confidences)[0] == _step_through(policy, outputs, confidences)[0]
    assert restored.state_dict() == policy.state_dict()


@pytest.mark.parametrize(("cls", "params"), SEQUENTIAL_CASES)
def test_sequential_bad_input_raises_value_error_naming_the_parameter(cls, params) -> None:
    signature = inspect.signature(cls.__init__).parameters
    for name, bad_values in BAD_VALUES.items():
        if name in signature:
            for bad in bad_values:
                with pytest.raises(ValueError, match=name):
                    cls(**{**params, name: bad})
    with pytest.raises(ValueError, match="stage_costs"):
        cls(**{**params, "stage_costs": [0.0]})  # nothing to decide after a single stage
    policy, twin = cls(**params), cls(**params)
    outputs, confidences = _sequential_stream(policy.n_stages, 100, seed=5, flip=0.3)
    _step_through(policy, outputs, confidences)
    _step_through(twin, outputs, confidences)
    before = policy.state_dict()
    with pytest.raises(ValueError, match="NotAPolicy"):
        policy.load_state_dict({**before, "policy": "NotAPolicy"})
    wider = cls(**{**params, "stage_costs": [*params["stage_costs"], 0.1]})
    with pytest.raises(ValueError, match="stages"):
        policy.load_state_dict(wider.state_dict())
    assert policy.state_dict() == before, "a rejected document changes nothing"
    # a bad confidence is refused before anything is counted, at any stage: each event then goes
    # on exactly as the twin's, which never saw one
    outputs, confidences = _sequential_stream(policy.n_stages, 50, seed=6, flip=0.3)
    bad_values = itertools.cycle((1.5, -0.1, math.inf, -math.inf, "high", True, [0.9]))
    for row, sure in zip(outputs, confidences):
        policy.begin()
        twin.begin()
        for output, confidence in zip(row, sure):
            with pytest.raises(ValueError, match="confidence"):
                policy.step(output, next(bad_values))
            going_on = policy.step(output, confidence)
            assert going_on == twin.step(output, confidence)
            if not going_on:
                break
    assert policy.state_dict() == twin.state_dict() != before
    with pytest.raises(ValueError, match="confidences"):
        policy.run(np.zeros((3, policy.n_stages)))
    with pytest.raises(ValueError, match="outputs and confidences"):
        policy.run(np.zeros((3, policy.n_stages)), np.zeros((3, policy.n_stages + 1)))
    assert policy.state_dict() == twin.state_dict()
    # the depth-first protocol is refused by name, not half-served
    for call in (policy.select, lambda: policy.update([0]), lambda: policy.decide_many([1], [[1]], [[[0]]])):
        with pytest.raises(TypeError, match="sequential"):
            call()
