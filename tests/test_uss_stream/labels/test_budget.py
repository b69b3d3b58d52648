"""AuditedUSS's label budget (``_label_budget``): thresholds, scope and request masks, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from uss_stream.labels.budget import LabelBudget, contested_many, request_mask

PAIRS_3 = [(0, 1), (0, 2), (1, 2)]


@pytest.mark.parametrize(
    ("requested", "contradicted", "allowed"),
    [
        (3, False, True),  # 3 < 1·sqrt(16) = 4
        (4, False, False),  # not below 4, and no contradiction
        (4, True, True),  # 4 < 3·4 = 12 once contradicted
        (11, True, True),
        (12, True, False),  # 12 is not below 12
    ],
)
def test_the_budget_is_c_sqrt_t_raised_only_when_contradicted(requested, contradicted, allowed):
    budget = LabelBudget(1.0, 3.0)
    budget.requested = requested
    assert budget.allowed(16, contradicted) is allowed


def test_an_explicit_raised_budget_and_the_vectorised_thresholds():
    budget = LabelBudget(2.0, 5.0)
    # t = 25: sqrt 5, so 10 labels without a contradiction and 25 with one.
    assert budget.many(np.array([25, 25]), np.array([False, True])).tolist() == [10.0, 25.0]
    contradicted = np.array([False, True])
    assert budget.thresholds_many(np.array([25, 100]), contradicted).tolist() == [[10.0, 10.0], [20.0, 50.0]]


@pytest.mark.parametrize(
    ("requested", "allowed"),
    [(13, True), (14, False)],  # 13 < 10 + 1·sqrt(16) = 14; 14 is not below 14
)
def test_the_allotment_adds_to_every_threshold_and_no_raise_by_default(requested, allowed):
    budget = LabelBudget(1.0, allotment=10.0)
    budget.requested = requested
    assert budget.allowed(16, False) is allowed and budget.allowed(16, True) is allowed
    assert budget.thresholds_many(np.array([16]), np.array([True])).tolist() == [[14.0, 14.0]]


def test_invalid_budgets_are_rejected():
    with pytest.raises(ValueError, match="label_budget"):
        LabelBudget(0.0)
    with pytest.raises(ValueError, match="contradicted_budget"):
        LabelBudget(2.0, 1.0)
    with pytest.raises(ValueError, match="label_allotment"):
        LabelBudget(2.0, allotment=-1.0)


def test_withdraw_takes_back_one_request_and_never_goes_below_zero():
    budget = LabelBudget(1.0)
    budget.requested = 1
    budget.withdraw()
    assert budget.requested == 0
    with pytest.raises(RuntimeError):
        budget.withdraw()


class _Relations:
    """A hand-set stand-in for one round's relations."""

    def __init__(self, plausible=(), open_pairs=(), audited=(), decisive=()):
        self._plausible = set(plausible)
        self._open = set(open_pairs)
        self._audited = set(audited)
        self.decisive_pairs = list(decisive)
        self.contradicted = bool(decisive)

    def plausible(self, i):
        return i in self._plausible

    def open(self, i, j):
        return (i, j) in self._open

    def audit(self, i, j):
        return (i, j) in self._audited


def test_the_mask_names_the_disagreeing_open_or_audited_pairs_of_plausible_stages():
    relations = _Relations(plausible={0, 1}, open_pairs={(0, 1)}, audited={(1, 2)})
    # Outputs a, b, a: pairs (0,1) and (1,2) disagree, (0,2) agrees.
    assert request_mask(["a", "b", "a"], relations, None) == 0b101
    assert request_mask(["a", "b", "a"], relations, {1}) == 0b100  # only stage 2's pairs in scope
    assert request_mask(["a", "b", "b"], relations, None) == 0b001  # (1,2) agrees now


def test_beyond_the_base_budget_only_contested_stages_are_asked_about():
    relations = _Relations(plausible={0, 1}, open_pairs={(0, 1), (0, 2)}, audited={(1, 2)}, decisive=[(1, 2)])
    budget = LabelBudget(1.0, 3.0)
    budget.requested = 4  # t = 16: base 4 reached, raised 12 not
    assert budget.request(16, ["a", "b", "c"], relations) == 0b100
    assert budget.requested == 5
    budget.requested = 12
    assert budget.request(16, ["a", "b", "c"], relations) == 0
    assert budget.requested == 12


def test_contested_stages_are_the_shallower_stages_of_decisive_pairs():
    decisive = np.array([[False, False, False], [True, False, True], [False, True, False]])
    expected = [[False, False, False], [True, True, False], [True, False, False]]
    assert contested_many(decisive, PAIRS_3, 3).tolist() == expected


def test_the_vectorised_scope_matches_the_streaming_rule():
    budget = LabelBudget(1.0, 3.0)
    rounds = np.array([16, 16, 16])
    requested = np.array([3, 4, 12])  # below base; between base and raised; at raised
    decisive = np.array([[False, False, True]] * 3)
    contested = contested_many(decisive, PAIRS_3, 3)
    scope = budget.scope_many(rounds, requested, decisive.any(axis=1), contested)
    assert scope.tolist() == [[True, True, True], [False, True, False], [False, False, False]]
