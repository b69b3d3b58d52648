"""Replay of keyed logs: one learner per key against one learner for all keys, with regret per key.

A *keyed log* is a log (``N x K`` stage outputs, ``N`` labels) whose rows carry a key (a device, a
site). Each repetition plays ``horizon`` rows (:func:`~uss_stream.replay.log.sample_rows`: in log
order by default, since a keyed log's order says when its keys appear) through each policy: a
plain :class:`~uss_stream.policies.Policy` is **one learner for all keys**, a
:class:`~uss_stream.policies.KeyedPolicy` keeps one learner per key. The pseudo-regret of an event
of key ``k`` queried to depth ``d`` is measured against **the key's own best fixed depth**:
``Δ_kd = C_d + γ_kd - min_j (C_j + γ_kj)``, with ``γ_kj`` the error rate of stage ``j`` on the
key's rows of the log (or given). :func:`keyed_policies` builds the usual comparison: keyed (the
pool prior), one learner, and independent learners per key (no prior).

Examples
--------
Two sites; on "south" stage 1 is unreliable, so its best depth is 2 while "north"'s is 1:

>>> import numpy as np
>>> from uss_stream.policies import USSKLUCB
>>> rng = np.random.default_rng(0)
>>> keys = rng.choice(["north", "south"], size=6000, p=[0.7, 0.3])
>>> labels = rng.integers(0, 2, size=6000)
>>> first = labels ^ (rng.random(6000) < np.where(keys == "north", 0.03, 0.35))
>>> outputs = np.stack([first, labels ^ (rng.random(6000) < 0.02)], axis=1)
>>> result = replay_keyed(outputs, keys, labels, policies=keyed_policies(USSKLUCB([0.0, 0.1])))
>>> result.summary()[["policy", "regret_mean"]].round(1)
        policy  regret_mean
0        keyed         42.5
1  one learner        288.4
2  independent         44.2
>>> result.key_summary()[["key", "events", "best_depth"]]
     key  events  best_depth
0  north  4206.0           1
1  south  1794.0           2

"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from uss_stream.policies.base import Policy
from uss_stream.policies.kernel import speculate
from uss_stream.policies.keyed import KeyedPolicy
from uss_stream.policies.keyed_store import as_key
from uss_stream.replay.engine import pair_indicators
from uss_stream.replay.log import check_column_kinds, encode_log, sample_rows
from uss_stream.replay.result import Z_95

__all__ = ["KEYED", "ONE_LEARNER", "INDEPENDENT", "KeyedReplayResult", "keyed_policies", "replay_keyed"]

KEYED = "keyed"
ONE_LEARNER = "one learner"
INDEPENDENT = "independent"
#: Events each keyed policy is given per ``decide_many`` call.
_CHUNK = 8192


def keyed_policies(policy: Policy, **params: Any) -> dict[str, Policy | KeyedPolicy]:
    """The comparison of a keyed replay: ``keyed`` (``KeyedPolicy(policy, **params)``), ``one
    learner`` (``policy`` itself) and ``independent`` (``prior_strength=0``: a learner per key that
    never looks at the pool).

    >>> from uss_stream.policies import USSKLUCB
    >>> list(keyed_policies(USSKLUCB([0.0, 0.1])))
    ['keyed', 'one learner', 'independent']
    """
    independent = {**params, "prior_strength": 0}
    return {
        KEYED: KeyedPolicy(policy, **params),
        ONE_LEARNER: policy,
        INDEPENDENT: KeyedPolicy(policy, **independent),
    }


class KeyedReplayResult:
    """What :func:`replay_keyed` measured.

    Attributes
    ----------
    names
        Policy names, in the order given.
    keys
        The distinct keys, in order of first appearance in the log.
    depths
        ``name -> (reps, horizon)`` depths chosen in each round.
    key_of
        ``(reps, horizon)`` index into :attr:`keys` of each round's key.
    gaps
        ``(n_keys, K)``: ``Δ_kd``, the regret of depth ``d`` on key ``k``'s events.
    horizon, reps, seed, sampling
        The replay's parameters.
    """

    def __init__(
        self,
        *,
        depths: dict[str, np.ndarray],
        keys: list[Any],
        key_of: np.ndarray,
        gaps: np.ndarray,
        horizon: int,
        reps: int,
        seed: Any,
        sampling: str,
    ) -> None:
        self.names = list(depths)
        self.depths = depths
        self.keys = keys
        self.key_of = key_of
        self.gaps = gaps
        self.horizon = horizon
        self.reps = reps
        self.seed = seed
        self.sampling = sampling

    def key_events(self) -> np.ndarray:
        """``(reps, n_keys)`` events of each key in each repetition."""
        return np.stack([np.bincount(row, minlength=len(self.keys)) for row in self.key_of])

    def key_regret(self, name: str) -> np.ndarray:
        """``(reps, n_keys)`` regret of policy ``name`` on each key's events, each repetition."""
        regret = self.gaps[self.key_of, self.depths[name].astype(np.int64) - 1]
        return np.stack(
            [np.bincount(row, weights=r, minlength=len(self.keys)) for row, r in zip(self.key_of, regret)]
        )

    def regret(self, name: str, keys: np.ndarray | None = None) -> np.ndarray:
        """``(reps,)`` total regret of policy ``name``, over all keys or the keys of the mask ``keys``."""
        per_key = self.key_regret(name)
        return per_key.sum(axis=1) if keys is None else per_key[:, keys].sum(axis=1)

    def summary(self) -> pd.DataFrame:
        """One row per policy: mean total regret and its 95% half-width, and the share of each depth."""
        rows = []
        k = self.gaps.shape[1]
        for name in self.names:
            total = self.regret(name)
            shares = np.bincount(self.depths[name].ravel().astype(np.int64), minlength=k + 1)[1:]
            row = {
                "policy": name,
                "regret_mean": float(total.mean()),
                "regret_ci95": float(Z_95 * total.std(ddof=1) / np.sqrt(self.reps))
                if self.reps > 1
                else np.nan,
            }
            row.update({f"depth_{d + 1}": shares[d] / shares.sum() for d in range(k)})
            rows.append(row)
        return pd.DataFrame(rows)

    def key_summary(self) -> pd.DataFrame:
        """One row per key: its mean events per repetition, its best depth, each policy's mean regret
        on its events."""
        frame = pd.DataFrame(
            {
                "key": self.keys,
                "events": self.key_events().mean(axis=0),
                "best_depth": np.argmin(self.gaps + np.arange(self.gaps.shape[1]) * -1e-12, axis=1) + 1,
            }
        )
        for name in self.names:
            frame[f"regret {name}"] = self.key_regret(name).mean(axis=0)
        return frame


