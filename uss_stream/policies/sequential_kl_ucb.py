"""Sequential USS-KL-UCB: after each queried stage, stop or go on, by the set test of its context."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uss_stream.core.context_stats import CELL_EDGES, ContextStats
from uss_stream.core.stats import DisagreementStats
from uss_stream.core.validation import check_positive
from uss_stream.policies.stagewise import SequentialPolicy, checked_confidence
from uss_stream.policies.uss_kl_ucb import USSKLUCB

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SequentialKLUCB"]

#: Why :meth:`SequentialKLUCB.step` stopped: the context's cost test, or no deeper stage.
STOP_REASONS = ("cost test", "last stage")


class SequentialKLUCB(SequentialPolicy):
    """Stop or continue after every stage, by USS-KL-UCB's set test on the stage's confidence bin.

    An event is decided stage by stage: :meth:`begin`, then :meth:`step` with each queried stage's
    output and confidence (its largest class probability) until it returns ``False``. After stage
    ``s`` answered with confidence ``c``, the *context* is ``(s, b)`` with ``b`` the adaptive
    confidence bin of ``c`` at stage ``s`` (:mod:`uss_stream.core.context_stats`). Each context keeps the
    disagreement counts, observed without labels, between stage ``s`` and every deeper stage on the
    events of that context, and runs USS-KL-UCB's set test on stages ``s..K`` with them:

    * ``t`` is the context's own round (its events so far, plus one); stage ``s`` and the deeper
      stages play the roles of stages ``1..K-s+1`` with costs ``C_j - C_s``,
    * the test's depth ``s ≤ j* ≤ K`` is a *target*: ``j* = s`` stops, ``j* = s + 1`` goes on and
      lets stage ``s + 1``'s context decide; a deeper ``j*`` commits stages ``s+1..j*`` (then
      ``j*``'s context decides) only while the context has observed stage ``j*`` on fewer than
      ``√t`` of its events, so that the pair ``(s, j*)`` the test asks for keeps being observed;
      otherwise it goes on one stage, as for ``j* = s + 1``. Committing on every event would
      compete with the fixed depth ``j*`` only, never with going on to stage ``s + 1`` and stopping
      there where stage ``s + 1`` is sure (the better rule when ``j*`` is worth its cost on
      average but not on the events stage ``s + 1`` is sure of); the ``√t`` commits cost
      ``O(√T)`` and keep the pair's bound shrinking (level ``≈ ½·log t`` over ``≥ √t`` events),
    * in the context's rounds ``t`` where ``⌊explore·ln t⌋`` steps up (``t = 1`` and then about every
      ``t·(e^{1/explore} - 1)`` rounds) the context instead explores to depth ``K``: forced
      exploration at the vanishing rate ``explore / t``, ``explore·ln T + 1`` events per context, so
      every deeper stage keeps being observed in every context whatever the deeper contexts
      decide. The schedule is deterministic (no random numbers to key or to store), so the
      decisions are a function of the counts.

    **What is guaranteed, and what is not** (``docs/evidence/results_adaptive.md``). Within a context, the
    events form a sub-stream on which the policy is USS-KL-UCB on stages ``s..K``: if weak
    dominance holds *conditionally on the context* (stages ``s..K`` on the events of bin ``b``),
    USS-KL-UCB's ``O(log T)`` bound applies to that context's choice between stopping and each
    fixed deeper depth, the forced exploration adds ``O(log T)`` rounds and the commits at most
    ``√T`` (a stopping decision needs the pair ``(s, j)`` observed ``≈ log t / ξ²`` times, which
    the ``√t`` commits guarantee after ``O((log T)² / ξ⁴)`` rounds). The comparator is the rule
    "from ``(s, b)`` go on to stage ``s + 1`` iff some fixed deeper depth is worth its extra cost
    on that context, and let stage ``s + 1``'s context decide": when it says continue, the best
    stopping rule continues too (going to a fixed depth is one way of continuing), but when it
    says stop, an adaptive continuation could still pay off, so the rule is optimal among
    stopping rules for ``K = 2`` and an upper bound otherwise. Two more caveats: the events
    reaching stage ``s > 1`` depend on the earlier contexts' decisions, so a deep context's
    sub-stream is stationary only once the shallower contexts have settled; and per-context WD is
    an assumption, testable from labels (:func:`uss_stream.replay.sequential.context_wd`), not
    implied by global WD.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0`` (``K >= 2``).
    n_bins
        Adaptive confidence bins (contexts) per stage.
    alpha
        USS-KL-UCB's exploration scale ``α > 0``.
    explore
        Scale ``> 0`` of the forced exploration: ``explore·ln T + 1`` rounds of the ``T`` of a context.
    discount
        ``None`` or ``0 < γ < 1``: every confidence cell forgets at the pace of its own events.

    Examples
    --------
    Stage 1 flips 10% of the labels, and says so: its confidence is 0.6 on the events it flips
    and on as many others, 0.99 on the rest. Stage 2 is always right and costs 0.3: worth it
    where stage 1 is unsure (half of those events disagree), not where it is sure.

    >>> import numpy as np
    >>> from uss_stream.policies import SequentialKLUCB
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(0, 2, size=4000)
    >>> flipped = rng.random(4000) < 0.1
    >>> unsure = flipped | (rng.random(4000) < 0.1 / 0.9)
    >>> outputs = np.stack([truth ^ flipped, truth], axis=1)
    >>> confidences = np.stack([np.where(unsure, 0.6, 0.99), np.full(4000, 0.9)], axis=1)
    >>> policy = SequentialKLUCB(stage_costs=[0.0, 0.3], n_bins=2)
    >>> depths = policy.run(outputs, confidences)
    >>> [float(depths[1000:][unsure[1000:]].mean()), float(depths[1000:][~unsure[1000:]].mean())]
    [2.0, 1.0...]
    >>> policy.contexts()[["stage", "bin", "low", "high", "events", "stopped", "next"]]
       stage  bin   low  high  events  stopped           next
    0      1    0  0.00  0.99     818       14  continue to 2
    1      1    1  0.99  1.00    3182     3167           stop

    """

    def __init__(
        self,
        stage_costs: Sequence[float],
        n_bins: int = 4,
        alpha: float = 1.0,
        explore: float = 1.0,
        discount: float | None = None,
    ) -> None:
        super().__init__(stage_costs, discount=discount)
        check_positive(alpha, "alpha")
        check_positive(explore, "explore")
        self.n_bins = n_bins
        self.alpha = alpha
        self.explore = explore
        self._contexts = ContextStats(self.n_stages, n_bins, self.discount)
        costs = list(stage_costs)
        # One USS-KL-UCB per (stage, bin) on stages s..K; stage s's own cost is sunk (0).
        self._deciders = [
            [USSKLUCB([0.0, *costs[s + 1 :]], alpha=alpha, discount=self.discount) for _ in range(n_bins)]
            for s in range(self.n_stages - 1)
        ]
        self._last = self.n_stages - 1
        self._outputs: list[Any] | None = None
        self._cells: list[int] = []
        self._target = 0
        self._context: tuple[int, int] | None = None

    # -- read-only views --------------------------------------------------------------------------
    @property
    def context_stats(self) -> ContextStats:
        """The learned counts per context (a live reference: do not modify)."""
        return self._contexts

    @property
    def stats(self) -> DisagreementStats:
        """Whole-stream disagreement counts (the sum of stage 1's cells; a fresh object)."""
        total = DisagreementStats(self.n_stages, discount=self.discount)
        for cell in self._contexts.cells[0]:
            total = total.merge(cell)
        total.decisions = self._contexts.decisions
        return total

    @property
    def stop_context(self) -> tuple[int, int] | None:
        """``(stage, bin)`` (1-based stage) of the context whose cost test stopped the last event."""
        return self._context

    # -- the sequential protocol -----------------------------------------------------------------
    def begin(self) -> None:
        """Start an event; then call :meth:`step` after each queried stage."""
        if self._outputs is not None:
            raise RuntimeError("begin() called again before the event ended: step() until it returns False")
        self._outputs = []
        self._cells = []
        self._target = 0

    def step(self, output: Any, confidence: float | None, proba: Any = None) -> bool:
        """Report the next stage's output and confidence; ``True`` if the following stage is worth it.

        ``confidence`` is the stage's largest class probability in ``[0, 1]`` (``None`` or NaN for a
        stage that abstained); ``proba`` is not read (the context is the confidence's bin). When
        this returns ``False`` the event is learned from and ends.
        """
        outputs = self._outputs
        if outputs is None:
            raise RuntimeError("step() called without begin()")
        if type(confidence) is float and 0.0 <= confidence <= 1.0:
            cell = bisect_right(CELL_EDGES, confidence)
        else:
            cell = _checked_cell(confidence)
        stage = len(outputs)
        outputs.append(output)
        self._cells.append(cell)
        last = self._last
        if stage == last:
            return self._end("last stage", None)
        if stage < self._target:
            return True
        contexts = self._contexts
        bin_, counts = contexts.context(stage, cell)
        t = counts.decisions + 1
        explore = self.explore
        if t == 1 or math.floor(explore * math.log(t)) > math.floor(explore * math.log(t - 1)):
            self._target = last
            return True
        decider = self._deciders[stage][bin_]
        decider._stats = counts
        target = stage + decider._decide(t) - 1
        if target == stage:
            contexts.record_cells(outputs, self._cells)
            self._outputs = None
            self._reason = "cost test"
            self._context = (stage + 1, bin_)
            return False
        if counts.queried[target - stage] >= math.sqrt(t):
            # The pair (stage, target) is observed often enough: the next stage's context decides.
            target = stage + 1
        self._target = target
        return True

    def _end(self, reason: str, context: tuple[int, int] | None) -> bool:
        self._contexts.record_cells(self._outputs, self._cells)
        self._outputs = None
        self._reason = reason
        self._context = context
        return False

    def cancel(self) -> None:
        """Withdraw the event in progress (e.g. a stage failed): nothing is learned."""
        if self._outputs is None:
            raise RuntimeError("cancel() called without an event in progress")
        self._outputs = None

    # -- introspection ---------------------------------------------------------------------------
    def contexts(self) -> pd.DataFrame:
        """One row per context (1-based ``stage``, ``bin``): confidence range, events, depth mix, next action.

        ``events`` reached the stage with a confidence in the bin; ``stopped`` of them ended there;
        ``depth_<d>`` is how many ended at depth ``d``; ``next`` is what the cost test would do now
        (forced exploration aside).
        """
        import pandas as pd  # here, not at import: a policy decides without pandas (e.g. the service)

        contexts = self._contexts
        k = self.n_stages
        rows = []
        for s in range(k - 1):
            for b in range(self.n_bins):
                counts = contexts.bin_stats(s, b)
                low, high = contexts.bin_range(s, b)
                if math.isnan(low):
                    continue
                reached = [*counts.queried, 0]
                row = {"stage": s + 1, "bin": b, "low": low, "high": high, "events": counts.decisions}
                row["stopped"] = reached[0] - reached[1]
                for d in range(1, k + 1):
                    row[f"depth_{d}"] = reached[d - s - 1] - reached[d - s] if d > s else 0
                decider = self._deciders[s][b]
                decider._stats = counts
                target = s + decider._decide(counts.decisions + 1)
                row["next"] = "stop" if target == s + 1 else f"continue to {target}"
                rows.append(row)
        return pd.DataFrame(rows)

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The learned counts per context as a JSON-serialisable document."""
        return {"policy": type(self).__name__, "contexts": self._contexts.to_dict()}

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; validates before replacing."""
        if not isinstance(document, dict):
            raise ValueError(f"state document must be a JSON object, got {type(document).__name__}")
        name = document.get("policy")
        if name != type(self).__name__:
            raise ValueError(f"state document is for policy {name!r}, not {type(self).__name__!r}")
        contexts = ContextStats.from_dict(document.get("contexts"))
        mine = (self.n_stages, self.n_bins, self.discount)
        theirs = (contexts.n_stages, contexts.n_bins, contexts.discount)
        if theirs != mine:
            raise ValueError(
                f"state document has (n_stages, n_bins, discount) {theirs}, the policy has {mine}"
            )
        self._contexts = contexts
        self._outputs = None

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {
            "stage_costs": [0.0, 0.5],
            "n_bins": 2,
            "alpha": 1.5,
            "explore": 2.0,
            "discount": 0.99,
        }


def _checked_cell(confidence: Any) -> int:
    """The cell of a confidence that is not a plain float in ``[0, 1]``: validated, ``None``/NaN is 0."""
    return ContextStats.cell_of(checked_confidence(confidence))
