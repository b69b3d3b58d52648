"""KeyedPolicy: one learner per key with a pool prior; the loop, the batch and restores agree."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from uss_stream.core.stats import DisagreementStats
from uss_stream.policies import (
    USSKLUCB,
    USSTS,
    USSUCB,
    AuditedUSS,
    FixedDepth,
    KeyedPolicy,
    SequentialKLUCB,
    SupervisedUCB,
)
from uss_stream.policies.keyed_prior import PoolPrior

COSTS = [0.0, 0.08, 0.1]


def keyed_stream(seed: int, n: int, n_keys: int, k: int = 3) -> tuple[list[str], np.ndarray]:
    """``n`` events of ``n_keys`` keys (Zipf-like traffic) whose stage 1 errs at a key-specific rate."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_keys + 1) ** 1.1
    keys = rng.choice(n_keys, size=n, p=weights / weights.sum())
    flip = rng.random(n_keys) * 0.4
    truth = rng.integers(0, 2, size=n)
    first = truth ^ (rng.random(n) < flip[keys])
    second = truth ^ (rng.random(n) < 0.05)
    outputs = np.stack([first, second, *([truth] * (k - 2))], axis=1)
    return [f"k{key}" for key in keys], outputs


def chunks(rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    bounds = [0]
    while bounds[-1] < n:
        bounds.append(min(n, bounds[-1] + int(rng.choice([1, 7, 40, 300, 2000]))))
    return list(itertools.pairwise(bounds))


POLICIES = {
    "uss-kl-ucb": lambda: USSKLUCB(COSTS),
    "uss-ucb": lambda: USSUCB(COSTS),
    "uss-ts": lambda: USSTS(COSTS, seed=3),
    "fixed": lambda: FixedDepth(2, COSTS),
    "discounted": lambda: USSKLUCB(COSTS, discount=0.995),
    "audited": lambda: AuditedUSS(COSTS),
}


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"pool_refresh": 1, "prior_half_life": None, "prior_strength": 50},
        {"pool_refresh": 97, "max_keys": 5, "ttl": 40, "prior_half_life": 20},
    ],
)
def test_batches_of_any_size_give_the_loops_depths_and_state(name, params):
    keys, outputs = keyed_stream(1, 4000, 12)
    looped = KeyedPolicy(POLICIES[name](), **params)
    expected = looped.run(keys, outputs).tolist()
    batched = KeyedPolicy(POLICIES[name](), **params)
    depths = []
    for begin, end in chunks(np.random.default_rng(2), len(keys)):
        depths.extend(batched.decide_many(keys[begin:end], outputs[begin:end].ravel().tolist()))
    assert depths == expected
    assert batched.state_dict() == looped.state_dict()


def test_a_single_key_decides_as_the_base_policy():
    # The prior comes from the other keys' counts: a lone key has none to lean on.
    _, outputs = keyed_stream(4, 3000, 1)
    expected = USSKLUCB(COSTS).run(outputs).tolist()
    policy = KeyedPolicy(USSKLUCB(COSTS), pool_refresh=1)
    assert policy.decide_many(["only"] * 3000, outputs) == expected


def test_without_a_prior_keys_are_independent_learners():
    keys, outputs = keyed_stream(5, 3000, 4)
    depths = KeyedPolicy(USSUCB(COSTS), prior_strength=0).decide_many(keys, outputs)
    for key in set(keys):
        mine = [n for n, other in enumerate(keys) if other == key]
        assert [depths[n] for n in mine] == USSUCB(COSTS).run(outputs[mine]).tolist()


