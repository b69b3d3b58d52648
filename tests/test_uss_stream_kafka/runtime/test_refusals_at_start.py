"""Refused at start with one clear error: a cascade factory that raises or exits, a restart of
``kafka run`` with other stage costs than its checkpoints; a spaced policy spec is not one."""

from __future__ import annotations

import pytest

from uss_stream_kafka.cli.exit_codes import exit_code
from uss_stream_kafka.processing.processors import FeaturesProcessor, OutputsProcessor


def _raising():
    raise RuntimeError("no model file")


def _exiting():
    raise SystemExit(0)


@pytest.mark.parametrize(
    ("factory", "cause"), [(_raising, "RuntimeError: no model file"), (_exiting, "SystemExit")]
)
def test_a_cascade_factory_that_raises_or_exits_is_a_configuration_error(factory, cause):
    with pytest.raises(ValueError, match=r"cascade factory .* failed") as caught:
        FeaturesProcessor(factory)
    assert cause in str(caught.value)
    assert exit_code(caught.value) == 2  # one line and the configuration code, never 0 nor a traceback


def test_a_restart_of_kafka_run_with_other_stage_costs_is_refused():
    written = OutputsProcessor([0.0, 0.15, 0.2], alpha=0.51).describe()
    OutputsProcessor([0.0, 0.15, 0.2], alpha=0.51).check_checkpoint(written)  # the same: restored
    with pytest.raises(
        ValueError, match=r"stage costs \[0.0, 0.15, 0.2\], the service has \[0.0, 0.15, 0.25\]"
    ):
        OutputsProcessor([0.0, 0.15, 0.25], alpha=0.51).check_checkpoint(written)


@pytest.mark.parametrize("spaced", [" uss-ucb", "uss-ucb ", " uss-ucb : alpha = 0.51 ", "\tuss-ucb\n"])
def test_a_spec_with_surrounding_spaces_is_the_same_policy_across_a_restart(spaced):
    """Spaces are not part of a spec: the checkpoint records the canonical spec, so a service
    started with a spaced ``--policy`` restarts from the unspaced one's checkpoints and back."""
    from uss_stream_kafka.processing.orchestration import OrchestrationProcessor

    for processor in (OutputsProcessor, OrchestrationProcessor):
        plain = processor([0.0, 0.15, 0.2], policy="uss-ucb")
        spaced_one = processor([0.0, 0.15, 0.2], policy=spaced)
        assert spaced_one.policy == plain.policy == "uss-ucb:alpha=0.51"
        spaced_one.check_checkpoint(plain.describe())
        plain.check_checkpoint(spaced_one.describe())
