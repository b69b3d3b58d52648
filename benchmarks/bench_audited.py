"""AuditedUSS against USS-KL-UCB, in the same run: streaming select/update and replay speed.

Run: ``python -m benchmarks.bench_audited``. Both policies see the same stream (the BSC log, with
case 5's costs, where weak dominance fails and AuditedUSS asks for labels, and case 2's, where it
holds); AuditedUSS gets its requested labels ``--label-delay`` rounds late. The figure of merit is
the ratio of CPU times (``time.process_time``), target <= 2, each the best of ``--repeat`` runs
with the two policies interleaved (on a shared machine one run's CPU time moves with the load). The
replay is ``uss_stream.replay.engine.replay`` with one policy at a time.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

from uss_stream.datasets.paper import paper_case
from uss_stream.policies import USSKLUCB, AuditedUSS
from uss_stream.replay.engine import replay


def _cpu(function, *args, **kwargs):
    """CPU seconds of ``function(*args, **kwargs)`` and its result."""
    began = time.process_time()
    result = function(*args, **kwargs)
    return time.process_time() - began, result


def _best_of(repeat, base, ours):
    """The least CPU seconds of ``base()`` and of ``ours()`` over ``repeat`` interleaved runs, and
    the last result of ``ours``."""
    best_base = best_ours = float("inf")
    result = None
    for _ in range(repeat):
        best_base = min(best_base, _cpu(base)[0])
        seconds, result = _cpu(ours)
        best_ours = min(best_ours, seconds)
    return best_base, best_ours, result


def _label_free(costs, stream):
    """A fresh USS-KL-UCB's select/update loop over ``stream``."""
    return USSKLUCB(costs).run(stream)


def _streaming(costs, stream, truth, label_delay):
    """AuditedUSS's select/update loop over ``stream``, its labels ``label_delay`` rounds late."""
    audited = AuditedUSS(costs)
    audited.run(stream, labels=truth, label_delay=label_delay)
    return audited


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="streaming events (20000)")
    parser.add_argument("--horizon", type=int, default=20_000, help="replay rounds (20000)")
    parser.add_argument("--reps", type=int, default=20, help="replay repetitions (20)")
    parser.add_argument("--label-delay", type=int, default=100, help="label delay in rounds (100)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved runs, best kept (5)")
    args = parser.parse_args(argv)
    settings = {"horizon": args.horizon, "reps": args.reps, "label_delay": args.label_delay}
    print("| case | what | USS-KL-UCB (s) | AuditedUSS (s) | ratio | labels requested |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in ("bsc-5", "bsc-2"):
        case = paper_case(name)
        outputs, labels = case.log()
        stream, truth = outputs[: args.events], labels[: args.events]
        costs = case.stage_costs
        base, ours, audited = _best_of(
            args.repeat,
            partial(_label_free, costs, stream),
            partial(_streaming, costs, stream, truth, args.label_delay),
        )
        print(
            f"| {name} | select+update, {len(stream)} events | {base:.2f} | {ours:.2f} | "
            f"{ours / base:.2f} | {audited.labels_requested} |"
        )
        base, ours, result = _best_of(
            args.repeat,
            partial(replay, outputs, labels, policies={"a": USSKLUCB(costs)}, **settings),
            partial(replay, outputs, labels, policies={"a": AuditedUSS(costs)}, **settings),
        )
        used = result.labels_used["a"].mean()
        print(
            f"| {name} | replay, {args.reps} x {args.horizon} rounds | {base:.2f} | {ours:.2f} | "
            f"{ours / base:.2f} | {used:.0f} per repetition |"
        )


if __name__ == "__main__":
    main()
