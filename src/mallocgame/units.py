"""Human-readable quantities for what the command line and reports print."""

from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(n: int) -> str:
    """``n`` bytes with a binary unit: ``"128.0 MiB"``, ``"3.5 KiB"``, ``"512 B"``; the
    unit is the largest whose figure, rounded to one decimal, is at least 1 (so 1,048,575
    bytes read ``"1.0 MiB"``, not ``"1024.0 KiB"``; under 1,024 bytes they are counted
    exactly), a negative ``n`` by its size."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale or (scale > 1 << 10 and round(abs(n) / scale, 1) >= 1):
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
