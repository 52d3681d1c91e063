"""The suite loading benchmark: its arguments are argparse's (--help, a suite name)."""

from __future__ import annotations

import pytest

from tests.benchmarks import load_benchmark

suite_load = load_benchmark("suite_load")


def test_help_is_help_not_a_suite(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        suite_load.main(["--help"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("usage:")


def test_an_unknown_suite_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        suite_load.main(["nosuch"])
    assert stop.value.code == 2 and "invalid choice: 'nosuch'" in capsys.readouterr().err
