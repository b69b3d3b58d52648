"""How much memory a replay needs, checked before it allocates anything.

The estimate adds up the arrays the replay allocates (:func:`uss_stream.replay.engine.replay`,
:func:`uss_stream.policies.kernel.speculate`), for ``N`` log rows, ``K`` stages and
``P = K(K-1)/2`` stage pairs, ``H`` rounds, ``R`` repetitions and ``Q`` policies:

* per round and repetition: the sampled row (``int64``), per policy the depth (``int8``, ``int32``
  from 128 stages) and the cumulative regret (``float64``), and the summary's and plot's
  temporaries of the same shape;
* the log: the table as read (``C`` columns, 16 bytes a cell), its integer codes (``N x (K+1)``
  ``int64``), the error indicators (``N x K`` booleans), the pair indicators and the kernel's copy
  of them (``N x P``, one byte each);
* the largest of the temporaries, which do not coexist: encoding the log (a sorted copy, its
  order and inverse, 72 bytes a cell), the pair indicators (two ``N x P`` ``int64`` gathers) and a
  kernel step over ``S`` speculated states (``S = min(max(16384, R), R·min(4096, 2H))``): the
  ``K x K`` count matrices (``int64``) and the policy's bounds and set test on them (up to 40
  bytes a pair and state, USS-KL-UCB's), the per-pair steps and counts (9 bytes) and the
  per-stage counts.

The kernel step grows with ``K²`` (200 stages, 100 repetitions: about 35 GB), the log terms with ``N``.
:func:`check_replay_memory` refuses a run whose estimate exceeds the memory available, with a
message naming the size and the parameters to lower, instead of a ``MemoryError`` after minutes
of work (or the system killing the process).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from uss_stream.policies.kernel import MAX_STATES, MAX_WINDOW

__all__ = ["available_memory", "check_replay_memory", "replay_memory_estimate"]

#: Bytes per round and repetition: the sampled row index (``int64``).
ROW_BYTES = 8
#: Bytes per round, repetition and policy, besides the depth: the cumulative regret (``float64``).
REGRET_BYTES = 8
#: Bytes per round and repetition of the largest temporaries (summary indexing, plot statistics).
TRANSIENT_BYTES = 32
#: Bytes per cell of a table read from a file and held (pandas' ``int64``/``float64`` columns and
#: what its parser keeps: 16 measured on a 10^6-row CSV).
CELL_BYTES = 16
#: Bytes per log cell while the log is encoded: the array and missing-value mask, the concatenation,
#: ``numpy.unique``'s order, sorted copy, flags, running sum and inverse, the ``int64`` codes (61
#: measured).
ENCODE_BYTES = 72
#: Bytes per stage pair and speculated state of a kernel step: the ``int64`` count matrix (8) and
#: the policy's bounds and set test on it (40 at most, USS-KL-UCB's).
KERNEL_PAIR_BYTES = 48


def replay_memory_estimate(
    *, horizon: int, reps: int, policies: int, stages: int, rows: int, columns: int = 0
) -> int:
    """Bytes a replay holds at its peak (an upper estimate; the module says what it counts).

    ``columns``: the columns of the table read from a file that is held during the replay
    (0 when the caller holds the log already).

    >>> replay_memory_estimate(horizon=10_000, reps=100, policies=3, stages=3, rows=768)
    74944960
    >>> f"{replay_memory_estimate(horizon=10_000, reps=100, policies=3, stages=200, rows=768) / 1e9:.1f}"
    '34.5'

    """
    pairs = stages * (stages - 1) // 2
    depth_bytes = 1 if stages < 128 else 4
    states = min(max(MAX_STATES, reps), reps * min(MAX_WINDOW, 2 * horizon))
    per_round = ROW_BYTES + policies * (depth_bytes + REGRET_BYTES) + TRANSIENT_BYTES
    log = rows * (columns * CELL_BYTES + (stages + 1) * 8 + stages + 2 * pairs)
    transient = max(
        rows * (stages + 1) * ENCODE_BYTES,
        rows * pairs * 16,
        states * (stages * stages * KERNEL_PAIR_BYTES + pairs * 9 + stages * 8),
    )
    return horizon * reps * per_round + log + transient


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
    horizon: int,
    reps: int,
    policies: int,
    *,
    stages: int,
    rows: int,
    columns: int = 0,
    names: tuple[str, str] = ("horizon", "reps"),
) -> None:
    """Raise ``ValueError`` if a replay of this size would not fit in the memory available.

    The arguments are those of :func:`replay_memory_estimate`; ``names`` are how the message calls
    the horizon and the repetitions (``--horizon``/``--reps`` on the command line).

    >>> check_replay_memory(10**12, 10**6, 3, stages=3, rows=768)
    Traceback (most recent call last):
    ...
    ValueError: horizon=1000000000000 x reps=1000000 with 3 policies on a log of 768 rows x 3 stages ...

    """
    needed = replay_memory_estimate(
        horizon=horizon, reps=reps, policies=policies, stages=stages, rows=rows, columns=columns
    )
    available = available_memory()
    if available is None or needed <= available:
        return
    horizon_name, reps_name = names
    raise ValueError(
        f"{horizon_name}={horizon} x {reps_name}={reps} with {policies} policies on a log of {rows} rows "
        f"x {stages} stages needs about {needed / 1e9:.3g} GB of memory, more than the "
        f"{available / 1e9:.3g} GB available; lower {horizon_name} or {reps_name}, or replay fewer stages "
        "or rows"
    )
