"""Markdown pieces shared by the study reports."""

from __future__ import annotations

from collections.abc import Sequence


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table.

    >>> print(table(["a", "b"], [["1", "2"]]))
    | a | b |
    |---|---|
    | 1 | 2 |

    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
