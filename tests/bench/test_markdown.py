"""Markdown tables of the bench commands."""

from __future__ import annotations

from mallocgame.bench.markdown import markdown_table


def test_header_rule_and_rows() -> None:
    table = markdown_table(
        ["name", "model", "value"], [["a", "x", "1.0"], ["b", "", "2.0"]], left=2
    )
    assert table.splitlines() == [
        "| name | model | value |",
        "| --- | --- | ---: |",
        "| a | x | 1.0 |",
        "| b |  | 2.0 |",
    ]
    assert markdown_table(["only"], []) == "| only |\n| --- |"
