"""Markdown tables, as every ``bench`` command prints them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["markdown_table"]


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], *, left: int = 1) -> str:
    """A Markdown table: the ``header`` row, its rule (the first ``left`` columns
    left-aligned, the others right-aligned, as numbers are) and the ``rows``, cells as given."""
    rule = ["---"] * left + ["---:"] * (len(header) - left)
    lines = [header, rule, *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)
