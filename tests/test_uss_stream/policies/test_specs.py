"""The one ``--policy`` spec parser (:mod:`uss_stream.policies.specs`): what each spec builds, its errors."""

from __future__ import annotations

import pytest

from uss_stream.policies import UEEUCB, USSKLUCB, USSTS, USSUCB, AuditedUSS, FixedDepth, Hanawal2017WD
from uss_stream.policies.specs import DEFAULT_POLICY, parse_spec, spec_of

COSTS = [0.0, 0.1, 0.25]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("uss-kl-ucb", USSKLUCB(COSTS)),
        ("uss-ucb:alpha=0.51", USSUCB(COSTS, alpha=0.51)),
        ("uss-ucb", USSUCB(COSTS, alpha=0.51)),
        ("uss-ts:seed=0", USSTS(COSTS, seed=0)),
        ("uss-ts", USSTS(COSTS, seed=0)),
        ("fixed:depth=2", FixedDepth(2, COSTS)),
        ("fixed:depth=-1", FixedDepth(3, COSTS)),
        ("uee-ucb:alpha=0.5,discount=0.9", UEEUCB(COSTS, alpha=0.5, discount=0.9)),
        ("alg2:discount=0.99", Hanawal2017WD(COSTS, discount=0.99)),
        ("audited-uss", AuditedUSS(COSTS)),
        (" uss-kl-ucb : alpha = 2 , discount = 0.999 ", USSKLUCB(COSTS, alpha=2.0, discount=0.999)),
    ],
)
def test_each_spec_builds_the_policy_its_class_would(spec, expected):
    assert repr(parse_spec(spec).build(COSTS)) == repr(expected)


def test_the_default_is_the_cascades_default_policy():
    from river import linear_model

    from uss_stream import CascadeClassifier, Stage

    stages = [Stage(linear_model.LogisticRegression(), cost=c) for c in COSTS]
    cascade = CascadeClassifier(stages=stages)
    assert repr(cascade._policy) == repr(parse_spec(DEFAULT_POLICY).build(COSTS)) == repr(USSKLUCB(COSTS))


def test_the_canonical_spec_names_one_policy_whatever_its_spelling():
    same = ["uss-kl-ucb", "uss-kl-ucb:alpha=1", "uss-kl-ucb:alpha=1.0", "uss-kl-ucb: alpha=1e0"]
    assert {spec_of(parse_spec(s).build(COSTS)) for s in same} == {"uss-kl-ucb:alpha=1.0"}
    assert spec_of(parse_spec("uss-ts").build(COSTS)) == "uss-ts:seed=0"
    assert spec_of(parse_spec("uss-ucb:discount=0.9").build(COSTS)) == "uss-ucb:alpha=0.51,discount=0.9"
    assert spec_of(parse_spec("uss-ucb:alpha=2").build(COSTS)) != spec_of(parse_spec("uss-ucb").build(COSTS))
    # Round trip: the canonical spec builds the same policy again.
    for spec in ("uss-ts:seed=4,discount=0.5", "fixed:depth=-1", "uee-ucb", "alg2", "audited:label_budget=2"):
        policy = parse_spec(spec).build(COSTS)
        assert repr(parse_spec(spec_of(policy)).build(COSTS)) == repr(policy)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ucb", "--policy 'ucb': unknown policy 'ucb'; one of uss-kl-ucb, uss-ucb"),
        ("", "--policy '': unknown policy ''"),
        (
            "uss-ucb:beta=1",
            "--policy 'uss-ucb:beta=1': unknown parameter(s) beta; uss-ucb takes alpha, discount",
        ),
        ("uss-ucb:0.5", "--policy 'uss-ucb:0.5': parameters are key=value, got '0.5'"),
        ("uss-ucb:alpha=x", "--policy 'uss-ucb:alpha=x': alpha='x' is not a valid float"),
        ("uss-ts:seed=0.5", "--policy 'uss-ts:seed=0.5': seed='0.5' is not a valid int"),
        ("uss-ucb:alpha=1,alpha=2", "--policy 'uss-ucb:alpha=1,alpha=2': parameter 'alpha' is given twice"),
        ("fixed", "--policy 'fixed': fixed needs depth=D"),
        ("fixed:depth=2,discount=0.9", "unknown parameter(s) discount; fixed takes depth"),
        ("oracle:x=1", "unknown parameter(s) x; oracle takes no parameters"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_option_and_the_spec(spec, message):
    with pytest.raises(ValueError) as error:
        parse_spec(spec)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fixed:depth=4", "--policy 'fixed:depth=4': depth must be <= the number of stages 3, got 4"),
        ("uss-kl-ucb:discount=1", "--policy 'uss-kl-ucb:discount=1': discount must be"),
        ("uss-ucb:alpha=-1", "--policy 'uss-ucb:alpha=-1': alpha"),
        ("oracle", "--policy 'oracle': oracle needs the stages' error rates"),
    ],
)
def test_a_value_the_policy_refuses_is_reported_with_the_spec(spec, message):
    parsed = parse_spec(spec)  # the syntax is fine
    with pytest.raises(ValueError) as error:
        parsed.build(COSTS)
    assert message in str(error.value)


