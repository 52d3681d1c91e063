"""Leaves of nested lists and tuples (a PyTorch graph's arguments, a model's results)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["nested_leaves"]


def nested_leaves(value: Any, keep: Callable[[Any], bool]) -> list[Any]:
    """The leaves of ``value``, a nest of lists and tuples, that ``keep`` accepts, in
    order (depth first); ``value`` itself when it is not a list or tuple and is kept."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in nested_leaves(v, keep)]
    return [value] if keep(value) else []