def test_the_prior_truncates_the_other_keys_counts_stage_by_stage():
    # Other keys: 1000 rounds, stage 2 queried 400 times, stage 3 30 times; D = 100, 9, 6.
    others = np.array([1000, 1000, 400, 30, 100, 9, 6])
    own = np.array([[40, 40, 40, 10, 3, 2, 1]])
    prior = PoolPrior(strength=200, half_life=40)  # s(40) = floor(200 * 40 / 80) = 100
    effective = prior.effective(own, others + own[0])[0].tolist()
    # rounds, n_j: min(others, 100); D_12 = 100 * 100 / 400 = 25, D_13 = 9 * 30 / 30, D_23 = 6.
    assert effective == [40 + 100, 40 + 100, 40 + 100, 10 + 30, 3 + 25, 2 + 9, 1 + 6]
    assert PoolPrior(strength=200, half_life=None).effective(own, others + own[0])[0].tolist()[:4] == [
        240,
        240,
        240,
        40,
    ]
    # One round later the strength is floor(200 * 40 / 81) = 98.
    assert prior.strength_at(np.array([40, 41])).tolist() == [100.0, 98.0]


def test_a_key_whose_counts_turn_a_cost_test_gets_no_prior():
    # Costs (0, 0.2): the gap of pair (1, 2) is 0.2. The others disagree at 0.1 (below it: depth 1);
    # the key disagreed 10 times in 20: 20·kl(0.5, 0.2) = 10·ln(0.5/0.2) + 10·ln(0.5/0.8) = 4.46.
    others = np.array([1000, 1000, 1000, 100])
    own = np.array([[20, 20, 20, 10]])
    sure = PoolPrior(50, None, tolerance=4.4, cumulative_costs=(0.0, 0.2))
    unsure = PoolPrior(50, None, tolerance=4.5, cumulative_costs=(0.0, 0.2))
    assert sure.effective(own, others + own[0]).tolist() == [[20, 20, 20, 10]]
    assert unsure.effective(own, others + own[0]).tolist() == [[70, 70, 70, 15]]
    # A rate unlike the others' on the same side of the gap (0.15, 0.1 < 0.2) turns no test.
    alike = np.array([[20, 20, 20, 3]])
    tiny = PoolPrior(50, None, tolerance=0.01, cumulative_costs=(0.0, 0.2))
    assert tiny.effective(alike, others + alike[0]).tolist() == [[70, 70, 70, 8]]
    # K = 3, costs (0, 0.2, 0.3): the key turns the test of pair (2, 3) (gap 0.1: others 0.05, it
    # 0.5 over 20). Only the tests of the pool's depth count: at depth 1, pairs (1, 2) and (1, 3).
    others3 = np.array([1000, 1000, 1000, 1000, 100, 100, 50])
    own3 = np.array([[20, 20, 20, 20, 2, 2, 10]])
    prior3 = PoolPrior(50, None, tolerance=3.0, cumulative_costs=(0.0, 0.2, 0.3))
    assert prior3.effective(own3, others3 + own3[0], 0)[0, 0] == 20  # every pair tested: no prior
    assert prior3.effective(own3, others3 + own3[0], 1)[0, 0] == 70  # the pool's depth 1: kept
    assert prior3.effective(own3, others3 + own3[0], 2)[0, 0] == 20  # depth 2: pair (2, 3) counts
    with pytest.raises(ValueError, match="needs the 2 cumulative costs"):
        PoolPrior(50, None, tolerance=1.0).effective(own, others)


def test_the_prior_never_lends_more_disagreements_than_queries():
    # The key's own counts (since the snapshot) exceed the snapshot's: the other keys' rate is capped.
    effective = PoolPrior(100, None).effective(np.array([[5, 5, 5, 3]]), np.array([10, 10, 6, 3]))
    assert effective.tolist() == [[10, 10, 6, 3]]  # others: rounds 5, n_2 1, D 0 (3 - 3)
    effective = PoolPrior(100, None).effective(np.array([[0, 0, 0, 0]]), np.array([10, 10, 4, 6]))
    assert effective[0, 3] <= effective[0, 2]


