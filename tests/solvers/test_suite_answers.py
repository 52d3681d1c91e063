"""Every answer of the ``es``, ``mcts`` and ``exact`` solvers on every suite program passes check.

The other solvers are covered elsewhere: ``heuristic`` on every bundled workload in
``tests/solvers/test_heuristic.py``, ``random`` on every suite program in
``tests/workloads/test_suite.py``. Here each program of the suites ``xla-v1`` (28
programs, 70 to 16,911 buffers), ``xla-v2`` (26, 67 to 26,915 buffers), ``torch-v1``
(6, 771 to 3,808) and ``holdout-v1`` (10, 386 to 4,496;
:func:`mallocgame.workloads.suite.suite_names`) is solved by each of the three
solvers with a small budget, and :func:`mallocgame.check.check_solution`
must accept the answer (its summary is the assertion message). The check replays the
actions of a game answer and compares ``reward_s`` and ``normalized_reward`` with the
exact reward it recomputes (``reward_mismatch``, relative 1e-9); the report does not
expose that reward itself, so there is no separate equality assertion.

Budgets: the smallest work that still runs each solver's own search, with work
budgets (reproducible) wherever the solver can keep to one. ``LARGE`` (1,000
buffers) splits the programs into small ones and large ones (in xla-v1 nineteen and
nine, 1,083 to 16,911 buffers), where one plain game takes 0.1 to 1.4 s and a check
0.04 to 1.1 s on the reference 2-core machine (up to about 1.5 s and 1 s at
xla-v2's 26,915 buffers).

- ``es``: ``population`` 2 (one antithetic pair a generation), one worker.
  Small programs: ``work`` 4 games: the initial mean policy, one perturbed pair,
  the ES update, and the updated mean policy. Large: ``work`` 3 (the updated mean
  is not played). Asserted: one generation ran.
- ``mcts``: ``simulations`` 2 per searched move, ``rollout_depth`` 4. Small
  programs: no budget, so *every* move with a choice is searched with two
  simulations (UCT tries two actions and commits the better one). Large: ``work``
  64 simulations; the solver spreads a work budget over the decisions left, so
  the last ~64 decisions get one simulation each (selection, expansion, rollout,
  backup and restoring the real game run; with one simulation the committed move
  is the default policy's) and the rest play the default policy; a search on
  every decision there would take 2 to 15 s a program. Asserted: moves were
  searched (small: no move left to the default policy).
- ``exact``: up to 130 buffers (five programs) ``work`` 250 ms of CP-SAT
  deterministic time: CP-SAT proves optimality or returns its own model solution
  (the answer comes from the CP-SAT model, status OPTIMAL or FEASIBLE). 131 to 999
  buffers: ``work`` 10: the model is built, the heuristic and warm-start games are
  put into it as a hint and CP-SAT starts, but it does not get past presolve
  (status UNKNOWN), so the answer is the best hint mapping (a real search costs 2
  to 20 s a program there). Large programs: ``seconds`` ``max(1, 1.5e-4 * B)``
  (1 to 2.5 s), too little to build the model (about 1 ms a buffer, and CP-SAT's
  presolve on top: over 4 minutes at 16,911 buffers even with a 10 ms work
  budget; 4 s at 26,915), so the solver takes its designed short-budget path (status NOT_RUN:
  the best warm-start game, or the heuristic where it fits in the budget). These
  cases are the only wall-clock ones, hence not reproducible; the budget is large
  enough that the answer is a real mapping, not an empty one, on an idle machine.
  Asserted: the status of each tier (OPTIMAL/FEASIBLE, a built model, NOT_RUN).

The instances are cached for the module (the largest takes about 0.8 s to derive).
"""

from __future__ import annotations

from typing import Any

import pytest

from mallocgame.check import check_solution
from mallocgame.instance import Instance
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.suite import suite_instance, suite_names

NAMES = suite_names()  # every suite
SOLVERS = ("es", "mcts", "exact")
LARGE = 1_000  # buffers: programs at least this large get the cheaper cases
EXACT_SMALL = 130  # buffers: programs at most this large get a real CP-SAT search


@pytest.fixture(scope="module")
def instances() -> dict[str, Instance]:
    """Suite instances, derived once for the module."""
    return {}


def _instance(cache: dict[str, Instance], name: str) -> Instance:
    if name not in cache:
        cache[name] = suite_instance(name)
    return cache[name]


def _request(solver: str, num_buffers: int) -> SolveRequest:
    """The case run for ``solver`` on a program of ``num_buffers`` (module docstring)."""
    large = num_buffers >= LARGE
    options: dict[str, Any]
    if solver == "es":
        return SolveRequest(seed=0, work=3 if large else 4, options={"population": 2, "workers": 1})
    if solver == "mcts":
        options = {"simulations": 2, "rollout_depth": 4}
        return SolveRequest(seed=0, work=64 if large else None, options=options)
    if solver == "exact":
        if large:
            return SolveRequest(seed=0, seconds=max(1.0, 1.5e-4 * num_buffers))
        return SolveRequest(seed=0, work=250 if num_buffers <= EXACT_SMALL else 10)
    raise AssertionError(solver)


def _assert_search_ran(solver: str, num_buffers: int, extra: dict[str, Any]) -> None:
    """The case did what the module docstring says (not only a fallback)."""
    work = extra["work"]
    large = num_buffers >= LARGE
    if solver == "es":
        assert work["generations"] == 1 and work["games"] == (3 if large else 4), work
    elif solver == "mcts":
        assert work["searched_moves"] > 0 and work["fallback_moves"] == 0, work
        if not large:
            assert (
                work["default_moves"] == 0 and work["simulations"] == 2 * work["searched_moves"]
            ), work
    elif large:
        assert extra["status"] == "NOT_RUN", extra["status"]
    elif num_buffers <= EXACT_SMALL:
        assert extra["status"] in ("OPTIMAL", "FEASIBLE"), extra["status"]
    else:
        assert extra["status"] != "NOT_RUN" and extra["build_s"] > 0, extra["status"]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("name", NAMES)
def test_answer_passes_check(instances: dict[str, Instance], name: str, solver: str) -> None:
    inst = _instance(instances, name)
    solution = get_solver(solver).solve(inst, _request(solver, inst.num_buffers))
    report = check_solution(inst, solution)
    assert report.ok, f"{solver} on {name}:\n{report.summary()}"
    assert solution.solver == solver and solution.instance == inst.name
    _assert_search_ran(solver, inst.num_buffers, {**solution.info, "work": solution.work})


def test_the_suite_is_there() -> None:
    assert NAMES  # (an empty parameter list would only skip the test above)
