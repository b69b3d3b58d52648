"""USS-TS: counter-based draws checked by hand, the stopping rule, vectorised = scalar, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from policy_counts import loaded, random_counts
from scipy.special import betaincinv

from uss_stream.policies import USSTS
from uss_stream.rules.counter_rng import (
    pair_uniform,
    pair_uniform_many,
    repetition_key,
    round_seed,
    round_seed_many,
    seed_key,
)

MASK = (1 << 64) - 1


def splitmix64(state: int) -> tuple[int, int]:
    """One step of the reference SplitMix64 generator: (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def nth_output(seed: int, n: int) -> int:
    state = seed
    for _ in range(n):
        state, out = splitmix64(state)
    return out


def test_splitmix64_reference_values():
    # The first outputs of SplitMix64 seeded with 0 (Vigna's reference implementation).
    assert nth_output(0, 1) == 0xE220A8397B1DCDAF
    assert nth_output(0, 2) == 0x6E789E6AA1B965F4


def test_uniform_of_seed_round_pair_by_hand():
    seed, t, pair = 7, 5, 2
    # seed_key(s) = mix64(s): the output of a SplitMix64 step from state s - γ.
    key0 = nth_output((seed - 0x9E3779B97F4A7C15) & MASK, 1)
    assert key0 == seed_key(seed)
    key = nth_output(key0, 1)  # repetition 0: the first output from the root key
    assert key == repetition_key(key0, 0)
    h_t = nth_output(key, t)  # round t: the t-th output from the stream key
    assert h_t == round_seed(key, t)
    bits = nth_output(h_t, pair + 1)  # pair p: the (p+1)-th output from the round seed
    u = ((bits >> 12) + 0.5) / 2.0**52
    assert u == pair_uniform(h_t, pair)
    assert 0.0 < u < 1.0


def test_vectorised_uniforms_equal_scalar_ones():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**63, size=50, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    rounds = rng.integers(1, 10**6, size=50)
    seeds = round_seed_many(keys, rounds)
    uniforms = pair_uniform_many(seeds[:, None], np.arange(6)[None, :])
    for k in range(50):
        assert int(seeds[k]) == round_seed(int(keys[k]), int(rounds[k]))
        for pair in range(6):
            assert uniforms[k, pair] == pair_uniform(int(seeds[k]), pair)


def test_beta_draw_is_the_inverse_cdf_of_the_counter_uniform():
    costs = [0.0, 0.1, 0.2]
    queried, disagreements = [40, 30, 10], [[0, 6, 3], [0, 0, 1], [0, 0, 0]]
    policy = loaded(USSTS(costs, seed=11), 40, queried, disagreements)
    key = repetition_key(seed_key(11), 0)
    h_t = round_seed(key, 41)  # the next round
    draws = policy.samples()
    for pair, (i, j) in enumerate([(0, 1), (0, 2), (1, 2)]):
        d, n = disagreements[i][j], queried[j]
        expected = betaincinv(1 + d, 1 + n - d, pair_uniform(h_t, pair))
        assert draws[i, j] == expected
    assert np.all(np.tril(draws) == 0.0)


def test_depth_is_the_first_stage_beating_every_deeper_draw():
    rng = np.random.default_rng(3)
    for trial in range(300):
        k = int(rng.integers(2, 6))
        costs = rng.choice([0.0, 0.02, 0.05, 0.1, 0.3], size=k).tolist()
        queried, disagreements = random_counts(rng, k, 50, lambda n: int(rng.integers(0, n + 1)))
        policy = loaded(USSTS(costs, seed=trial), queried[0], queried, disagreements)
        draws = policy.samples()
        cumulative = np.cumsum(costs)
        expected = k
        for i in range(k):
            if all(cumulative[j] - cumulative[i] > draws[i, j] for j in range(i + 1, k)):
                expected = i + 1
                break
        assert policy.select() == expected


def test_round_one_samples_the_uniform_prior():
    policy = USSTS([0.0, 0.3], seed=0)
    u = pair_uniform(round_seed(repetition_key(seed_key(0), 0), 1), 0)
    assert policy.samples()[0, 1] == u  # Beta(1, 1) is uniform: the draw is the uniform itself
    assert policy.select() == (1 if u < 0.3 else 2)


def test_vectorised_decisions_equal_select_with_and_without_streams():
    rng = np.random.default_rng(5)
    template = USSTS([0.0, 0.05, 0.1, 0.2], seed=4)
    for trial in range(40):
        policy = template.for_repetition(trial)
        outputs = rng.integers(0, 2, size=(int(rng.integers(0, 200)), 4))
        policy.run(outputs)
        stats = policy.stats
        arguments = (
            np.array([stats.decisions + 1]),
            np.array([stats.queried]),
            np.array([stats.disagreements]),
        )
        key = template.stream_keys(trial + 1)[trial : trial + 1]
        own = policy.decide_many(*arguments)
        keyed = template.decide_many(*arguments, streams=key)
        assert own.tolist() == keyed.tolist() == [policy.select()]


def test_same_seed_same_decisions_other_seed_other_decisions():
    rng = np.random.default_rng(1)
    outputs = rng.integers(0, 2, size=(500, 3))
    costs = [0.0, 0.2, 0.3]
    first = USSTS(costs, seed=5).run(outputs)
    assert np.array_equal(first, USSTS(costs, seed=5).run(outputs))
    assert not np.array_equal(first, USSTS(costs, seed=6).run(outputs))
    unseeded = USSTS(costs)
    assert np.array_equal(unseeded.for_repetition(3).run(outputs), unseeded.for_repetition(3).run(outputs))


def test_repetition_zero_is_the_policy_itself_and_keys_are_distinct():
    policy = USSTS([0.0, 0.1], seed=2)
    keys = policy.stream_keys(4)
    assert keys.dtype == np.uint64 and len(set(keys.tolist())) == 4
    assert int(keys[0]) == repetition_key(seed_key(2), 0)
    outputs = np.random.default_rng(0).integers(0, 2, size=(300, 2))
    assert np.array_equal(USSTS([0.0, 0.1], seed=2).run(outputs), policy.for_repetition(0).run(outputs))


def test_state_round_trip_continues_identically():
    rng = np.random.default_rng(2)
    outputs = rng.integers(0, 2, size=(400, 3))
    costs = [0.0, 0.1, 0.15]
    whole = USSTS(costs, seed=9).run(outputs)
    first = USSTS(costs, seed=9)
    first.run(outputs[:250])
    second = USSTS(costs, seed=9)
    second.load_state_dict(first.state_dict())
    assert np.array_equal(np.concatenate([whole[:250], second.run(outputs[250:])]), whole)


def test_discounted_posterior_uses_the_discounted_counts():
    policy = USSTS([0.0, 0.1], seed=1, discount=0.5)
    policy.select()
    policy.update([0, 1])
    policy.select()
    policy.update([0, 0])
    # n_2 = 0.5·1 + 1 = 1.5 and D_12 = 0.5·1 + 0 = 0.5: Beta(1.5, 2).
    assert policy.stats.queried == [1.5, 1.5] and policy.stats.disagreements[0][1] == 0.5
    u = pair_uniform(round_seed(repetition_key(seed_key(1), 0), 3), 0)
    assert policy.samples()[0, 1] == betaincinv(1.5, 2.0, u)


@pytest.mark.parametrize("seed", [1.5, "1", True])
def test_bad_seed_is_rejected(seed):
    with pytest.raises(ValueError, match="seed must be an integer or None"):
        USSTS([0.0, 0.1], seed=seed)


@pytest.mark.parametrize("repetition", [-1, 1.0, True])
def test_bad_repetition_is_rejected(repetition):
    with pytest.raises(ValueError, match="repetition must be an integer >= 0"):
        USSTS([0.0, 0.1], seed=0).for_repetition(repetition)


def test_bad_discount_is_rejected():
    with pytest.raises(ValueError, match="discount must be a number with 0 < discount < 1"):
        USSTS([0.0, 0.1], discount=1.0)


def test_clone_keeps_the_seed():
    policy = USSTS([0.0, 0.1], seed=3, discount=0.99)
    assert repr(policy.clone()) == "USSTS(stage_costs=[0.0, 0.1], seed=3, discount=0.99)"
