"""Counter-based random numbers: the uniform of a (stream, round, pair) is a pure function of them.

A randomised policy (:class:`~uss_stream.policies.USSTS`) must make the same decision in the
streaming loop and in the replay engine, which evaluates many speculated states at once and in
any order. So its randomness is not drawn from a stateful generator but *computed*: with
SplitMix64 (Steele, Lea, Flood, OOPSLA 2014), whose ``n``-th output from state ``s`` is
``mix64(s + n·γ)`` (``γ = 0x9E3779B97F4A7C15``, arithmetic modulo ``2**64``),

* a stream key ``k`` (64 bits) identifies one run of a policy,
* round ``t`` of that run has the seed ``h_t = mix64(k + t·γ)`` (the ``t``-th output from ``k``),
* the uniform of pair index ``p`` in round ``t`` is the ``(p+1)``-th output from ``h_t``,
  ``mix64(h_t + (p+1)·γ)``, whose top 52 bits ``m`` give ``u = (m + 0.5)·2**-52`` in ``(0, 1)``.

Keys come from a seed: ``seed_key(s) = mix64(s mod 2**64)``; repetition ``r`` of a replay uses
``repetition_key(root, r) = mix64(root + (r+1)·γ)``. The scalar functions use Python integers,
the ``*_many`` functions ``uint64`` arrays; both give identical results (tested), and ``u`` is
exact in both (a 52-bit integer plus one half, times a power of two).

>>> u = pair_uniform(round_seed(seed_key(7), 3), 0)
>>> u == float(pair_uniform_many(round_seed_many(np.array([seed_key(7)], dtype=np.uint64),
...                                              np.array([3])), np.array([0]))[0])
True
>>> 0.0 < u < 1.0
True

"""

from __future__ import annotations

import numpy as np

__all__ = [
    "GOLDEN_GAMMA",
    "mix64",
    "mix64_many",
    "pair_uniform",
    "pair_uniform_many",
    "repetition_key",
    "round_seed",
    "round_seed_many",
    "seed_key",
]

MASK = (1 << 64) - 1
#: SplitMix64's increment, the odd integer closest to ``2**64 / φ``.
GOLDEN_GAMMA = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_UNIT = 2.0**-52


def mix64(z: int) -> int:
    """SplitMix64's output function (Stafford's "Mix13") on a 64-bit integer.

    >>> hex(mix64(GOLDEN_GAMMA))  # the first output of SplitMix64 seeded with 0
    '0xe220a8397b1dcdaf'

    """
    z = ((z ^ (z >> 30)) * _M1) & MASK
    z = ((z ^ (z >> 27)) * _M2) & MASK
    return z ^ (z >> 31)


def mix64_many(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` on a ``uint64`` array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


def seed_key(seed: int) -> int:
    """The stream key of an integer seed (any sign or size; reduced modulo ``2**64``)."""
    return mix64(seed & MASK)


def repetition_key(root: int, repetition: int) -> int:
    """The key of repetition ``r >= 0`` of a replay whose policy has the root key ``root``."""
    return mix64((root + (repetition + 1) * GOLDEN_GAMMA) & MASK)


def round_seed(key: int, t: int) -> int:
    """``h_t``: the seed of round ``t`` of the stream ``key``."""
    return mix64((key + t * GOLDEN_GAMMA) & MASK)


def round_seed_many(keys: np.ndarray, rounds: np.ndarray) -> np.ndarray:
    """:func:`round_seed` for ``uint64`` keys and integer rounds (broadcast)."""
    return mix64_many(keys + rounds.astype(np.uint64) * np.uint64(GOLDEN_GAMMA))


def pair_uniform(seed: int, pair: int) -> float:
    """The uniform in ``(0, 1)`` of pair index ``pair`` in the round with seed ``seed``."""
    z = (seed + (pair + 1) * GOLDEN_GAMMA) & MASK  # mix64 inlined: this runs once per pair and event
    z = ((z ^ (z >> 30)) * _M1) & MASK
    z = ((z ^ (z >> 27)) * _M2) & MASK
    return (((z ^ (z >> 31)) >> 12) + 0.5) * _UNIT


def pair_uniform_many(seeds: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """:func:`pair_uniform` for ``uint64`` round seeds and pair indices (broadcast)."""
    bits = mix64_many(seeds + (pairs.astype(np.uint64) + np.uint64(1)) * np.uint64(GOLDEN_GAMMA))
    return ((bits >> np.uint64(12)).astype(np.float64) + 0.5) * _UNIT
