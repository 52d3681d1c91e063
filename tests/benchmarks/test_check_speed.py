"""The checker speed benchmark: a size of no buffer is refused."""

from __future__ import annotations

import sys

import pytest

from tests.benchmarks import load_benchmark

check_speed = load_benchmark("check_speed")


@pytest.mark.parametrize("size", ["0", "-3", "x"])
def test_a_size_below_one_is_a_usage_error(size: str, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["check_speed.py", "--sizes", "1000", size])
    with pytest.raises(SystemExit) as stop:
        check_speed.main()
    assert stop.value.code == 2 and "argument --sizes" in capsys.readouterr().err
