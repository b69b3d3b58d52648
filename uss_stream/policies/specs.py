"""Policy specs: one text form of a policy and its parameters, shared by every command line.

A spec is ``name[:key=value,...]``, e.g. ``uss-kl-ucb``, ``uss-ucb:alpha=0.51``, ``uss-ts:seed=0``,
``fixed:depth=2`` or ``uss-kl-ucb:discount=0.999``. :func:`parse_spec` checks the name, the keys
and the value types (no stage costs needed); :meth:`PolicySpec.build` builds the policy for a
cascade. ``uss-stream replay --policy`` and every ``uss-stream kafka`` mode read ``--policy`` with
these two functions, so a spec means the same policy everywhere.

=================  =====================================  ============================================
name               parameters (default)                   policy
=================  =====================================  ============================================
uss-kl-ucb         alpha (1), discount                    :class:`~uss_stream.policies.USSKLUCB`,
                                                          the library's default (:data:`DEFAULT_POLICY`)
uss-ucb            alpha (0.51), discount                 :class:`~uss_stream.policies.USSUCB`
uss-ts             seed (0), discount                     :class:`~uss_stream.policies.USSTS`
uee-ucb            alpha (1), discount                    :class:`~uss_stream.policies.UEEUCB`
alg2               discount                               :class:`~uss_stream.policies.Hanawal2017WD`
fixed              depth (required; -1: the deepest)      :class:`~uss_stream.policies.FixedDepth`
audited            alpha (1), label_budget (2),           :class:`~uss_stream.policies.AuditedUSS`
                   label_allotment (300)                  (asks for labels; alias ``audited-uss``)
supervised         alpha (0.51), discount                 :class:`~uss_stream.policies.SupervisedUCB`
                                                          (learns from every label)
oracle             --                                     :class:`~uss_stream.policies.Oracle`
                                                          (needs the stages' error rates)
sequential-kl-ucb  n_bins (4), alpha (1), explore (1),    :class:`~uss_stream.policies.SequentialKLUCB`
                   discount                               (decides stage by stage on the stages'
                                                          confidences: a ``CascadeClassifier`` or
                                                          :func:`~uss_stream.replay.sequential.replay_sequential`
                                                          runs it; commands that decide a depth up
                                                          front refuse it)
=================  =====================================  ============================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from uss_stream.policies.audited_uss import AuditedUSS
from uss_stream.policies.base import Policy
from uss_stream.policies.fixed_depth import FixedDepth
from uss_stream.policies.hanawal2017 import Hanawal2017WD
from uss_stream.policies.oracle import Oracle
from uss_stream.policies.sequential_kl_ucb import SequentialKLUCB
from uss_stream.policies.supervised_ucb import SupervisedUCB
from uss_stream.policies.thresholds import ConfidenceThreshold, EntropyThreshold, ThresholdBandit
from uss_stream.policies.uee_ucb import UEEUCB
from uss_stream.policies.uss_kl_ucb import USSKLUCB
from uss_stream.policies.uss_ts import USSTS
from uss_stream.policies.uss_ucb import USSUCB

__all__ = [
    "DEFAULT_POLICY",
    "LABELS",
    "POLICY_NAMES",
    "PolicySpec",
    "check_serving",
    "parse_spec",
    "policy_spec",
    "serving_policy",
    "spec_of",
]

#: The library's default policy: the one :class:`uss_stream.CascadeClassifier` uses.
DEFAULT_POLICY = "uss-kl-ucb"


@dataclass(frozen=True)
class _Family:
    policy_class: type[Policy]
    params: dict[str, type]  # key -> value type
    shown: dict[str, str]  # keys always in the display name, with their defaults


_FAMILIES: dict[str, _Family] = {
    "uss-kl-ucb": _Family(USSKLUCB, {"alpha": float, "discount": float}, {}),
    "uss-ucb": _Family(USSUCB, {"alpha": float, "discount": float}, {"alpha": "0.51"}),
    "uss-ts": _Family(USSTS, {"seed": int, "discount": float}, {"seed": "0"}),
    "uee-ucb": _Family(UEEUCB, {"alpha": float, "discount": float}, {}),
    "alg2": _Family(Hanawal2017WD, {"discount": float}, {}),
    "fixed": _Family(FixedDepth, {"depth": int}, {}),
    "audited": _Family(AuditedUSS, {"alpha": float, "label_budget": float, "label_allotment": float}, {}),
    "supervised": _Family(SupervisedUCB, {"alpha": float, "discount": float}, {"alpha": "0.51"}),
    "oracle": _Family(Oracle, {}, {}),
    "sequential-kl-ucb": _Family(
        SequentialKLUCB, {"n_bins": int, "alpha": float, "explore": float, "discount": float}, {}
    ),
    "confidence-threshold": _Family(ConfidenceThreshold, {"threshold": float}, {}),
    "entropy-threshold": _Family(EntropyThreshold, {"threshold": float}, {}),
    "threshold-bandit": _Family(ThresholdBandit, {"explore": float}, {}),
}
_ALIASES = {"audited-uss": "audited"}

#: Every spec name (aliases included).
POLICY_NAMES: tuple[str, ...] = (*_FAMILIES, *_ALIASES)


@dataclass(frozen=True)
class PolicySpec:
    """A parsed ``--policy`` spec: a policy family and its parameters, as given.

    Build it with :func:`parse_spec`; :meth:`build` makes the policy.

    Examples
    --------
    >>> spec = parse_spec("uss-ucb:alpha=.5,discount=0.999")
    >>> spec.kind, spec.values
    ('uss-ucb', {'alpha': 0.5, 'discount': 0.999})
    >>> spec.build([0.0, 0.1])
    USSUCB(stage_costs=[0.0, 0.1], alpha=0.5, f=None, discount=0.999)
    >>> spec.name(2)
    'uss-ucb:alpha=.5,discount=0.999'
    >>> parse_spec("fixed:depth=-1").name(3)
    'fixed:depth=3'

    """

    text: str
    kind: str
    raw: tuple[tuple[str, str], ...]
    values: dict[str, Any]

    def build(self, stage_costs: Sequence[float], error_rates: Sequence[float] | None = None) -> Policy:
        """The policy for a cascade of ``stage_costs`` (``error_rates``: only ``oracle`` reads them).

        Raises ``ValueError`` naming ``--policy`` and the spec if the policy refuses a value.
        """
        costs = list(stage_costs)
        params = dict(self.values)
        if self.kind == "oracle":
            if error_rates is None:
                raise ValueError(
                    f"--policy {self.text!r}: oracle needs the stages' error rates (a replay only)"
                )
            return Oracle(costs, error_rates=list(error_rates))
        if self.kind == "fixed":
            return self._build(FixedDepth, self._depth(len(costs)), costs)
        return self._build(_FAMILIES[self.kind].policy_class, costs, **params)

    def name(self, n_stages: int) -> str:
        """The display name: the spec's parameters as given, plus those always shown (``alpha`` of
        ``uss-ucb`` and ``supervised``, ``seed`` of ``uss-ts``); ``fixed``'s resolved depth."""
        if self.kind == "fixed":
            return f"fixed:depth={self._depth(n_stages)}"
        shown = dict(_FAMILIES[self.kind].shown)
        shown.update(self.raw)
        return self._render({**dict.fromkeys(_FAMILIES[self.kind].shown), **shown})

    def _render(self, params: dict[str, str]) -> str:
        given = ",".join(f"{key}={value}" for key, value in params.items())
        return self.kind + (f":{given}" if given else "")

    def _depth(self, n_stages: int) -> int:
        depth = self.values["depth"]
        return n_stages if depth == -1 else depth

    def _build(self, policy_class: Callable[..., Policy], *args: Any, **params: Any) -> Policy:
        try:
            return policy_class(*args, **params)
        except ValueError as error:
            raise ValueError(f"--policy {self.text!r}: {error}") from None