def replay_keyed(
    outputs: Any,
    keys: Any,
    labels: Any = None,
    *,
    policies: Mapping[str, Policy | KeyedPolicy],
    horizon: int | None = None,
    reps: int = 1,
    seed: Any = 0,
    sampling: str = "sequential",
    key_error_rates: Mapping[Any, Sequence[float]] | None = None,
) -> KeyedReplayResult:
    """Replay one-learner and keyed policies on a keyed log; see the module docstring.

    Parameters
    ----------
    outputs
        ``N x K`` outputs of all stages, cascade order.
    keys
        ``N`` keys (:func:`~uss_stream.policies.keyed_store.as_key`: integers, also as floats, stay
        integers; anything else is its text).
    labels
        ``N`` true labels: the error rates ``γ_kj`` of each key's rows (unless given).
    policies
        ``name -> policy``: a :class:`~uss_stream.policies.Policy` (one learner for all keys, a
        fresh clone per repetition) or a :class:`~uss_stream.policies.KeyedPolicy` (cloned per
        repetition). Label-free policies that decide a depth up front.
    horizon
        Rounds per repetition (default ``N``).
    reps, seed, sampling
        Repetitions and their rows (:func:`~uss_stream.replay.log.sample_rows`).
    key_error_rates
        ``key -> γ_k1..γ_kK`` for every key, instead of the labels' (e.g. a generator's rates).
    """
    check_column_kinds(outputs)
    codes, label_codes = encode_log(outputs, labels)
    n_rows, n_stages = codes.shape
    key_values, key_index = _keys(keys, n_rows)
    costs = _costs(policies, n_stages)
    gaps = _gaps(codes, label_codes, key_index, key_values, costs, key_error_rates)
    horizon = n_rows if horizon is None else horizon
    rows = sample_rows(n_rows, horizon=horizon, reps=reps, seed=seed, sampling=sampling)
    pairs = pair_indicators(codes)
    depths = {}
    for name, policy in policies.items():
        if isinstance(policy, KeyedPolicy):
            depths[name] = np.stack(
                [_run_keyed(policy.clone(), codes, key_values, key_index, row) for row in rows]
            )
        else:
            runner = policy.clone()
            depths[name] = speculate(runner, rows, pairs, streams=policy.stream_keys(reps)).astype(np.int8)
    return KeyedReplayResult(
        depths=depths,
        keys=key_values,
        key_of=key_index[rows],
        gaps=gaps,
        horizon=horizon,
        reps=reps,
        seed=seed,
        sampling=sampling,
    )


