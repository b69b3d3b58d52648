"""Policies in a chosen state: given counts loaded through the state document, or random valid counts.

A decision rule is checked at a state written by hand or drawn at random; :func:`loaded` puts the
policy there the way a restore would (``load_state_dict``), and :func:`random_counts` draws counts
that a real run could reach: the deeper a stage, the fewer times it was queried, and no pair
disagrees more often than the deeper stage of the pair was queried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

from uss_stream.core.stats import DisagreementStats
from uss_stream.policies.base import Policy

P = TypeVar("P", bound=Policy)


def loaded(policy: P, decisions: int, queried: list[int], disagreements: list[list[int]]) -> P:
    """``policy`` with these counts loaded through its state document; returned for chaining.

    Examples
    --------
    >>> from uss_stream.policies import USSUCB
    >>> policy = loaded(USSUCB([0.0, 0.1]), 5, [5, 3], [[0, 1], [0, 0]])
    >>> policy.stats.decisions, policy.stats.queried, policy.stats.disagreements
    (5, [5, 3], [[0, 1], [0, 0]])
    """
    stats = DisagreementStats(len(queried))
    stats.decisions, stats.queried, stats.disagreements = decisions, queried, disagreements
    policy.load_state_dict({"policy": type(policy).__name__, "stats": stats.to_dict()})
    return policy


def random_counts(
    rng: np.random.Generator, k: int, max_queried: int, disagreements_of: Callable[[int], int]
) -> tuple[list[int], list[list[int]]]:
    """Counts of ``k`` stages: ``queried`` (decreasing, each below ``max_queried``) and ``disagreements``.

    ``disagreements_of(n)`` draws the count of a pair whose deeper stage was queried ``n`` times
    (at most ``n``); pairs are drawn column by column, below the diagonal stays 0.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> queried, disagreements = random_counts(rng, 3, 50, lambda n: n // 2)
    >>> queried == sorted(queried, reverse=True)
    True
    >>> disagreements == [[0, queried[1] // 2, queried[2] // 2], [0, 0, queried[2] // 2], [0, 0, 0]]
    True
    """
    queried = sorted(rng.integers(0, max_queried, size=k).tolist(), reverse=True)
    disagreements = [[0] * k for _ in range(k)]
    for j in range(k):
        for i in range(j):
            disagreements[i][j] = disagreements_of(queried[j])
    return queried, disagreements