@pytest.mark.parametrize("discounted", [False, True])
def test_the_loop_and_the_batch_compute_the_same_effective_counts(discounted):
    rng = np.random.default_rng(11)
    for _ in range(300):
        queried = np.sort(rng.integers(0, 5000, size=3))[::-1]
        own = np.array(
            [queried[0] + rng.integers(0, 9), *queried, *(rng.random(3) * queried[[1, 2, 2]]).astype(int)]
        )
        snapshot = own + rng.integers(0, 3, size=7) * rng.integers(0, 20000, size=7)
        if discounted:
            own, snapshot = own * rng.random(), snapshot * 0.9
        prior = PoolPrior(
            int(rng.integers(0, 3000)),
            None if rng.random() < 0.3 else int(rng.integers(1, 5000)),
            None if rng.random() < 0.3 else float(rng.choice([0.5, 3.0, 20.0])),
            tuple(np.cumsum(rng.random(3) * 0.4).tolist()),
        )
        depth = int(rng.integers(0, 4))
        batch = prior.effective(own[None, :], snapshot, depth)[0].tolist()
        assert prior.effective_one(own.tolist(), snapshot.tolist(), not discounted, depth) == batch


def test_a_new_key_starts_from_the_pool():
    # Ten keys where stage 1 always agrees: the pool says depth 1, a new key starts there.
    policy = KeyedPolicy(USSKLUCB(COSTS), pool_refresh=1)
    policy.decide_many([f"k{n % 10}" for n in range(2000)], [[1, 1, 1]] * 2000)
    assert policy.select("new") == 1
    assert KeyedPolicy(USSKLUCB(COSTS), prior_strength=0).select("new") == 3


def test_least_recently_used_keys_are_evicted_and_come_back_fresh():
    evicted = []
    policy = KeyedPolicy(USSKLUCB(COSTS), max_keys=2, on_evict=evicted.append)
    policy.run(["a", "b", "a", "c"], [[1, 1, 1]] * 4)
    assert evicted == ["b"] and policy.keys == ["a", "c"]
    assert policy.pool_stats().decisions == 4  # "b"'s counts stay in the pool
    policy.run(["b"], [[1, 1, 1]])
    assert evicted == ["b", "a"] and policy.key_stats("b").decisions == 1
    assert policy.keys_created == 4 and policy.keys_evicted == 2


def test_ttl_evicts_keys_idle_for_more_than_ttl_events():
    evicted = []
    policy = KeyedPolicy(USSKLUCB(COSTS), ttl=3, on_evict=evicted.append)
    policy.run(["a", "b", "b", "b"], [[1, 1, 1]] * 4)  # "a" last seen at event 1
    assert policy.expire() == [] and "a" in policy  # idle 3 events: not more than ttl
    policy.run(["b"], [[1, 1, 1]])
    assert policy.expire() == ["a"] and evicted == ["a"]
    policy.run(["b"] * 3, [[1, 1, 1]] * 3)  # "b" seen at event 8; at event 12 it is idle 4 events
    policy.run(["c", "c", "c", "b"], [[1, 1, 1]] * 4)
    assert evicted == ["a", "b"] and policy.key_stats("b").decisions == 1


def test_decisions_do_not_depend_on_when_expired_keys_are_swept():
    keys, outputs = keyed_stream(6, 3000, 20)
    swept, lazy = (KeyedPolicy(USSKLUCB(COSTS), ttl=50, max_keys=8) for _ in range(2))
    depths = []
    for begin in range(0, 3000, 100):
        depths.extend(swept.decide_many(keys[begin : begin + 100], outputs[begin : begin + 100]))
        swept.expire()
    assert depths == lazy.decide_many(keys, outputs)


def test_changes_and_tombstones_since_the_last_checkpoint():
    policy = KeyedPolicy(USSKLUCB(COSTS), max_keys=2)
    policy.run(["a", "b"], [[1, 1, 1]] * 2)
    assert policy.pop_changes() == (["a", "b"], [])
    policy.run(["c", "b"], [[1, 1, 1]] * 2)  # "c" evicts "a"
    assert policy.pop_changes() == (["c", "b"], ["a"])
    policy.run(["a"], [[1, 1, 1]])  # "a" back (evicting "c"), then "c" back (evicting "b")
    policy.run(["c"], [[1, 1, 1]])
    assert policy.pop_changes() == (["a", "c"], ["b"])
    policy.record_label("c", [1, 0], 1)
    assert policy.pop_changes() == (["c"], [])


