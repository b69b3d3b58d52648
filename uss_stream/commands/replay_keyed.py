"""``uss-stream replay --key COLUMN``: the keyed replay of a log whose events carry a key.

For each ``--policy`` (default: the library's, :data:`~uss_stream.policies.specs.DEFAULT_POLICY`)
three learners are replayed on the same events (:func:`uss_stream.replay.keyed.replay_keyed`):
``keyed`` (one learner per key, leaning on the pooled counts of the other keys), ``one learner``
(for all keys) and ``independent`` (one learner per key, no pool). The regret of a key's event is
measured against the key's own best fixed depth, from the labels of its rows. By default the log is
replayed once, in its order (``--sampling sequential``, ``--horizon`` its rows, ``--reps 1``). It
prints the summary and the keys, and writes ``summary.csv`` (one row per learner) and ``keys.csv``
(one row per key: its events, its best depth, each learner's regret on its events).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from uss_stream.policies import Policy
from uss_stream.policies.keyed import KeyedPolicy
from uss_stream.policies.specs import DEFAULT_POLICY, parse_spec
from uss_stream.replay.keyed import keyed_policies, replay_keyed

__all__ = ["run_keyed"]

#: Keys printed (the most frequent); ``keys.csv`` has them all.
SHOWN_KEYS = 20


def run_keyed(
    args: argparse.Namespace,
    outputs: Any,
    labels: Any,
    stage_costs: list[float],
    keys: Any,
    *,
    write: Callable[[str, Callable[[Path], Any]], None],
) -> int:
    """Replay the keyed comparison of every ``--policy`` and write the tables with ``write(name, save)``."""
    if labels is None:
        raise ValueError("--key measures each key's regret from its labels: give --label")
    policies: dict[str, Policy | KeyedPolicy] = {}
    for spec in args.policies or [DEFAULT_POLICY]:
        parsed = parse_spec(spec)
        name = parsed.name(len(stage_costs))
        policy = parsed.build(stage_costs)
        if policy.sequential or policy.asks_for_labels or policy.supervised:
            raise ValueError(
                f"--policy {spec!r}: --key replays label-free policies that decide a depth up front"
            )
        for variant, built in keyed_policies(policy).items():
            policies[f"{name} {variant}" if len(args.policies or [1]) > 1 else variant] = built
    print(
        f"replaying {args.input} keyed by {args.key!r}: {outputs.shape[0]} rows x {outputs.shape[1]} stages, "
        f"{args.reps} repetition(s) x {args.horizon or outputs.shape[0]} rounds ({args.sampling} sampling)"
    )
    result = replay_keyed(
        outputs,
        keys,
        labels,
        policies=policies,
        horizon=args.horizon,
        reps=args.reps,
        seed=args.seed,
        sampling=args.sampling,
    )
    summary = result.summary()
    per_key = result.key_summary().sort_values("events", ascending=False, kind="stable")
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    shown = per_key.head(SHOWN_KEYS).to_string(index=False, float_format=lambda v: f"{v:.4g}")
    most = f" ({SHOWN_KEYS} most frequent)" if len(per_key) > SHOWN_KEYS else ""
    print(f"{len(per_key)} keys{most}:\n{shown}")
    write("summary.csv", lambda path: summary.to_csv(path, index=False))
    write("keys.csv", lambda path: per_key.to_csv(path, index=False))
    print(f"wrote {Path(args.out) / 'summary.csv'} and {Path(args.out) / 'keys.csv'}")
    return 0
