"""Replay with per-stage confidences: sequential policies, stopping rules in hindsight, regret.

A *confidence log* is the ``N x K`` outputs of all stages, their ``N x K`` confidences (the top
class probability of each stage) and, for the comparators, the ``N`` labels; as a table, one column
per stage, one ``<stage>_confidence`` column per stage and a label column
(:func:`split_confidence_log`). Under cumulative
costs ``C_1..C_K`` an event answered at depth ``d`` scores ``v_d = C_d + 1[Y_d != Y]`` (the paper's
objective per event: cost plus error). The comparators, all computed from labels in hindsight:

* the best *fixed* depth (:func:`best_fixed_depth`, the paper's optimum),
* the best *context-dependent stopping rule* (:func:`best_stopping_rule`): a table that says, for
  every stage ``s < K`` and every quantile bin of that stage's confidence on the log, stop or
  continue; found by exhaustive search (rows with the same bin pattern share a depth, so each rule
  is scored on ``n_bins^(K-1)`` patterns, not on ``N`` rows),
* the *threshold cascade* (:func:`threshold_frontier`): stop at the first stage whose confidence
  reaches its threshold; every combination of quantile thresholds is scored, giving the
  cost/error frontier a label-free policy is compared with at equal error.

:func:`replay_sequential` runs policies on rows drawn from the log, as :func:`uss_stream.replay.engine.replay`
does: fixed-depth policies through the same vectorised engine
(:func:`uss_stream.policies.kernel.speculate`), sequential ones (``policy.sequential``) event by event on each
repetition's rows, with the repetition's random stream (``for_repetition``). The regret of a round
is ``v_{d_t}(row_t)`` minus the comparator's ``v`` on the same row, against the best fixed depth and
against the best stopping rule of the whole log.

Examples
--------
>>> import numpy as np
>>> from uss_stream.policies import SequentialKLUCB, USSKLUCB
>>> from uss_stream.replay.sequential import replay_sequential
>>> rng = np.random.default_rng(0)
>>> truth = rng.integers(0, 2, 2000)
>>> unsure = rng.random(2000) < 0.3
>>> stage1 = np.where(unsure & (rng.random(2000) < 0.4), 1 - truth, truth)
>>> outputs = np.stack([stage1, truth], axis=1)
>>> confidences = np.stack([np.where(unsure, 0.6, 0.99), np.full(2000, 0.95)], axis=1)
>>> costs = [0.0, 0.2]
>>> result = replay_sequential(outputs, confidences, truth, stage_costs=costs, horizon=3000, reps=4,
...                            policies={"sequential": SequentialKLUCB(costs, n_bins=2),
...                                      "USS-KL-UCB": USSKLUCB(costs)}, n_bins=2)
>>> # stage 1 is wrong on 12% of the events, all unsure: stopping costs 0.12, continuing on the
>>> # unsure 30% costs 0.3 · 0.2 = 0.06 (on this sample: 0.115 and 0.062)
>>> result.best_fixed_depth, [round(v, 3) for v in (result.best_fixed_value, result.best_rule_value)]
(1, [0.115, 0.062])
>>> result.summary()[["policy", "objective", "regret_rule", "depth_1"]].round(3)
       policy  objective  regret_rule  depth_1
0  sequential      0.065         8.80    0.692
1  USS-KL-UCB      0.120       172.65    0.964

"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from uss_stream.core.instances import Instance
from uss_stream.core.validation import check_stage_costs
from uss_stream.policies.base import Policy
from uss_stream.policies.kernel import speculate
from uss_stream.replay.engine import encode_log, pair_indicators, sample_rows

__all__ = [
    "SequentialReplayResult",
    "best_fixed_depth",
    "best_history_rule",
    "best_stopping_rule",
    "confidence_bins",
    "context_wd",
    "headroom",
    "replay_sequential",
    "split_confidence_log",
    "rule_depths",
    "stage_values",
    "threshold_depths",
    "threshold_frontier",
]

_MAX_RULES = 1 << 16


CONFIDENCE_SUFFIX = "_confidence"


def split_confidence_log(
    frame: pd.DataFrame, label: str | None = "label", suffix: str = CONFIDENCE_SUFFIX
) -> tuple[pd.DataFrame, np.ndarray, pd.Series | None]:
    """Split a confidence log into outputs, confidences and labels by its column names.

    Every column ``<stage>`` with a partner ``<stage><suffix>`` is a stage (in the frame's column
    order), the partner its confidence; ``label`` names the label column (``None``: no labels). A
    confidence column without its stage, or a stage output without a confidence, is an error.

    >>> log = pd.DataFrame({"cheap": [1, 0], "cheap_confidence": [0.9, 0.6],
    ...                     "deep": [1, 1], "deep_confidence": [0.8, 0.99], "label": [1, 1]})
    >>> outputs, confidences, labels = split_confidence_log(log)
    >>> list(outputs.columns), confidences.tolist(), labels.tolist()
    (['cheap', 'deep'], [[0.9, 0.8], [0.6, 0.99]], [1, 1])

    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    columns = [str(c) for c in frame.columns]
    if label is not None and label not in columns:
        raise ValueError(f"label: the log has no column {label!r} (columns: {columns})")
    confidence_columns = [c for c in columns if c.endswith(suffix)]
    stages = [c for c in columns if c != label and not c.endswith(suffix)]
    orphans = [c for c in confidence_columns if c[: -len(suffix)] not in stages]
    if orphans:
        raise ValueError(f"confidence column(s) {orphans} have no stage column of the same name")
    missing = [c for c in stages if c + suffix not in confidence_columns]
    if missing:
        raise ValueError(
            f"stage column(s) {missing} have no confidence column (expected {missing[0]}{suffix})"
        )
    if len(stages) < 2:
        raise ValueError(f"a confidence log needs at least 2 stages, found {stages}")
    confidences = frame[[c + suffix for c in stages]].to_numpy(dtype=float)
    return frame[stages], confidences, (None if label is None else frame[label])


