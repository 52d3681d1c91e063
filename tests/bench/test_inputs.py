"""The bench studies' and benchmark scripts' input types (mallocgame.bench.inputs)."""

from __future__ import annotations

import argparse

import pytest

from mallocgame.bench.inputs import at_least


def test_at_least_takes_whole_numbers_from_its_bound() -> None:
    assert at_least(1)("3") == 3 and at_least(200)("200") == 200


@pytest.mark.parametrize(
    "least, text, needle",
    [
        (1, "0", "must be at least 1, not 0"),
        (200, "100", "must be at least 200, not 100"),
        (1, "2.5", "not a whole number: '2.5'"),
    ],
)
def test_at_least_refuses_in_argparses_one_line(least: int, text: str, needle: str) -> None:
    parser = argparse.ArgumentParser(prog="script")
    parser.add_argument("--n", type=at_least(least))
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--n", text])
    assert exit_info.value.code == 2
    with pytest.raises(argparse.ArgumentTypeError, match=needle):
        at_least(least)(text)


def test_seconds_arg_is_a_budget_or_argparses_one_line() -> None:
    from mallocgame.bench.inputs import seconds_arg

    assert seconds_arg("2.5") == 2.5
    for text in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(argparse.ArgumentTypeError):
            seconds_arg(text)