def parse_spec(spec: str) -> PolicySpec:
    """Parse a ``--policy`` spec ``name[:key=value,...]``; errors name ``--policy`` and the spec.

    Examples
    --------
    >>> parse_spec("uss-ts:seed=3").values
    {'seed': 3}
    >>> parse_spec("audited-uss").kind
    'audited'
    >>> parse_spec("uss-ucb:beta=1")
    Traceback (most recent call last):
    ...
    ValueError: --policy 'uss-ucb:beta=1': unknown parameter(s) beta; uss-ucb takes alpha, discount
    >>> parse_spec("fixed")
    Traceback (most recent call last):
    ...
    ValueError: --policy 'fixed': fixed needs depth=D

    """
    if not isinstance(spec, str):
        raise ValueError(f"--policy must be a spec string such as 'uss-ucb:alpha=0.51', got {spec!r}")
    name, _, rest = spec.strip().partition(":")
    name = name.strip()
    kind = _ALIASES.get(name, name)
    if kind not in _FAMILIES:
        raise ValueError(f"--policy {spec!r}: unknown policy {name!r}; one of {', '.join(POLICY_NAMES)}")
    family = _FAMILIES[kind]
    raw: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--policy {spec!r}: parameters are key=value, got {item!r}")
        if key.strip() in raw:
            raise ValueError(f"--policy {spec!r}: parameter {key.strip()!r} is given twice")
        raw[key.strip()] = value.strip()
    unknown = set(raw) - set(family.params)
    if unknown:
        takes = ", ".join(family.params) or "no parameters"
        names = ", ".join(sorted(unknown))
        raise ValueError(f"--policy {spec!r}: unknown parameter(s) {names}; {kind} takes {takes}")
    if kind == "fixed" and "depth" not in raw:
        raise ValueError(f"--policy {spec!r}: fixed needs depth=D")
    values: dict[str, Any] = {}
    for key, text in raw.items():
        try:
            values[key] = family.params[key](text)
        except ValueError:
            kind_name = family.params[key].__name__
            raise ValueError(f"--policy {spec!r}: {key}={text!r} is not a valid {kind_name}") from None
    if kind == "uss-ts" and "seed" not in values:
        values["seed"] = 0  # replays and services are reproducible
    return PolicySpec(spec.strip(), kind, tuple(raw.items()), values)


