"""XLA's own placement as the solution ``xla``: checked like any solver's answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mallocgame.check import check_solution
from mallocgame.costmodel import derive_instance
from mallocgame.frontends.xla import extract_dump_with_placement
from mallocgame.frontends.xla_placement import PlacementError, placement_solution
from mallocgame.simulate import simulate
from mallocgame.solution import Allocation

DATA = Path(__file__).parent / "data"


def _kinds(report) -> set[str]:
    return {f.kind for f in report.failures}


def test_tpu_placement_is_a_valid_solution() -> None:
    program, placement = extract_dump_with_placement(DATA / "tpu_mlp")
    inst = derive_instance(program, "tpu_v4i", capacity_fraction=None)
    solution = placement_solution(inst, placement)
    assert solution.solver == "xla" and solution.actions is None
    by_buffer = {a.buffer: a for a in solution.allocations}
    b = inst.instructions
    # fusion.1 produced into S(1) and evicted before fusion.3: copied out over step 1.
    assert by_buffer[b[0].buffers[2]] == Allocation(b[0].buffers[2], "Copy", 0, 0, 1, (1, 1))
    # fusion.2 reads it where it was produced: resident, nothing to extend.
    assert by_buffer[b[1].buffers[0]] == Allocation(b[1].buffers[0], "NoCopy", 0, None, None, None)
    # fusion.3 reads the evicted copy from slow memory and the weight through a prefetch
    # started after fusion.1; both allocations live over step 1, so their offsets differ.
    assert b[2].buffers[0] not in by_buffer
    prefetch = by_buffer[b[2].buffers[1]]
    assert (prefetch.action, prefetch.start, prefetch.end, prefetch.copy) == ("Copy", 1, 2, (1, 1))
    assert prefetch.offset >= inst.buffers[b[0].buffers[2]].size
    # The cross-program prefetch of w1 happens before the program: the game cannot say it.
    assert b[0].buffers[1] not in by_buffer
    assert solution.info["unexpressed"] == [
        "fusion.1: the prefetch of Arg_1.2 has no step to copy in"
    ]
    assert check_solution(inst, solution).ok
    assert 0 < solution.normalized_reward < 1
    assert simulate(inst, solution).latency_s > 0


def test_a_placement_the_cost_model_cannot_supply_is_refused_with_the_rule() -> None:
    program, placement = extract_dump_with_placement(DATA / "tpu_mlp")
    inst = derive_instance(program, "gpu_hbm_host", capacity_fraction=None)
    report = check_solution(inst, placement_solution(inst, placement))
    assert _kinds(report) == {"copy_supply"}


def test_chains_that_do_not_fit_are_listed_and_refused() -> None:
    program, placement = extract_dump_with_placement(DATA / "tpu_mlp")
    inst = derive_instance(program, "tpu_v4i", capacity_fraction=0.05)
    solution = placement_solution(inst, placement)
    assert any("no room in the fast memory" in line for line in solution.info["unexpressed"])
    assert "over_capacity" in _kinds(check_solution(inst, solution))


def test_host_offloading_with_the_device_memory_as_fast() -> None:
    program, placement = extract_dump_with_placement(DATA / "gpu_offload")
    inst = derive_instance(program, "gpu_hbm_host", capacity_fraction=None)
    solution = placement_solution(inst, placement, fast_spaces={0})
    unexpressed = solution.info["unexpressed"]
    assert any("reads a.1 from memory space 0" in line for line in unexpressed)
    assert any("program result fusion.4 stays in memory space 0" in line for line in unexpressed)
    first = inst.instructions[0]
    offloaded = {a.buffer: a for a in solution.allocations}[first.buffers[-1]]
    assert (offloaded.action, offloaded.copy) == (
        "Copy",
        (1, 1),
    )  # offloaded to the host over step 1
    assert _kinds(check_solution(inst, solution)) <= {"copy_supply"}
    # Memory space 1 names nothing here: the module's placement is all slow memory.
    nothing = placement_solution(inst, placement)
    assert nothing.allocations == () and check_solution(inst, nothing).ok


def test_placement_of_another_program_is_refused() -> None:
    _, placement = extract_dump_with_placement(DATA / "tpu_mlp")
    other, _ = extract_dump_with_placement(DATA / "gpu_step")
    with pytest.raises(PlacementError, match="does not match instance"):
        placement_solution(derive_instance(other, "tpu_v4i", capacity_fraction=None), placement)


def test_placement_of_a_program_with_the_same_counts_is_refused_by_its_structure() -> None:
    """Counts alike (one tensor's size doubled): the recorded structure tells them apart."""
    from dataclasses import replace

    from mallocgame.frontends.xla_placement import (
        instance_structure_sha256,
        program_structure_sha256,
    )

    program, placement = extract_dump_with_placement(DATA / "tpu_mlp")
    assert placement.structure_sha256 == program_structure_sha256(program)
    inst = derive_instance(program, "tpu_v4i", capacity_fraction=None)
    assert instance_structure_sha256(inst) == placement.structure_sha256
    first = program.tensors[0]
    other = replace(program, tensors=(replace(first, size=2 * first.size), *program.tensors[1:]))
    with pytest.raises(PlacementError, match="another program's tensors or sizes"):
        placement_solution(derive_instance(other, "tpu_v4i", capacity_fraction=None), placement)
    unbound = replace(placement, structure_sha256=None)  # a file from before the field
    placement_solution(derive_instance(other, "tpu_v4i", capacity_fraction=None), unbound)


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d["buffers"][0].__setitem__(0, [0, 7]), "copy 7 of 1 copies"),
        (lambda d: d["buffers"][0].__setitem__(0, [1.9, -1]), "1.9 is not a whole number"),
        (lambda d: d["buffers"][0].__setitem__(0, [True, -1]), "True is not a whole number"),
        (lambda d: d["copies"][0].__setitem__(3, 1.7), "1.7 is not a whole number"),
        (lambda d: d["copies"][0].__setitem__(3, float("inf")), "inf is not a whole number"),
        (lambda d: d.__setitem__("structure_sha256", "ab"), "'ab' is not a SHA-256 digest"),
        (lambda d: d.__setitem__("structure_sha256", 7), "7 is not a SHA-256 digest"),
        (lambda d: d.__setitem__("program", None), "program None is not a string"),
        (lambda d: d.__setitem__("copies", {}), "copies {} is not a list"),
        (lambda d: d.__setitem__("buffers", {}), "buffers {} is not a list"),
        (lambda d: d["buffers"].__setitem__(0, {}), "a row of buffers {} is not a list"),
    ],
)
def test_a_malformed_placement_is_a_format_error(mutate, needle: str) -> None:
    from mallocgame.errors import FormatError
    from mallocgame.frontends.xla_placement import (
        BufferSpace,
        XlaCopy,
        XlaPlacement,
        placement_from_dict,
        placement_to_dict,
    )

    placement = XlaPlacement(
        "p", ((BufferSpace(1, 0), BufferSpace(0, None)),), (XlaCopy(0, 0, 1, 0, 1),), "0" * 64
    )
    doc = placement_to_dict(placement)
    assert placement_from_dict(doc) == placement
    mutate(doc)
    with pytest.raises(FormatError, match=f"a malformed XLA placement .*{needle}"):
        placement_from_dict(doc)


@pytest.mark.parametrize("version", [True, 1.0, "1"])
def test_a_placement_version_that_only_equals_1_is_refused(version: Any) -> None:
    """A version of true or 1.0 (== 1 in Python) was read as version 1."""
    from mallocgame.errors import FormatError
    from mallocgame.frontends.xla_placement import placement_from_dict

    doc = {
        "format": "mallocgame-xla-placement",
        "version": version,
        "program": "p",
        "buffers": [[[0, -1]]],
        "copies": [],
    }
    placement_from_dict({**doc, "version": 1})
    with pytest.raises(FormatError, match=f"XLA placement version {version!r}"):
        placement_from_dict(doc)
