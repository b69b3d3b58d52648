"""AuditedUSS against USS-KL-UCB, in the same run: streaming select/update and replay speed.

Run: ``python -m benchmarks.bench_audited``. Both policies see the same stream (the BSC log, with
case 5's costs, where weak dominance fails and AuditedUSS asks for labels, and case 2's, where it
holds); AuditedUSS gets its requested labels ``--label-delay`` rounds late. The figure of merit is
the ratio of CPU times (``time.process_time``, robust to other load on the machine), target
<= 2. The replay is ``uss_stream.replay.replay`` with one policy at a time.
"""

from __future__ import annotations

import argparse
import time

from uss_stream.datasets.paper import paper_case
from uss_stream.policies import USSKLUCB, AuditedUSS
from uss_stream.replay import replay


def _cpu(function, *args, **kwargs):
    """CPU seconds of ``function(*args, **kwargs)`` and its result."""
    began = time.process_time()
    result = function(*args, **kwargs)
    return time.process_time() - began, result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="streaming events (20000)")
    parser.add_argument("--horizon", type=int, default=20_000, help="replay rounds (20000)")
    parser.add_argument("--reps", type=int, default=20, help="replay repetitions (20)")
    parser.add_argument("--label-delay", type=int, default=100, help="label delay in rounds (100)")
    args = parser.parse_args(argv)
    print("| case | what | USS-KL-UCB (s) | AuditedUSS (s) | ratio | labels requested |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in ("bsc-5", "bsc-2"):
        case = paper_case(name)
        outputs, labels = case.log()
        stream, truth = outputs[: args.events], labels[: args.events]
        costs = case.stage_costs
        audited = AuditedUSS(costs)
        base, _ = _cpu(USSKLUCB(costs).run, stream)
        ours, _ = _cpu(audited.run, stream, labels=truth, label_delay=args.label_delay)
        print(
            f"| {name} | select+update, {len(stream)} events | {base:.2f} | {ours:.2f} | "
            f"{ours / base:.2f} | {audited.labels_requested} |"
        )
        settings = {"horizon": args.horizon, "reps": args.reps, "label_delay": args.label_delay}
        base, _ = _cpu(replay, outputs, labels, policies={"kl": USSKLUCB(costs)}, **settings)
        ours, result = _cpu(replay, outputs, labels, policies={"a": AuditedUSS(costs)}, **settings)
        used = result.labels_used["a"].mean()
        print(
            f"| {name} | replay, {args.reps} x {args.horizon} rounds | {base:.2f} | {ours:.2f} | "
            f"{ours / base:.2f} | {used:.0f} per repetition |"
        )


if __name__ == "__main__":
    main()
