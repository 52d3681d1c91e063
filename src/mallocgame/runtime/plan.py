"""An answer as a placement plan: per instruction, which copy of each tensor is read and written.

:func:`placement_plan` turns a :class:`~mallocgame.solution.Solution` for an
:class:`~mallocgame.instance.Instance` into a :class:`PlacementPlan` that a runtime
(:mod:`mallocgame.runtime.torch_run`) follows step by step. It needs no torch and no GPU,
so which tensors live where and which copies happen is testable anywhere.

The two memories of the game are, at run time, **HBM** (fast) and **host memory** (slow:
pinned host memory that kernels read directly over PCIe). A tensor has at most one
*host copy* and any number of *HBM copies* ("segments"), each alive over an inclusive
interval of instructions:

- An **operand Copy** of tensor ``X`` at instruction ``t`` with copy interval
  ``[s, t-1]`` starts a segment: its copy host -> HBM is issued before instruction ``s``
  runs (``s = t`` when the copy interval is empty, a zero-byte buffer) and must be
  complete before ``t`` runs; the segment is alive from its memory interval's start,
  which may come before ``s``.
- An **output Copy** or **output NoCopy** of ``X`` starts a segment at ``X``'s defining
  instruction: the instruction writes ``X`` into HBM; after a Copy, ``X`` is also copied
  HBM -> host (issued right after the write; a host read of ``X`` waits for it).
- An **operand NoCopy** at instruction ``t`` reads a segment of ``X`` at the
  allocation's offset that is alive at ``t`` and ready by ``t`` (an output written by
  then, or a prefetch due by ``t``): of those, the latest-starting; an in-place extension
  (SPEC section 4) lengthens the one ready by ``t`` that ends just before it (or covers
  its start). Two segments of ``X`` at one offset can be alive together (one alias
  group's location, filled again by a prefetch for a later read): a prefetch due only
  after ``t`` is never read at ``t``, where the runtime would wait for its copy, a stall
  the answer does not have; with no ready segment the plan is refused.
- A buffer with no allocation (**Drop**) reads ``X``'s host copy directly (an operand) or
  is written straight into host memory (an output).

A segment is freed after the last instruction of its memory intervals (not after the
last instruction of the program: the runtime keeps those until the results are read).

Program inputs start in host memory (SPEC section 1). :meth:`PlacementPlan.all_fast` is
the framework's default, which is not a game answer: inputs resident in HBM for the whole
run, every output written to HBM, no copies.

**Two counts of fast memory.** :meth:`PlacementPlan.hbm_bytes` is the HBM the runtime
holds as it follows the plan: every live segment at its tensor's full size, because the
runtime copies whole tensors in and out and stores every segment as a tensor of its own
(the exported graph is functional, so an in-place update writes a new tensor). It can
exceed the fast memory of a checked answer, for two reasons: the game counts the
buffers of one alias group as one location, so the two tensors of an in-place update
(alive together at the update), or a tensor's output copy and a later prefetch of it into
the same group's location, take the room of one there and of both here; and the game
allocates a buffer at its own (aligned) size, which may be smaller than its tensor's.
:meth:`PlacementPlan.game_fast_bytes` is the game's count, the union of the answer's
allocated address ranges (:class:`Region`); it never exceeds the fast memory of an
answer that passes the checker (SPEC section 7, physical rule 1).

Units: instructions are indices ``0 .. T-1``; sizes in bytes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from mallocgame.instance import Instance
from mallocgame.runtime.errors import AnswerMismatchError, PlanError
from mallocgame.solution import Allocation, Solution

__all__ = ["Segment", "Region", "Read", "Write", "Step", "PlacementPlan", "placement_plan"]


@dataclass(frozen=True)
class Segment:
    """One HBM copy of tensor ``tensor``, alive over instructions ``[start, end]`` (inclusive).

    ``source`` is ``"prefetch"`` (copied in from host memory; the copy is issued before
    the first instruction of the answer's copy interval, at or after ``start``, in that
    step's :attr:`Step.prefetch`, and must be done before ``ready``) or ``"output"``
    (written by instruction ``start == ready``, the tensor's definition); ``copy_out``:
    the tensor is copied to host memory after that write. ``offset`` is the answer's
    offset (bytes).
    """

    id: int
    tensor: int
    offset: int
    start: int
    end: int
    source: str
    ready: int
    copy_out: bool = False


@dataclass(frozen=True)
class Region:
    """A non-empty allocation of the answer as the game counts fast memory: buffer
    ``buffer`` holds bytes ``[offset, offset + size)`` over instructions ``[start, end]``
    (inclusive); ``size`` is the buffer's size rounded up to the alignment."""

    buffer: int
    offset: int
    size: int
    start: int
    end: int


@dataclass(frozen=True)
class Read:
    """One operand: tensor ``tensor`` read from HBM segment ``segment``, or from host memory
    (``segment`` None)."""

    tensor: int
    segment: int | None


@dataclass(frozen=True)
class Write:
    """One output: tensor ``tensor`` written into HBM segment ``segment``, or into host memory
    (``segment`` None)."""

    tensor: int
    segment: int | None


@dataclass(frozen=True)
class Step:
    """What the runtime does around instruction ``index`` (named ``name``), in this order:
    issue the copies in of ``prefetch`` (segment ids), run the instruction reading ``reads``
    and writing ``writes`` (one per operand / output buffer, in the instruction's order),
    issue the copies out of ``copy_out``, then free the segments of ``free``."""

    index: int
    name: str
    prefetch: tuple[int, ...]
    reads: tuple[Read, ...]
    writes: tuple[Write, ...]
    copy_out: tuple[int, ...]
    free: tuple[int, ...]


@dataclass(frozen=True)
class PlacementPlan:
    """An answer, step by step (see the module docstring).

    ``resident``: program inputs placed in HBM before the run and kept there (only the
    framework default has any); ``host_tensors``: the tensors that have a host copy at
    some point (inputs in host memory, outputs written there or copied out);
    ``sizes``: every tensor's size in bytes, by tensor id; ``regions``: the answer's
    non-empty allocations (None for the framework default, which is no game answer).
    """

    label: str
    instance_sha256: str
    steps: tuple[Step, ...]
    segments: tuple[Segment, ...]
    resident: frozenset[int]
    host_tensors: frozenset[int]
    sizes: tuple[int, ...]
    regions: tuple[Region, ...] | None = None

    @classmethod
    def all_fast(cls, instance: Instance, label: str = "hbm-resident") -> PlacementPlan:
        """The framework default: every input resident in HBM, every output written to HBM."""
        num_t = instance.num_instructions
        segments: list[Segment] = []
        seg_of: dict[int, int] = {}
        for x in instance.tensors:
            if x.def_time >= 0:
                seg_of[x.id] = len(segments)
                end = num_t - 1 if x.live_out else max(x.last_use_time, x.def_time)
                segments.append(
                    Segment(len(segments), x.id, 0, x.def_time, end, "output", x.def_time)
                )
        resident = frozenset(x.id for x in instance.tensors if x.def_time < 0)
        steps = []
        for t, ins in enumerate(instance.instructions):
            reads, writes = [], []
            for b in ins.buffers:
                buf = instance.buffers[b]
                if buf.is_output:
                    writes.append(Write(buf.tensor_id, seg_of[buf.tensor_id]))
                else:
                    reads.append(Read(buf.tensor_id, seg_of.get(buf.tensor_id)))
            free = tuple(s.id for s in segments if s.end == t and t < num_t - 1)
            steps.append(Step(t, ins.name, (), tuple(reads), tuple(writes), (), free))
        return cls(
            label,
            instance.sha256,
            tuple(steps),
            tuple(segments),
            resident,
            frozenset(),
            tuple(x.size for x in instance.tensors),
        )

    def segment(self, seg: int) -> Segment:
        return self.segments[seg]

    def hbm_bytes(self) -> list[int]:
        """Planned HBM bytes alive at each instruction: resident inputs plus live segments,
        each at its tensor's size: what the runtime holds there (kernel workspaces and
        the allocator's rounding aside). It can exceed the fast memory of a checked answer
        where the game shares room between the buffers of an alias group or allocates a
        buffer smaller than its tensor (module docstring); :meth:`game_fast_bytes` is
        the game's count."""
        resident = sum(self.sizes[x] for x in self.resident)
        live = [resident] * len(self.steps)
        for s in self.segments:
            for t in range(s.start, s.end + 1):
                live[t] += self.sizes[s.tensor]
        return live

    def game_fast_bytes(self) -> list[int]:
        """Fast-memory bytes the answer occupies at each instruction as the game and the
        checker count them: the size of the union of the address ranges of the
        :attr:`regions` alive there (one alias group's buffers at one offset overlap: the
        largest counts once; each buffer at its own aligned size). At most the fast
        memory for an answer that passes the checker. Raises :class:`PlanError` for a plan
        without regions (the framework default, no game answer)."""
        if self.regions is None:
            raise PlanError(
                f"plan {self.label!r} is no game answer (the framework default): it has "
                "no allocations to count as the game does"
            )
        alive: list[list[tuple[int, int]]] = [[] for _ in self.steps]
        for r in self.regions:
            for t in range(r.start, r.end + 1):
                alive[t].append((r.offset, r.offset + r.size))
        counts = []
        for ranges in alive:
            total, reach = 0, 0
            for lo, hi in sorted(ranges):
                if hi > reach:
                    total += hi - max(lo, reach)
                    reach = hi
            counts.append(total)
        return counts

    def host_bytes(self) -> int:
        """Bytes of the tensors that have a host copy."""
        return sum(self.sizes[x] for x in self.host_tensors)

    def copy_bytes(self) -> tuple[int, int]:
        """Bytes copied host -> HBM and HBM -> host in one run of the program."""
        copy_in = sum(self.sizes[s.tensor] for s in self.segments if s.source == "prefetch")
        copy_out = sum(self.sizes[s.tensor] for s in self.segments if s.copy_out)
        return copy_in, copy_out


def _reaches_host(instance: Instance, by_buffer: dict[int, Allocation], x: int) -> bool:
    """Whether tensor ``x`` has a host copy: a program input, or its definition was dropped
    or copied out."""
    tensor = instance.tensors[x]
    if tensor.def_time < 0:
        return True
    for b in instance.instructions[tensor.def_time].buffers:
        buf = instance.buffers[b]
        if buf.is_output and buf.tensor_id == x:
            a = by_buffer.get(b)
            return a is None or a.action == "Copy"
    return False


def _check_answer(instance: Instance, solution: Solution, check: bool) -> None:
    """Raise :class:`AnswerMismatchError` when ``solution`` is for another instance (hash), and
    with ``check`` :class:`PlanError` when it fails the checker."""
    if solution.instance_sha256 != instance.sha256:
        raise AnswerMismatchError(
            f"the answer is for another program: instance sha256 "
            f"{solution.instance_sha256[:12]}... "
            f"(answer for {solution.instance!r}), this program's is {instance.sha256[:12]}..."
        )
    if check:
        from mallocgame.check import check_solution

        report = check_solution(instance, solution)
        if not report.ok:
            first = report.summary().splitlines()[0]
            raise PlanError(
                f"the answer fails the check ({len(report.failures)} failures): {first}"
            )


class _Planner:
    """State of one run of :func:`placement_plan`: the answer's allocations by buffer, the HBM
    segments made of them (per ``(tensor, offset)``, in time order), the segment each
    allocated buffer starts or extends, and the tensors that reach host memory."""

    def __init__(self, instance: Instance, solution: Solution) -> None:
        self.instance = instance
        self.by_buffer: dict[int, Allocation] = {}
        for a in solution.allocations:
            if not 0 <= a.buffer < instance.num_buffers:
                raise PlanError(f"allocation names unknown buffer {a.buffer}")
            self.by_buffer[a.buffer] = a
        self.segments: list[Segment] = []
        self.live: dict[tuple[int, int], list[int]] = defaultdict(list)  # -> segment ids
        self.seg_of_buffer: dict[int, int] = {}
        self.issue: dict[int, int] = {}  # prefetch segment id -> the step its copy is issued
        self.host: set[int] = set()

    def build_segments(self) -> None:
        """The segments, from the non-empty allocations in time order: an output or a Copy
        starts one, an operand NoCopy extends one."""
        ordered = sorted(
            (a for a in self.by_buffer.values() if not a.is_empty),
            key=lambda a: (a.start, a.buffer),
        )
        for a in ordered:
            buf = self.instance.buffers[a.buffer]
            if buf.is_output or a.action == "Copy":
                self._start_segment(a)
            else:
                self._extend_segment(a)

    def _start_segment(self, a: Allocation) -> None:
        """A new segment for ``a`` (an output, or an operand Copy: a prefetch)."""
        buf = self.instance.buffers[a.buffer]
        assert a.start is not None and a.end is not None
        seg = Segment(
            len(self.segments),
            buf.tensor_id,
            a.offset,
            a.start,
            a.end,
            "output" if buf.is_output else "prefetch",
            buf.instruction,
            copy_out=a.action == "Copy" if buf.is_output else False,
        )
        self.segments.append(seg)
        self.live[(buf.tensor_id, a.offset)].append(seg.id)
        self.seg_of_buffer[a.buffer] = seg.id
        if not buf.is_output:  # at the copy interval's start (none: the read's own step)
            self.issue[seg.id] = a.copy[0] if a.copy is not None else buf.instruction

    def _extend_segment(self, a: Allocation) -> None:
        """Lengthen, for operand NoCopy ``a`` (read at instruction ``t``), the segment that
        ends just before it (or covers its start) and is ready by ``t``, the latest-starting
        of those; :class:`PlanError` if there is none (:meth:`_ready_at`)."""
        buf = self.instance.buffers[a.buffer]
        assert a.start is not None and a.end is not None
        found = [
            sid
            for sid in self.live[(buf.tensor_id, a.offset)]
            if self.segments[sid].start <= a.start <= self.segments[sid].end + 1
        ]
        if found:
            sid = self._ready_at(found, buf.instruction, a.buffer, a.offset)
            s = self.segments[sid]
            self.segments[sid] = Segment(
                s.id,
                s.tensor,
                s.offset,
                s.start,
                max(s.end, a.end),
                s.source,
                s.ready,
                s.copy_out,
            )
            self.seg_of_buffer[a.buffer] = sid
            return
        raise PlanError(
            f"buffer {a.buffer} (instruction {buf.instruction}) extends tensor "
            f"{buf.tensor_id} in HBM "
            f"at offset {a.offset}, but no HBM copy of it ends just before step {a.start}"
        )

    def regions(self) -> tuple[Region, ...]:
        """The answer's non-empty allocations (:class:`Region`), by buffer."""
        hw = self.instance.hardware
        return tuple(
            Region(b, a.offset, hw.aligned(self.instance.buffers[b].size), a.start, a.end)
            for b, a in sorted(self.by_buffer.items())
            if a.start is not None and a.end is not None
        )

    def find_host(self) -> None:
        """The tensors that have a host copy (into ``host``): inputs, and those whose
        definition is dropped or copied out."""
        instance = self.instance
        self.host = {
            x.id for x in instance.tensors if _reaches_host(instance, self.by_buffer, x.id)
        }

    def copies(self) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, list[int]]]:
        """By instruction, the segments copied in before it (at their copy interval's
        start), copied out after it and freed after it (after :meth:`find_host`)."""
        prefetch_at: dict[int, list[int]] = defaultdict(list)
        copy_out_at: dict[int, list[int]] = defaultdict(list)
        for s in self.segments:
            if s.source == "prefetch":
                if s.tensor not in self.host:
                    raise PlanError(
                        f"tensor {s.tensor} is copied into HBM at step {s.ready} but never "
                        f"reaches host memory"
                    )
                prefetch_at[self.issue[s.id]].append(s.id)
            elif s.copy_out:
                copy_out_at[s.ready].append(s.id)
        free_at: dict[int, list[int]] = defaultdict(list)
        for s in self.segments:
            if s.end < self.instance.num_instructions - 1:
                free_at[s.end].append(s.id)
        return prefetch_at, copy_out_at, free_at

    def _ready_at(self, found: list[int], t: int, b: int, offset: int) -> int:
        """The segment buffer ``b`` reads at instruction ``t`` among ``found`` (segments of
        one tensor at ``offset``, in the order they were made): the latest-starting (of a
        tie, the later made) of those ready by ``t``, an output written by then or a
        prefetch due by ``t`` (one due later would make the runtime wait at ``t`` for its
        copy, a stall the answer does not have). Raises :class:`PlanError` if none is."""
        ready = [sid for sid in found if self.segments[sid].ready <= t]
        if not ready:
            s = self.segments[found[-1]]
            raise PlanError(
                f"buffer {b} (instruction {t}) reads tensor {s.tensor} from HBM at offset "
                f"{offset}, but its copy there is not in HBM yet (copied in by step "
                f"{s.ready})"
            )
        return max(ready, key=lambda sid: (self.segments[sid].start, sid))

    def _covering(self, x: int, offset: int, t: int, b: int) -> int:
        """The segment of tensor ``x`` at ``offset`` alive at instruction ``t`` that buffer
        ``b`` (an operand NoCopy with an empty interval) reads: the latest-starting of
        those ready by ``t``; :class:`PlanError` if none is alive or ready
        (:meth:`_ready_at`)."""
        found = [
            sid
            for sid in self.live[(x, offset)]
            if self.segments[sid].start <= t <= self.segments[sid].end
        ]
        if not found:
            raise PlanError(
                f"buffer {b} (instruction {t}) reads tensor {x} from HBM at offset {offset}, "
                "but no HBM copy of it is alive there"
            )
        return self._ready_at(found, t, b, offset)

    def _segment_of(self, t: int, b: int) -> int | None:
        """The segment buffer ``b`` of instruction ``t`` reads or writes (None: host memory)."""
        buf = self.instance.buffers[b]
        a = self.by_buffer.get(b)
        if a is None:
            if not buf.is_output and buf.tensor_id not in self.host:
                raise PlanError(
                    f"buffer {b} (instruction {t}) reads tensor {buf.tensor_id} from host "
                    f"memory, "
                    "but it never reaches host memory (its definition is resident in HBM)"
                )
            return None
        if b in self.seg_of_buffer:
            return self.seg_of_buffer[b]
        return self._covering(buf.tensor_id, a.offset, t, b)

    def steps(self) -> list[Step]:
        """The plan's steps, one per instruction (after :meth:`build_segments` and
        :meth:`find_host`)."""
        prefetch_at, copy_out_at, free_at = self.copies()
        steps = []
        for t, ins in enumerate(self.instance.instructions):
            reads: list[Read] = []
            writes: list[Write] = []
            for b in ins.buffers:
                buf = self.instance.buffers[b]
                seg = self._segment_of(t, b)
                if buf.is_output:
                    writes.append(Write(buf.tensor_id, seg))
                else:
                    reads.append(Read(buf.tensor_id, seg))
            steps.append(
                Step(
                    t,
                    ins.name,
                    tuple(prefetch_at[t]),
                    tuple(reads),
                    tuple(writes),
                    tuple(copy_out_at[t]),
                    tuple(free_at[t]),
                )
            )
        return steps


def placement_plan(
    instance: Instance, solution: Solution, *, check: bool = True, label: str | None = None
) -> PlacementPlan:
    """The plan of ``solution`` (an answer for ``instance``); see the module docstring.

    Raises :class:`AnswerMismatchError` when the answer is for another instance (hash),
    :class:`PlanError` when it fails the checker (``check``, the default: SPEC section 7's
    physical rules, via :func:`mallocgame.check.check_solution`) or its allocations do not
    describe a placement (a fast read with no HBM copy alive, or only one whose copy in is
    due after the read, a host read of a tensor that never reaches host memory).
    """
    _check_answer(instance, solution, check)
    planner = _Planner(instance, solution)
    planner.build_segments()
    planner.find_host()
    steps = planner.steps()
    return PlacementPlan(
        label=label or solution.solver,
        instance_sha256=instance.sha256,
        steps=tuple(steps),
        segments=tuple(planner.segments),
        resident=frozenset(),
        host_tensors=frozenset(planner.host),
        sizes=tuple(x.size for x in instance.tensors),
        regions=planner.regions(),
    )