def test_the_replay_reads_its_specs_with_the_same_parser():
    from uss_stream.commands.replay import parse_policy

    for spec in ("uss-ucb:alpha=1", "uss-ts:seed=3,discount=0.9", "fixed:depth=-1", "audited-uss"):
        name, policy = parse_policy(spec, COSTS, [0.3, 0.2, 0.1])
        parsed = parse_spec(spec)
        assert (name, repr(policy)) == (parsed.name(len(COSTS)), repr(parsed.build(COSTS)))
    with pytest.raises(ValueError, match="--policy 'uss-ucb:beta=1': unknown parameter"):
        parse_policy("uss-ucb:beta=1", COSTS, [0.3, 0.2, 0.1])


def test_every_policy_class_has_a_spec_that_builds_it():
    import uss_stream.policies as policies
    from uss_stream.policies.specs import POLICY_NAMES

    classes = {getattr(policies, name) for name in policies.__all__}
    classes -= {policies.Policy, policies.SequentialPolicy}  # the abstract bases
    built = {
        type(parse_spec(name).build(COSTS, error_rates=[0.3, 0.2, 0.1]))
        for name in POLICY_NAMES
        if name != "fixed"
    }
    assert classes == built | {FixedDepth}


def test_the_sequential_spec_builds_sequential_kl_ucb_and_depth_first_commands_refuse_it():
    import numpy as np

    from uss_stream.commands.replay import DEFAULT_POLICIES
    from uss_stream.policies import SequentialKLUCB
    from uss_stream.policies.specs import serving_policy
    from uss_stream.replay.engine import replay

    spec = "sequential-kl-ucb:n_bins=2,explore=0.5"
    policy = parse_spec(spec).build(COSTS)
    assert repr(policy) == repr(SequentialKLUCB(COSTS, n_bins=2, explore=0.5))
    assert parse_spec(spec_of(policy)).build(COSTS).n_bins == 2
    outputs = np.array([[0, 1, 1], [1, 1, 1]])
    with pytest.raises(ValueError, match=r"decides stage by stage.*replay_sequential"):
        replay(outputs, np.array([1, 1]), policies={"s": policy}, horizon=5, reps=1)
    with pytest.raises(ValueError, match=r"decides stage by stage.*features mode"):
        serving_policy(spec, COSTS, "outputs mode")
    assert DEFAULT_POLICY in DEFAULT_POLICIES


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("confidence-threshold", "ConfidenceThreshold(stage_costs=[0.0, 0.1, 0.3], threshold=0.9)"),
        (
            "confidence-threshold:threshold=0.8",
            "ConfidenceThreshold(stage_costs=[0.0, 0.1, 0.3], threshold=0.8)",
        ),
        ("entropy-threshold:threshold=0.2", "EntropyThreshold(stage_costs=[0.0, 0.1, 0.3], threshold=0.2)"),
        (
            "threshold-bandit:explore=0.5",
            "ThresholdBandit(stage_costs=[0.0, 0.1, 0.3], "
            "thresholds=(0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0), explore=0.5)",
        ),
    ],
)
def test_the_threshold_rules_have_specs_and_the_service_refuses_them(spec, expected):
    from uss_stream.policies.specs import serving_policy

    assert repr(parse_spec(spec).build([0.0, 0.1, 0.3])) == expected
    with pytest.raises(ValueError, match=r"decides stage by stage.*features mode"):
        serving_policy(spec, [0.0, 0.1, 0.3], "outputs mode")