def stage_values(codes: np.ndarray, label_codes: np.ndarray, cumulative_costs: Sequence[float]) -> np.ndarray:
    """``N x K`` per-event objective ``v_d = C_d + 1[Y_d != Y]`` of answering at each depth.

    >>> stage_values(np.array([[0, 1]]), np.array([1]), [0.0, 0.25]).tolist()
    [[1.0, 0.25]]

    """
    return np.asarray(cumulative_costs, dtype=float)[None, :] + (codes != label_codes[:, None])


def confidence_bins(confidences: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Quantile bins of each of stages ``1..K-1``'s confidences on the log.

    Returns the ``N x (K-1)`` bin of each row and stage, and the ``(K-1) x (n_bins - 1)`` inner edges
    (bin ``b`` holds confidences in ``[e_{b-1}, e_b)``). Missing confidences (NaN) fall in bin 0.

    >>> bins, edges = confidence_bins(np.array([[0.1, 0], [0.2, 0], [0.3, 0], [0.4, 0]]), 2)
    >>> bins[:, 0].tolist(), edges.tolist()
    ([0, 0, 1, 1], [[0.25]])

    """
    conf = np.nan_to_num(np.asarray(confidences, dtype=float)[:, :-1], nan=0.0)
    levels = np.arange(1, n_bins) / n_bins
    edges = np.quantile(conf, levels, axis=0).T.reshape(conf.shape[1], n_bins - 1)
    bins = np.stack(
        [np.searchsorted(edges[s], conf[:, s], side="right") for s in range(conf.shape[1])], axis=1
    )
    return bins.astype(np.int64), edges


def rule_depths(bins: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Depths of a stopping rule: ``table[s, b]`` says whether to continue after stage ``s`` in bin ``b``.

    >>> rule_depths(np.array([[0, 1], [1, 0], [1, 1]]), np.array([[True, False], [False, True]])).tolist()
    [3, 1, 1]

    """
    n_rows, n_decisions = bins.shape
    depth = np.ones(n_rows, dtype=np.int64)
    for s in range(n_decisions):
        depth += (depth == s + 1) & table[s, bins[:, s]]
    return depth


def best_fixed_depth(values: np.ndarray) -> tuple[int, float]:
    """The depth with the least mean ``v_d`` on the rows and that mean (the first one on ties)."""
    means = values.mean(axis=0)
    depth = int(np.argmin(means))
    return depth + 1, float(means[depth])


def best_stopping_rule(values: np.ndarray, bins: np.ndarray, n_bins: int) -> tuple[np.ndarray, float]:
    """The stopping rule (``(K-1) x n_bins`` continue table) with the least mean ``v``, by exhaustive search.

    >>> values = np.array([[1.0, 0.2], [0.0, 0.2]])   # row 0: stage 1 wrong; row 1: right
    >>> best_stopping_rule(values, np.array([[0], [1]]), 2)
    (array([[ True, False]]), 0.1)

    """
    n_rows, n_decisions = bins.shape
    n_rules = 1 << (n_decisions * n_bins)
    if n_rules > _MAX_RULES:
        raise ValueError(
            f"n_bins: {n_bins} bins over {n_decisions} decision stages give {n_rules} rules, "
            f"more than the {_MAX_RULES} an exhaustive search scores"
        )
    patterns, inverse = np.unique(bins, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    sums = np.zeros((len(patterns), values.shape[1]))
    np.add.at(sums, inverse, values)
    rules = np.arange(n_rules, dtype=np.int64)
    depth = np.ones((n_rules, len(patterns)), dtype=np.int64)
    for s in range(n_decisions):
        bit = s * n_bins + patterns[:, s]
        goes = ((rules[:, None] >> bit[None, :]) & 1).astype(bool)
        depth += (depth == s + 1) & goes
    totals = np.take_along_axis(np.broadcast_to(sums, (n_rules, *sums.shape)), depth[..., None] - 1, axis=2)
    scores = totals[..., 0].sum(axis=1)
    best = int(np.argmin(scores))
    table = ((best >> np.arange(n_decisions * n_bins)) & 1).astype(bool).reshape(n_decisions, n_bins)
    return table, float(scores[best] / n_rows)


def best_history_rule(values: np.ndarray, codes: np.ndarray, confidences: np.ndarray, n_bins: int) -> float:
    """Mean ``v`` of the best stopping rule that may look at everything the queried stages said.

    After stage ``s`` the rule's context is the confidence bin (:func:`confidence_bins`) of every
    stage ``1..s`` and which of their outputs are equal: the richest context a policy deciding on
    bins has. The contexts of stage ``s + 1`` refine those of stage ``s``, so the best rule is
    found exactly from the last decision backwards (a context stops where stopping costs less, in
    sum over its rows, than the best continuations of its sub-contexts), not by search. With many
    bins it fits the labels of small contexts: an upper reference, more generous than
    :func:`best_stopping_rule` on the same bins.

    >>> values = np.array([[1.0, 0.2], [0.0, 0.2]])   # row 0: stage 1 wrong; row 1: right
    >>> float(best_history_rule(values, np.array([[0, 1], [1, 1]]), np.array([[0.6, 1.0], [0.9, 1.0]]), 2))
    0.1

    """
    n_rows, n_stages = values.shape
    bins, _ = confidence_bins(confidences, n_bins)
    codes = np.asarray(codes)
    columns: list[np.ndarray] = []
    keys = []
    for s in range(n_stages - 1):
        columns += [bins[:, s], *((codes[:, j] == codes[:, s]).astype(np.int64) for j in range(s))]
        keys.append(np.column_stack(columns))
    # Per row, its share of the best total of its context at the next stage (the last: v_K).
    onward = np.asarray(values[:, -1], dtype=float)
    for s in reversed(range(n_stages - 1)):
        _, group = np.unique(keys[s], axis=0, return_inverse=True)
        group = group.ravel()
        best = np.minimum(np.bincount(group, weights=values[:, s]), np.bincount(group, weights=onward))
        onward = (best / np.bincount(group))[group]
    return float(onward.sum() / n_rows)


def threshold_depths(confidences: np.ndarray, thresholds: Sequence[float]) -> np.ndarray:
    """Depths of a threshold cascade: stop at the first stage ``s < K`` with confidence ``>= τ_s``.

    >>> threshold_depths(np.array([[0.9, 0.5, 0.7], [0.6, 0.8, 0.7], [0.6, 0.5, 0.7]]), [0.8, 0.8]).tolist()
    [1, 2, 3]

    """
    conf = np.nan_to_num(np.asarray(confidences, dtype=float), nan=0.0)
    depth = np.ones(len(conf), dtype=np.int64)
    for s, tau in enumerate(thresholds):
        depth += (depth == s + 1) & (conf[:, s] < tau)
    return depth


def threshold_frontier(
    values: np.ndarray, costs: Sequence[float], confidences: np.ndarray, n_levels: int = 20
) -> pd.DataFrame:
    """Mean cost, error rate and objective of every threshold cascade on a quantile grid.

    Each stage ``s < K`` gets the thresholds ``0`` (always stop), its confidences' quantiles at
    ``1/n_levels, ..., (n_levels-1)/n_levels`` and ``inf`` (never stop); every combination is scored.
    """
    conf = np.nan_to_num(np.asarray(confidences, dtype=float), nan=0.0)
    n_stages = values.shape[1]
    grids = [
        np.unique(
            np.concatenate([[0.0], np.quantile(conf[:, s], np.arange(1, n_levels) / n_levels), [np.inf]])
        )
        for s in range(n_stages - 1)
    ]
    mesh = np.array(np.meshgrid(*grids, indexing="ij")).reshape(n_stages - 1, -1).T
    cumulative = np.asarray(costs, dtype=float)
    wrong = values - cumulative[None, :]
    rows = []
    for thresholds in mesh:
        depth = threshold_depths(conf, thresholds)
        picked = np.arange(len(depth)), depth - 1
        rows.append((*thresholds, cumulative[depth - 1].mean(), wrong[picked].mean(), values[picked].mean()))
    columns = [f"tau_{s + 1}" for s in range(n_stages - 1)] + ["cost", "error", "objective"]
    return pd.DataFrame(rows, columns=columns)


def headroom(
    codes: np.ndarray,
    label_codes: np.ndarray,
    confidences: np.ndarray,
    cumulative_costs: Sequence[float],
    n_bins: int = 4,
) -> dict[str, float]:
    """How much deciding stage by stage can gain on a labelled log, before any policy runs.

    The objectives (mean ``v``) of the best fixed depth and of three stopping references, all
    chosen with the labels of the very rows they are scored on: the best threshold cascade
    (:func:`threshold_frontier`), the best stopping rule on ``n_bins`` confidence bins
    (:func:`best_stopping_rule`) and the best rule on every bin and agreement seen so far
    (:func:`best_history_rule`). ``ratio`` is the best reference's objective over the best fixed
    depth's: about the least a policy deciding on these confidences could reach, relative to the
    best fixed-depth policy. Near 1, a cascade has nothing to gain from stopping per event at these
    costs, and a fixed-depth policy (:class:`~uss_stream.policies.USSKLUCB`) is the simpler choice.

    Examples
    --------
    Stage 1 is right where it is sure (0.9) and wrong where it is not (0.6); stage 2 costs 0.1 and
    is always right. Stopping where stage 1 is sure halves the best fixed depth's objective:

    >>> codes = np.array([[0, 0], [1, 1], [0, 1], [1, 0]])
    >>> confidences = np.array([[0.9, 1.0], [0.9, 1.0], [0.6, 1.0], [0.6, 1.0]])
    >>> gain = headroom(codes, np.array([0, 1, 1, 0]), confidences, [0.0, 0.1], n_bins=2)
    >>> {name: round(value, 3) for name, value in gain.items()}
    {'fixed_depth': 2, 'fixed': 0.1, 'threshold': 0.05, 'rule': 0.05, 'history': 0.05, 'ratio': 0.5}

    """
    values = stage_values(codes, label_codes, cumulative_costs)
    depth, fixed = best_fixed_depth(values)
    threshold = float(threshold_frontier(values, cumulative_costs, confidences)["objective"].min())
    bins, _ = confidence_bins(confidences, n_bins)
    _, rule = best_stopping_rule(values, bins, n_bins)
    history = best_history_rule(values, codes, confidences, n_bins)
    return {
        "fixed_depth": depth,
        "fixed": fixed,
        "threshold": threshold,
        "rule": rule,
        "history": history,
        "ratio": min(threshold, rule, history) / fixed,
    }


def context_wd(
    codes: np.ndarray, label_codes: np.ndarray, bins: np.ndarray, costs: Sequence[float]
) -> pd.DataFrame:
    """Whether weak dominance holds within each context ``(stage s, bin b)`` of the log.

    Each context's rows form an instance on stages ``s..K`` with costs ``C_j - C_s``
    (:class:`~uss_stream.core.instances.Instance`); its optimal depth, ``ξ`` and WD verdict are listed.
    """
    cumulative = np.asarray(costs, dtype=float)
    rows = []
    for s in range(bins.shape[1]):
        for b in np.unique(bins[:, s]):
            mask = bins[:, s] == b
            instance = Instance.from_log(
                codes[mask, s:], label_codes[mask], cumulative_costs=cumulative[s:] - cumulative[s]
            )
            rows.append(
                {
                    "stage": s + 1,
                    "bin": int(b),
                    "rows": int(mask.sum()),
                    "optimal_depth": s + instance.optimal_depth,
                    "xi": instance.xi,
                    "wd": instance.satisfies_wd,
                }
            )
    return pd.DataFrame(rows)


@dataclass
class SequentialReplayResult:
    """What :func:`replay_sequential` measured.

    Attributes
    ----------
    depths
        ``name -> (reps, horizon)`` depths per round.
    rows
        ``(reps, horizon)`` log rows fed to the policies.
    values
        ``N x K`` per-row objective ``v_d`` of the log.
    best_fixed_depth, best_fixed_value
        The best fixed depth on the log and its mean ``v``.
    best_rule, best_rule_value
        The best stopping rule's ``(K-1) x n_bins`` continue table and its mean ``v``.
    bins
        ``N x (K-1)`` quantile bins of the log rows (the best rule's contexts).
    """

    depths: dict[str, np.ndarray]
    rows: np.ndarray
    values: np.ndarray
    best_fixed_depth: int
    best_fixed_value: float
    best_rule: np.ndarray
    best_rule_value: float
    bins: np.ndarray

    def realised(self, name: str) -> np.ndarray:
        """``(reps, horizon)`` objective ``v_{d_t}(row_t)`` of each round."""
        return np.take_along_axis(self.values[self.rows], self.depths[name][..., None] - 1, axis=2)[..., 0]

    def cumulative_regret(self, name: str, against: str = "rule") -> np.ndarray:
        """``(reps, horizon)`` cumulative regret against ``"rule"`` (best stopping rule) or ``"fixed"``."""
        if against == "rule":
            best = self.values[np.arange(len(self.values)), rule_depths(self.bins, self.best_rule) - 1]
        elif against == "fixed":
            best = self.values[:, self.best_fixed_depth - 1]
        else:
            raise ValueError(f"against must be 'rule' or 'fixed', got {against!r}")
        return np.cumsum(self.realised(name) - best[self.rows], axis=1)

    def summary(self) -> pd.DataFrame:
        """One row per policy: mean objective, final regret (mean over repetitions), depth mix."""
        n_stages = self.values.shape[1]
        rows = []
        for name, depths in self.depths.items():
            row = {
                "policy": name,
                "objective": float(self.realised(name).mean()),
                "regret_fixed": float(self.cumulative_regret(name, "fixed")[:, -1].mean()),
                "regret_rule": float(self.cumulative_regret(name, "rule")[:, -1].mean()),
            }
            for d in range(1, n_stages + 1):
                row[f"depth_{d}"] = float(np.mean(depths == d))
            rows.append(row)
        return pd.DataFrame(rows)


def replay_sequential(
    outputs: Any,
    confidences: Any,
    labels: Any,
    *,
    stage_costs: Sequence[float],
    policies: Mapping[str, Policy],
    horizon: int = 10_000,
    reps: int = 10,
    seed: int | None = 0,
    sampling: str = "uniform",
    n_bins: int = 4,
    probabilities: Any = None,
) -> SequentialReplayResult:
    """Replay fixed-depth and sequential policies on a confidence log (see the module docstring).

    Parameters
    ----------
    outputs, confidences
        ``N x K`` stage outputs (any hashable labels) and confidences in ``[0, 1]`` (NaN: none).
    labels
        ``N`` ground-truth labels (for the comparators and the regret).
    stage_costs
        Per-stage costs ``c_1..c_K``.
    policies
        ``name -> policy`` templates; each repetition runs a fresh copy.
    horizon, reps, seed, sampling
        As :func:`uss_stream.replay.engine.replay`.
    n_bins
        Confidence quantile bins per stage of the best stopping rule.
    probabilities
        ``N x K x C`` each stage's class probabilities (any class order; zeros pad), for the
        sequential policies that read them (:class:`~uss_stream.policies.EntropyThreshold`);
        ``None``: only the confidences are known.
    """
    codes, label_codes = encode_log(outputs, labels)
    if label_codes is None:
        raise ValueError("labels are needed for the regret against the rules in hindsight")
    conf = np.asarray(confidences, dtype=float)
    if conf.shape != codes.shape:
        raise ValueError(f"confidences must have the outputs' shape {codes.shape}, got {conf.shape}")
    if np.any((conf < 0) | (conf > 1)):
        raise ValueError("confidences must lie in [0, 1] (NaN for a stage without one)")
    if probabilities is not None:
        probabilities = np.asarray(probabilities, dtype=float)
        if probabilities.ndim != 3 or probabilities.shape[:2] != codes.shape:
            raise ValueError(
                f"probabilities must be an N x K x C array matching the outputs {codes.shape}, "
                f"got {probabilities.shape}"
            )
    cumulative = check_stage_costs(stage_costs)
    if len(cumulative) != codes.shape[1]:
        raise ValueError(
            f"stage_costs must hold {codes.shape[1]} costs (one per stage), got {len(cumulative)}"
        )
    values = stage_values(codes, label_codes, cumulative)
    fixed_depth, fixed_value = best_fixed_depth(values)
    bins, _ = confidence_bins(conf, n_bins)
    rule, rule_value = best_stopping_rule(values, bins, n_bins)
    rows = sample_rows(len(codes), horizon=horizon, reps=reps, seed=seed, sampling=sampling)
    pairs = pair_indicators(codes)
    depths: dict[str, np.ndarray] = {}
    for name, template in policies.items():
        if not isinstance(template, Policy):
            raise TypeError(f"policies[{name!r}] must be a Policy, got {type(template).__name__}")
        if template.sequential:
            depths[name] = np.stack(
                [
                    template.for_repetition(r).run(
                        codes[rows[r]],
                        conf[rows[r]],
                        None if probabilities is None else probabilities[rows[r]],
                    )
                    for r in range(reps)
                ]
            )
        else:
            streams = template.stream_keys(reps)
            depths[name] = speculate(template.clone(), rows, pairs, streams=streams)
    return SequentialReplayResult(
        depths=depths,
        rows=rows,
        values=values,
        best_fixed_depth=fixed_depth,
        best_fixed_value=fixed_value,
        best_rule=rule,
        best_rule_value=rule_value,
        bins=bins,
    )


def _rows_of(probabilities: np.ndarray | None, rows: np.ndarray) -> np.ndarray | None:
    return None if probabilities is None else probabilities[rows]
