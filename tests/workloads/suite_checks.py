"""Checks shared by the tests of the suites whose programs run on a preset's physical fast memory."""

from __future__ import annotations

from mallocgame.check import check_solution
from mallocgame.costmodel import peak_live_bytes
from mallocgame.hardware import get_preset
from mallocgame.instance import Instance
from mallocgame.program import validate_program
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload
from mallocgame.workloads.suite import suite_instance, suite_preset, suite_program


def assert_plays_on_its_physical_memory(
    name: str, frontend: str, *, binds: bool | None = True, solver: str = "random"
) -> tuple[Instance, int]:
    """``SUITE/NAME`` is a valid program of ``frontend``, derives on its preset's own fast memory
    (no capacity fraction), which its peak live bytes exceed (fit in, if not ``binds``; either,
    if ``None``), and
    plays a game of ``solver`` (seed 0) that ``check`` accepts with a positive reward. Returns
    the instance and its peak live bytes."""
    program = suite_program(name)
    validate_program(program)
    assert program.source["frontend"] == frontend and program.source["suite"] == name.split("/")[0]
    inst = suite_instance(name)
    assert inst.name == name and load_workload(name) is inst
    preset = get_preset(suite_preset(name))
    assert inst.hardware.name == preset.name  # no capacity fraction
    assert inst.hardware.fast_memory_bytes == preset.fast_memory_bytes
    assert inst.source["capacity_fraction"] is None
    peak = peak_live_bytes(inst)
    if binds is not None:
        assert (peak > inst.hardware.fast_memory_bytes) == binds  # the fast memory binds
    solution = get_solver(solver).solve(inst, SolveRequest(seed=0))
    report = check_solution(inst, solution)
    assert report.ok, report.summary()
    assert solution.reward_s > 0
    return inst, peak