@pytest.mark.parametrize("name", ["uss-kl-ucb", "uss-ts", "discounted", "audited"])
def test_a_restored_state_continues_the_uninterrupted_run(name):
    keys, outputs = keyed_stream(7, 3000, 15)
    params = {"max_keys": 10, "ttl": 400, "pool_refresh": 64}
    uninterrupted = KeyedPolicy(POLICIES[name](), **params).run(keys, outputs).tolist()
    first = KeyedPolicy(POLICIES[name](), **params)
    head = first.run(keys[:1700], outputs[:1700]).tolist()
    text = json.dumps(first.state_dict())
    second = KeyedPolicy(POLICIES[name](), **params)
    second.load_state_dict(json.loads(text))
    assert head + second.run(keys[1700:], outputs[1700:]).tolist() == uninterrupted


def test_keys_restored_one_by_one_in_any_order_continue_the_run():
    # What a service restore does: the pool's record, then each key's record from a compacted topic.
    keys, outputs = keyed_stream(8, 2500, 12)
    params = {"max_keys": 6, "ttl": 300, "pool_refresh": 32}
    uninterrupted = KeyedPolicy(USSKLUCB(COSTS), **params).run(keys, outputs).tolist()
    first = KeyedPolicy(USSKLUCB(COSTS), **params)
    head = first.decide_many(keys[:1300], outputs[:1300])
    records = [json.loads(json.dumps(first.key_state(key))) for key in first.keys]
    np.random.default_rng(0).shuffle(records)
    second = KeyedPolicy(USSKLUCB(COSTS), **params)
    second.load_pool_state(json.loads(json.dumps(first.pool_state())))
    second.load_key_states(records)
    assert second.keys == first.keys
    assert head + second.decide_many(keys[1300:], outputs[1300:]) == uninterrupted


@pytest.mark.parametrize("name", POLICIES)
def test_the_documents_of_many_keys_are_each_keys_document(name):
    # key_states reads plain rows together; key_state builds each from a DisagreementStats.
    keys, outputs = keyed_stream(10, 1500, 40)
    policy = KeyedPolicy(POLICIES[name](), max_keys=30)
    policy.decide_many(keys, outputs)
    live = list(policy.keys)
    policy.record_label(live[0], outputs[0], 1)  # a key with labels' evidence
    np.random.default_rng(1).shuffle(live)
    assert policy.key_states(live) == [policy.key_state(key) for key in live]
    assert policy.key_states([]) == []
    with pytest.raises(KeyError):
        policy.key_states([live[0], "no such key"])


def test_a_keys_document_counts_its_own_events():
    keys, outputs = keyed_stream(11, 800, 5)
    policy = KeyedPolicy(FixedDepth(2, COSTS))
    policy.decide_many(keys, outputs)
    for key, document in zip(policy.keys, policy.key_states(list(policy.keys))):
        expected = DisagreementStats(3)
        for event_key, row in zip(keys, outputs.tolist()):
            if event_key == key:  # the policy counts its decisions; record() the queried outputs
                expected.decisions += 1
                expected.record(row[:2])
        assert document["stats"] == expected.to_dict()
        assert document["last_depth"] == 2


def test_bad_documents_are_refused_and_change_nothing():
    policy = KeyedPolicy(USSKLUCB(COSTS))
    policy.run(["a"], [[1, 1, 1]])
    before = policy.state_dict()
    good = policy.key_state("a")
    for bad, message in [
        ({**good, "key": 1.5}, "'key' must be a string or an integer"),
        ({**good, "last_depth": 4}, "last_depth"),
        ({**good, "stats": DisagreementStats(2).to_dict()}, "'stats' has 2 stages"),
    ]:
        with pytest.raises(ValueError, match=message):
            policy.load_key_states([policy.key_state("a"), bad])
    assert policy.state_dict() == before
    with pytest.raises(ValueError, match="not 'USSKLUCB'"):
        policy.load_pool_state({**policy.pool_state(), "policy": "USSUCB"})


