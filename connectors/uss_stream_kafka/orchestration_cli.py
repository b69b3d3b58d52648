"""``uss-stream kafka orchestrate``: run the orchestration-mode service (see ``docs/orchestration.md``).

Its options are the settings of :class:`~uss_stream_kafka.settings.KafkaSettings` that
``orchestrate`` takes (added by :func:`uss_stream_kafka.cli.add_orchestrate`).
``python -m uss_stream_kafka.orchestration_cli orchestrate ...`` runs it too.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from uss_stream_kafka.exit_codes import StartupInterrupted, one_line_errors

__all__ = ["main", "orchestrate_command"]


@one_line_errors("orchestrate")
def orchestrate_command(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT (or idle); print a summary; exit 0 after a clean stop."""
    from uss_stream_kafka.cli import _setup_logging
    from uss_stream_kafka.orchestration import OrchestrationTopics, Orchestrator
    from uss_stream_kafka.settings import KafkaSettings

    settings = KafkaSettings.from_args(args)
    _setup_logging(settings.log_level)
    orchestrator = Orchestrator(
        settings.client_config(),
        group_id=settings.group_id,
        topics=OrchestrationTopics(
            requests=settings.input_topic,
            reports=settings.reports_topic,
            decisions=settings.output_topic,
            dead_letter=settings.dlq_topic,
            state=settings.state_topic,
        ),
        stage_costs=settings.stage_costs,
        stage_names=settings.stage_names,
        policy=settings.policy_spec(),
        max_age_decisions=settings.max_age_decisions,
        max_age_seconds=settings.max_age_seconds,
        checkpoint_every=settings.checkpoint_every,
        checkpoint_interval=settings.checkpoint_interval,
        guarantee=settings.guarantee,
        exit_when_idle=settings.exit_when_idle,
        max_input_bytes=settings.max_input_bytes,
        max_dead_letter_bytes=settings.max_input_bytes,
        consumer_options={"group_instance_id": settings.group_instance_id, **settings.consumer_options()},
        producer_options=settings.producer_options(),
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
    from uss_stream_kafka.cli import add_orchestrate

    parser = argparse.ArgumentParser(prog="python -m uss_stream_kafka.orchestration_cli")
    add_orchestrate(parser.add_subparsers(dest="kafka_command", required=True, metavar="SUBCOMMAND"))
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as error:
        logging.getLogger("uss_stream_kafka").error("%s", error)
        return 2


if __name__ == "__main__":
    sys.exit(main())
