"""Read a logged cascade as users have it: CSV, TSV, Parquet or JSON Lines, with or without a header.

Early-exit and cascade research publishes its *prediction matrices* as one column per stage (exit)
in cascade order, then the label column, often as headerless tab- or space-separated numbers.
:func:`read_table` reads such a file into a :class:`pandas.DataFrame` whose column names are
strings, and :func:`matrix_layout` splits it into stage columns and the label column.

* ``.parquet`` / ``.pq``: Parquet (the ``[parquet]`` extra);
* ``.jsonl`` / ``.ndjson``: one JSON object per line; ``.json``: the same, or an array of objects;
* anything else is delimited text (optionally ``.gz``/``.bz2``/``.xz`` compressed): the delimiter
  is sniffed among ``,`` ``\\t`` ``;`` ``|`` and runs of spaces (``numpy.savetxt``'s default), and
  the first row is a header unless it is a data row (see :func:`has_header`). A headerless file's
  columns are named ``"0"``, ``"1"``, ...
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import pandas as pd

from uss_stream.core.extras import require

__all__ = ["has_header", "matrix_layout", "read_table", "sniff_delimiter"]

PARQUET_SUFFIXES = (".parquet", ".pq")
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
#: Delimiters a text log may use, most specific first; whitespace (runs of spaces) is the fallback.
DELIMITERS = ",\t;|"
WHITESPACE = r"\s+"
_OPENERS: dict[str, Callable[..., IO[Any]]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_SAMPLE_LINES = 200


def read_table(path: str | Path) -> pd.DataFrame:
    """The log at ``path`` as a DataFrame with string column names, in the file's column order.

    Parameters
    ----------
    path
        A CSV/TSV/space-separated text file, Parquet file or JSON Lines file (see the module).

    Examples
    --------
    A headerless tab-separated prediction matrix (two exits, then the label):

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "preds.tsv").write_text("0\\t1\\t1\\n1\\t1\\t1\\n0\\t0\\t0\\n")
    >>> read_table(folder / "preds.tsv")
       0  1  2
    0  0  1  1
    1  1  1  1
    2  0  0  0
    >>> rows = ['{"cheap": 1, "dear": 0, "y": 0}', '{"cheap": 0, "dear": 0, "y": 0}']
    >>> _ = (folder / "log.jsonl").write_text("\\n".join(rows))
    >>> list(read_table(folder / "log.jsonl").columns)
    ['cheap', 'dear', 'y']
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            f"{path} is a directory: give the log file itself (CSV, JSON lines or Parquet)"
        )
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    suffixes = [s.lower() for s in path.suffixes]
    suffix = suffixes[-1] if suffixes else ""
    if suffix in PARQUET_SUFFIXES:
        require("pyarrow", purpose="reading Parquet logs")
        table = pd.read_parquet(path)
    elif suffix in JSON_LINES_SUFFIXES or suffix == ".json":
        table = _read_json(path, lines=suffix != ".json")
    else:
        table = _read_text(path, _OPENERS.get(suffix, open))
    table.columns = [str(c) for c in table.columns]
    if table.empty:
        raise ValueError(
            f"{path} has no rows"
            + (f" (only the header: {', '.join(table.columns)})" if len(table.columns) else "")
        )
    return table


def _read_json(path: Path, *, lines: bool) -> pd.DataFrame:
    text = path.read_text()
    if not lines:
        lines = not text.lstrip().startswith("[")
    try:
        records = (
            [json.loads(line) for line in text.splitlines() if line.strip()] if lines else json.loads(text)
        )
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON{' Lines' if lines else ''}: {error}") from None
    except RecursionError:
        raise ValueError(f"{path}: a value is nested too deeply to read (a log holds flat rows)") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path}: expected one JSON object per row")
    return pd.DataFrame.from_records(records)


