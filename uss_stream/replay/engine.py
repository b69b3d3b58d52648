"""Offline regret replay: run depth-selection policies on a logged cascade, many repetitions at once.

A *log* is an ``N x K`` table of the outputs of all ``K`` stages (cheapest first) for ``N`` past
events, optionally with their ground-truth labels. Each repetition draws ``horizon`` rows from the
log (uniformly with replacement, the paper's protocol, or by permutation or in log order) and feeds
them to a fresh copy of each policy, revealing to the policy only the stages it queries. All
policies see the same rows. The pseudo-regret of a round at depth ``j`` is
``Δ_j = c(j) - min_k c(k)`` with ``c(j) = C_j + γ_j`` and ``γ_j`` the error rate of stage ``j`` on
the whole log (Section 2 of the paper).

The engine is vectorised across repetitions and exact: a policy's decision is a deterministic
function of the round number and its counts, which :meth:`~uss_stream.policies.base.Policy.decide_many`
evaluates for many states at once. Each repetition *speculates* that it queries a depth ``d`` for
its next ``B`` rounds; the counts of all those rounds then follow in closed form (cumulative sums of
per-row disagreement and error indicators, masked to the stages ``d`` queries), one call evaluates
every speculated state, and each repetition accepts its rounds up to and including the first whose
decision differs from ``d`` (that state is still exact). ``d`` is the last depth, except after a
one-round deviation, when the repetition speculates that it returns to ``d`` (exploration rounds of
the UCB policies are mostly single). ``B`` adapts to how many speculations hold. The depth
sequences are identical to those of the streaming ``select``/``update`` loop on the same rows.

Randomised policies (:class:`~uss_stream.policies.USSTS`) draw counter-based random numbers from a
stream key and the round number, so their decisions are functions of the state too: repetition
``r`` of a policy template uses the key ``template.stream_keys(reps)[r]`` (for USS-TS with seed
``s``, ``repetition_key(seed_key(s), r)``), and ``template.for_repetition(r)`` is the streaming
policy that makes the same decisions. Policies with a ``discount`` (:mod:`uss_stream.core.forgetting`)
get their discounted counts by the same recursion ``γ·x + indicator`` as the streaming statistics,
evaluated round by round inside each speculated window.

:func:`replay_piecewise` replays a piecewise-stationary stream: consecutive segments drawn from
different logs (for instance before and after a stage improved), with the regret of each round
measured against the optimal depth of its own segment.

Examples
--------
>>> import numpy as np
>>> from uss_stream.datasets.bsc import generate_bsc
>>> from uss_stream.policies import FixedDepth, USSUCB
>>> from uss_stream.replay.engine import replay
>>> outputs, labels = generate_bsc(2000, seed=1)
>>> costs = [0.0, 0.6, 0.2]  # per-stage: C = (0, 0.6, 0.8), BSC case 1, stage 1 optimal
>>> result = replay(outputs, labels=labels, horizon=2000, reps=8, seed=0,
...                 policies={"USS-UCB": USSUCB(costs), "depth 3": FixedDepth(3, costs)})
>>> result.depths["USS-UCB"].shape, result.cumulative_regret["depth 3"].shape
((8, 2000), (8, 2000))
>>> result.summary()[["policy", "regret_mean", "depth_1", "depth_2", "depth_3"]].round(2)
    policy  regret_mean  depth_1  depth_2  depth_3
0  USS-UCB        55.05     0.94      0.0     0.06
1  depth 3       880.00     0.00      0.0     1.00

"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from uss_stream.core.extras import require
from uss_stream.core.instances import Instance
from uss_stream.core.validation import check_stage_costs
from uss_stream.policies.base import Policy
from uss_stream.policies.kernel import pair_order, speculate
from uss_stream.replay.labelled import LabelledRun, simulate_labelled
from uss_stream.replay.log import (
    SAMPLING_MODES,
    _check_labels_overlap,
    check_column_kinds,
    encode_log,
    sample_rows,
)
from uss_stream.replay.memory import check_replay_memory
from uss_stream.replay.result import PLOT_POINTS, Z_95, PiecewiseReplayResult, ReplayResult

__all__ = [
    "PLOT_POINTS",
    "SAMPLING_MODES",
    "Z_95",
    "PiecewiseReplayResult",
    "ReplayResult",
    "check_column_kinds",
    "encode_log",
    "pair_indicators",
    "pair_order",
    "replay",
    "replay_piecewise",
    "sample_rows",
]


def replay(
    outputs: Any,
    labels: Any = None,
    *,
    policies: Mapping[str, Policy],
    horizon: int = 10_000,
    reps: int = 100,
    seed: int | None = 0,
    sampling: str = "uniform",
    error_rates: Sequence[float] | None = None,
    stage_costs: Sequence[float] | None = None,
    progress: bool = False,
    label_delay: int = 0,
    label_cost: float = 0.0,
) -> ReplayResult:
    """Replay policies on a logged cascade; see the module docstring for the protocol.

    Parameters
    ----------
    outputs
        ``N x K`` outputs of all stages (ndarray, DataFrame or nested sequence), columns in
        cascade order. Any hashable labels; equal values (across columns too) mean agreement.
    labels
        ``N`` ground-truth labels, optional; needed for error rates, regret and
        :class:`~uss_stream.policies.SupervisedUCB`.
    policies
        ``name -> policy`` templates; each repetition runs a fresh :meth:`~Policy.clone`.
    horizon
        Rounds per repetition (``>= 1``).
    reps
        Repetitions (``>= 1``).
    seed
        Seed of :func:`sample_rows`.
    sampling
        ``"uniform"`` (with replacement), ``"permutation"`` or ``"sequential"``; see
        :func:`sample_rows`.
    error_rates
        ``γ_1..γ_K`` to use for the regret instead of (or without) the labels' error rates.
    stage_costs
        Per-stage costs ``c_j`` of the regret; by default those of the policies, which must agree
        (those built without costs, e.g. ``FixedDepth(2)``, are not consulted).
    progress
        Show a tqdm progress bar (on stderr).
    label_delay
        Rounds ``D >= 0`` between a label request of a label-asking policy
        (:class:`~uss_stream.policies.AuditedUSS`) and its label (applied before the decision of
        round ``s + D + 1``; :mod:`uss_stream.replay.labelled`). SupervisedUCB, the paper's
        reference, still learns every label at once.
    label_cost
        ``λ >= 0`` added to the regret per label used (:attr:`ReplayResult.labels_used`).

    Returns
    -------
    ReplayResult

    Raises
    ------
    ValueError
        On a bad parameter or a malformed log (missing outputs, naming their rows; stage columns of
        numbers next to text; labels sharing no value with the outputs), or a run too large for the
        memory available (:func:`uss_stream.replay.memory.check_replay_memory`).

    """
    horizon, reps = _positive_int(horizon, "horizon"), _positive_int(reps, "reps")
    _check_sampling(sampling)
    codes, label_codes = _encoded(outputs, labels, "labels")
    n_rows, n_stages = codes.shape
    templates = _check_policies(policies, n_stages)
    check_replay_memory(horizon, reps, len(templates), stages=n_stages, rows=n_rows)
    cumulative = _regret_costs(templates, stage_costs, n_stages)
    wrong = None if label_codes is None else codes != label_codes[:, None]
    gamma = _error_rates(error_rates, wrong, n_stages)
    _check_labels_arguments(label_delay, label_cost, templates, wrong)
    rows = sample_rows(n_rows, horizon=horizon, reps=reps, seed=seed, sampling=sampling)
    pairs = pair_indicators(codes)
    asking = {name: p for name, p in templates.items() if p.asks_for_labels}
    others = {name: p for name, p in templates.items() if name not in asking}
    depths = _run_policies(others, rows, pairs, wrong, progress) if others else {}
    labelled = {
        name: simulate_labelled(policy, rows, pairs, wrong, int(label_delay))
        for name, policy in asking.items()
    }
    labels_used, curves = _labels_used(templates, labelled, horizon, reps)
    return ReplayResult(
        depths={name: labelled[name].depths if name in labelled else depths[name] for name in templates},
        rows=rows,
        instance=_log_instance(cumulative, gamma, codes, wrong),
        wrong=wrong,
        horizon=horizon,
        reps=reps,
        seed=seed,
        sampling=sampling,
        labels_used=labels_used,
        label_curves=curves,
        label_delay=int(label_delay),
        label_cost=float(label_cost),
        wd_reports={
            name: _wd_reports(asking[name], run, horizon, int(label_delay)) for name, run in labelled.items()
        },
    )


def _error_rates(error_rates: Sequence[float] | None, wrong: np.ndarray | None, n_stages: int) -> Any:
    """``γ_1..γ_K``: those given, else the log's (``None`` without labels)."""
    if error_rates is None:
        return None if wrong is None else wrong.mean(axis=0)
    gamma = np.asarray(error_rates, dtype=float)
    if gamma.shape != (n_stages,):
        raise ValueError(f"error_rates must hold {n_stages} rates (one per stage), got shape {gamma.shape}")
    return gamma


