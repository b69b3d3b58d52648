"""Replay logs: how a repetition samples a log's rows, and a log's encoding and checks.

A log is ``N x K`` stage outputs (any hashable values; a DataFrame's columns are the stages) and
optionally ``N`` true labels. :func:`encode_log` turns both into integer codes of one shared
alphabet (so that "stage says the label" is one integer comparison) and refuses missing values by
row; :func:`check_column_kinds` refuses columns of mixed kinds (``0`` against ``"0"``);
:func:`sample_rows` draws the rows each repetition of :func:`uss_stream.replay.engine.replay` plays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["SAMPLING_MODES", "check_column_kinds", "encode_log", "sample_rows"]

#: How each repetition draws its rows from the log.
SAMPLING_MODES = ("uniform", "permutation", "sequential")


def sample_rows(
    n_rows: int, *, horizon: int, reps: int, seed: Any = 0, sampling: str = "uniform"
) -> np.ndarray:
    """The ``(reps, horizon)`` log rows each repetition replays.

    * ``"uniform"``: ``numpy.random.default_rng(seed).integers(0, n_rows, size=(reps, horizon))``;
    * ``"permutation"``: each repetition walks through independent random permutations of the log,
      one after the other (without replacement within each pass);
    * ``"sequential"``: rows ``0, 1, ..., n_rows - 1, 0, 1, ...`` in every repetition.

    >>> sample_rows(3, horizon=5, reps=2, sampling="sequential").tolist()
    [[0, 1, 2, 0, 1], [0, 1, 2, 0, 1]]
    >>> sorted(sample_rows(4, horizon=4, reps=1, sampling="permutation")[0].tolist())
    [0, 1, 2, 3]

    """
    if sampling == "uniform":
        return np.random.default_rng(seed).integers(0, n_rows, size=(reps, horizon))
    if sampling == "permutation":
        rng = np.random.default_rng(seed)
        passes = -(-horizon // n_rows)
        tiled = np.broadcast_to(np.arange(n_rows), (reps, passes, n_rows))
        return rng.permuted(tiled, axis=2).reshape(reps, passes * n_rows)[:, :horizon]
    if sampling == "sequential":
        return np.broadcast_to(np.arange(horizon) % n_rows, (reps, horizon)).copy()
    raise ValueError(f"sampling must be one of {', '.join(SAMPLING_MODES)}, got {sampling!r}")


def encode_log(outputs: Any, labels: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Map the log's values to small integers, one mapping shared by all columns and the labels.

    Equal values get equal codes wherever they appear, so agreement between stages (and with the
    label) is preserved. Missing values (None/NaN) are rejected, naming the rows.

    >>> codes, label_codes = encode_log([["cat", "dog"], ["dog", "dog"]], ["dog", "cat"])
    >>> codes.tolist(), label_codes.tolist()
    ([[0, 1], [1, 1]], [1, 0])
    >>> encode_log([[1, None], [0, 1]])
    Traceback (most recent call last):
    ...
    ValueError: outputs have missing values (None/NaN) in 1 row(s): 0

    """
    table = _as_array(outputs, "outputs")
    if table.ndim != 2 or table.shape[0] == 0 or table.shape[1] == 0:
        raise ValueError(f"outputs must be a non-empty N x K table, got shape {table.shape}")
    _reject_missing(pd.isna(table).any(axis=1), "outputs")
    truth = None
    if labels is not None:
        truth = _as_array(labels, "labels")
        if truth.shape != (table.shape[0],):
            raise ValueError(
                f"labels must hold {table.shape[0]} entries (one per row), got shape {truth.shape}"
            )
        _reject_missing(pd.isna(truth), "labels")
    parts = [table.ravel()] if truth is None else [table.ravel(), truth]
    if all(part.dtype.kind in "biuf" for part in parts):
        # Numbers (no NaN left): equal values are equal after the common numeric cast.
        _, codes = np.unique(np.concatenate(parts), return_inverse=True)
    else:
        try:
            codes, _ = pd.factorize(np.concatenate([part.astype(object) for part in parts]))
        except TypeError as error:
            raise ValueError(f"outputs and labels must be hashable: {error}") from error
    codes = codes.astype(np.int64).ravel()
    out = codes[: table.size].reshape(table.shape)
    return out, (None if truth is None else codes[table.size :])


def check_column_kinds(outputs: Any) -> None:
    """Refuse a log whose stage columns hold numbers in some and text in others.

    ``'1' != 1``: a column read as text (a CSV column with one cell that is not a number) would
    never agree with the numeric ones, and its error rate would silently become 1. Columns that
    mix both within themselves are left alone (any hashable labels are allowed).

    >>> import pandas as pd
    >>> check_column_kinds(pd.DataFrame({"a": [0, 1], "b": ["1", "?"]}))
    Traceback (most recent call last):
    ...
    ValueError: outputs mix numbers and text: column 'b' holds text, column 'a' numbers, ...

    """
    names = list(outputs.columns) if isinstance(outputs, pd.DataFrame) else None
    table = _as_array(outputs, "outputs")
    if table.ndim != 2:
        return
    kinds: dict[str, list[str]] = {}
    for j in range(table.shape[1]):
        column = table[:, j]
        inferred = "numeric" if column.dtype.kind in "biuf" else pd.api.types.infer_dtype(column, skipna=True)
        kind = _KINDS.get(inferred)
        if kind is not None:
            kinds.setdefault(kind, []).append(repr(names[j]) if names is not None else str(j))
    if len(kinds) == 2:
        text, numbers = (", ".join(kinds[kind]) for kind in ("text", "numbers"))
        raise ValueError(
            f"outputs mix numbers and text: column {text} holds text, column {numbers} numbers, and "
            "'1' != 1, so they would never agree; give every stage column the same type (a CSV "
            "column is read as text when one of its cells is not a number)"
        )


def _check_labels_overlap(codes: np.ndarray, label_codes: np.ndarray | None, what: str) -> None:
    if label_codes is not None and not np.isin(label_codes, codes).any():
        raise ValueError(
            f"{what} share no value with the outputs: every stage would be wrong on every row "
            "(are the labels coded like the outputs, e.g. 0/1 and not 'neg'/'pos'?)"
        )


_KINDS = {
    "numeric": "numbers",
    "integer": "numbers",
    "floating": "numbers",
    "mixed-integer-float": "numbers",
    "boolean": "numbers",
    "decimal": "numbers",
    "string": "text",
}


def _as_array(values: Any, what: str) -> np.ndarray:
    """``values`` as an ndarray: numeric dtypes are kept, anything else becomes ``object``."""
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        return values
    try:
        return np.asarray(values, dtype=object)
    except ValueError as error:
        raise ValueError(f"{what} must be an N x K table or a column: {error}") from error


def _reject_missing(mask: np.ndarray, what: str) -> None:
    bad = np.flatnonzero(mask)
    if bad.size:
        shown = ", ".join(str(r) for r in bad[:10])
        more = f" (and {bad.size - 10} more)" if bad.size > 10 else ""
        raise ValueError(f"{what} have missing values (None/NaN) in {bad.size} row(s): {shown}{more}")
