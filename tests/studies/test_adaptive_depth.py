"""The adaptive-depth study: one cascade rule for the non-paper streams, and its accuracy check."""

from __future__ import annotations

import numpy as np
from river import ensemble, forest, linear_model, multiclass

from studies.adaptive_depth import StreamLog, StreamSpec, _cascade_section, streams
from uss_stream.datasets.paper import REAL_STAGE_FEATURES

PAPER = {"PIMA": "pima", "Heart": "heart"}


def test_the_non_paper_streams_follow_one_rule_and_the_paper_streams_keep_their_cascades():
    specs = {spec.name: spec for spec in streams()}
    assert len(specs) == 7
    for name, key in PAPER.items():
        assert [features for features, _ in specs[name].stages] == list(REAL_STAGE_FEATURES[key])
    for name, spec in specs.items():
        if name in PAPER:
            continue
        (cheap, first), (every, second), (last_features, last) = spec.stages
        # Stage 1 sees a few features, stages 2 and 3 all of them (None: the whole event).
        assert cheap is not None and len(cheap) >= 1 and every is None and last_features is None
        one, two, three = first(), second(), last()
        multi = name == "ImageSegments"
        linear = multiclass.OneVsRestClassifier if multi else linear_model.LogisticRegression
        assert type(one) is linear and type(two) is linear
        # The last stage stacks stage 2's model with a forest; the meta-model sees the features too.
        assert isinstance(three, ensemble.StackingClassifier) and three.include_features
        assert [type(m) for m in three.models] == [linear, forest.ARFClassifier]
        assert type(three.meta_classifier) is linear


def test_cascade_section_reports_each_stages_error_and_flags_a_weaker_deepest_stage():
    def log(name, outputs, labels):
        spec = StreamSpec(name, "", lambda: [], ((None, None),) * 3)
        codes = np.array(outputs)
        return {"log": StreamLog(spec, codes, np.ones(codes.shape), np.array(labels), np.ones(3), 0.0)}

    # Errors by hand: A: stage 1 wrong on 2 of 4, stage 2 on 1, stage 3 on 0 -> the deepest is best.
    # B: stage 1 wrong on 1 of 4, stage 2 on 0, stage 3 on 1 -> stage 2 is the most accurate.
    results = {
        "A": log("A", [[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 1, 1]], [0, 0, 0, 1]),
        "B": log("B", [[0, 0, 1], [1, 1, 1], [0, 0, 0], [0, 1, 1]], [0, 1, 0, 1]),
    }
    table = _cascade_section(results)[1]
    assert "| A | 0.5000 | 0.2500 | 0.0000 | yes |" in table
    assert "| B | 0.2500 | 0.0000 | 0.2500 | no (stage 2) |" in table


def test_halves_and_worst_eighth_read_the_excess_by_hand():
    from studies.adaptive_depth import halves, worst_eighth

    # 16 events, two per eighth; the excess is 0 except 0.5 on events 10 and 11 (the sixth eighth).
    excess = np.zeros(16)
    excess[[10, 11]] = 0.5
    assert halves(excess) == (0.0, 0.125)
    spec = StreamSpec("S", "", lambda: [], ((None, None),) * 2)
    codes = np.zeros((16, 2), dtype=int)
    codes[10, 1] = 1  # stage 2 wrong on one of the two events of that eighth
    log = StreamLog(spec, codes, np.ones(codes.shape), np.zeros(16, dtype=int), np.ones(2), 0.0)
    assert worst_eighth(log, excess) == {"range": (10, 12), "excess": 0.5, "errors": [0.0, 0.5]}
