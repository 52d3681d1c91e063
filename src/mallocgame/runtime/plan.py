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
  complete before ``t`` runs.
- An **output Copy** or **output NoCopy** of ``X`` starts a segment at ``X``'s defining
  instruction: the instruction writes ``X`` into HBM; after a Copy, ``X`` is also copied
  HBM -> host (issued right after the write; a host read of ``X`` waits for it).
- An **operand NoCopy** reads the segment of ``X`` at the allocation's offset that is
  alive at ``t`` (an in-place extension, SPEC section 4, lengthens it).
- A buffer with no allocation (**Drop**) reads ``X``'s host copy directly (an operand) or
  is written straight into host memory (an output).

A segment is freed after the last instruction of its memory intervals (not after the
last instruction of the program: the runtime keeps those until the results are read).
Program inputs start in host memory (SPEC section 1). :meth:`PlacementPlan.all_fast` is
the framework's default, which is not a game answer: inputs resident in HBM for the whole
run, every output written to HBM, no copies.

Units: instructions are indices ``0 .. T-1``; sizes in bytes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from mallocgame.instance import Instance
from mallocgame.runtime.errors import AnswerMismatchError, PlanError
from mallocgame.solution import Allocation, Solution

__all__ = ["Segment", "Read", "Write", "Step", "PlacementPlan", "placement_plan"]


@dataclass(frozen=True)
class Segment:
    """One HBM copy of tensor ``tensor``, alive over instructions ``[start, end]`` (inclusive).

    ``source`` is ``"prefetch"`` (copied in from host memory; the copy is issued before
    instruction ``start`` and must be done before ``ready``) or ``"output"`` (written by
    instruction ``start == ready``, the tensor's definition); ``copy_out``: the tensor is
    copied to host memory after that write. ``offset`` is the answer's offset (bytes).
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
    ``sizes``: every tensor's size in bytes, by tensor id.
    """

    label: str
    instance_sha256: str
    steps: tuple[Step, ...]
    segments: tuple[Segment, ...]
    resident: frozenset[int]
    host_tensors: frozenset[int]
    sizes: tuple[int, ...]

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
        """Planned HBM bytes alive at each instruction: resident inputs plus live segments."""
        resident = sum(self.sizes[x] for x in self.resident)
        live = [resident] * len(self.steps)
        for s in self.segments:
            for t in range(s.start, s.end + 1):
                live[t] += self.sizes[s.tensor]
        return live

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

    def _extend_segment(self, a: Allocation) -> None:
        """Lengthen, for operand NoCopy ``a``, the segment that ends just before it."""
        buf = self.instance.buffers[a.buffer]
        assert a.start is not None and a.end is not None
        for sid in reversed(self.live[(buf.tensor_id, a.offset)]):
            s = self.segments[sid]
            if s.end + 1 >= a.start and s.start <= a.start:
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

    def find_host(self) -> None:
        """The tensors that have a host copy (into ``host``): inputs, and those whose
        definition is dropped or copied out."""
        instance = self.instance
        self.host = {
            x.id for x in instance.tensors if _reaches_host(instance, self.by_buffer, x.id)
        }

    def copies(self) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, list[int]]]:
        """By instruction, the segments copied in before it, copied out after it and freed
        after it (after :meth:`find_host`)."""
        prefetch_at: dict[int, list[int]] = defaultdict(list)
        copy_out_at: dict[int, list[int]] = defaultdict(list)
        for s in self.segments:
            if s.source == "prefetch":
                if s.tensor not in self.host:
                    raise PlanError(
                        f"tensor {s.tensor} is copied into HBM at step {s.ready} but never "
                        f"reaches host memory"
                    )
                prefetch_at[s.start].append(s.id)
            elif s.copy_out:
                copy_out_at[s.ready].append(s.id)
        free_at: dict[int, list[int]] = defaultdict(list)
        for s in self.segments:
            if s.end < self.instance.num_instructions - 1:
                free_at[s.end].append(s.id)
        return prefetch_at, copy_out_at, free_at

    def _covering(self, x: int, offset: int, t: int, b: int) -> int:
        """The latest-starting segment of tensor ``x`` at ``offset`` alive at instruction ``t``
        (read by buffer ``b``)."""
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
        return max(found, key=lambda sid: self.segments[sid].start)

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
    describe a placement (a fast read with no HBM copy alive, a host read of a tensor that
    never reaches host memory).
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
    )
