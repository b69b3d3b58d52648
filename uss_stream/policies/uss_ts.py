"""USS-TS: Thompson sampling for unsupervised sequential selection (Verma, Hanawal, Hemachandra, 2020)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from uss_stream.core.validation import plain_number
from uss_stream.policies.base import CountStates, Policy
from uss_stream.rules.counter_rng import (
    pair_uniform,
    pair_uniform_many,
    repetition_key,
    round_seed,
    round_seed_many,
    seed_key,
)
from uss_stream.rules.selection_rule import pair_index, select_depth_by, select_depth_many_by

__all__ = ["USSTS"]


_SPECIAL: list[Any] = []


def _special() -> Any:
    """``scipy.special``, imported on first use (it costs ~0.15 s; ``uss_stream.policies`` stays light)."""
    if not _SPECIAL:
        from scipy import special

        _SPECIAL.append(special)
    return _SPECIAL[0]


class USSTS(Policy):
    """Thompson sampling on the disagreement rates, with counter-based randomness.

    In round ``t``, for ``i = 1, 2, ...``: draw ``p̃_ij ~ Beta(1 + D_ij, 1 + n_j - D_ij)`` for every
    deeper ``j > i`` and stop at the first ``i`` with ``C_j - C_i > p̃_ij`` for all ``j > i`` (depth
    ``K`` if none). Then the counts of all queried pairs are updated, as in USS-UCB. There is no
    ``B^l`` test (the ACML 2020 algorithm).

    **Randomness.** The draw of pair ``(i, j)`` in round ``t`` is the inverse-CDF transform
    ``p̃_ij = I⁻¹(1 + D_ij, 1 + n_j - D_ij; u)`` (``I`` the regularised incomplete beta function) of
    the counter-based uniform ``u`` of (stream key, ``t``, pair index ``j(j-1)/2 + i``)
    (:mod:`~uss_stream.rules.counter_rng`). The decision therefore is a function of the seed,
    ``t`` and the counts, and the streaming loop and the vectorised replay agree to the bit. The
    comparison ``C_j - C_i > p̃_ij`` is evaluated as ``I(a, b; C_j - C_i) > u``, which is the same
    event (``I`` is increasing) and needs no inverse; :meth:`samples` returns the ``p̃_ij``
    themselves.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``.
    seed
        Integer seed of the random stream; ``None`` draws one from the operating system. The seed,
        like USS-UCB's ``alpha``, is a parameter and not part of the saved state: restore into a
        policy with the same seed to continue the same stream. A replay's repetition ``r`` uses
        the stream of :meth:`for_repetition` ``(r)`` (repetition 0 is this policy's own stream).
    discount
        ``None`` or ``0 < γ < 1``: sample from the discounted counts (discounted Thompson
        sampling; :mod:`uss_stream.core.forgetting`).

    Examples
    --------
    The stream of :class:`~uss_stream.policies.USSUCB`'s example (USS-UCB: ``[1922, 0, 78]``):

    >>> import numpy as np
    >>> from uss_stream.policies import USSTS
    >>> rng = np.random.default_rng(42)
    >>> truth = rng.integers(0, 2, size=2000)
    >>> outputs = np.stack([truth ^ (rng.random(2000) < 0.1), truth, truth], axis=1)
    >>> policy = USSTS(stage_costs=[0.0, 0.3, 0.2], seed=0)
    >>> np.bincount(policy.run(outputs), minlength=4)[1:].tolist()
    [1940, 48, 12]
    >>> USSTS(stage_costs=[0.0, 0.3, 0.2], seed=0).run(outputs).tolist() == policy.for_repetition(0).run(
    ...     outputs).tolist()
    True

    """

    def __init__(
        self, stage_costs: Sequence[float], seed: int | None = None, discount: float | None = None
    ) -> None:
        super().__init__(stage_costs, discount=discount)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        self.seed = plain_number(seed)
        self._root = secrets.randbits(64) if seed is None else seed_key(int(seed))
        self._key = repetition_key(self._root, 0)
        costs = self._costs
        k = self.n_stages
        self._pairs = [(i, j) for j in range(k) for i in range(j)]
        # Cost gaps clipped to [0, 1]: I(a, b; 0) = 0 never beats u > 0, I(a, b; 1) = 1 always does.
        self._gap = [min(max(costs[j] - costs[i], 0.0), 1.0) for i, j in self._pairs]
        self._gap_array = np.array(self._gap)
        self._columns = (
            np.array([i for i, _ in self._pairs], dtype=np.int64),
            np.array([j for _, j in self._pairs], dtype=np.int64),
        )

    def _decide(self, t: int) -> int:
        betainc = _special().betainc
        seed = round_seed(self._key, t)
        queried = self._stats.queried
        disagreements = self._stats.disagreements
        gap = self._gap

        def beats(i: int, j: int) -> bool:
            pair = pair_index(i, j)
            d = disagreements[i][j]
            return betainc(1.0 + d, 1.0 + queried[j] - d, gap[pair]) > pair_uniform(seed, pair)

        return select_depth_by(self.n_stages, beats, check_lower=False)

    def _decide_many(self, states: CountStates) -> np.ndarray:
        rounds, queried, disagreements, _, streams = states[:5]
        rounds = np.asarray(rounds)
        keys = np.full(rounds.shape, self._key, dtype=np.uint64) if streams is None else streams
        uniforms = pair_uniform_many(round_seed_many(keys, rounds)[:, None], np.arange(len(self._pairs)))
        upper_i, upper_j = self._columns
        d = np.asarray(disagreements, dtype=np.float64)[:, upper_i, upper_j]
        n = np.asarray(queried, dtype=np.float64)[:, upper_j]
        posterior = _special().betainc(1.0 + d, 1.0 + n - d, self._gap_array)
        return select_depth_many_by(posterior > uniforms, self.n_stages, check_lower=False)

    def samples(self) -> np.ndarray:
        """The ``K x K`` draws ``p̃_ij`` (``i < j``, else 0) that the next :meth:`select` compares.

        >>> policy = USSTS(stage_costs=[0.0, 0.3], seed=0)
        >>> from uss_stream.rules.counter_rng import pair_uniform, repetition_key, round_seed, seed_key
        >>> u = pair_uniform(round_seed(repetition_key(seed_key(0), 0), 1), 0)
        >>> bool(policy.samples()[0, 1] == u)   # Beta(1, 1) is uniform: p̃ = u
        True

        """
        betaincinv = _special().betaincinv
        seed = round_seed(self._key, self._stats.decisions + 1)
        queried = self._stats.queried
        disagreements = self._stats.disagreements
        draws = np.zeros((self.n_stages, self.n_stages))
        for pair, (i, j) in enumerate(self._pairs):
            d = disagreements[i][j]
            draws[i, j] = betaincinv(1.0 + d, 1.0 + queried[j] - d, pair_uniform(seed, pair))
        return draws

    def stream_keys(self, reps: int) -> np.ndarray:
        return np.array([repetition_key(self._root, r) for r in range(reps)], dtype=np.uint64)

    def for_repetition(self, repetition: int) -> USSTS:
        if isinstance(repetition, bool) or not isinstance(repetition, (int, np.integer)) or repetition < 0:
            raise ValueError(f"repetition must be an integer >= 0, got {repetition!r}")
        fresh = self.clone()
        fresh._root = self._root
        fresh._key = repetition_key(self._root, int(repetition))
        return fresh

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3], "seed": 0}
        yield {"stage_costs": [0.0, 0.5], "seed": 7, "discount": 0.99}