def _run_keyed(
    policy: KeyedPolicy, codes: np.ndarray, key_values: list[Any], key_index: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """The depths ``policy`` chooses on the log's ``rows``, in chunks of :data:`_CHUNK` events."""
    names = [key_values[k] for k in key_index[rows].tolist()]
    depths = np.empty(len(rows), dtype=np.int8)
    for begin in range(0, len(rows), _CHUNK):
        chunk = rows[begin : begin + _CHUNK]
        depths[begin : begin + len(chunk)] = policy.decide_many(
            names[begin : begin + len(chunk)], codes[chunk]
        )
    return depths


def _keys(keys: Any, n_rows: int) -> tuple[list[Any], np.ndarray]:
    """The distinct keys (as a keyed policy takes them), in order of first appearance, and each row's."""
    values = keys.to_numpy() if hasattr(keys, "to_numpy") else np.asarray(keys, dtype=object)
    if values.shape != (n_rows,):
        raise ValueError(f"keys must hold one key per row ({n_rows}), got shape {values.shape}")
    if pd.isna(values).any():
        raise ValueError(f"keys is missing in row(s) {np.flatnonzero(pd.isna(values))[:5].tolist()}")
    codes, uniques = pd.factorize(values)
    distinct = [as_key(value) for value in uniques]
    if len(set(distinct)) != len(distinct):
        raise ValueError("keys: two distinct values give the same key (e.g. True and 'True'); give one kind")
    return distinct, codes.astype(np.int64)


def _costs(policies: Mapping[str, Policy | KeyedPolicy], n_stages: int) -> np.ndarray:
    if not policies:
        raise ValueError("policies must name at least one policy")
    costs = None
    for name, policy in policies.items():
        base = policy.policy if isinstance(policy, KeyedPolicy) else policy
        if not isinstance(base, Policy):
            raise TypeError(f"policy {name!r} must be a Policy or a KeyedPolicy, got {type(policy).__name__}")
        if base.sequential or base.asks_for_labels or base.supervised:
            raise ValueError(
                f"policy {name!r} ({type(base).__name__}) is not label-free with a depth up front"
            )
        if base.n_stages != n_stages:
            raise ValueError(f"policy {name!r} has {base.n_stages} stages, the log {n_stages}")
        mine = np.asarray(base.cumulative_costs)
        if costs is not None and not np.allclose(costs, mine):
            raise ValueError(f"policy {name!r} has other stage costs than the first policy")
        costs = mine
    return costs


def _gaps(
    codes: np.ndarray,
    label_codes: np.ndarray | None,
    key_index: np.ndarray,
    key_values: list[Any],
    costs: np.ndarray,
    given: Mapping[Any, Sequence[float]] | None,
) -> np.ndarray:
    """``(n_keys, K)`` regret of each depth on each key: ``C_d + γ_kd - min_j (C_j + γ_kj)``."""
    n_stages = codes.shape[1]
    if given is not None:
        missing = [key for key in key_values if key not in given]
        if missing:
            raise ValueError(f"key_error_rates has no rates for key(s) {missing[:5]}")
        gamma = np.array([np.asarray(given[key], dtype=float) for key in key_values])
        if gamma.shape != (len(key_values), n_stages):
            raise ValueError(f"key_error_rates must give {n_stages} rates per key")
    elif label_codes is None:
        raise ValueError("the regret needs each key's error rates: give labels or key_error_rates")
    else:
        wrong = codes != label_codes[:, None]
        events = np.bincount(key_index, minlength=len(key_values))
        gamma = (
            np.stack(
                [
                    np.bincount(key_index, weights=wrong[:, j], minlength=len(key_values))
                    for j in range(n_stages)
                ],
                axis=1,
            )
            / events[:, None]
        )
    total = costs[None, :] + gamma
    return total - total.min(axis=1, keepdims=True)
