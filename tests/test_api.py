"""The public API (``import mallocgame as mg``): its names, their docs, and the example."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mallocgame as mg


def test_every_public_name_resolves_and_is_documented() -> None:
    for name in mg.__all__:
        value = getattr(mg, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), f"mg.{name} has no docstring"
    assert len(mg.__all__) == len(set(mg.__all__)) <= 20
    listed = dir(mg)
    assert len(listed) == len(set(listed)) and set(mg.__all__) <= set(listed)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'solve_everything'"):
        mg.solve_everything  # noqa: B018


def test_simulate_is_the_function_even_after_importing_the_module() -> None:
    import mallocgame.simulate  # noqa: F401

    assert callable(mg.simulate) and mg.simulate.__name__ == "simulate"


def test_import_is_cheap() -> None:
    code = "import sys, mallocgame; print(sorted(m for m in ('numpy', 'numba', 'jax') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "numba" not in out and "jax" not in out


def test_the_documented_example(small) -> None:
    sol = mg.get_solver("es").solve(small, mg.SolveRequest(seed=0, work=6))
    assert mg.check_solution(small, sol).ok
    assert sol.work["games"] == 6 and sol.bound_s is None
    assert mg.simulate(small, sol).latency_s > 0
    game = mg.Game(small)
    mg.DropBackup(game).play(lambda g, allowed: int(allowed.argmax()))
    assert game.complete and 0 <= game.normalized_return <= 1
    assert {mg.COPY, mg.NOCOPY, mg.DROP} == {0, 1, 2}
