"""Which tensors two solutions of one instance keep in fast memory, and when (what the
paper's Figure 8 compares: a tensor one mapping evicts and fetches again where the
other keeps it resident).

A tensor's *residency* in a solution is a sequence of *runs*: the memory intervals of
its buffers' allocations (SPEC section 7) in time order, merged where they touch or
overlap, except that an operand Copy (a *fetch*: a copy in from slow memory) always
begins a run of its own: a tensor kept in fast memory is read with NoCopy, so a fetch
means that its copy in fast memory was given up, or never made.

Tensor ``X`` is *re-fetched by B where A keeps it* when a fetch run of B follows another
run of B and A holds ``X`` in fast memory at every step from the end of B's earlier run
to the read the fetch serves, with no fetch of its own beginning in that window: B
evicted ``X`` and paid a copy to bring it back, A did not. The window opens at the end
of B's earlier run or at the start of B's fetch, whichever is earlier (a fetch may begin
at the very step the earlier run ends, or before it), so a fetch A makes where B makes
its own is never taken for A keeping ``X``: a solution compared with itself has no
re-fetch. Sizes are bytes; steps are instruction indices.
"""

from __future__ import annotations

from dataclasses import dataclass

from mallocgame.errors import SolutionError
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.units import format_bytes

__all__ = [
    "TensorRun",
    "Refetch",
    "ResidencyComparison",
    "residency",
    "compare_residency",
    "format_residency_comparison",
]


@dataclass(frozen=True)
class TensorRun:
    """Consecutive steps ``[first, last]`` at which a tensor is in fast memory; a run that
    begins with a fetch also names the read the fetch serves (the end of the Copy's memory
    interval: NoCopy reads after it may extend the run)."""

    first: int
    last: int
    fetched: bool  # the run begins with an operand Copy (a copy in from slow memory)
    fetched_for: int | None = None  # the step of the read that Copy serves


@dataclass(frozen=True)
class Refetch:
    """A tensor B evicts after step ``evicted_after`` and fetches again for its read at
    ``needed_at``, where A keeps it in fast memory over all of ``[evicted_after, needed_at]``
    and fetches it in none of that window (module docstring)."""

    tensor: int
    name: str
    size: int  # bytes
    evicted_after: int
    needed_at: int


@dataclass(frozen=True)
class ResidencyComparison:
    """Solutions ``a`` and ``b`` of one instance, tensor by tensor."""

    a: str  # their names (the solvers', unless named otherwise)
    b: str
    fast_in_a: int  # tensors with at least one step in fast memory
    fast_in_b: int
    only_in_a: tuple[tuple[str, int], ...]  # (name, bytes) in fast memory in a only, largest first
    only_in_b: tuple[tuple[str, int], ...]
    refetched_by_b: tuple[Refetch, ...]  # B evicts and fetches again where A keeps it
    refetched_by_a: tuple[Refetch, ...]  # and the other way round
    fast_byte_steps_a: int  # sum over tensors of bytes times steps in fast memory
    fast_byte_steps_b: int
    fast_byte_steps_common: int  # ... at the steps where both keep the tensor there

    @property
    def agreement(self) -> float:
        """The fast-memory byte-steps the two have in common, over those either has (1.0
        when neither keeps anything in fast memory)."""
        either = self.fast_byte_steps_a + self.fast_byte_steps_b - self.fast_byte_steps_common
        return self.fast_byte_steps_common / either if either else 1.0


