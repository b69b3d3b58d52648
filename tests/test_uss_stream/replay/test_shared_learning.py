"""Replay with shared learning equals a plain streaming loop of W learners merging stale snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from uss_stream.core.stats import DisagreementStats
from uss_stream.datasets.bsc import generate_bsc
from uss_stream.policies import USSKLUCB, USSTS, USSUCB, Hanawal2017WD, SupervisedUCB
from uss_stream.policies.kernel import speculate
from uss_stream.replay.delayed import feedback_delays, simulate_delayed
from uss_stream.replay.engine import encode_log, pair_order, sample_rows
from uss_stream.replay.shared import simulate_shared, simulate_shared_many

TEMPLATES = [
    USSUCB(stage_costs=[0.0, 0.15, 0.2]),
    Hanawal2017WD([0.0, 0.15, 0.2]),
    USSKLUCB([0.0, 0.15, 0.2]),
    USSTS([0.0, 0.15, 0.2], seed=4),
]
DISCOUNTED = [
    USSUCB(stage_costs=[0.0, 0.15, 0.2], discount=0.97),
    Hanawal2017WD([0.0, 0.15, 0.2], discount=0.98),
    USSKLUCB([0.0, 0.15, 0.2], discount=0.97),
    USSTS([0.0, 0.15, 0.2], seed=4, discount=0.98),
]


def _log(n=400, seed=3):
    outputs, labels = generate_bsc(n, seed=seed)
    codes, label_codes = encode_log(outputs, labels)
    upper_i, upper_j = pair_order(3)
    return outputs, codes[:, upper_i] != codes[:, upper_j], codes != label_codes[:, None]


def _rows(n_rows, reps, workers, horizon, seed=11):
    return sample_rows(n_rows, horizon=workers * horizon, reps=reps, seed=seed).reshape(
        reps, workers, horizon
    )


def _streaming(template, outputs, rows, sync_every, first_stream):
    """W learners of one repetition, round by round, with DisagreementStats and select().

    Worker w decides with its own counts merged with the snapshot of every other worker's counts
    taken after the last round that is a multiple of ``sync_every`` (the snapshots merged in
    worker order, then added to the own counts, as the service pools them); its decision counter
    is that of the merged counts, so select() decides round ``decisions + 1``.
    """
    workers, horizon = rows.shape
    learners = [template.for_repetition(first_stream + w) for w in range(workers)]
    own = [DisagreementStats(template.n_stages, discount=template.discount) for _ in range(workers)]
    snapshot = [DisagreementStats(template.n_stages, discount=template.discount) for _ in range(workers)]
    depths = [[] for _ in range(workers)]
    for t in range(1, horizon + 1):
        for w in range(workers):
            foreign = DisagreementStats(template.n_stages, discount=template.discount)
            for other in range(workers):
                if other != w:
                    foreign = foreign.merge(snapshot[other])
            counts = own[w].merge(foreign)
            learners[w].load_state_dict({"policy": type(template).__name__, "stats": counts.to_dict()})
            depth = learners[w].select()
            depths[w].append(depth)
            own[w].decisions += 1
            own[w].record(outputs[rows[w, t - 1]][:depth].tolist())
        if sync_every is not None and t % sync_every == 0:
            snapshot = [counts.copy() for counts in own]
    return depths


@pytest.mark.parametrize(("workers", "sync_every"), [(2, 1), (2, 3), (3, 1), (3, 7), (2, None)])
@pytest.mark.parametrize("template", TEMPLATES + DISCOUNTED, ids=repr)
def test_shared_replay_equals_streaming_loop(template, workers, sync_every):
    outputs, pairs, _ = _log(n=60)
    rows = _rows(len(outputs), reps=2, workers=workers, horizon=150)
    got = simulate_shared(template.clone(), rows, pairs, sync_every)
    for r in range(2):
        want = _streaming(template, outputs, rows[r], sync_every, first_stream=r * workers)
        assert got[r].tolist() == want


@pytest.mark.parametrize(
    "template",
    [
        *TEMPLATES,
        *DISCOUNTED,
        SupervisedUCB([0.0, 0.15, 0.2]),
        SupervisedUCB([0.0, 0.15, 0.2], discount=0.97),
    ],
    ids=repr,
)
def test_one_worker_is_the_single_learner_replay(template):
    outputs, pairs, wrong = _log()
    rows = sample_rows(len(outputs), horizon=1500, reps=4, seed=1)
    got = simulate_shared(template, rows[:, None, :], pairs, sync_every=1, wrong=wrong)[:, 0]
    delayed = simulate_delayed(template, rows, pairs, feedback_delays(0, reps=4, horizon=1500), wrong=wrong)
    assert got.tolist() == delayed.tolist()
    if not isinstance(template, SupervisedUCB):
        assert got.tolist() == speculate(template, rows, pairs, streams=template.stream_keys(4)).tolist()


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("sync_every", [None, 400, 10_000])
def test_never_syncing_is_independent_learners(template, sync_every):
    outputs, pairs, _ = _log()
    rows = _rows(len(outputs), reps=3, workers=2, horizon=400)
    isolated = simulate_shared(template, rows, pairs, sync_every)
    alone = simulate_delayed(template, rows.reshape(6, 400), pairs, feedback_delays(0, reps=6, horizon=400))
    assert isolated.reshape(6, 400).tolist() == alone.tolist()


def test_staleness_matters():
    outputs, pairs, _ = _log()
    rows = _rows(len(outputs), reps=3, workers=3, horizon=600)
    policy = USSUCB(stage_costs=[0.0, 0.15, 0.2])
    runs = [simulate_shared(policy, rows, pairs, every).tolist() for every in (1, 50, None)]
    assert runs[0] != runs[1] != runs[2]


def test_many_settings_equal_separate_runs():
    outputs, pairs, wrong = _log()
    policy = SupervisedUCB([0.0, 0.15, 0.2])
    settings = [(_rows(len(outputs), 2, 2, 300), 1), (_rows(len(outputs), 3, 4, 300, seed=2), 7)]
    settings.append((settings[0][0][:, :1], None))
    got = simulate_shared_many(policy, settings, pairs, wrong=wrong)
    for (rows, every), depths in zip(settings, got):
        assert depths.tolist() == simulate_shared(policy, rows, pairs, every, wrong=wrong).tolist()


def test_progress_counts_every_decision():
    outputs, pairs, _ = _log()
    seen = []
    simulate_shared(USSUCB([0.0, 0.1, 0.2]), _rows(len(outputs), 2, 3, 50), pairs, 5, on_progress=seen.append)
    assert seen == [6] * 50


def test_discounted_snapshots_stay_as_published_by_hand():
    # Two workers, γ = 0.5, synced after round 2, every round at depth 3 (a stubbed decision rule
    # that records the counts it is shown); stages always agree. Round 2: own n = 1, no snapshot
    # yet. Round 3: own 0.5·1 + 1 = 1.5 plus the other's snapshot 1.5 = 3, at round number
    # t + (W - 1)·2 = 5. Round 4: own 0.5·1.5 + 1 = 1.75 plus the snapshot, still 1.5 (it is not
    # discounted by the worker's own rounds): 3.25.
    pairs = np.zeros((1, 3), dtype=bool)
    policy = USSUCB(stage_costs=[0.0, 0.01, 0.02], discount=0.5)
    seen = []

    def decide_many(rounds, queried, disagreements, errors=None, **other_states):
        seen.append((rounds.tolist(), queried[:, 0].tolist()))
        return np.full(len(rounds), 3)

    policy.decide_many = decide_many
    simulate_shared(policy, np.zeros((1, 2, 4), dtype=np.int64), pairs, sync_every=2)
    assert seen == [([1, 1], [0.0, 0.0]), ([2, 2], [1.0, 1.0]), ([5, 5], [3.0, 3.0]), ([6, 6], [3.25, 3.25])]


@pytest.mark.parametrize(
    ("rows", "sync_every", "name"),
    [
        (np.zeros((2, 3), int), 1, "rows"),
        (np.zeros((1, 0, 3), int), 1, "rows"),
        (np.zeros((1, 2, 3)), 1, "rows"),
        (np.full((1, 2, 3), 400), 1, "rows"),
        (np.full((1, 2, 3), -1), 1, "rows"),
        (np.zeros((1, 2, 3), int), 0, "sync_every"),
        (np.zeros((1, 2, 3), int), 1.5, "sync_every"),
        (np.zeros((1, 2, 3), int), True, "sync_every"),
    ],
)
def test_bad_arguments_name_the_parameter(rows, sync_every, name):
    _, pairs, _ = _log()
    with pytest.raises(ValueError, match=rf"^{name} "):
        simulate_shared(USSUCB([0.0, 0.1, 0.2]), rows, pairs, sync_every)


def test_bad_log_arrays_name_the_parameter():
    _, pairs, wrong = _log()
    rows = np.zeros((1, 2, 3), int)
    policy = USSUCB([0.0, 0.1, 0.2])
    with pytest.raises(ValueError, match=r"^pairs "):
        simulate_shared(policy, rows, pairs[:, :2], 1)
    with pytest.raises(ValueError, match=r"^wrong "):
        simulate_shared(policy, rows, pairs, 1, wrong=wrong[:10])
    with pytest.raises(ValueError, match=r"^settings "):
        simulate_shared_many(policy, [], pairs)
    with pytest.raises(ValueError, match="horizon"):
        simulate_shared_many(policy, [(rows, 1), (np.zeros((1, 2, 4), int), 1)], pairs)