def spec_of(policy: Policy) -> str:
    """The canonical spec of a policy: its family and every parameter but the costs, normalised.

    Two specs of the same policy (``uss-kl-ucb``, ``uss-kl-ucb:alpha=1``) build policies with the
    same canonical spec; the service records it in its checkpoints.

    >>> spec_of(parse_spec("uss-kl-ucb").build([0.0, 0.1]))
    'uss-kl-ucb:alpha=1.0'
    >>> spec_of(parse_spec("uss-ucb:discount=0.99,alpha=.5").build([0.0, 0.1]))
    'uss-ucb:alpha=0.5,discount=0.99'
    >>> spec_of(parse_spec("fixed:depth=-1").build([0.0, 0.1, 0.2]))
    'fixed:depth=3'

    """
    kinds = {family.policy_class: kind for kind, family in _FAMILIES.items()}
    kind = kinds.get(type(policy))
    if kind is None:
        raise ValueError(f"{type(policy).__name__} has no --policy spec")
    params = policy._get_params()
    shown = ",".join(
        f"{key}={value!r}"
        for key, value in sorted(params.items())
        if key not in ("stage_costs", "error_rates") and value is not None
    )
    return kind + (f":{shown}" if shown else "")


#: What a service's events bring of the labels: ``"none"`` (outputs mode) or ``"requested"`` (the
#: labels a label-asking policy asks for: orchestration's reports topic).
LABELS = ("none", "requested")