def residency(instance: Instance, solution: Solution) -> dict[int, tuple[TensorRun, ...]]:
    """Each tensor with a step in fast memory → its runs, in time order."""
    pieces: dict[int, list[tuple[int, int, bool]]] = {}
    for allocation in solution.allocations:
        if allocation.start is None or allocation.end is None:
            continue  # an empty memory interval: a read of what is already resident
        if not 0 <= allocation.buffer < instance.num_buffers:
            continue  # a buffer the instance lacks: the checker names it, as the picture does
        buffer = instance.buffers[allocation.buffer]
        fetch = allocation.action == "Copy" and not buffer.is_output
        pieces.setdefault(buffer.tensor_id, []).append((allocation.start, allocation.end, fetch))
    runs: dict[int, tuple[TensorRun, ...]] = {}
    for tensor, intervals in pieces.items():
        found: list[TensorRun] = []
        for start, end, fetch in sorted(intervals, key=lambda i: (i[0], not i[2], i[1])):
            if found and not fetch and start <= found[-1].last + 1:
                last = found[-1]
                found[-1] = TensorRun(
                    last.first, max(last.last, end), last.fetched, last.fetched_for
                )
            else:
                found.append(TensorRun(start, end, fetch, end if fetch else None))
        runs[tensor] = tuple(found)
    return runs


def _covers(runs: tuple[TensorRun, ...], first: int, last: int) -> bool:
    """Whether ``runs`` (in time order) cover every step of ``[first, last]``."""
    covered = first
    for run in runs:
        if run.first > covered:
            break
        covered = max(covered, run.last + 1)
        if covered > last:
            return True
    return False


def _keeps(runs: tuple[TensorRun, ...], before: TensorRun, after: TensorRun) -> bool:
    """Whether ``runs`` keep a tensor in fast memory where another solution ends its run
    ``before`` and fetches it again in ``after``: they cover every step from
    ``before.last`` to the read the fetch serves, and none of their fetches begins at a
    step from ``min(before.last, after.first)`` to that read (such a fetch pays a copy too)."""
    opens, read = min(before.last, after.first), _fetched_for(after)
    if any(run.fetched and opens <= run.first <= read for run in runs):
        return False
    return _covers(runs, before.last, read)


def _fetched_for(run: TensorRun) -> int:
    """The step of the read ``run``'s fetch serves (its last step for a run built by hand)."""
    return run.last if run.fetched_for is None else run.fetched_for


def _refetches(
    instance: Instance,
    evicting: dict[int, tuple[TensorRun, ...]],
    keeping: dict[int, tuple[TensorRun, ...]],
) -> tuple[Refetch, ...]:
    found = []
    for tensor, runs in evicting.items():
        for before, after in zip(runs, runs[1:]):
            if after.fetched and _keeps(keeping.get(tensor, ()), before, after):
                t = instance.tensors[tensor]
                found.append(Refetch(tensor, t.name, t.size, before.last, _fetched_for(after)))
    return tuple(sorted(found, key=lambda r: (-r.size, r.tensor, r.evicted_after)))


def _spans(runs: tuple[TensorRun, ...], num_steps: int) -> list[tuple[int, int]]:
    """The steps of ``runs`` within the program's ``0 .. num_steps - 1``, as disjoint
    ``(first, last)`` spans in order (an invalid answer's runs may reach past its end)."""
    clipped = sorted((max(r.first, 0), min(r.last, num_steps - 1)) for r in runs if r.last >= 0)
    spans: list[tuple[int, int]] = []
    for first, last in clipped:
        if first > last:
            continue
        if spans and first <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], last))
        else:
            spans.append((first, last))
    return spans


def _count(spans: list[tuple[int, int]]) -> int:
    return sum(last - first + 1 for first, last in spans)


