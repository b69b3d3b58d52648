"""The synthetic Bernoulli Symmetric Channel (BSC) cascade of the paper's Section 5 and Table 1.

The label is ``Y ~ Bernoulli(0.7)``; three sensors output ``Y`` flipped by their error events.
The paper fixes the error rates ``γ = (0.4, 0.1, 0.05)``, builds the errors with strong dominance
(a sensor is wrong only if every cheaper one is) and then, "when sensor 1 predicts correctly",
adds errors of up to 10% to sensors 2 and 3. Its exact mechanism is not published; ours keeps
the marginal error rates at exactly ``γ``:

* ``U ~ Uniform(0, 1)``; sensor 1 is wrong iff ``U < 0.4``;
* nested (SD) errors: sensor 2 wrong if ``U < 0.04``, sensor 3 wrong if ``U < 0.014``;
* extra errors when sensor 1 is right (``U >= 0.4``), with an independent ``V ~ Uniform(0, 1)``:
  sensor 2 wrong if ``V < 0.10`` (10%), sensor 3 wrong if ``0.10 <= V < 0.16`` (6%), disjoint.

So ``γ_2 = 0.04 + 0.6·0.10 = 0.1`` and ``γ_3 = 0.014 + 0.6·0.06 = 0.05``, and the disagreement
probabilities are ``p_12 = 0.42``, ``p_13 = 0.422``, ``p_23 = 0.122``. With the cumulative costs
of Table 1 the optimal sensors are 1, 2, 1, 3, 2 and weak dominance fails only in case 5
(``C_3 - C_2 = 0.11 <= p_23``), as in the paper.
"""

from __future__ import annotations

import numpy as np

from uss_stream.core.instances import Instance

__all__ = ["BSC_CASES", "ERROR_RATES", "bsc_instance", "bsc_probabilities", "generate_bsc"]

#: Cumulative costs ``C_1, C_2, C_3`` of the paper's Table 1, by case.
BSC_CASES: dict[int, tuple[float, float, float]] = {
    1: (0.0, 0.6, 0.8),
    2: (0.0, 0.15, 0.35),
    3: (0.0, 0.65, 0.9),
    4: (0.2, 0.36, 0.4),
    5: (0.0, 0.11, 0.22),
}
#: The optimal sensor of each case in Table 1 (checked by the tests against our generator).
TABLE1_OPTIMAL = {1: 1, 2: 2, 3: 1, 4: 3, 5: 2}
#: Whether weak dominance holds in each case of Table 1.
TABLE1_WD = {1: True, 2: True, 3: True, 4: True, 5: False}

P_LABEL_ONE = 0.7
ERROR_RATES = (0.4, 0.1, 0.05)
#: Probability of the extra error of sensors 2 and 3 given that sensor 1 is right (disjoint events).
EXTRA_ERROR = (0.10, 0.06)


def _nested_thresholds() -> tuple[float, float, float]:
    right_1 = 1.0 - ERROR_RATES[0]
    return (
        ERROR_RATES[0],
        ERROR_RATES[1] - right_1 * EXTRA_ERROR[0],
        ERROR_RATES[2] - right_1 * EXTRA_ERROR[1],
    )


def bsc_probabilities() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact ``γ``, disagreement matrix ``p`` and SD-violation matrix of the generator."""
    u1, u2, u3 = _nested_thresholds()
    right_1 = 1.0 - u1
    a, b = EXTRA_ERROR
    gamma = np.array([u1, u2 + right_1 * a, u3 + right_1 * b])
    p = np.zeros((3, 3))
    # Binary outputs disagree iff exactly one of the two sensors is wrong.
    p[0, 1] = (u1 - u2) + right_1 * a
    p[0, 2] = (u1 - u3) + right_1 * b
    p[1, 2] = (u2 - u3) + right_1 * (a + b)
    p = p + p.T
    violation = np.zeros((3, 3))
    violation[0, 1] = right_1 * a  # sensor 1 right, sensor 2 wrong
    violation[0, 2] = right_1 * b
    violation[1, 2] = right_1 * b  # sensor 2 right (its extra error is disjoint), sensor 3 wrong
    return gamma, p, violation


def bsc_instance(case: int, cumulative_costs: tuple[float, ...] | None = None) -> Instance:
    """The exact instance of a Table 1 case (or of the given cumulative costs)."""
    if cumulative_costs is None:
        if case not in BSC_CASES:
            raise ValueError(f"case must be one of {sorted(BSC_CASES)}, got {case!r}")
        cumulative_costs = BSC_CASES[case]
    gamma, p, violation = bsc_probabilities()
    return Instance(
        cumulative_costs=cumulative_costs,
        error_rates=gamma,
        disagreement=p,
        sd_violation=violation,
        name=f"BSC case {case}",
    )


def generate_bsc(
    n_samples: int, seed: int | np.random.Generator | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n_samples`` events: an ``n x 3`` int array of sensor outputs and the ``n`` labels.

    >>> outputs, labels = generate_bsc(5, seed=0)
    >>> outputs.shape, labels.shape
    ((5, 3), (5,))

    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
    rng = np.random.default_rng(seed)
    labels = (rng.random(n_samples) < P_LABEL_ONE).astype(np.int64)
    u = rng.random(n_samples)
    v = rng.random(n_samples)
    u1, u2, u3 = _nested_thresholds()
    a, b = EXTRA_ERROR
    right_1 = u >= u1
    wrong = np.stack(
        [
            u < u1,
            (u < u2) | (right_1 & (v < a)),
            (u < u3) | (right_1 & (v >= a) & (v < a + b)),
        ],
        axis=1,
    )
    outputs = labels[:, None] ^ wrong.astype(np.int64)
    return outputs, labels
