"""How much memory a replay needs, checked before it allocates anything.

A replay keeps ``reps x horizon`` arrays: the sampled log rows (``int64``), per policy the depths
(``int8``) and, once the summary is computed, the cumulative regret (``float64``); the summary
and the plot add temporaries of the same shape (fancy-indexing positions, standard deviations).
:func:`replay_memory_estimate` adds these up; :func:`check_replay_memory` refuses a run whose
estimate exceeds the memory available, with a message naming the parameters to lower, instead of
a ``MemoryError`` after minutes of work (or the system killing the process).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["available_memory", "check_replay_memory", "replay_memory_estimate"]

#: Bytes per round and repetition: the sampled row index (``int64``).
ROW_BYTES = 8
#: Bytes per round, repetition and policy: the depth (``int8``) and the cumulative regret (``float64``).
POLICY_BYTES = 1 + 8
#: Bytes per round and repetition of the largest temporaries (summary indexing, plot statistics).
TRANSIENT_BYTES = 32


def replay_memory_estimate(*, horizon: int, reps: int, policies: int) -> int:
    """Bytes a replay of ``reps`` repetitions of ``horizon`` rounds holds at its peak (an upper estimate).

    >>> replay_memory_estimate(horizon=10_000, reps=100, policies=3)
    67000000

    """
    return horizon * reps * (ROW_BYTES + policies * POLICY_BYTES + TRANSIENT_BYTES)


def available_memory() -> int | None:
    """Bytes of memory available to this process now (``None`` if the system does not say).

    The smaller of the system's available memory (``MemAvailable`` on Linux) and the room left
    under a cgroup v2 memory limit, if there is one.
    """
    limits = []
    with contextlib.suppress(OSError, ValueError, IndexError):
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        limits += [int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:")]
    if not limits:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            limits.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    with contextlib.suppress(OSError, ValueError):
        maximum = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if maximum != "max":
            current = Path("/sys/fs/cgroup/memory.current").read_text().strip()
            limits.append(max(int(maximum) - int(current), 0))
    return min(limits) if limits else None


def check_replay_memory(
    horizon: int, reps: int, policies: int, *, names: tuple[str, str] = ("horizon", "reps")
) -> None:
    """Raise ``ValueError`` if a replay of this size would not fit in the memory available.

    ``names`` are how the message calls the horizon and the repetitions (``--horizon``/``--reps``
    on the command line).

    >>> check_replay_memory(10**12, 10**6, 3)
    Traceback (most recent call last):
    ...
    ValueError: horizon=1000000000000 x reps=1000000 with 3 policies needs about 6.7e+10 GB of memory, ...

    """
    needed = replay_memory_estimate(horizon=horizon, reps=reps, policies=policies)
    available = available_memory()
    if available is None or needed <= available:
        return
    horizon_name, reps_name = names
    raise ValueError(
        f"{horizon_name}={horizon} x {reps_name}={reps} with {policies} policies needs about "
        f"{needed / 1e9:.3g} GB of memory, more than the {available / 1e9:.3g} GB available; "
        f"lower {horizon_name} or {reps_name}"
    )
