"""The whole suite's settings: the Hypothesis profiles, and the chaos tests' seed (``tests/chaos.py``).

Hypothesis runs with the profile ``HYPOTHESIS_PROFILE`` names (or pytest's ``--hypothesis-profile``),
else ``ci`` in CI (``CI=true``: ``make test``) and ``dev`` elsewhere. Neither has a deadline: no
property of this suite is a duration (speed is measured by ``benchmarks/``), and a loaded machine
made examples overrun one. Both print the failing example's ``@reproduce_failure`` blob; ``ci`` is
derandomized (the examples are a function of the test, so a CI failure repeats anywhere with
``HYPOTHESIS_PROFILE=ci``), ``dev`` explores new examples each run and keeps failures in the
example database.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from random import Random

import pytest
from hypothesis import HealthCheck, settings

from tests import chaos, needs

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, print_blob=True)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if needs.in_ci() else "dev")
settings.load_profile(PROFILE)


def pytest_configure(config: pytest.Config) -> None:
    """Pick the run's chaos seed once, before any test: in the controller (xdist workers inherit it)."""
    if not hasattr(config, "workerinput"):
        os.environ.setdefault(chaos.VARIABLE, str(secrets.randbelow(2**31)))
    try:
        chaos.run_seed()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    seed = chaos.run_seed()
    return [
        f"chaos seed: {seed} (the random kill points of this run; {chaos.VARIABLE}={seed} repeats them)",
        f"hypothesis profile: {PROFILE} (tests/conftest.py)",
    ]


@pytest.fixture
def chaos_random(request: pytest.FixtureRequest) -> Iterator[Random]:
    """This test's random source of faults (kill points, restarts): :func:`tests.chaos.for_test`."""
    request.node.user_properties.append(("chaos_seed", chaos.run_seed()))
    yield chaos.for_test(request.node.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """A failed test that drew from :func:`chaos_random` says how to repeat its draws."""
    report = yield
    if report.failed and "chaos_random" in getattr(item, "fixturenames", ()):
        seed = chaos.run_seed()
        report.sections.append(
            (
                "chaos seed",
                f"{chaos.VARIABLE}={seed} pytest '{item.nodeid}' repeats this test's random faults",
            )
        )
    return report
