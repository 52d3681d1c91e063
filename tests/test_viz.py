"""Tests of the memory layout pictures (mallocgame.viz)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mallocgame.errors import InputFileError, SolutionError
from mallocgame.instance import Instance
from mallocgame.solution import Allocation, Solution
from mallocgame.viz import draw_layout, draw_layouts
from mallocgame.workloads.synthetic import generate
from tests.builders import assert_only_files, conformance_instance, trajectory_solution

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _empty_solution(inst: Instance) -> Solution:
    return Solution(inst.name, inst.sha256, "drop", 0, 0.0, (), 0.0, 0.0)


def test_png_of_a_trajectory(tmp_path: Path) -> None:
    inst, solution = trajectory_solution("tiny_chain")
    assert any(a.copy is not None for a in solution.allocations)
    path = tmp_path / "layout.png"
    draw_layout(inst, solution, path, title="tiny chain")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
    assert_only_files(tmp_path, "layout.png")


def test_names_with_dollars_are_drawn_as_written(tmp_path: Path) -> None:
    import dataclasses

    inst, solution = trajectory_solution("tiny_chain")
    named = dataclasses.replace(inst, name=r"lstm $\alpha_$ cost")
    odd = dataclasses.replace(solution, solver=r"my$\foo$solver")
    draw_layout(named, odd, tmp_path / "a.png")  # unbalanced and unknown TeX: no error
    draw_layouts(named, [odd, solution], tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes().startswith(PNG_SIGNATURE)


def test_empty_solution_draws(tmp_path: Path) -> None:
    inst = conformance_instance("tiny_chain")
    path = tmp_path / "empty.png"
    draw_layout(inst, _empty_solution(inst), path)
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert_only_files(tmp_path, "empty.png")


@pytest.mark.parametrize(
    ("suffix", "magic"), [(".svg", b"<?xml"), (".pdf", b"%PDF"), (".PNG", PNG_SIGNATURE)]
)
def test_format_from_suffix(tmp_path: Path, suffix: str, magic: bytes) -> None:
    inst, solution = trajectory_solution("random105")
    path = tmp_path / f"layout{suffix}"
    draw_layout(inst, solution, str(path))
    assert path.read_bytes().startswith(magic)


def test_overwrites_atomically(tmp_path: Path) -> None:
    inst, solution = trajectory_solution("tiny_alias")
    path = tmp_path / "layout.png"
    path.write_bytes(b"old")
    draw_layout(inst, solution, path)
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert_only_files(tmp_path, "layout.png")


def test_unknown_suffix_is_refused(tmp_path: Path) -> None:
    inst, solution = trajectory_solution("tiny_chain")
    with pytest.raises(InputFileError, match="unsupported picture format"):
        draw_layout(inst, solution, tmp_path / "layout.bmp")
    assert_only_files(tmp_path)


def test_many_allocations(tmp_path: Path) -> None:
    """A large layout (rectangles need not be a legal mapping to be drawn)."""
    inst = generate(4000, 1)
    step = inst.hardware.alignment_bytes
    allocations = tuple(
        Allocation(
            b.id,
            "Copy" if i % 3 == 0 else "NoCopy",
            (i * step) % inst.hardware.fast_memory_bytes,
            max(b.instruction - 2, 0),
            b.instruction,
            (max(b.instruction - 2, 0), max(b.instruction - 1, 0)) if i % 3 == 0 else None,
        )
        for i, b in enumerate(inst.buffers)
        if not b.is_output
    )
    solution = Solution(inst.name, inst.sha256, "sketch", 0, 0.0, allocations, 1.0, 0.5)
    path = tmp_path / "big.png"
    draw_layout(inst, solution, path)
    assert path.read_bytes().startswith(PNG_SIGNATURE)


def test_layouts_side_by_side(tmp_path: Path) -> None:
    inst, solution = trajectory_solution("tiny_chain")
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    draw_layout(inst, solution, one)
    draw_layouts(
        inst, [solution, _empty_solution(inst)], two, titles=["a trajectory", "nothing fast"]
    )
    assert two.read_bytes().startswith(PNG_SIGNATURE)
    assert len(two.read_bytes()) > len(one.read_bytes())  # two panels


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_stacked_panels_show_the_highest_allocation_of_any(order) -> None:
    """The panels share their address axis: its limit is the highest of all, whichever panel
    holds it (an answer drawn unchecked can lie above the capacity)."""
    from dataclasses import replace

    from mallocgame.viz import _address_unit, _figure

    inst, solution = trajectory_solution("tiny_chain")
    capacity = inst.hardware.fast_memory_bytes
    high = replace(
        solution,
        allocations=tuple(replace(a, offset=a.offset + 2 * capacity) for a in solution.allocations),
    )
    solutions = [(solution, high)[i] for i in order]
    figure = _figure(inst, solutions, [None, None])
    limits = {ax.get_ylim()[1] for ax in figure.axes}
    highest = max(a.offset + inst.buffers[a.buffer].size for a in high.allocations)
    unit, _ = _address_unit(capacity)
    assert len(limits) == 1 and limits.pop() >= highest / unit


@pytest.mark.parametrize(
    "change",
    [{"offset": -4096}, {"start": -3}, {"end": 40}, {"action": "Copy", "copy": (-2, 0)}],
    ids=["below-address-0", "before-time-0", "past-the-end", "copy-before-time-0"],
)
def test_an_allocation_outside_the_memory_or_the_time_is_drawn_whole(change) -> None:
    """An invalid answer is drawn anyway, to show what is wrong: the axes of every panel
    reach below address 0, before time 0 and past the program's end where it does, and show
    at least the times [0, T] and the addresses from 0 to the capacity."""
    from dataclasses import replace

    from mallocgame.viz import _address_unit, _figure

    inst, solution = trajectory_solution("tiny_chain")
    first = replace(solution.allocations[0], **change)
    bad = replace(solution, allocations=(first, *solution.allocations[1:]))
    capacity = inst.hardware.fast_memory_bytes
    unit, _ = _address_unit(capacity)
    figure = _figure(inst, [solution, bad], [None, None])
    for ax in figure.axes:
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert y0 <= min(0, first.offset) / unit and y1 >= capacity / unit
        assert x0 <= min(0, first.start, (first.copy or (0,))[0])
        assert x1 >= max(inst.num_instructions, first.end + 1)


@pytest.mark.parametrize(
    "solutions, titles, message",
    [
        (0, None, "at least one"),
        (2, ["only one"], "1 titles for 2 solutions"),
    ],
)
def test_layouts_refuse_a_bad_call(tmp_path: Path, solutions: int, titles, message: str) -> None:
    inst, solution = trajectory_solution("tiny_chain")
    with pytest.raises(ValueError, match=message):
        draw_layouts(inst, [solution] * solutions, tmp_path / "x.png", titles=titles)
    with pytest.raises(InputFileError, match="unsupported picture format"):
        draw_layouts(inst, [solution], tmp_path / "x.gif")
    assert_only_files(tmp_path)


def test_a_solution_of_another_instance_is_refused_and_nothing_drawn(tmp_path: Path) -> None:
    """The library drew it (show refused it, by a check of its own): another program's
    offsets and intervals over this one's buffers, past the capacity line."""
    inst, solution = trajectory_solution("tiny_chain")
    other, _ = trajectory_solution("random105")
    with pytest.raises(SolutionError, match="a solution of another instance"):
        draw_layout(other, solution, tmp_path / "a.png")
    with pytest.raises(SolutionError, match="a solution of another instance"):
        draw_layouts(inst, [solution, _empty_solution(other)], tmp_path / "b.png")
    assert_only_files(tmp_path)