def policy_spec(policy: str | None, alpha: float | None) -> str:
    """The spec of ``--policy`` / ``--alpha`` (its shorthand); the library's default without either.

    One rule for the Python API and every command-line mode.

    >>> policy_spec(None, None)
    'uss-kl-ucb'
    >>> policy_spec(None, 0.51), policy_spec("uss-ts:seed=1", None)
    ('uss-ucb:alpha=0.51', 'uss-ts:seed=1')
    >>> policy_spec("uss-ts", 0.5)
    Traceback (most recent call last):
    ...
    ValueError: give policy (--policy) or alpha (--alpha, shorthand for uss-ucb:alpha=A), not both: ...

    """
    if policy is not None and alpha is not None:
        raise ValueError(
            "give policy (--policy) or alpha (--alpha, shorthand for uss-ucb:alpha=A), "
            f"not both: got {policy!r} and {alpha!r}"
        )
    if alpha is not None:
        return f"uss-ucb:alpha={alpha!r}"
    return DEFAULT_POLICY if policy is None else policy


def serving_policy(
    spec: str, stage_costs: Sequence[float], mode: str, labels: str = "none"
) -> tuple[Policy, str]:
    """The policy of ``spec`` for ``stage_costs``, checked for a service (:func:`check_serving`), and
    its canonical spec (:func:`spec_of`): the one build of a service's policy template.

    >>> serving_policy("uss-kl-ucb:alpha=1", [0, 0.1], "outputs mode")
    (USSKLUCB(stage_costs=[0, 0.1], alpha=1.0, discount=None), 'uss-kl-ucb:alpha=1.0')
    >>> serving_policy("audited", [0, 0.1], "orchestration", labels="requested")[1]
    'audited:alpha=1.0,label_allotment=300.0,label_budget=2.0'
    >>> serving_policy("supervised", [0, 0.1], "X")
    Traceback (most recent call last):
    ...
    ValueError: --policy 'supervised': SupervisedUCB learns from labels; X has none (use a label-free one)

    """
    parsed = parse_spec(spec)
    policy = parsed.build(list(stage_costs))
    check_serving(policy, mode, labels, parsed.text)
    return policy, spec_of(policy)


def check_serving(policy: Policy, mode: str, labels: str = "none", text: str | None = None) -> None:
    """Refuse a ``policy`` a service of ``mode`` cannot feed: one deciding stage by stage (the
    service decides a depth up front), a supervised one (no service has every label) and, unless
    ``labels="requested"``, a label-asking one. Errors name ``--policy`` and ``text`` (its spec).

    >>> check_serving(parse_spec("audited").build([0, 0.1]), "outputs mode")
    Traceback (most recent call last):
    ...
    ValueError: --policy 'audited:...': AuditedUSS asks for labels; outputs mode has none (use a label-free...
    >>> check_serving(parse_spec("audited").build([0, 0.1]), "orchestration", labels="requested")

    """
    if labels not in LABELS:
        raise ValueError(f"labels must be one of {', '.join(LABELS)}, got {labels!r}")
    text = spec_of(policy) if text is None else text
    name = type(policy).__name__
    if policy.sequential:
        raise ValueError(
            f"--policy {text!r}: {name} decides stage by stage on the stages' confidences; {mode} "
            "decides a depth up front (run it in a CascadeClassifier, features mode)"
        )
    if policy.supervised and labels == "requested":
        raise ValueError(
            f"--policy {text!r}: {name} learns from every event's label; {mode} has only the labels "
            "a label-asking policy asks for (use a label-free or a label-asking one, e.g. audited)"
        )
    asks = policy.asks_for_labels
    if (asks and labels == "none") or policy.supervised:
        needs = "asks for labels" if asks else "learns from labels"
        raise ValueError(f"--policy {text!r}: {name} {needs}; {mode} has none (use a label-free one)")