def _common(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Steps in both of two lists of disjoint spans in order."""
    i = j = common = 0
    while i < len(a) and j < len(b):
        common += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]) + 1)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return common


def _byte_steps(instance: Instance, runs: dict[int, tuple[TensorRun, ...]]) -> int:
    """Sum over tensors of bytes times the steps at which they are in fast memory."""
    steps = len(instance.instructions)
    return sum(instance.tensors[t].size * _count(_spans(rs, steps)) for t, rs in runs.items())


def _common_byte_steps(
    instance: Instance,
    a: dict[int, tuple[TensorRun, ...]],
    b: dict[int, tuple[TensorRun, ...]],
) -> int:
    """Sum over tensors of bytes times the steps at which both keep them in fast memory."""
    steps = len(instance.instructions)
    return sum(
        instance.tensors[t].size * _common(_spans(a[t], steps), _spans(b[t], steps))
        for t in set(a) & set(b)
    )


def compare_residency(
    instance: Instance,
    a: Solution,
    b: Solution,
    names: tuple[str, str] | None = None,
) -> ResidencyComparison:
    """Compare where ``a`` and ``b`` (solutions of ``instance``) keep each tensor; ``names``
    (default: their solvers') name them in the comparison. Steps are counted within the
    program, so an invalid answer's intervals past its end are compared as far as it goes.
    Raises :class:`~mallocgame.errors.SolutionError` (before any work) when ``a`` or ``b``
    is a solution of another instance (its ``instance_sha256`` is not ``instance``'s), as
    ``check`` fails it and ``show`` refuses it: its buffers are not this program's."""
    for which, solution in (("a", a), ("b", b)):
        if solution.instance_sha256 != instance.sha256:
            raise SolutionError(
                f"compare_residency: {which} ({solution.solver}) is a solution of another "
                f"instance ({solution.instance!r}, instance_sha256 "
                f"{solution.instance_sha256[:12]}...), not of {instance.name!r} "
                f"({instance.sha256[:12]}...)"
            )
    runs_a, runs_b = residency(instance, a), residency(instance, b)
    name_a, name_b = names if names is not None else (a.solver, b.solver)

    def only(mine: dict, theirs: dict) -> tuple[tuple[str, int], ...]:
        tensors = sorted(set(mine) - set(theirs), key=lambda t: (-instance.tensors[t].size, t))
        return tuple((instance.tensors[t].name, instance.tensors[t].size) for t in tensors)

    return ResidencyComparison(
        name_a,
        name_b,
        len(runs_a),
        len(runs_b),
        only(runs_a, runs_b),
        only(runs_b, runs_a),
        _refetches(instance, runs_b, runs_a),
        _refetches(instance, runs_a, runs_b),
        _byte_steps(instance, runs_a),
        _byte_steps(instance, runs_b),
        _common_byte_steps(instance, runs_a, runs_b),
    )


def _named(items: tuple[tuple[str, int], ...], shown: int = 3) -> str:
    if not items:
        return "none"
    listed = ", ".join(f"{name} ({format_bytes(size)})" for name, size in items[:shown])
    return f"{len(items)}: {listed}" + (", ..." if len(items) > shown else "")


def _refetch_lines(
    refetches: tuple[Refetch, ...], who: str, other: str, shown: int = 5
) -> list[str]:
    head = f"re-fetched by {who} where {other} keeps them resident: "
    if not refetches:
        return [head + "none"]
    lines = [head + f"{len(refetches)}"]
    lines += [
        f"  {r.name} ({format_bytes(r.size)}): evicted after step {r.evicted_after}, "
        f"fetched again for step {r.needed_at}"
        for r in refetches[:shown]
    ]
    if len(refetches) > shown:
        lines.append(f"  ... and {len(refetches) - shown} more")
    return lines


def format_residency_comparison(c: ResidencyComparison) -> str:
    """A few lines: counts, what only one keeps, and the re-fetches either way."""
    if c.fast_byte_steps_a and c.fast_byte_steps_b:
        ratio = c.fast_byte_steps_b / c.fast_byte_steps_a
        steps = f"fast byte-steps {c.b}/{c.a} {ratio:.3f}, in common {c.agreement:.1%} of either's"
    elif c.fast_byte_steps_a or c.fast_byte_steps_b:
        steps = f"no fast byte-steps in {c.b if c.fast_byte_steps_a else c.a}"
    else:
        steps = "no fast byte-steps in either"
    lines = [
        f"tensors in fast memory: {c.a} {c.fast_in_a}, {c.b} {c.fast_in_b}; {steps}",
        f"only {c.a} keeps in fast memory: {_named(c.only_in_a)}",
        f"only {c.b} keeps in fast memory: {_named(c.only_in_b)}",
    ]
    lines += _refetch_lines(c.refetched_by_b, c.b, c.a)
    lines += _refetch_lines(c.refetched_by_a, c.a, c.b)
    return "\n".join(lines)
