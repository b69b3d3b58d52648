"""Reading logs as users have them: every format gives back exactly the rows and columns written."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from uss_stream.datasets.bsc import generate_bsc
from uss_stream.replay.io import has_header, matrix_layout, read_table, sniff_delimiter


@pytest.fixture
def matrix() -> np.ndarray:
    """A prediction matrix: three exits' predictions of 10 classes, then the label."""
    rng = np.random.default_rng(5)
    return rng.integers(0, 10, size=(40, 4))


def _as_named(values: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(values, columns=[str(j) for j in range(values.shape[1])])


@pytest.mark.parametrize("delimiter", ["\t", ",", ";", "|", " "])
def test_a_headerless_matrix_reads_back_whole(matrix: np.ndarray, delimiter: str, tmp_path: Path) -> None:
    path = tmp_path / "preds.txt"
    np.savetxt(path, matrix, fmt="%d", delimiter=delimiter)
    table = read_table(path)
    pd.testing.assert_frame_equal(table, _as_named(matrix), check_dtype=False)


def test_numpy_savetxt_default_floats_are_read(matrix: np.ndarray, tmp_path: Path) -> None:
    """``np.savetxt``'s defaults: ``%.18e`` numbers separated by single spaces, no header."""
    path = tmp_path / "preds.txt"
    np.savetxt(path, matrix)
    assert np.array_equal(read_table(path).to_numpy(), matrix)


def test_pandas_default_integer_header_is_a_header(matrix: np.ndarray, tmp_path: Path) -> None:
    path = tmp_path / "preds.tsv"
    pd.DataFrame(matrix).to_csv(path, sep="\t", index=False)
    assert path.read_text().startswith("0\t1\t2\t3\n")
    pd.testing.assert_frame_equal(read_table(path), _as_named(matrix), check_dtype=False)


def test_named_columns_and_missing_values_survive(tmp_path: Path) -> None:
    frame = pd.DataFrame({"cheap": [0, 1, 1, 0], "dear": [1, None, 1, None], "y": [0, 1, 1, 0]})
    for sep, name in [(",", "log.csv"), ("\t", "log.tsv"), (";", "log.txt")]:
        path = tmp_path / name
        frame.to_csv(path, sep=sep, index=False)
        pd.testing.assert_frame_equal(read_table(path), frame, check_dtype=False)


def test_text_labels_without_header_are_data(tmp_path: Path) -> None:
    path = tmp_path / "labels.tsv"
    path.write_text("cat\tdog\tcat\ndog\tdog\tdog\ncat\tcat\tcat\n")
    table = read_table(path)
    assert table.shape == (3, 3)
    assert table.iloc[0].tolist() == ["cat", "dog", "cat"]


def test_json_lines_json_array_parquet_and_gzip(tmp_path: Path) -> None:
    outputs, labels = generate_bsc(50, seed=2)
    frame = pd.DataFrame(outputs, columns=["s1", "s2", "s3"]).assign(y=labels)
    records = frame.to_dict(orient="records")
    (tmp_path / "log.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    (tmp_path / "log.ndjson").write_text("\n".join(json.dumps(r) for r in records))
    (tmp_path / "log.json").write_text(json.dumps(records))
    frame.to_parquet(tmp_path / "log.parquet")
    with gzip.open(tmp_path / "log.tsv.gz", "wt") as handle:
        frame.to_csv(handle, sep="\t", index=False)
    for name in ("log.jsonl", "log.ndjson", "log.json", "log.parquet", "log.tsv.gz"):
        pd.testing.assert_frame_equal(read_table(tmp_path / name), frame, check_dtype=False, obj=name)


def test_unreadable_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_table(tmp_path / "absent.csv")
    (tmp_path / "empty.csv").write_text("\n\n")
    with pytest.raises(ValueError, match=r"empty\.csv is empty"):
        read_table(tmp_path / "empty.csv")
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(ValueError, match=r"bad\.jsonl is not valid JSON Lines"):
        read_table(tmp_path / "bad.jsonl")
    (tmp_path / "list.jsonl").write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="one JSON object per row"):
        read_table(tmp_path / "list.jsonl")


def test_sniffing_and_header_rules() -> None:
    assert sniff_delimiter("a;b;c\n1;2;3\n") == ";"
    assert sniff_delimiter("a|b\n1|2\n") == "|"
    assert sniff_delimiter("one\ntwo\n") == ","  # one column: nothing to split
    # a tab-separated file whose text has a comma on every line: tab gives more fields
    assert sniff_delimiter("x, y\t1\t2\nz, w\t0\t1\n") == "\t"
    assert has_header([["exit1", "exit2", "label"], ["1", "", "0"]])
    assert not has_header([["1", "", "0"], ["1", "1", "0"]])
    assert not has_header([["0.5", "1", "2"]])
    assert has_header([["a", "b"]])


def test_matrix_layout_is_stages_then_label() -> None:
    assert matrix_layout(["exit1", "exit2", "exit3", "y"]) == (["exit1", "exit2", "exit3"], "y")
    with pytest.raises(ValueError, match="give --stages"):
        matrix_layout(["only"])


def test_a_header_only_file_has_no_rows(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("cheap,dear,y\n")
    with pytest.raises(ValueError, match=r"has no rows \(only the header: cheap, dear, y\)"):
        read_table(path)


def test_a_jsonl_cell_nested_3000_deep_is_a_clear_error(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"cheap": ' + "[" * 3000 + "]" * 3000 + ', "y": 1}\n')
    with pytest.raises(ValueError, match="nested too deeply"):
        read_table(path)
