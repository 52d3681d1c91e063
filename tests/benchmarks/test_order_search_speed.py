"""The order-search speed benchmark: an unknown program is refused before any search."""

from __future__ import annotations

import sys

import pytest

from tests.benchmarks import load_benchmark

order_search_speed = load_benchmark("order_search_speed")


def test_an_unknown_program_is_a_usage_error(monkeypatch, capsys) -> None:
    argv = ["order_search_speed.py", "--programs", "xla-v2/alexnet_train_b32", "xla-v2/nosuch"]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(order_search_speed, "load_workload", lambda name: pytest.fail("loaded"))
    with pytest.raises(SystemExit) as stop:
        order_search_speed.main()
    assert stop.value.code == 2
    assert "xla-v2/nosuch: neither a bundled workload" in capsys.readouterr().err
