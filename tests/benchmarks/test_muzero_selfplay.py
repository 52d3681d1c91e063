"""The MuZero self-play benchmark: a malformed or unknown option, or an unknown program,
is refused before the trainer is built."""

from __future__ import annotations

import sys

import pytest

from tests.benchmarks import load_benchmark

muzero_selfplay = load_benchmark("muzero_selfplay")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--option", "foo"], "argument --option: expected KEY=VALUE, not 'foo'"),
        (["--option", "nosuch=1"], "muzero: unknown option 'nosuch'"),
        (["--program", "xla-v1/nosuch"], "xla-v1/nosuch: neither a bundled workload"),
        (["--seconds", "nan"], "argument --seconds: seconds must be a finite number"),
        (["--seconds", "0"], "argument --seconds: seconds must be a finite number"),
    ],
)
def test_a_bad_argument_is_a_usage_error(argv, said, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["muzero_selfplay.py", *argv])
    monkeypatch.setattr(muzero_selfplay, "Trainer", lambda *args, **kwargs: pytest.fail("built"))
    with pytest.raises(SystemExit) as stop:
        muzero_selfplay.main()
    assert stop.value.code == 2 and said in capsys.readouterr().err
