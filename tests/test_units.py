"""Human-readable quantities."""

from __future__ import annotations

import pytest

from mallocgame.units import format_bytes


@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (13_824, "13.5 KiB"),
        (128 << 20, "128.0 MiB"),
        (40 << 30, "40.0 GiB"),
        ((1 << 20) - 1, "1.0 MiB"),  # not 1024.0 KiB
        ((1 << 30) - 1, "1.0 GiB"),
        (-2048, "-2.0 KiB"),
    ],
)
def test_format_bytes_picks_the_largest_binary_unit(n: int, text: str) -> None:
    assert format_bytes(n) == text
