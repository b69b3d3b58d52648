"""The seed of the chaos tests' random choices: when a service is SIGKILLed, which one, when a broker stops.

One seed per run, chosen before it starts (or given as ``USS_CHAOS_SEED``) and printed in the
run's header; each test draws from its own :class:`random.Random`, seeded by the run's seed and
the test's id, so that a failed test repeats with ``USS_CHAOS_SEED=<seed> pytest <its id>`` alone
and with the other tests alike. ``tests/conftest.py`` picks the seed, prints it, gives the
``chaos`` fixture and names the seed in the report of a failed test that drew from it.

>>> a, b = for_test("t::x", seed=7), for_test("t::x", seed=7)
>>> [a.random() for _ in range(3)] == [b.random() for _ in range(3)]
True
>>> for_test("t::x", seed=7).random() == for_test("t::y", seed=7).random()
False
"""

from __future__ import annotations

import os
import random

VARIABLE = "USS_CHAOS_SEED"


def run_seed() -> int:
    """The run's seed: ``USS_CHAOS_SEED`` (set by ``tests/conftest.py`` when the run starts, if not given)."""
    text = os.environ.get(VARIABLE, "")
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{VARIABLE} must be an integer, got {text!r}") from None


def for_test(test_id: str, seed: int | None = None) -> random.Random:
    """The random source of the test ``test_id`` (a pytest node id): from ``seed``, else the run's."""
    return random.Random(f"{run_seed() if seed is None else seed}:{test_id}")
