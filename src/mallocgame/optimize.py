"""The main job: ``muzero-prod`` on one program, and what it found against the heuristic
(and against XLA's own placement, for a program compiled for a TPU).

:func:`optimize` runs :class:`~mallocgame.solvers.muzero.prod.MuZeroProdSolver` and
keeps, from its callback, both candidates (the heuristic's answer and the agent's best
game) and the reward-against-time curve; :func:`comparison` puts the heuristic, the
agent, the answer and the LP bound in one table (normalized reward, simulated latency,
speedup over the heuristic, gap to the bound); :func:`write_outputs` writes the
answer, both candidates, the curve (CSV and PNG) and the two layouts side by side.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mallocgame.curves import (
    CurvePoint,
    normalized_upper_bound,
    plot_curves,
    work_text,
    write_csv,
)
from mallocgame.errors import SolverError
from mallocgame.fileio import check_writable, output_beside
from mallocgame.game.state import warm_game_kernels
from mallocgame.instance import Instance
from mallocgame.solution import Solution, save_solution
from mallocgame.solvers.base import Improvement, SolveRequest
from mallocgame.solvers.bound import upper_bound
from mallocgame.solvers.muzero.prod import AGENT, BASELINE, COMPILER, ORDER_SEARCH, MuZeroProdSolver
from mallocgame.viz import draw_layouts

__all__ = [
    "Outcome",
    "Row",
    "OutputPaths",
    "optimize",
    "check_budget",
    "comparison",
    "format_comparison",
    "write_outputs",
]


@dataclass(frozen=True)
class Outcome:
    """What one :func:`optimize` run found."""

    instance: Instance
    answer: Solution  # muzero-prod's: the faster candidate
    baseline: Solution  # the heuristic's answer
    agent: Solution  # the agent's best game (its work: all the agent's work)
    curve: tuple[
        CurvePoint, ...
    ]  # every new best of either candidate in time order; at the end both again and the answer
    # the LP upper bound on the normalized reward; None where the normalizer is not positive
    # (:func:`~mallocgame.curves.normalized_upper_bound`)
    bound_normalized: float | None
    seconds: float | None  # the wall-clock budget given
    wall_s: float  # seconds the run took
    games: int | None = None  # the work budget given: the agent's self-play games
    upper_bound_s: float | None = None  # the LP upper bound on the reward, seconds


@dataclass(frozen=True)
class Row:
    """One line of the comparison table."""

    name: str  # heuristic, xla (where it answers), muzero, msa-search, muzero-prod, bound
    normalized_reward: float | None  # None: the bound's, where it bounds no normalized reward
    latency_s: float | None  # simulated, seconds (None for the bound)
    speedup: float | None  # the heuristic's simulated latency over this one's
    # 1 - reward / bound, both in seconds (0: the bound is reached); None where it means
    # nothing: the normalizer or the bound is not positive
    gap_to_bound: float | None


@dataclass(frozen=True)
class OutputPaths:
    """Where :func:`write_outputs` put each file."""

    answer: Path
    baseline: Path
    agent: Path
    curve_csv: Path
    curve_png: Path
    layouts: Path
    checkpoint: Path  # the agent's checkpoint folder (the command line's default)
    steer: Path  # ``optimize --steer``'s flags

    def files(self) -> tuple[Path, ...]:
        """Every file :func:`write_outputs` writes, the answer first."""
        return (
            self.answer,
            self.baseline,
            self.agent,
            self.curve_csv,
            self.curve_png,
            self.layouts,
        )


def check_budget(seconds: float | None, options: Mapping[str, Any] | None = None) -> None:
    """A :class:`SolverError` where ``seconds`` is no wall-clock budget a
    :class:`~mallocgame.solvers.base.SolveRequest` takes (in its words), or one that gives
    the agent less than its ``agent_min_seconds`` (``options``: muzero-prod's settings): its
    share, the budget less the order search's, would leave it out before anything runs."""
    budget = SolveRequest(seconds=seconds).seconds  # SolveRequest's own check of it
    if budget is None:
        return
    config = MuZeroProdSolver().config(dict(options or {}))
    share_s = budget * (1.0 - config.order_search_share)
    if share_s < config.agent_min_seconds:
        raise SolverError(
            f"a budget of {budget:g} s gives the agent {share_s:g} s, less than the "
            f"{config.agent_min_seconds:g} s it needs to start (agent_min_seconds): give a "
            "larger budget"
        )


def optimize(
    instance: Instance,
    *,
    seconds: float | None = None,
    games: int | None = None,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    on_improvement: Callable[[Improvement], None] | None = None,
    on_progress: Callable[[Mapping[str, int | float]], None] | None = None,
    compiler: Solution | None = None,
) -> Outcome:
    """Run ``muzero-prod`` on ``instance`` within ``seconds`` of wall-clock and/or
    ``games`` of the agent's self-play; ``options`` are the agent's settings
    (``mallocgame solvers muzero``). ``on_improvement`` sees every new best of a
    candidate as it comes (the heuristic's first), ``on_progress`` the agent's games
    played so far after each one (``{"games": n}``). ``compiler``: XLA's own answer (the
    solver ``xla``'s, passing the checker) where the caller has it, a candidate beside the
    heuristic's (suite programs frozen with XLA's placement have theirs already). With a
    wall-clock budget, the game's compiled kernels are loaded before the clock starts
    (:func:`~mallocgame.game.state.warm_game_kernels`).

    A budget that gives the agent less than ``agent_min_seconds`` of its share is a
    :class:`SolverError` before the run (:func:`check_budget`), and so is one the heuristic
    spends down to less than that, as soon as the heuristic's answer is in, before the
    agent or the order search runs
    (:class:`~mallocgame.solvers.muzero.prod.AgentLeftOutError`; ``on_improvement`` has
    then seen the heuristic's answer, and XLA's where there is one)."""
    check_budget(seconds, options)
    if seconds is not None:  # the game's kernels load outside the budget
        warm_game_kernels(instance)
    start = time.perf_counter()
    bests: dict[str, Solution] = {}
    curve: list[CurvePoint] = []

    def record(improvement: Improvement) -> None:
        solution = improvement.solution
        bests[solution.solver] = solution
        curve.append(_point(instance, solution, improvement.elapsed_s, seconds))
        if on_improvement is not None:
            on_improvement(improvement)

    request = SolveRequest(
        seed=seed,
        seconds=seconds,
        work=games,
        callback=record,
        progress=on_progress,
        demonstrations=() if compiler is None else (compiler,),
        options=dict(options or {}),
    )
    # a budget the heuristic spends down is refused before the agent or order search runs
    answer = MuZeroProdSolver(agent_required=True).solve(instance, request)
    missing = [name for name in (BASELINE, AGENT) if name not in bests]
    if missing:
        raise SolverError(f"muzero-prod reported no answer of {', '.join(missing)}")
    # the agent's best game, with all the work the agent did (not the order search's) and
    # its info as the run ended (not as it was when that game was found)
    agent_work = {k: v for k, v in answer.work.items() if k != "order_evaluations"}
    agent_info = answer.info.get("agent_info", bests[AGENT].info)
    agent = replace(bests[AGENT], work=agent_work, info=dict(agent_info))
    curve.extend(  # each curve's last point: its best, with the work done by the end
        _point(instance, s, answer.wall_s, seconds) for s in (bests[BASELINE], agent, answer)
    )
    bound_s = upper_bound(instance)
    return Outcome(
        instance,
        answer,
        bests[BASELINE],
        agent,
        tuple(curve),
        normalized_upper_bound(instance, bound_s),
        seconds,
        time.perf_counter() - start,
        games,
        bound_s,
    )


def _point(
    instance: Instance, solution: Solution, elapsed_s: float, budget_s: float | None
) -> CurvePoint:
    return CurvePoint(
        instance.name,
        solution.solver,
        solution.seed,
        elapsed_s,
        solution.normalized_reward,
        work_text(solution.work),
        budget_s,
    )


def comparison(outcome: Outcome) -> list[Row]:
    """The heuristic, the agent, the order search (where it ran), the answer and the
    bound, each with its normalized reward, simulated latency, speedup over the heuristic
    and gap to the bound: ``1 - reward_s / upper_bound_s`` in seconds. Where the normalizer
    is not positive (a negative one makes the normalized bound a lower limit) or the bound
    is 0, every gap and the bound's normalized reward are ``None``."""
    latencies = {c: v["latency_s"] for c, v in outcome.answer.info["candidates"].items()}
    base = latencies[BASELINE]
    bound = outcome.bound_normalized
    bound_s = outcome.upper_bound_s
    gaps = bound is not None and bound_s is not None and bound_s > 0

    def row(name: str, reward: float, reward_s: float | None, latency: float | None) -> Row:
        speedup = base / latency if latency and base is not None else None
        gap = 1.0 - reward_s / bound_s if gaps and reward_s is not None and bound_s else None
        return Row(name, reward, latency, speedup, gap)

    chosen = outcome.answer.info["chosen"]
    searched = outcome.answer.info["candidates"].get(ORDER_SEARCH)
    compiler = outcome.answer.info["candidates"].get(COMPILER)

    def candidate(name: str, found: dict[str, Any]) -> Row:
        return row(name, found["normalized_reward"], found.get("reward_s"), found["latency_s"])

    answer = outcome.answer
    return [
        row(BASELINE, outcome.baseline.normalized_reward, outcome.baseline.reward_s, base),
        *([candidate(f"{COMPILER} (XLA's own)", compiler)] if compiler else []),
        row(AGENT, outcome.agent.normalized_reward, outcome.agent.reward_s, latencies[AGENT]),
        *([candidate(ORDER_SEARCH, searched)] if searched else []),
        row(
            f"muzero-prod (answer: {chosen})",
            answer.normalized_reward,
            answer.reward_s,
            answer.info["latency_s"],
        ),
        Row("bound (LP)", bound, None, None, 0.0 if gaps else None),
    ]


def _fixed(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` decimals, and no sign where that shows zero (a reward of
    0 s over a negative normalizer is -0.0)."""
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def format_comparison(outcome: Outcome) -> str:
    """:func:`comparison` as a text table, under a line naming the run; where the budget
    left the order search out (the answer's ``info["left_out"]``), a line under the table
    says so."""
    inst = outcome.instance
    played = outcome.agent.work.get("games", 0)
    parts = [f"{outcome.seconds:g} s"] if outcome.seconds is not None else []
    if outcome.games is not None:
        parts.append(f"{outcome.games} game{'s' if outcome.games != 1 else ''}")
    # a batch of parallel games can end past a work budget
    budget = " and ".join(parts) or "none"
    budget += f" ({played} game{'s' if played != 1 else ''} played)"
    header = (
        "",
        "normalized reward",
        "simulated latency",
        "speedup over heuristic",
        "gap to bound",
    )
    rows = [
        (
            r.name,
            "—" if r.normalized_reward is None else _fixed(r.normalized_reward, 4),
            "—" if r.latency_s is None else f"{r.latency_s * 1e3:.4f} ms",
            "—" if r.speedup is None else f"{r.speedup:.4f}",
            "—" if r.gap_to_bound is None else f"{_fixed(r.gap_to_bound * 100, 1)}%",
        )
        for r in comparison(outcome)
    ]
    widths = [max(len(line[i]) for line in (header, *rows)) for i in range(len(header))]
    lines = [
        f"{inst.name}: {inst.num_buffers} buffers, {inst.hardware.name}; budget {budget}, "
        f"seed {outcome.answer.seed}, {outcome.wall_s:.0f} s"
    ]
    for line in (header, *rows):
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))
            )
        )
    if ORDER_SEARCH in outcome.answer.info.get("left_out", ()):  # no row: say why
        lines.append(f"{ORDER_SEARCH}: left out, the budget was spent before it could start")
    return "\n".join(lines)


def output_paths(out: str | Path) -> OutputPaths:
    """The files :func:`write_outputs` writes for the answer file ``out`` (``X.json``, or
    any other name ``X``): ``X.heuristic.json``, ``X.muzero.json``, ``X.curve.csv``,
    ``X.curve.png`` and ``X.layouts.png`` beside it; and ``X.checkpoint`` and
    ``X.steer.json``, for the command line (:func:`~mallocgame.fileio.output_beside`,
    which refuses an ``out`` that names no file)."""
    beside = lambda suffix: output_beside(out, suffix)  # noqa: E731
    return OutputPaths(
        Path(out),
        beside(f".{BASELINE}.json"),
        beside(f".{AGENT}.json"),
        beside(".curve.csv"),
        beside(".curve.png"),
        beside(".layouts.png"),
        beside(".checkpoint"),
        beside(".steer.json"),
    )


def write_outputs(outcome: Outcome, out: str | Path) -> OutputPaths:
    """Write the answer to ``out`` and the rest beside it (:func:`output_paths`), the
    answer last (a write that fails leaves the answer file as it was). A file that cannot
    be written (:func:`~mallocgame.fileio.check_writable`: a directory there, a read-only
    folder) is an :class:`~mallocgame.errors.OutputFileError` before any is written. The
    layouts are the heuristic's above the agent's."""
    paths = output_paths(out)
    for path in paths.files():  # every one before the first write
        check_writable(path)
    save_solution(outcome.baseline, paths.baseline)
    save_solution(outcome.agent, paths.agent)
    write_csv(list(outcome.curve), paths.curve_csv)
    bound = outcome.bound_normalized
    plot_curves(
        list(outcome.curve),
        paths.curve_png,
        {} if bound is None else {outcome.instance.name: bound},
    )
    info = outcome.answer.info
    titles = []
    for name in (BASELINE, AGENT):
        latency = info["candidates"][name]["latency_s"]
        titles.append(
            f"{outcome.instance.name}: {name}{' (the answer)' if name == info['chosen'] else ''}, "
            + ("invalid" if latency is None else f"simulated latency {latency * 1e3:.4f} ms")
        )
    draw_layouts(outcome.instance, [outcome.baseline, outcome.agent], paths.layouts, titles=titles)
    save_solution(outcome.answer, paths.answer)
    return paths
