"""The suite table."""

from __future__ import annotations

from mallocgame.bench.suite_table import format_suite_table, suite_row


def test_suite_row_measures_a_program() -> None:
    row = suite_row("xla-v1/lstm_infer")
    assert row.loops >= 1 and row.buffers > row.instructions > 0
    assert row.drop == 0.0 and 0.0 < row.random <= 1.0 and 0.0 < row.greedy <= 1.0
    assert "| `xla-v1/lstm_infer` |" in format_suite_table([row])