def test_two_workers_states_merge_by_adding_counts():
    keys, outputs = keyed_stream(9, 2000, 6)
    one, two = KeyedPolicy(USSKLUCB(COSTS)), KeyedPolicy(USSKLUCB(COSTS))
    one.run(keys[:1000], outputs[:1000])
    two.run(keys[1000:], outputs[1000:])
    merged = one.merge(two)
    assert merged.pool_stats() == one.pool_stats().merge(two.pool_stats())
    for key in set(keys):
        parts = [p.key_stats(key) for p in (one, two) if key in p]
        total = parts[0] if len(parts) == 1 else parts[0].merge(parts[1])
        assert merged.key_stats(key) == total


def test_shared_counts_join_the_snapshot():
    policy = KeyedPolicy(USSKLUCB(COSTS))
    assert policy.select("a") == 3
    policy.cancel("a")
    foreign = DisagreementStats(3)
    foreign.decisions, foreign.queried = 5000, [5000, 5000, 5000]  # other workers: stage 1 agrees
    policy.share(foreign)
    assert policy.select("a") == 1 and policy.chosen_depth() == 1


def test_labels_go_to_the_keys_learner_and_verdict():
    policy = KeyedPolicy(AuditedUSS([0.0, 0.5]), prior_strength=0)
    requests = []
    policy.decide_many(["a"] * 4, [[0, 1]] * 4, requests=requests)
    assert requests[0] != 0 and policy.label_request == requests[-1]
    policy.learn_label("a", [0, 1], 1, requests[0])
    assert json.loads(json.dumps(policy.key_state("a")))["learner"]["evidence"]["labels"] == 1
    for _ in range(3):
        policy.record_label("a", [0, 1], 1)
    assert policy.label_evidence("a").labels == 3 == policy.label_evidence().labels
    assert policy.wd_report("b" if "b" in policy else None).labels == 3


def test_sequential_policies_get_one_learner_per_key():
    rng = np.random.default_rng(0)
    keys = rng.choice(["a", "b"], size=600).tolist()
    outputs = rng.integers(0, 2, size=(600, 3))
    confidences = rng.choice([0.6, 0.99], size=(600, 3))
    policy = KeyedPolicy(SequentialKLUCB(COSTS))
    depths = policy.run(keys, outputs, confidences)
    for key in ("a", "b"):
        mine = [n for n, other in enumerate(keys) if other == key]
        assert depths[mine].tolist() == SequentialKLUCB(COSTS).run(outputs[mine], confidences[mine]).tolist()
    again = KeyedPolicy(SequentialKLUCB(COSTS))
    assert again.decide_many(keys, outputs, confidences=confidences) == depths.tolist()
    assert again.state_dict() == policy.state_dict()


def test_misuse_is_refused():
    with pytest.raises(TypeError, match="learns from every label"):
        KeyedPolicy(SupervisedUCB(COSTS))
    with pytest.raises(ValueError, match="max_keys must be an integer >= 1"):
        KeyedPolicy(USSKLUCB(COSTS), max_keys=0)
    with pytest.raises(ValueError, match="prior_strength"):
        KeyedPolicy(USSKLUCB(COSTS), prior_strength=-1)
    policy = KeyedPolicy(USSKLUCB(COSTS))
    with pytest.raises(TypeError, match="decode bytes keys first"):
        policy.select(b"a")
    with pytest.raises(TypeError, match="str or an int"):
        policy.select(True)
    policy.select("a")
    with pytest.raises(RuntimeError, match="pending"):
        policy.select("b")
    with pytest.raises(RuntimeError, match="key 'a'"):
        policy.update("b", [1, 1, 1])
    with pytest.raises(ValueError, match="3 queried stage"):
        policy.update("a", [1])
    policy.update("a", [1, 1, 1])
    with pytest.raises(ValueError, match="3 values per event"):
        policy.decide_many(["a", "b"], [1, 1, 1])
    with pytest.raises(KeyError):
        policy.key_stats("zzz")
