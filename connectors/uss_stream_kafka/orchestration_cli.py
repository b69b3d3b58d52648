"""``uss-stream kafka orchestrate``: run the orchestration-mode service (see ``docs/orchestration.md``).

Until the subcommand is registered in :mod:`uss_stream_kafka.cli`, run it with
``python -m uss_stream_kafka.orchestration_cli orchestrate ...``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from uss_stream_kafka.cli import (
    _add_connection,
    _add_consumer_options,
    _add_logging,
    _add_policy,
    _client_config,
    _costs,
    _non_negative_float,
    _non_negative_int,
    _option,
    _policy,
    _positive_float,
    _positive_int,
    _setup_logging,
)
from uss_stream_kafka.exit_codes import StartupInterrupted, one_line_errors

__all__ = ["main", "orchestrate_command", "register"]


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``orchestrate`` subcommand to the ``kafka`` subcommands."""
    parser = commands.add_parser(
        "orchestrate",
        help="orchestration mode: decide requests now, learn from the sensors' later reports",
        description="Consume requests, produce decisions (depth, stages, cost), join the sensors' "
        "reports to the pending decisions by id. Single process: one learner for all partitions.",
    )
    _add_connection(parser)
    topics = parser.add_argument_group("topics")
    _option(topics, "--requests-topic", required=True, help="requests")
    _option(topics, "--reports-topic", required=True, help="sensor reports")
    _option(topics, "--decisions-topic", required=True, help="decisions")
    _option(topics, "--dlq-topic", required=True, help="dead letters")
    _option(topics, "--state-topic", required=True, help="checkpoints (compacted)")
    job = parser.add_argument_group("orchestration")
    _option(job, "--group-id", required=True, help="consumer group (checkpoint key)")
    _option(job, "--stage-costs", convert=_costs, required=True, help="c_1,...,c_K")
    _option(job, "--stage-names", convert=_names, help="names (default stage1..K)")
    _add_policy(job)
    _option(
        job,
        "--max-age-decisions",
        convert=_positive_int,
        help="expire a pending decision after that many later decisions",
    )
    _option(
        job,
        "--max-age-seconds",
        convert=_positive_float,
        help="expire a pending decision after that many seconds",
    )
    _option(
        job,
        "--checkpoint-every",
        convert=_non_negative_int,
        default=10_000,
        help="checkpoint and commit after this many records (0 = off)",
    )
    _option(
        job,
        "--checkpoint-interval",
        convert=_non_negative_float,
        default=5.0,
        help="seconds between checkpoints and commits (0 = off; with both off, only at the stop)",
    )
    _option(
        job,
        "--guarantee",
        default="at-least-once",
        choices=("at-least-once", "exactly-once"),
        help="delivery guarantee (exactly-once: transactions; readers use read_committed)",
    )
    _option(
        job,
        "--exit-when-idle",
        convert=_positive_float,
        help="stop after S seconds without records, once the partitions are assigned and read to their end",
    )
    _option(
        job,
        "--max-input-bytes",
        convert=_positive_int,
        default=1 << 20,
        help="larger requests and reports are dead-lettered as oversize",
    )
    _add_consumer_options(parser)
    _add_logging(parser)
    parser.set_defaults(handler=orchestrate_command)


@one_line_errors("orchestrate")
def orchestrate_command(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT (or idle); print a summary; exit 0 after a clean stop."""
    from uss_stream_kafka.config import merge_options
    from uss_stream_kafka.orchestration import OrchestrationTopics, Orchestrator

    _setup_logging(args.log_level)
    orchestrator = Orchestrator(
        _client_config(args),
        group_id=args.group_id,
        topics=OrchestrationTopics(
            requests=args.requests_topic,
            reports=args.reports_topic,
            decisions=args.decisions_topic,
            dead_letter=args.dlq_topic,
            state=args.state_topic,
        ),
        stage_costs=args.stage_costs,
        stage_names=args.stage_names,
        policy=_policy(args),
        max_age_decisions=args.max_age_decisions,
        max_age_seconds=args.max_age_seconds,
        checkpoint_every=args.checkpoint_every,
        checkpoint_interval=args.checkpoint_interval,
        guarantee=args.guarantee,
        exit_when_idle=args.exit_when_idle,
        max_input_bytes=args.max_input_bytes,
        max_dead_letter_bytes=args.max_input_bytes,
        consumer_options={
            "session_timeout_ms": args.session_timeout_ms,
            "group_instance_id": args.group_instance_id,
            **merge_options(args.consumer_option),
        },
        producer_options=merge_options(args.producer_option),
    )

    def _stop(signum: int, frame: Any) -> None:
        if not orchestrator.serving.is_set():
            raise StartupInterrupted(signum)  # a blocking connect or restore: do not wait for it
        orchestrator.stop()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        summary = orchestrator.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    dead = {reason: n for reason, n in summary.dead_letters.items() if n}
    print(
        f"kafka orchestrate: {summary.requests} requests, {summary.decisions} decisions "
        f"(depths {summary.depth_counts}), {summary.reports} reports, {summary.applied} applied, "
        f"{orchestrator.book.pending} pending, {orchestrator.book.counters['expired']} expired, "
        f"dead letters {dead}, {summary.checkpoints} checkpoints in {summary.seconds:.1f}s",
        file=sys.stderr,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m uss_stream_kafka.orchestration_cli orchestrate ...``."""
    parser = argparse.ArgumentParser(prog="python -m uss_stream_kafka.orchestration_cli")
    register(parser.add_subparsers(dest="kafka_command", required=True, metavar="SUBCOMMAND"))
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as error:
        logging.getLogger("uss_stream_kafka").error("%s", error)
        return 2


if __name__ == "__main__":
    sys.exit(main())
