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
    "tests/test_uss_stream_kafka/broker/test_long_outage.py",
    "tests/test_uss_stream_kafka/broker/test_scale_out.py",
    "tests/test_uss_stream_kafka/broker/test_exactly_once.py",
    "tests/test_uss_stream_kafka/broker/test_broker_restart_confluent.py",
    "tests/test_uss_stream_kafka/broker/test_soak.py",
    "tests/test_uss_stream_kafka/broker/test_compression.py",
    "tests/test_uss_stream_kafka/broker/test_service.py",
    "tests/test_uss_stream_kafka/broker/test_policies.py",
    "tests/test_uss_stream_kafka/broker/test_long_outage_confluent.py",
    "tests/test_uss_stream_kafka/broker/test_broker_restart.py",
    "tests/test_uss_stream/core/test_state_fuzz.py",
    "tests/test_uss_stream_kafka/runtime/test_logic.py",
    "tests/test_uss_stream_kafka/broker/test_secured.py",
    "tests/test_uss_stream_kafka/broker/test_poison_pills.py",
    "tests/test_uss_stream_kafka/processing/test_events.py",
    "tests/test_uss_stream_kafka/broker/test_crash_restart.py",
    "tests/test_uss_stream_kafka/broker/test_prometheus.py",
    "tests/test_uss_stream_kafka/broker/test_startup_errors.py",
    "tests/test_uss_stream_kafka/broker/test_features_durable.py",
    "tests/studies/test_reproduce.py",
    "tests/test_uss_stream_kafka/broker/test_clients_secured.py",
    "tests/test_uss_stream/replay/test_engine.py",
    "tests/test_uss_stream_kafka/processing/test_fuzz_parsers.py",
    "tests/test_uss_stream_kafka/broker/test_clients.py",
    "tests/test_uss_stream_kafka/broker/test_settings_variables.py",
    "tests/test_uss_stream_kafka/broker/test_orchestration_crash.py",
    "tests/test_uss_stream_kafka/broker/test_quix_failures.py",
    "tests/test_uss_stream/cascade/test_river_checks.py",
    "tests/test_uss_stream_kafka/broker/test_cli.py",
)
_RANK = {path: rank for rank, path in enumerate(LONGEST_FIRST)}


def rank(relative_path: str) -> int:
    """Where a file goes in the queue: its place in :data:`LONGEST_FIRST`, else after all of them.

    >>> first = "tests/test_uss_stream_kafka/broker/test_long_outage.py"
    >>> stats = "tests/test_uss_stream/core/test_stats.py"
    >>> rank(first), rank(stats) == len(LONGEST_FIRST)
    (0, True)
    """
    return _RANK.get(str(PurePosixPath(relative_path)), len(LONGEST_FIRST))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Sort ``items`` by their file's :func:`rank` (stable: a file's tests keep their order)."""
    root = config.rootpath
    items.sort(key=lambda item: rank(item.path.relative_to(root).as_posix()))
