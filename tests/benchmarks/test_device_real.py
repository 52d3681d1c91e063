"""``benchmarks/device_real.py``'s options: a bad number is refused before any work (its
runs on the CPU: tests/runtime/test_bench.py)."""

from __future__ import annotations

import pytest

from tests.benchmarks import load_benchmark


@pytest.mark.parametrize(
    ("option", "value", "why"),
    [
        ("--capacity-fraction", "0", "0 is not in [1e-06, 1]"),
        ("--capacity-fraction", "7", "7 is not in [1e-06, 1]"),
        ("--work", "-3", "must be at least 1, not -3"),
        ("--profile-repeats", "0", "must be at least 1, not 0"),
        ("--seconds", "nan", "nan is not in [1, 604800]"),
        ("--seconds", "0.5", "0.5 is not in [1, 604800]"),
        ("--hbm-limit", "inf", "inf is not in [0.001, 1000]"),
    ],
)
def test_a_bad_number_is_refused_in_one_line_before_any_work(tmp_path, capsys, option, value, why):
    """These were taken as given (exit 0): a fraction of 0 or 7, -3 games, no profile run,
    a budget of NaN seconds."""
    device_real = load_benchmark("device_real")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        device_real.main(["--dry-run", "--out", str(out), option, value])
    assert exit_.value.code == 2
    assert f"argument {option}: {why}" in capsys.readouterr().err
    assert not out.exists()
