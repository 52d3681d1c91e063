"""Pictures of a memory layout, like Figure 1 of the paper.

:func:`draw_layout` draws one rectangle per buffer in fast memory: x is logical time
(instruction index), y the address in fast memory. The rectangle spans the buffer's
memory interval ``[start, end + 1)`` and its region ``[offset, offset + aligned
size)``; buffers of one tensor share a colour. Copy steps are hatched and darkened, a
dashed line marks the fast memory capacity, and the legend notes the normalized
reward. Rendering goes through matplotlib's Agg canvas (no display), with all
rectangles in two polygon collections, so layouts of 16,000 buffers draw quickly.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path as MplPath
from matplotlib.ticker import MaxNLocator

from mallocgame.errors import InputFileError, SolutionError
from mallocgame.fileio import write_bytes_atomic
from mallocgame.instance import Instance
from mallocgame.solution import Allocation, Solution

__all__ = [
    "draw_layout",
    "draw_layouts",
]

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}  # file suffix -> matplotlib format
COLORMAP = "tab20"  # qualitative colours, cycled by tensor id
FIGSIZE = (12.0, 6.0)  # inches
DPI = 150  # dots per inch of raster output
OUTLINE_LIMIT = 2000  # outline rectangles only in layouts with at most this many
COPY_FACE = (0.0, 0.0, 0.0, 0.25)  # RGBA darkening over copy steps
COPY_HATCH = "////"
CAPACITY_COLOR = "tab:red"

_UNITS = ((1024 * 1024, "MiB"), (1024, "KiB"), (1, "bytes"))


def _address_unit(top: int) -> tuple[int, str]:
    """The largest binary unit (bytes per unit, name) not above ``top`` bytes."""
    for unit, name in _UNITS:
        if top >= unit:
            return unit, name
    return _UNITS[-1]


def _boxes(rows: list[tuple[int, int, int, int]], unit: int) -> np.ndarray:
    """Polygon vertices, shape (n, 4, 2), of rectangles ``(t0, t1, address0, address1)``.

    Times are in steps, addresses in bytes, converted to ``unit``.
    """
    if not rows:
        return np.zeros((0, 4, 2))
    r = np.asarray(rows, dtype=np.float64)
    x0, x1, y0, y1 = r[:, 0], r[:, 1], r[:, 2] / unit, r[:, 3] / unit
    corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    return np.stack([np.stack(c, axis=1) for c in corners], axis=1)


def _memory_rows(
    instance: Instance, allocations: tuple[Allocation, ...]
) -> tuple[list[tuple[int, int, int, int]], list[int]]:
    """Rectangles of the non-empty memory intervals, and the tensor id of each (an
    allocation of a buffer the instance does not have is not drawn: ``check`` names it)."""
    rows, tensors = [], []
    for a in allocations:
        if a.start is None or a.end is None or not 0 <= a.buffer < instance.num_buffers:
            continue
        buffer = instance.buffers[a.buffer]
        top = a.offset + instance.hardware.aligned(buffer.size)
        rows.append((a.start, a.end + 1, a.offset, top))
        tensors.append(buffer.tensor_id)
    return rows, tensors


def _copy_rows(
    instance: Instance, allocations: tuple[Allocation, ...]
) -> list[tuple[int, int, int, int]]:
    """Rectangles over the copy steps of each Copy allocation (of a buffer the instance has)."""
    rows = []
    for a in allocations:
        if a.action == "Copy" and a.copy is not None and 0 <= a.buffer < instance.num_buffers:
            top = a.offset + instance.hardware.aligned(instance.buffers[a.buffer].size)
            rows.append((a.copy[0], a.copy[1] + 1, a.offset, top))
    return rows


def _draw_rectangles(
    ax: Axes, instance: Instance, solution: Solution, unit: int
) -> tuple[float, float, float, float] | None:
    """Add the buffer and copy rectangles; return the box around all of them, ``(first
    time, last time, lowest address, highest address)`` (addresses in ``unit``), or
    ``None`` where nothing is drawn."""
    rows, tensors = _memory_rows(instance, solution.allocations)
    boxes = _boxes(rows, unit)
    cmap = colormaps[COLORMAP]
    outline = len(rows) <= OUTLINE_LIMIT
    ax.add_collection(
        PolyCollection(
            boxes,  # type: ignore[arg-type]  # an [N, 4, 2] array is a sequence of polygons
            facecolors=cmap(np.mod(np.asarray(tensors, dtype=np.int64), cmap.N)),
            edgecolors="0.2" if outline else "none",
            linewidths=0.4 if outline else 0.0,
        )
    )
    copies = _boxes(_copy_rows(instance, solution.allocations), unit)
    drawn = np.concatenate([boxes, copies])
    if len(copies):
        # One compound path: Agg hatches it in one pass (a collection hatches each box).
        ax.add_patch(
            PathPatch(
                MplPath.make_compound_path_from_polys(copies),
                facecolor=COPY_FACE,
                edgecolor="0.1",
                linewidth=0.0,
                hatch=COPY_HATCH,
            )
        )
    if not len(drawn):
        return None
    x, y = drawn[:, :, 0], drawn[:, :, 1]
    return float(x.min()), float(x.max()), float(y.min()), float(y.max())


def literal_text(text: str) -> str:
    """``text`` as matplotlib draws it letter for letter: its ``$`` escaped, so a name that
    holds ``$...$`` is neither read as mathematics nor (where unbalanced) an error."""
    return text.replace("$", r"\$")


def _legend(ax: Axes, solution: Solution) -> None:
    handles = [
        Patch(
            facecolor=colormaps[COLORMAP](0),
            edgecolor="0.2",
            label="buffer in fast memory (colour: tensor)",
        ),
        Patch(facecolor=COPY_FACE, edgecolor="0.1", hatch=COPY_HATCH, label="copy steps"),
        Line2D([], [], color=CAPACITY_COLOR, linestyle="--", label="fast memory capacity"),
    ]
    ax.legend(
        handles=handles,
        title=f"normalized reward {solution.normalized_reward:.4f}  "
        f"(reward {solution.reward_s:.4g} s, {len(solution.allocations)} allocations)",
        loc="upper center",
        bbox_to_anchor=(0.5, -0.1),
        ncol=3,
        frameon=False,
    )


def _panel(
    ax: Axes, instance: Instance, solution: Solution, title: str | None
) -> tuple[float, float, float, float]:
    """Draw ``solution``'s layout, the capacity line, the axes' labels and the legend on
    ``ax``; returns the box the axes must show, ``(first time, last time, lowest address,
    highest address)`` (addresses in the axis' unit): everything drawn, and at least the
    times ``[0, T]`` and the addresses from 0 to the capacity (an answer drawn unchecked
    can lie below address 0, above the capacity, or outside the program's time)."""
    capacity = instance.hardware.fast_memory_bytes
    unit, unit_name = _address_unit(capacity)
    box = (0.0, float(instance.num_instructions), 0.0, capacity / unit)
    drawn = _draw_rectangles(ax, instance, solution, unit)
    if drawn is not None:
        box = (
            min(box[0], drawn[0]),
            max(box[1], drawn[1]),
            min(box[2], drawn[2]),
            max(box[3], drawn[3]),
        )
    ax.axhline(capacity / unit, color=CAPACITY_COLOR, linestyle="--", linewidth=1.2)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("logical time (instruction index)")
    ax.set_ylabel(f"fast memory address ({unit_name})")
    default_title = f"{instance.name}: {solution.solver or 'solution'}"
    ax.set_title(literal_text(default_title if title is None else title))
    _legend(ax, solution)
    return box


def _figure(
    instance: Instance, solutions: Sequence[Solution], titles: Sequence[str | None]
) -> Figure:
    """One panel per solution, stacked, sharing the time and address axes."""
    fig = Figure(figsize=(FIGSIZE[0], FIGSIZE[1] * len(solutions)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(solutions), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    boxes = [
        _panel(ax, instance, solution, title)
        for ax, solution, title in zip(axes, solutions, titles)
    ]
    first, last = min(b[0] for b in boxes), max(b[1] for b in boxes)
    bottom, top = min(b[2] for b in boxes), max(b[3] for b in boxes)
    for ax in axes:  # one limit for each shared axis: around what every panel draws
        ax.set_xlim(first, last if last > first else first + 1.0)
        ax.set_ylim(bottom * 1.04, top * 1.04 if top > 0 else 1.0)
    return fig


def _picture_format(path: str | os.PathLike[str]) -> str:
    """The matplotlib format ``path``'s suffix names; :class:`InputFileError` for another."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise InputFileError(
            f"{path}: unsupported picture format {suffix!r} (use {', '.join(FORMATS)})"
        )
    return FORMATS[suffix]


def write_figure(fig: Figure, path: str | os.PathLike[str]) -> None:
    """Save ``fig`` to ``path`` atomically (a temporary file beside it, then renamed) in
    the format its suffix names (``.png``, ``.svg``, ``.pdf``)."""
    data = io.BytesIO()
    fig.savefig(data, format=_picture_format(path), dpi=DPI)
    write_bytes_atomic(path, data.getvalue())


def draw_layout(
    instance: Instance,
    solution: Solution,
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
) -> None:
    """Draw the fast memory layout of ``solution`` to ``path`` (``.png``, ``.svg`` or ``.pdf``).

    The file is written atomically (a temporary file beside it, then renamed).
    Raises :class:`InputFileError` for another suffix or an unwritable place, and
    :class:`SolutionError` for a solution of another instance.
    """
    draw_layouts(instance, [solution], path, titles=[title])


def draw_layouts(
    instance: Instance,
    solutions: Sequence[Solution],
    path: str | os.PathLike[str],
    *,
    titles: Sequence[str | None] | None = None,
) -> None:
    """Draw the layouts of several ``solutions`` of ``instance`` one above the other, on
    the same time and address axes, to ``path`` (as :func:`draw_layout`); ``titles``
    (default: each solution's instance and solver) names the panels. A solution of another
    instance (its ``instance_sha256`` is not ``instance``'s: its buffers are not this
    program's) is a :class:`SolutionError`, before anything is drawn."""
    if not solutions:
        raise ValueError("draw_layouts needs at least one solution")
    for solution in solutions:
        if solution.instance_sha256 != instance.sha256:
            raise SolutionError(
                f"draw_layouts: {solution.solver}'s answer is a solution of another instance "
                f"({solution.instance!r}), not of {instance.name!r}"
            )
    titles = list(titles) if titles is not None else [None] * len(solutions)
    if len(titles) != len(solutions):
        raise ValueError(f"{len(titles)} titles for {len(solutions)} solutions")
    _picture_format(path)  # a bad suffix is refused before any drawing
    write_figure(_figure(instance, solutions, titles), path)
