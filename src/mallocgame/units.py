"""Human-readable quantities for what the command line and reports print."""

from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(n: int) -> str:
    """``n`` bytes with a binary unit: ``"128.0 MiB"``, ``"3.5 KiB"``, ``"512 B"``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
