"""The answers of the ``es``, ``mcts`` and ``exact`` solvers on programs of every suite pass check.

The other solvers are covered elsewhere: ``heuristic`` on every bundled workload in
``tests/solvers/test_heuristic.py``, ``random`` on every suite program in
``tests/workloads/test_suite*.py`` (so every suite program is played, with Drop-backup,
and checked), ``egrl`` on all but nine of the largest in
``tests/solvers/egrl/test_suite_answers_egrl.py``. Here the programs of :data:`SPREAD`
(17 of the 70 of ``xla-v1``, ``xla-v2``, ``torch-v1`` and ``holdout-v1``: every suite,
67 to 26,915 buffers, every case below; of a suite without an entry there, all the
programs that :func:`tests.builders.suite_wide` keeps) are solved by each of the three
solvers with a small budget, and :func:`mallocgame.check.check_solution` must accept the
answer (its summary is the assertion message). The check replays the actions of a game
answer and compares ``reward_s`` and ``normalized_reward`` with the
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
- ``exact``: up to 130 buffers (eight suite programs, four of them here) ``work``
  250 ms of CP-SAT deterministic time: CP-SAT proves optimality or returns its own
  model solution (the answer comes from the CP-SAT model, status OPTIMAL or FEASIBLE). 131 to 999
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
from mallocgame.workloads.suite import suite_instance, suite_names, suite_program
from tests.builders import suite_wide

SPREAD: dict[str, tuple[str, ...]] = {
    "xla-v1": (
        "xla-v1/gru_infer",  # 70 buffers, a loop; exact: OPTIMAL (the heuristic's hint)
        "xla-v1/inplace_update_loop",  # 83, a loop-carried in-place update
        "xla-v1/donated_sgd_step",  # 129: exact's largest real search (FEASIBLE), donation
        "xla-v1/nmt_seq2seq_infer",  # 241, three loops; exact's hint: a warm-start game
        "xla-v1/transformer_train",  # 929, the largest small program
        "xla-v1/lstm_lm_train",  # 1,083, the smallest large; es, mcts back up 133, 65 times
        "xla-v1/alphatensor_matmul",  # 2,291, no alias group
    ),
    "xla-v2": (
        "xla-v2/gru_infer_b512",  # 67, the smallest; exact: OPTIMAL (a game's hint)
        "xla-v2/nmt_attention_infer_b64",  # 244, loops; exact's hint: the heuristic's
        "xla-v2/tinyllama_generate_b8",  # 2,080, a loop of 600 counted instructions
        "xla-v2/resnet152_train_b16",  # 26,915, the largest
    ),
    "torch-v1": (
        "torch-v1/wrn101_2_infer_b256_node",  # 930, 210 alias groups
        "torch-v1/resnet152_infer_b256",  # 2,166, backed up 40 to 60 times
    ),
    "holdout-v1": (
        "holdout-v1/mamba_lm_infer_b8",  # 386, loops
        "holdout-v1/convnext_t_infer_b64",  # 523, dram_pmem
        "holdout-v1/decoder_lm_scan_train",  # 1,314, loops, backed up 40 to 80 times
        "holdout-v1/codellama34b_score_512",  # 4,496, gpu_hbm_host
    ),
}
"""The programs solved, by suite: every suite, each of the cases of ``_request`` (exact's
three tiers, es's and mcts's two), answers with and without Drop-backup's backups, and
the features the suites have (loops, in-place updates, alias groups, every memory
preset). A program costs 0.3 to 17 s of the three solvers and checks here; the other
53 differ from these in sizes and layers, not in what the solvers do with them."""

NAMES = [
    name
    for name in suite_wide(suite_names())  # every suite (tpu-v1, tpu-v2: a sample)
    if name.split("/")[0] not in SPREAD or name in SPREAD[name.split("/")[0]]
]
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


def test_the_spread_covers_every_suite_and_every_case() -> None:
    names = suite_names()
    assert {n.split("/")[0] for n in NAMES} == {n.split("/")[0] for n in names}
    spread = [n for suite in SPREAD.values() for n in suite]
    assert set(spread) <= set(names) and set(spread) <= set(NAMES)
    sizes = [suite_program(n).num_buffers for n in NAMES]
    assert min(sizes) <= EXACT_SMALL  # exact: a real CP-SAT search
    assert any(EXACT_SMALL < b < LARGE for b in sizes)  # exact: the model built, no search
    assert any(b >= LARGE for b in sizes)  # every solver's case for large programs
    assert max(sizes) == max(suite_program(n).num_buffers for n in names)  # the largest