def _encoded(outputs: Any, labels: Any, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`encode_log` of a log whose columns and labels are checked (``what``: the labels' name)."""
    check_column_kinds(outputs)
    codes, label_codes = encode_log(outputs, labels)
    _check_labels_overlap(codes, label_codes, what)
    return codes, label_codes


def _log_instance(
    cumulative: np.ndarray, gamma: np.ndarray | None, codes: np.ndarray, wrong: np.ndarray | None
) -> Instance:
    """The log as an :class:`~uss_stream.core.instances.Instance`
    (its disagreement and SD-violation rates)."""
    return Instance(
        cumulative_costs=cumulative,
        error_rates=gamma,
        disagreement=_disagreement(codes),
        sd_violation=None if wrong is None else _sd_violation(wrong),
    )


def _check_labels_arguments(
    label_delay: Any, label_cost: Any, templates: dict[str, Policy], wrong: np.ndarray | None
) -> None:
    """The label delay and cost, and labels for every policy that learns from them."""
    for name, policy in templates.items():
        if (policy.asks_for_labels or policy.supervised) and wrong is None:
            raise ValueError(f"policy {name!r} ({type(policy).__name__}) learns from labels: pass labels=")
    if isinstance(label_delay, bool) or not isinstance(label_delay, (int, np.integer)) or label_delay < 0:
        raise ValueError(f"label_delay must be an integer >= 0, got {label_delay!r}")
    if isinstance(label_cost, bool) or not isinstance(label_cost, (int, float)) or not label_cost >= 0:
        raise ValueError(f"label_cost must be a number >= 0, got {label_cost!r}")


def _labels_used(
    templates: dict[str, Policy], labelled: dict[str, LabelledRun], horizon: int, reps: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per policy, the labels each repetition used, and the curve of labels used by round (label-asking
    policies: their requests; SupervisedUCB: one per round; label-free ones: none, no curve)."""
    labels_used: dict[str, np.ndarray] = {}
    curves: dict[str, np.ndarray] = {}
    for name, policy in templates.items():
        if name in labelled:
            curves[name] = np.cumsum(labelled[name].requests, axis=1)
            labels_used[name] = curves[name][:, -1].copy()
        elif policy.supervised:
            curves[name] = np.broadcast_to(np.arange(1, horizon + 1), (reps, horizon))
            labels_used[name] = np.full(reps, horizon, dtype=np.int64)
        else:
            labels_used[name] = np.zeros(reps, dtype=np.int64)
    return labels_used, curves


def _encoded_segments(segments: Any, horizons: Any) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[int]]:
    """The encoded ``(codes, label codes)`` of each segment's log, and the checked horizons."""
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence) or not segments:
        raise ValueError("segments must be a non-empty sequence of (outputs, labels) logs")
    if (
        isinstance(horizons, (str, bytes))
        or not isinstance(horizons, Sequence)
        or len(horizons) != len(segments)
    ):
        raise ValueError(f"horizons must hold one horizon per segment ({len(segments)}), got {horizons!r}")
    lengths = [_positive_int(h, f"horizons[{k}]") for k, h in enumerate(horizons)]
    encoded = []
    for k, segment in enumerate(segments):
        if not isinstance(segment, (tuple, list)) or len(segment) != 2 or segment[1] is None:
            raise ValueError(f"segments[{k}] must be an (outputs, labels) pair with labels")
        encoded.append(_encoded(*segment, f"the labels of segments[{k}]"))
    n_stages = encoded[0][0].shape[1]
    for k, (codes, _) in enumerate(encoded):
        if codes.shape[1] != n_stages:
            raise ValueError(f"segments[{k}] has {codes.shape[1]} stage columns, segments[0] has {n_stages}")
    return encoded, lengths


def _wd_reports(policy: Policy, run: LabelledRun, horizon: int, label_delay: int) -> list[Any]:
    """The WD monitor's report of each repetition at the horizon."""
    from uss_stream.labels.evidence import LabelEvidence
    from uss_stream.labels.wd_monitor import wd_report

    n_stages = policy.n_stages
    upper_i, upper_j = pair_order(n_stages)
    reps = run.queried.shape[0]
    matrix = np.zeros((reps, n_stages, n_stages), dtype=np.int64)
    matrix[:, upper_i, upper_j] = run.pair_counts
    rounds = np.full(reps, horizon + 1)
    label_free = policy.label_free_depth_many(rounds, run.queried, matrix)
    applied = run.requests[:, : max(horizon - label_delay, 0)].sum(axis=1)
    reports = []
    for r in range(reps):
        evidence = LabelEvidence(n_stages)
        evidence.labels = int(applied[r])
        evidence.labelled, evidence.deeper_right, evidence.shallower_right = run.evidence[r].tolist()
        reports.append(
            wd_report(
                policy.cumulative_costs,
                run.queried[r].tolist(),
                matrix[r].tolist(),
                evidence,
                horizon + 1,
                int(label_free[r]),
            )
        )
    return reports


def _run_policies(
    templates: dict[str, Policy],
    rows: np.ndarray,
    pairs: np.ndarray,
    wrong: np.ndarray | None,
    progress: bool,
) -> dict[str, np.ndarray]:
    """Each template's ``(reps, horizon)`` depths on ``rows`` (a fresh clone, the template's streams)."""
    reps, horizon = rows.shape
    depths: dict[str, np.ndarray] = {}
    with _progress_bar(reps * horizon * len(templates), progress) as bar:
        for name, template in templates.items():
            bar.set_description(name)
            policy = template.clone()
            errors = wrong if policy.supervised else None
            streams = template.stream_keys(reps)
            depths[name] = speculate(policy, rows, pairs, errors, bar.update, streams=streams)
    return depths


def _progress_bar(total: int, enabled: bool) -> Any:
    """A tqdm bar on stderr (the ``[plot]`` extra), or a silent stand-in when ``enabled`` is false."""
    if enabled:
        tqdm = require("tqdm.auto", purpose="progress bars").tqdm
        return tqdm(total=total, unit="decision", unit_scale=True)
    return contextlib.nullcontext(SimpleNamespace(update=lambda n: None, set_description=lambda text: None))


def replay_piecewise(
    segments: Sequence[tuple[Any, Any]],
    *,
    horizons: Sequence[int],
    policies: Mapping[str, Policy],
    reps: int = 100,
    seed: int | None = 0,
    sampling: str = "uniform",
    stage_costs: Sequence[float] | None = None,
    progress: bool = False,
) -> PiecewiseReplayResult:
    """Replay policies on a piecewise-stationary stream: segment ``k`` draws its rows from log ``k``.

    Each repetition plays ``horizons[0]`` rounds on rows of the first log, then ``horizons[1]`` on
    rows of the second, and so on, with one policy state throughout (the policy is not told about
    the change). The regret of a round is measured against the optimal depth of its own segment,
    with that segment's error rates (so every segment needs labels).

    Parameters
    ----------
    segments
        ``(outputs, labels)`` logs, one per segment, all with the same ``K`` stage columns.
    horizons
        Rounds of each segment (``>= 1`` each).
    policies, reps, sampling, stage_costs, progress
        As for :func:`replay`.
    seed
        Seed of the row sampling; segment ``k`` samples with the ``k``-th child of
        ``numpy.random.SeedSequence(seed)``.

    Examples
    --------
    The BSC cascade, then the same events with stage 2's outputs copied into stage 1 (stage 1 has
    become as good as stage 2): the optimal depth moves from 2 to 1.

    >>> from uss_stream.datasets.bsc import generate_bsc
    >>> from uss_stream.policies import USSUCB
    >>> outputs, labels = generate_bsc(2000, seed=1)
    >>> improved = outputs.copy()
    >>> improved[:, 0] = outputs[:, 1]
    >>> result = replay_piecewise([(outputs, labels), (improved, labels)], horizons=[500, 500],
    ...                           policies={"u": USSUCB([0.0, 0.15, 0.2])}, reps=4)
    >>> [instance.optimal_depth for instance in result.instances], result.boundaries
    ([2, 1], [0, 500, 1000])
    >>> result.cumulative_regret["u"].shape
    (4, 1000)

    """
    reps = _positive_int(reps, "reps")
    _check_sampling(sampling)
    encoded, lengths = _encoded_segments(segments, horizons)
    n_stages = encoded[0][0].shape[1]
    templates = _check_policies(policies, n_stages)
    for name, policy in templates.items():
        if policy.asks_for_labels:
            raise ValueError(f"policy {name!r} asks for labels: replay_piecewise does not deliver them")
    cumulative = _regret_costs(templates, stage_costs, n_stages)
    rows_total = sum(codes.shape[0] for codes, _ in encoded)
    check_replay_memory(
        sum(lengths), reps, len(templates), stages=n_stages, rows=rows_total, names=("sum(horizons)", "reps")
    )
    instances, row_blocks, offset = [], [], 0
    children = np.random.SeedSequence(seed).spawn(len(segments))
    for (codes, label_codes), length, child in zip(encoded, lengths, children):
        wrong = codes != label_codes[:, None]
        instances.append(_log_instance(cumulative, wrong.mean(axis=0), codes, wrong))
        rows = sample_rows(codes.shape[0], horizon=length, reps=reps, seed=child, sampling=sampling)
        row_blocks.append(rows + offset)
        offset += codes.shape[0]
    codes = np.concatenate([c for c, _ in encoded])
    wrong = np.concatenate([c != lc[:, None] for c, lc in encoded])
    rows = np.concatenate(row_blocks, axis=1)
    depths = _run_policies(templates, rows, pair_indicators(codes), wrong, progress)
    return PiecewiseReplayResult(
        instances=instances,
        boundaries=[0, *np.cumsum(lengths).tolist()],
        depths=depths,
        rows=rows,
        wrong=wrong,
        horizon=rows.shape[1],
        reps=reps,
        seed=seed,
        sampling=sampling,
    )


def pair_indicators(codes: np.ndarray) -> np.ndarray:
    """``N x P`` disagreement indicators of the ``N x K`` encoded log, pairs ordered as :func:`pair_order`.

    >>> pair_indicators(np.array([[0, 1, 1]])).tolist()
    [[True, True, False]]

    """
    upper_i, upper_j = pair_order(codes.shape[1])
    return codes[:, upper_i] != codes[:, upper_j]


def _disagreement(codes: np.ndarray) -> np.ndarray:
    n_stages = codes.shape[1]
    p = np.zeros((n_stages, n_stages))
    upper_i, upper_j = pair_order(n_stages)
    p[upper_i, upper_j] = pair_indicators(codes).mean(axis=0)
    return p + p.T


def _sd_violation(wrong: np.ndarray) -> np.ndarray:
    n_stages = wrong.shape[1]
    violation = np.zeros((n_stages, n_stages))
    upper_i, upper_j = pair_order(n_stages)
    violation[upper_i, upper_j] = (~wrong[:, upper_i] & wrong[:, upper_j]).mean(axis=0)
    return violation


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _check_sampling(sampling: Any) -> None:
    if sampling not in SAMPLING_MODES:
        raise ValueError(f"sampling must be one of {', '.join(SAMPLING_MODES)}, got {sampling!r}")


def _check_policies(policies: Any, n_stages: int) -> dict[str, Policy]:
    if not isinstance(policies, Mapping) or not policies:
        raise ValueError("policies must be a non-empty mapping name -> Policy")
    templates: dict[str, Policy] = {}
    for name, policy in policies.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"policy names must be non-empty strings, got {name!r}")
        if not isinstance(policy, Policy):
            raise ValueError(f"policy {name!r} must be a Policy, got {type(policy).__name__}")
        if policy.sequential:
            raise ValueError(
                f"policy {name!r} ({type(policy).__name__}) decides stage by stage on the stages' "
                "confidences: replay it with uss_stream.replay.sequential.replay_sequential"
            )
        if policy.n_stages > n_stages or (policy.n_stages < n_stages and policy.stage_costs is not None):
            raise ValueError(
                f"policy {name!r} has {policy.n_stages} stage cost(s) "
                f"but the log has {n_stages} stage column(s)"
            )
        templates[name] = policy
    return templates


def _regret_costs(templates: dict[str, Policy], stage_costs: Any, n_stages: int) -> np.ndarray:
    if stage_costs is not None:
        cumulative = np.array(check_stage_costs(stage_costs))
        if cumulative.size != n_stages:
            raise ValueError(
                f"stage_costs must hold {n_stages} costs (one per stage column), got {cumulative.size}"
            )
        return cumulative
    known = [np.asarray(p.cumulative_costs) for p in templates.values() if p.stage_costs is not None]
    if not known:
        raise ValueError("no policy carries stage costs: pass stage_costs= to replay()")
    for costs in known[1:]:
        if not np.allclose(costs, known[0], rtol=1e-12, atol=0.0):
            raise ValueError("the policies have different stage costs: pass stage_costs= to replay()")
    return known[0]
