"""Our heuristic against XLA's own memory-space assignment (``mallocgame bench xla``).

Per program compiled for a TPU (a ``tpu-v2`` or ``tpu-v1`` program, or any workload the
solver ``xla`` answers for): XLA's placement as it is (its normalized reward, and the kinds
of the game's rules it breaks, with counts), XLA's legal answer (the solver ``xla``: the raw
reading, projected onto the closest legal trajectory where it breaks a rule, and the
share of the raw reward it keeps), the ``heuristic``'s answer, the simulated speedup of
the heuristic over XLA's legal answer (:func:`mallocgame.simulate.simulate`'s step
time of one over the other's), their agreement (the fast-memory byte-steps they have in
common over those either has: :attr:`~mallocgame.residency.ResidencyComparison.agreement`)
and the upper bound (:func:`mallocgame.solvers.bound.bound_details`: no legal answer
does better). Every answer is re-checked before it is a row.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields

from mallocgame.bench.inputs import budget_seconds
from mallocgame.bench.markdown import markdown_table
from mallocgame.check import check_solution
from mallocgame.errors import ComparisonError
from mallocgame.fileio import write_csv_atomic
from mallocgame.instance import Instance
from mallocgame.latency import normalize
from mallocgame.residency import compare_residency
from mallocgame.simulate import simulate
from mallocgame.solution import Solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload

__all__ = ["XlaRow", "xla_row", "format_xla_table", "write_xla_csv"]

BOUND_SECONDS = 60.0
"""Seconds the bound's LP is given per program."""


@dataclass(frozen=True)
class XlaRow:
    """One program's line (rewards normalized; latencies in seconds)."""

    name: str
    target: str
    buffers: int
    xla_raw: float  # XLA's placement as it is (it may break the game's rules)
    raw_failures: str  # "kind xN, ..." of the checker on the raw placement ("" if none)
    xla: float  # the solver xla's legal answer
    kept_fraction: float
    heuristic: float
    xla_latency_s: float  # simulated step time of the legal answer
    heuristic_latency_s: float
    agreement: float  # heuristic and xla: byte-steps in common over either's
    bound: float

    @property
    def speedup(self) -> float:
        """The heuristic's simulated speedup over XLA's legal answer (> 1: faster)."""
        return self.xla_latency_s / self.heuristic_latency_s


def _checked(name: str, inst: Instance, solution: Solution) -> Solution:
    report = check_solution(inst, solution)
    if not report.ok:
        raise ComparisonError(f"{name}: the {solution.solver} answer fails the check: {report}")
    return solution


def xla_row(
    name: str,
    *,
    bound_seconds: float = BOUND_SECONDS,
    progress: Callable[[str], None] | None = None,
) -> XlaRow:
    """Measure one workload (module docstring); the solver ``xla`` must answer for it."""
    from mallocgame.solvers.bound import bound_details

    budget_seconds(bound_seconds, "bound_seconds")
    inst = load_workload(name)
    xla = _checked(name, inst, get_solver("xla").solve(inst, SolveRequest(seed=0)))
    heuristic = _checked(name, inst, get_solver("heuristic").solve(inst, SolveRequest(seed=0)))
    failures = xla.info.get("raw_failures", {})
    raw = xla.info.get("raw_normalized_reward", xla.normalized_reward)
    bound_s = bound_details(inst, time_limit=bound_seconds)["bound_s"]
    row = XlaRow(
        name=name,
        target=str(inst.source.get("target", "")),
        buffers=inst.num_buffers,
        xla_raw=float(raw),
        raw_failures=", ".join(f"{kind} x{n}" for kind, n in failures.items()),
        xla=xla.normalized_reward,
        kept_fraction=float(xla.info.get("kept_fraction", 1.0)),
        heuristic=heuristic.normalized_reward,
        xla_latency_s=simulate(inst, xla).latency_s,
        heuristic_latency_s=simulate(inst, heuristic).latency_s,
        agreement=compare_residency(inst, heuristic, xla).agreement,
        bound=normalize(inst, bound_s),
    )
    if progress is not None:
        progress(
            f"{name}: xla {row.xla:.3f} (raw {row.xla_raw:.3f}), heuristic {row.heuristic:.3f}, "
            f"speedup {row.speedup:.3f}, agreement {row.agreement:.1%}, bound {row.bound:.3f}"
        )
    return row


def format_xla_table(rows: Sequence[XlaRow]) -> str:
    """A Markdown table of ``rows``."""
    header = [
        "program",
        "target",
        "buffers",
        "xla as it is",
        "rules it breaks",
        "xla (legal)",
        "kept",
        "heuristic",
        "heuristic / xla speedup",
        "agreement",
        "bound",
    ]
    body = [
        [
            f"`{r.name}`",
            r.target,
            f"{r.buffers:,}",
            f"{r.xla_raw:.3f}",
            r.raw_failures or "none",
            f"{r.xla:.3f}",
            f"{r.kept_fraction:.1%}",
            f"{r.heuristic:.3f}",
            f"{r.speedup:.3f}",
            f"{r.agreement:.1%}",
            f"{r.bound:.3f}",
        ]
        for r in rows
    ]
    return markdown_table(header, body, left=2)


def write_xla_csv(rows: Sequence[XlaRow], path: str | os.PathLike[str]) -> None:
    """Atomically, one line per row: every field, then the speedup."""
    names = [f.name for f in fields(XlaRow)]
    body = [[*(asdict(r)[n] for n in names), r.speedup] for r in rows]
    write_csv_atomic(path, [*names, "speedup"], body)
