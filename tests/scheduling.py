"""The order in which ``make test`` hands test files to its pytest-xdist workers: longest first.

``--dist loadfile`` sends whole files to the workers in the order of a queue, and by default
pytest-xdist sorts that queue by each file's number of tests. The suite's longest files are broker
scenarios with one to six tests (an outage, SIGKILLs, a soak), so they came last, and whichever
of them started last was the run's tail: on four workers the test time added up to about 2 700 s
(about 680 s each), and the run took 810 s. ``make test`` turns that sort off
(``--no-loadscope-reorder``) and loads this plugin (``-p tests.scheduling``), which puts the files
below first, longest first (the longest-processing-time rule), and leaves every other test where
pytest collected it. The order changes how long the run takes, never what a test sees.

The list holds every file that took over 40 s in a CI run (``--durations`` and a JUnit report of
``make test``); a file missing from it only runs later.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

LONGEST_FIRST = (
    "tests/kafka/test_long_outage.py",
    "tests/kafka/test_scale_out.py",
    "tests/kafka/test_exactly_once.py",
    "tests/kafka/test_broker_restart_confluent.py",
    "tests/kafka/test_soak.py",
    "tests/kafka/test_compression.py",
    "tests/kafka/test_service.py",
    "tests/kafka/test_policies.py",
    "tests/kafka/test_long_outage_confluent.py",
    "tests/kafka/test_broker_restart.py",
    "tests/test_state_fuzz.py",
    "tests/kafka/test_logic.py",
    "tests/kafka/test_secured.py",
    "tests/kafka/test_poison_pills.py",
    "tests/test_outputs_codec_batch.py",
    "tests/kafka/test_crash_restart.py",
    "tests/kafka/test_prometheus.py",
    "tests/kafka/test_startup_errors.py",
    "tests/kafka/test_features_durable.py",
    "tests/studies/test_reproduce.py",
    "tests/kafka/test_clients_secured.py",
    "tests/test_replay.py",
    "tests/kafka/test_fuzz_parsers.py",
    "tests/kafka/test_clients.py",
    "tests/kafka/test_settings.py",
    "tests/kafka/test_orchestration_crash.py",
    "tests/kafka/test_quix_failures.py",
    "tests/test_river_checks.py",
    "tests/kafka/test_cli.py",
)
_RANK = {path: rank for rank, path in enumerate(LONGEST_FIRST)}


def rank(relative_path: str) -> int:
    """Where a file goes in the queue: its place in :data:`LONGEST_FIRST`, else after all of them.

    >>> rank("tests/kafka/test_long_outage.py"), rank("tests/test_stats.py") == len(LONGEST_FIRST)
    (0, True)
    """
    return _RANK.get(str(PurePosixPath(relative_path)), len(LONGEST_FIRST))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Sort ``items`` by their file's :func:`rank` (stable: a file's tests keep their order)."""
    root = config.rootpath
    items.sort(key=lambda item: rank(item.path.relative_to(root).as_posix()))
