"""The library's errors (mallocgame.errors): a foreign error summed up in one line."""

from __future__ import annotations

from mallocgame.errors import one_line


def test_one_line_is_the_type_and_the_first_line_of_text() -> None:
    assert one_line(ValueError("\n  boom  \n\n more\n")) == "ValueError: boom"
    assert one_line(RuntimeError()) == "RuntimeError: "