def _read_text(path: Path, opener: Callable[..., IO[Any]]) -> pd.DataFrame:
    with opener(path, "rt", newline="") as handle:
        sample = [line for _, line in zip(range(_SAMPLE_LINES), handle)]
    text = "".join(sample)
    if not text.strip():
        raise ValueError(f"{path} is empty")
    delimiter = sniff_delimiter(text)
    rows = _split(sample, delimiter)
    header = has_header(rows)
    sep = WHITESPACE if delimiter == " " else delimiter
    with opener(path, "rt", newline="") as handle:
        return pd.read_csv(handle, sep=sep, header=0 if header else None)


def _split(lines: Sequence[str], delimiter: str) -> list[list[str]]:
    if delimiter == " ":
        return [line.split() for line in lines if line.strip()]
    return [row for row in csv.reader(io.StringIO("".join(lines)), delimiter=delimiter) if row]


def sniff_delimiter(sample: str) -> str:
    """The delimiter of a text sample: one of ``, \\t ; |``, or ``" "`` for runs of spaces.

    The delimiter is the one of ``, \\t ; |`` that splits every line of the sample into the same
    number of fields, the most if several do (the first on a tie); else runs of spaces if they
    split every line alike; else ``","`` (a one-column file).

    Examples
    --------
    >>> sniff_delimiter("a\\tb\\tc\\n1\\t0\\t1\\n")
    '\\t'
    >>> sniff_delimiter("1.0e+00 0.0e+00 1.0e+00\\n0.0e+00  1.0e+00 1.0e+00\\n")
    ' '
    >>> sniff_delimiter('s1,s2,"y, the label"\\n1,0,1\\n')
    ','
    """
    lines = [line for line in sample.splitlines(keepends=True) if line.strip()]
    best, best_width = ",", 1
    for delimiter in DELIMITERS:
        widths = {len(row) for row in _split(lines, delimiter)}
        if len(widths) == 1 and (width := widths.pop()) > best_width:
            best, best_width = delimiter, width
    spaced = {len(row) for row in _split(lines, " ")}
    if best_width == 1 and len(spaced) == 1 and spaced.pop() >= 2:
        return " "
    return best


def _is_number(text: str) -> bool:
    """A number, or an empty field (a missing value does not make a column text)."""
    if not text.strip():
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def has_header(rows: Sequence[Sequence[str]]) -> bool:
    """Whether the first of ``rows`` (split fields of a text sample) names the columns.

    * A column whose other rows are all numbers but whose first row is not: a header.
    * A first row of numbers only: data, except exactly ``0, 1, ..., n-1`` (the header pandas writes
      for unnamed columns).
    * Text everywhere: a header unless one of its values reappears in its column below (class labels
      repeat, column names do not).

    Examples
    --------
    >>> has_header([["s1", "s2", "y"], ["0", "1", "1"]])
    True
    >>> has_header([["0", "1", "1"], ["1", "1", "0"]])
    False
    >>> has_header([["0", "1", "2"], ["1", "1", "0"]])
    True
    >>> has_header([["cat", "dog", "cat"], ["dog", "dog", "dog"]])
    False
    """
    if len(rows) < 2:
        return bool(rows) and not all(_is_number(value) for value in rows[0])
    first, rest = rows[0], rows[1:]
    columns = [[row[j] for row in rest if j < len(row)] for j in range(len(first))]
    if any(not _is_number(name) and all(map(_is_number, col)) for name, col in zip(first, columns)):
        return True
    if all(_is_number(value) for value in first):
        return [value.strip() for value in first] == [str(j) for j in range(len(first))]
    return not any(name in col for name, col in zip(first, columns))


def matrix_layout(columns: Sequence[str]) -> tuple[list[str], str]:
    """Stage columns and label column of a prediction matrix: every column but the last, then the last.

    Examples
    --------
    >>> matrix_layout(["0", "1", "2", "3"])
    (['0', '1', '2'], '3')
    """
    if len(columns) < 2:
        raise ValueError(
            f"a prediction matrix has at least one stage column then the label column; got {len(columns)} "
            "column(s): give --stages (and --label or --error-rates)"
        )
    return list(columns[:-1]), columns[-1]
