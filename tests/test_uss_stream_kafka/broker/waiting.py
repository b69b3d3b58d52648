"""Waiting on observable conditions, never on the clock: the one polling helper of the Kafka tests.

A test that needs something to have happened (records seen, a line logged, an offset committed)
polls for it with :func:`wait_until`; the deadline only bounds a failure, so a slow machine makes
a test slower, never wrong. A sleep stays only where time itself is the scenario (an outage's
length, a producer's rate), with a comment saying so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(
    condition: Callable[[], Any],
    what: str | Callable[[], str],
    *,
    timeout: float = 120.0,
    alive: Callable[[], Any] | None = None,
    every: float = 0.05,
) -> float:
    """Poll ``condition()`` until it is true; returns the seconds waited.

    ``alive()``, called after each poll that found the condition false, should raise (an
    ``AssertionError`` with the process's log) if what the test waits on died, so that the test
    fails at once instead of at the deadline.
    Fails after ``timeout`` seconds with ``what`` in the message (a callable: called then, so that
    the message can say how far things got). A condition that asks the broker is cheap for the
    test, not for a loaded machine: poll it every few tenths of a second, not every few hundredths.

    >>> seen = []
    >>> waited = wait_until(lambda: seen.append(1) or len(seen) >= 3, "three polls", every=0.0)
    >>> len(seen), waited < 120
    (3, True)
    >>> wait_until(lambda: False, "the impossible", timeout=0.0)
    Traceback (most recent call last):
    ...
    AssertionError: the impossible not reached in 0.0s

    """
    started = time.monotonic()
    while True:
        if condition():
            return time.monotonic() - started
        if alive is not None:
            alive()
        if time.monotonic() - started >= timeout:
            raise AssertionError(f"{what() if callable(what) else what} not reached in {timeout}s")
        time.sleep(every)  # the polling interval, not a wait for the condition
