"""``muzero-prod``: MMap-MuZero-prod, the production agent of the paper (section 5).

The heuristic answers first (seconds, even on 27,000 buffers); then ``muzero`` trains
for the budget but its last ``order_search_share``, its candidate the best of its
self-play games and of the games its policy network plays alone every ``eval_every``
learner steps (``answer="both"``: on programs of thousands of buffers, 16 simulations
of search per move play worse than the network's own policy); the rest of the budget
searches the heuristic's placement order (:mod:`mallocgame.solvers.order_search`),
starting from the heuristic's own order and from one that puts first the candidates the
agent's answer placed in fast memory. For a program compiled for a TPU, XLA's legal
answer is a candidate too, answering second: the request's demonstration by the solver
``xla`` where the caller gives one (:func:`mallocgame.optimize.optimize` does for
``optimize --target``), else the one frozen with a suite program (``tpu-v1``,
``tpu-v2``). The answer is whichever candidate has the lowest simulated latency
(:func:`~mallocgame.solvers.hybrid.fastest`; on a tie the earlier of heuristic,
xla, agent, order search), each candidate checked and simulated as it comes. So a
``muzero-prod`` answer is never slower in simulation than ``heuristic``'s, nor than
XLA's own where the program has it: the paper's guarantee with the simulator standing in
for the measurement.

Settings: ``muzero``'s, with restarts inside the best game on by default, and the order
search's share of a wall-clock budget or its evaluations without one
(:class:`~mallocgame.solvers.muzero.config.MuZeroProdConfig`); the heuristic runs with
its defaults. Work unit: the agent's self-play games. The callback sees the heuristic's
answer first, then each new best game of the agent, then each mapping of the order search
that is faster in simulation than every valid candidate before it; their ``solver``
names them (``heuristic``, ``muzero``, ``msa-search``). The answer's ``info`` has
``chosen``, ``latency_s`` and ``candidates`` (each candidate's reward, normalized reward,
simulated latency and validity) beside the chosen candidate's own ``info``, and, where
the agent ran, ``agent_info``: the agent's own ``info`` as its run ended; its ``work``
is the agent's, with the order search's ``order_evaluations``.

With ``order_search_patience`` above 0 and a wall-clock budget, the agent's share ends
early once its best answer has gone that share of the budget without improving (counted
from the end of the time its demonstrations may take: :class:`PatientStopwatch`),
and the order search has the rest; ``info["agent_ended_s"]`` says when the agent stopped.

A wall-clock budget is kept: the agent does not start where the heuristic has already
taken its share of the budget (``order_search_share``'s complement) or left it less than
``agent_min_seconds`` (the agent's setup would overrun it; the order search then has
the agent's share), nor the order search
where the whole budget is spent (``info["left_out"]`` names them; ``work`` then has
``games`` 0); the order search stops as long before the end as checking the heuristic's
answer took, the time its own answer's check will take, and does not start where that
time is all that is left. A solver made with ``agent_required=True`` (as
:func:`mallocgame.optimize.optimize` makes it) refuses instead of leaving the agent out:
:class:`AgentLeftOutError`, raised as soon as the heuristic's answer (and XLA's) is in,
before the agent or the order search spends anything. The heuristic runs once: its
answer is the agent's heuristic demonstration (projected) and its placement the one the
order search reorders. An ``init`` agent the agent's run would refuse (missing, another
trainer's, another network) is refused before the heuristic runs, whether the budget
leaves the agent out or not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import Improvement, Run, SolveRequest, Stopwatch, missing_dependencies
from mallocgame.solvers.checkpoint import CHECKPOINT_NAME
from mallocgame.solvers.heuristic import OrderedAssignment, heuristic_answer
from mallocgame.solvers.hybrid import Judged, fastest, judge
from mallocgame.solvers.muzero.config import MuZeroConfig, MuZeroProdConfig
from mallocgame.solvers.muzero.solver import MuZeroSolver
from mallocgame.solvers.order_search import (
    OrderSearchResult,
    Start,
    order_from_mapping,
    search_answer,
    search_order,
    stop_rule,
)
from mallocgame.solvers.xla_answer import frozen_xla_answer

__all__ = [
    "MuZeroProdSolver",
    "PatientStopwatch",
    "AgentLeftOutError",
    "AGENT",
    "BASELINE",
    "COMPILER",
    "ORDER_SEARCH",
]

AGENT = "muzero"  # the candidates' solver names
BASELINE = "heuristic"
COMPILER = "xla"
ORDER_SEARCH = "msa-search"


class AgentLeftOutError(SolverError):
    """A wall-clock budget of ``budget_s`` seconds that leaves the agent no time to start
    (less than ``agent_min_seconds`` of its share, after the heuristic took
    ``heuristic_s``), from a :class:`MuZeroProdSolver` made with ``agent_required=True``."""

    def __init__(self, budget_s: float, heuristic_s: float, agent_min_seconds: float) -> None:
        super().__init__(
            f"the budget of {budget_s:g} s left the agent no time to start (the heuristic "
            f"took {heuristic_s:.1f} s of it; the agent needs {agent_min_seconds:g} s of its "
            "share, agent_min_seconds): give a larger budget"
        )
        self.budget_s = budget_s
        self.heuristic_s = heuristic_s
        self.agent_min_seconds = agent_min_seconds

    def __reduce__(self) -> tuple[type, tuple[float, float, float]]:
        """Pickled with its three numbers (a pool's worker raises it to its parent)."""
        return type(self), (self.budget_s, self.heuristic_s, self.agent_min_seconds)


class PatientStopwatch(Stopwatch):
    """``clock``'s budget, which also ends once ``patience_s`` seconds have passed since
    the last improvement :meth:`watching`'s callback saw (the first counting from no
    earlier than ``grace_s`` seconds after this stopwatch was made, the time the agent's
    demonstrations take): the agent's share, handed to the order search when the agent
    stalls. Before the agent's first report nothing stalls (its setup, compilation and
    first games are no stall); only the budget ends it then."""

    def __init__(self, clock: Stopwatch, patience_s: float, grace_s: float = 0.0) -> None:
        super().__init__(clock.seconds)
        self.start = clock.start
        self.patience_s = patience_s
        self.grace_end_s = self.elapsed + grace_s
        self.last_improvement_s: float | None = None  # none reported yet
        self.ended_s: float | None = None  # elapsed seconds when it first read as expired

    def watching(
        self, callback: Callable[[Improvement], None] | None
    ) -> Callable[[Improvement], None]:
        """``callback`` (may be None), noting the time of every improvement it is given."""

        def noted(improvement: Improvement) -> None:
            # an improvement within the grace (a demonstration's) does not shorten it
            last = self.grace_end_s if self.last_improvement_s is None else self.last_improvement_s
            self.last_improvement_s = max(last, self.elapsed)
            if callback is not None:
                callback(improvement)

        return noted

    def expired(self) -> bool:
        """Whether the budget is spent or the agent has stalled; once true, true for good."""
        if self.ended_s is not None:
            return True
        now = self.elapsed
        stalled = (
            self.last_improvement_s is not None and now - self.last_improvement_s >= self.patience_s
        )
        if super().expired() or stalled:
            self.ended_s = now
        return self.ended_s is not None


class MuZeroProdSolver(MuZeroSolver, name="muzero-prod", config=MuZeroProdConfig):
    """The fastest in simulation of the heuristic's mapping, MMap-MuZero's, and the
    heuristic's placement order searched from both."""

    answer = "both"  # the agent's candidate: its best game, with search or its policy's alone

    def __init__(self, *, agent_required: bool = False) -> None:
        """``agent_required``: raise :class:`AgentLeftOutError` where the budget would leave
        the agent out, before the agent or the order search runs (else the order search
        has its share, and ``info["left_out"]`` says so); an answer given is the same
        either way."""
        self.agent_required = agent_required

    def search(self, instance: Instance, config: MuZeroConfig, run: Run) -> Solution:
        assert isinstance(config, MuZeroProdConfig)
        self.check_init(instance, config)  # before anything runs, whether the agent starts or not
        # the heuristic runs once: its answer, and the placement the order search reorders
        heuristic_run = Run(BASELINE, instance, SolveRequest(seed=run.seed), Stopwatch(None))
        assignment = OrderedAssignment(instance)
        baseline = heuristic_answer(
            heuristic_run, assignment.heuristic_allocations, assignment.heuristic_stats
        )
        run.improve(baseline)
        checked = time.perf_counter()
        judged = [judge(instance, baseline)]  # each candidate judged as it comes
        check_s = time.perf_counter() - checked  # about what judging one more will take
        xla = self.compiler_answer(instance, run)
        if xla is not None:
            run.improve(xla)
            judged.append(judge(instance, xla))
        left_out: list[str] = []
        # the agent's share; with no order search after it, less the judging of its answer
        shared = run.clock if config.order_search_share > 0 else run.clock.less(check_s)
        agent_clock = shared.until(1.0 - config.order_search_share)
        agent = None
        short = agent_clock.seconds is not None and (
            agent_clock.seconds - agent_clock.elapsed < config.agent_min_seconds
        )
        if agent_clock.expired() or short:  # its share is spent, or shorter than its setup
            if self.agent_required:
                assert run.request.seconds is not None  # only a wall-clock budget runs out
                raise AgentLeftOutError(
                    run.request.seconds, baseline.wall_s, config.agent_min_seconds
                )
            left_out.append(AGENT)
        else:
            # the heuristic's answer is the agent's heuristic demonstration, not solved again
            agent_request = replace(
                run.request, demonstrations=(*run.request.demonstrations, baseline)
            )
            budget_s = run.clock.seconds
            patient = config.order_search_patience > 0
            if patient and budget_s is not None and agent_clock.seconds is not None:
                patience_s = config.order_search_patience * budget_s
                # the demonstrations are not a stall: the heuristic's repair and es may take
                # es_share of the agent's share each (Trainer.add_demonstrations), so
                # patience counts from when both would be done
                timed = [d for d in config.demonstration_sources if d in ("heuristic", "es")]
                left_s = agent_clock.seconds - agent_clock.elapsed
                grace_s = min(len(timed) * config.es_share * agent_clock.seconds, left_s)
                agent_clock = PatientStopwatch(agent_clock, patience_s, grace_s)
                agent_request = replace(
                    agent_request, callback=agent_clock.watching(agent_request.callback)
                )
            agent_run = Run(AGENT, instance, agent_request, agent_clock)
            agent = self.train(instance, config, agent_run, solver_name=AGENT)
            judged.append(judge(instance, agent))
        search_clock = run.clock.less(check_s)  # its answer is judged within the budget
        if (
            run.request.seconds is not None
            and config.order_search_share > 0
            and search_clock.expired()
        ):
            left_out.append(ORDER_SEARCH)
            searched = None
        else:
            searched = self.search_order(
                instance, config, run, search_clock, judged, agent, assignment
            )
        if searched is not None:
            judged.append(judge(instance, searched))
        choice = fastest(judged)
        work: dict[str, int | float] = dict(agent.work) if agent is not None else {"games": 0}
        if searched is not None:
            work["order_evaluations"] = searched.work["evaluations"]
        info = {**choice.info(), **({"left_out": left_out} if left_out else {})}
        if agent is not None:  # the agent's own account of its run, as it ended
            info["agent_info"] = dict(agent.info)
        if isinstance(agent_clock, PatientStopwatch):
            info["agent_ended_s"] = agent_clock.ended_s
        return replace(choice.solution, work=work, info=info)

    def check_init(self, instance: Instance, config: MuZeroConfig) -> None:
        """Refuse, with a :class:`SolverError`, an ``init`` agent the agent's run would
        refuse (missing, unreadable, another trainer's, another network: from its
        fingerprint, :func:`~mallocgame.solvers.muzero.agent.check_agent`; its arrays are
        checked when the agent starts), where that run would read it: not for a program
        without buffers (answered without training) nor where ``checkpoint_dir`` holds a
        checkpoint (the run resumes its network)."""
        if config.init is None or instance.num_buffers == 0:
            return
        if (
            config.checkpoint_dir is not None
            and (Path(config.checkpoint_dir) / CHECKPOINT_NAME).exists()
        ):
            return
        from mallocgame.solvers.muzero.agent import check_agent

        try:
            check_agent(config.init, config)
        except ImportError as exc:  # msgpack, which reads its fingerprint, comes with flax
            raise missing_dependencies(self.name, "JAX, flax, optax and mctx", exc) from None

    @staticmethod
    def compiler_answer(instance: Instance, run: Run) -> Solution | None:
        """XLA's own answer: the request's demonstration by ``xla`` where one is given (it
        must pass the checker), else the one frozen with a suite program, else ``None``."""
        given = [d for d in run.request.demonstrations if d.solver == COMPILER]
        if given:
            report = check_solution(instance, given[0])
            if not report.ok:
                raise SolverError(f"XLA's answer given to muzero-prod fails the check: {report}")
            return replace(given[0], seed=run.seed)
        compiler = frozen_xla_answer(instance)
        return None if compiler is None else replace(compiler.solution, seed=run.seed)

    def search_order(
        self,
        instance: Instance,
        config: MuZeroProdConfig,
        run: Run,
        clock: Stopwatch,
        judged: Sequence[Judged],
        agent: Solution | None,
        assignment: OrderedAssignment,
    ) -> Solution | None:
        """The order search's answer within ``clock``'s budget (``None``: none given to
        it), placing with ``assignment`` (the heuristic's, already run), started from the
        heuristic's order and from ``agent``'s answer (where the agent ran); each mapping
        faster than every valid candidate of ``judged`` goes to ``run``'s callback."""
        timed = run.request.seconds is not None
        limit = None if timed else config.order_search_evaluations
        if (timed and config.order_search_share == 0) or limit == 0:
            return None  # switched off
        starts = (
            [Start("agent", order_from_mapping(assignment, agent.allocations))]
            if agent is not None
            else []
        )
        # where no candidate is valid, any mapping the search finds is the one to report
        to_beat = min(
            (j.candidate.latency_s for j in judged if j.candidate.valid), default=float("inf")
        )
        search_run = Run(ORDER_SEARCH, instance, run.request, clock)

        def report(result: OrderSearchResult) -> None:
            if result.latency_s < to_beat:
                run.improve(search_answer(search_run, result, {"evaluations": result.evaluations}))

        result = search_order(
            assignment,
            seed=run.seed,
            stop=stop_rule(search_run, limit),
            starts=starts,
            on_improve=report,
        )
        return search_answer(search_run, result, {"evaluations": result.evaluations})
