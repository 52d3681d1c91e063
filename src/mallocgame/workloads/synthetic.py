"""Random programs shaped like compiled ML programs (the ``synthetic-v1/...`` workloads).

:func:`program` builds a scheduled program instruction by instruction until it has
the requested number of buffers (exactly):

- Each instruction has an opcode (``fusion``, ``convolution``, ``dot``, ``reduce``,
  ``copy``, ``transpose``, ``dynamic-update-slice``) that fixes how many operands it
  reads, whether it reads a program input, its arithmetic intensity and its output
  size. It has one output, sometimes two (multi-output fusions).
- Activation operands are mostly the newest outputs (a geometric draw over recency,
  so most values are read soon after definition by one to a few instructions) and
  sometimes an old one (a skip connection).
- Program inputs (``def_time = -1``) are weights, biases and a few "hot" scalars;
  a weight is either fresh or a re-read of an earlier one (as a backward pass
  re-reads forward weights), hot scalars are read throughout the program.
- ``dynamic-update-slice`` updates its first operand in place, and the operand's tensor
  is never read again. The operand's tensor and the output tensor share one storage
  location, so (``synthetic-v2``, SPEC section 1) every buffer of both, definitions and
  reads, and of the tensors chained to them by further in-place updates, forms one
  alias group. (``synthetic-v1`` grouped the in-place operand buffer and the output
  buffer alone, and left the tensors' other buffers groups of their own: looser than
  any real program.) Every other buffer is an alias group of its own.
- Optionally a contiguous region is a flattened loop body: its instructions have
  ``count = trip_count`` and the program lists it in ``loops``; a value read inside
  the body lives until the body ends.
- The last instruction's outputs, most never-read values and most in-place updated
  weights are program results (``live_out``; they live until the end).

:func:`program` returns that :class:`~mallocgame.program.Program` (each instruction's
flops are a drawn arithmetic intensity times the bytes it moves); :func:`generate`
derives its instance on a hardware preset with :mod:`mallocgame.costmodel`, the one
cost model of every frontend (default: ``tpu_v4i`` and a fast memory of a quarter of
the peak live bytes, so it binds).

The generator is versioned: the named workloads are ``synthetic-vN/SIZE``
(:data:`SYNTHETIC_NAMES`, N in :data:`VERSIONS`), and a change of the program it draws
for a seed is a new version (their hashes are pinned in the tests). The versions draw
the same instructions, tensors and loops for a seed; they differ in the alias groups
alone. ``version`` defaults to the newest (:data:`SUITE`).

Everything is drawn from ``numpy.random.default_rng(seed)``: the same arguments give
the same instance.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate

import numpy as np

from mallocgame.costmodel import DEFAULT_CAPACITY_FRACTION, derive_instance
from mallocgame.errors import InputFileError
from mallocgame.hardware import DEFAULT_PRESET, HardwarePreset
from mallocgame.instance import Instance
from mallocgame.program import Program, ProgramInstruction, ProgramLoop, ProgramTensor

__all__ = ["SUITE", "VERSIONS", "LATEST", "SYNTHETIC_NAMES", "program", "generate", "named"]

VERSIONS = (1, 2)
"""The generator's versions: 2 groups in-place chains as SPEC section 1 says, 1 as before."""
LATEST = VERSIONS[-1]
SUITE = f"synthetic-v{LATEST}"

KIB = 1024
MIB = 1024 * KIB

# Tensor sizes (bytes): multiples of SIZE_GRANULE in [MIN_SIZE, MAX_SIZE].
MIN_SIZE = 1 * KIB
MAX_SIZE = 4 * MIB
SIZE_GRANULE = 128
HOT_SIZE = (1 * KIB, 8 * KIB)  # log-uniform range of a hot scalar input's size

# Program shape.
RECENT_P = 0.5  # geometric parameter of an activation operand's recency
SKIP_PROB = 0.07  # an activation operand is a skip connection
SKIP_MIN_AGE = 8  # a skip connection reaches at least this many activations back
SAME_SHAPE_PROB = 0.5  # an output has its main operand's size
PARAM_REUSE_PROB = 0.35  # a weight operand re-reads an earlier weight
HOT_PARAMS = 3  # number of hot scalar inputs read throughout the program
IN_PLACE_PARAM_PROB = 0.3  # an in-place update targets a program input (donated weight)
UNREAD_PROB = 0.6  # an activation operand prefers an output nobody has read yet
PICK_TRIES = 4  # attempts to find a readable tensor before taking a fresh input

# Program results.
RESULT_PROB_UNREAD = 0.5  # a never-read activation is a program result
RESULT_PROB_READ = 0.02  # a read activation is also a program result
RESULT_PROB_UPDATED_INPUT = 0.8  # an in-place updated program input is a result

# Loop region.
LOOP_PROB = 0.5  # the program has a flattened loop body
LOOP_MIN_BUFFERS = 40  # smaller programs have none
LOOP_START = (0.2, 0.6)  # uniform range of the body's start, fraction of the buffers
LOOP_LENGTH = (0.1, 0.3)  # uniform range of the body's length, fraction of the buffers
TRIP_COUNT = (2, 8)  # inclusive range of the trip count

# Fixed instances for the command line: name -> (version, number of buffers); all seed 0,
# with a loop.
_SIZES = {"small": 60, "1k": 1000, "4k": 4000, "16k": 16000}
_NAMED = {
    f"synthetic-v{version}/{size}": (version, buffers)
    for version in VERSIONS
    for size, buffers in _SIZES.items()
}
SYNTHETIC_NAMES: tuple[str, ...] = tuple(_NAMED)
_NAMED_SEED = 0


@dataclass(frozen=True)
class _OpKind:
    """How one opcode reads and writes; probabilities are per instruction."""

    opcode: str
    weight: float  # relative frequency in a program
    activations: tuple[float, ...]  # probability of reading 1, 2, ... activations
    param_prob: float = 0.0  # probability of also reading a program input
    hot_param: bool = False  # that input is a hot scalar (else a weight)
    param_size: tuple[int, int] = (MIN_SIZE, MAX_SIZE)  # log-uniform size of a new weight
    intensity: tuple[float, float] | None = None  # log-uniform flops per byte moved
    two_outputs: float = 0.0  # probability of a second output
    shrink: tuple[float, float] | None = None  # output = main operand / log-uniform(shrink)
    in_place: bool = False  # the output updates operand 0 in place

    @cached_property
    def activations_cumulative(self) -> tuple[float, ...]:
        return tuple(accumulate(self.activations))


_OPS: tuple[_OpKind, ...] = (
    _OpKind(
        "fusion",
        0.42,
        (0.55, 0.30, 0.15),
        0.3,
        param_size=(1 * KIB, 256 * KIB),
        intensity=(0.25, 8.0),
        two_outputs=0.12,
    ),
    _OpKind(
        "convolution", 0.12, (1.0,), 1.0, param_size=(4 * KIB, 4 * MIB), intensity=(16.0, 600.0)
    ),
    _OpKind("dot", 0.14, (0.75, 0.25), 0.75, param_size=(4 * KIB, 4 * MIB), intensity=(8.0, 600.0)),
    _OpKind("reduce", 0.08, (1.0,), 0.5, hot_param=True, intensity=(0.25, 2.0), shrink=(2.0, 64.0)),
    _OpKind("copy", 0.06, (1.0,)),
    _OpKind("transpose", 0.05, (1.0,)),
    _OpKind("dynamic-update-slice", 0.05, (1.0,), 0.5, hot_param=True, in_place=True),
)
_OPS_CUMULATIVE = tuple(accumulate(op.weight for op in _OPS))


class _Draw:
    """Scalar random draws served from blocks of ``Generator.random`` (fast and seeded)."""

    _BLOCK = 4096

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._block: list[float] = []
        self._next = 0

    def uniform(self) -> float:
        """A float in [0, 1)."""
        if self._next == len(self._block):
            self._block = self.rng.random(self._BLOCK).tolist()
            self._next = 0
        self._next += 1
        return self._block[self._next - 1]

    def chance(self, p: float) -> bool:
        return self.uniform() < p

    def index(self, n: int) -> int:
        """An integer in ``0 .. n-1``, uniformly."""
        return min(int(self.uniform() * n), n - 1)

    def weighted(self, cumulative: tuple[float, ...]) -> int:
        """An index drawn with probability proportional to its weight."""
        i = bisect.bisect_right(cumulative, self.uniform() * cumulative[-1])
        return min(i, len(cumulative) - 1)

    def log_uniform(self, lo: float, hi: float) -> float:
        return lo * (hi / lo) ** self.uniform()

    def geometric(self, p: float) -> int:
        """An integer >= 1 with ``P(k) = p (1-p)^(k-1)``."""
        return 1 + int(math.log1p(-self.uniform()) / math.log1p(-p))


def _round_size(size: float) -> int:
    """``size`` as a multiple of SIZE_GRANULE clamped to [MIN_SIZE, MAX_SIZE] (bytes)."""
    return max(MIN_SIZE, min(MAX_SIZE, round(size / SIZE_GRANULE) * SIZE_GRANULE))


def _fit(roles: list[str], outputs: int, remaining: int) -> tuple[list[str], int]:
    """Trim or pad an instruction so that the program ends on exactly its buffer target.

    Never leaves exactly one buffer for later (no instruction could take it alone).
    """
    while len(roles) + outputs > remaining:
        if outputs > 1:
            outputs -= 1
        else:
            roles.pop()
    if remaining - len(roles) - outputs == 1:
        roles.append("act")
    return roles, outputs


@dataclass
class _Builder:
    """The program built so far: flat lists of tensors, buffers and instructions."""

    draw: _Draw
    tensor_size: list[int] = field(default_factory=list)  # bytes
    tensor_def: list[int] = field(default_factory=list)
    tensor_name: list[str] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)  # program inputs that may be re-read
    hot: list[int] = field(default_factory=list)  # hot scalar inputs
    activations: list[int] = field(default_factory=list)  # outputs, in definition order
    unread: list[int] = field(default_factory=list)  # outputs maybe not read yet, same order
    was_read: set[int] = field(default_factory=set)
    consumed: set[int] = field(default_factory=set)  # updated in place: never read again
    results: set[int] = field(default_factory=set)  # chosen as program results
    buf_tensor: list[int] = field(default_factory=list)
    buf_instr: list[int] = field(default_factory=list)
    buf_output: list[bool] = field(default_factory=list)
    buf_alias: list[int] = field(default_factory=list)  # synthetic-v1's groups
    num_groups: int = 0
    in_place: list[tuple[int, int]] = field(default_factory=list)  # (operand, output) tensors
    ins_opcode: list[str] = field(default_factory=list)
    ins_buffers: list[range] = field(default_factory=list)
    ins_intensity: list[float] = field(default_factory=list)  # flops per byte moved

    @property
    def num_buffers(self) -> int:
        return len(self.buf_tensor)

    @property
    def num_instructions(self) -> int:
        return len(self.ins_opcode)

    def _tensor(self, size: int, def_time: int, name: str) -> int:
        self.tensor_size.append(size)
        self.tensor_def.append(def_time)
        self.tensor_name.append(name)
        return len(self.tensor_size) - 1

    def _new_input(self, size_range: tuple[float, float], pool: list[int]) -> int:
        """A new program input of log-uniform size, added to ``pool``."""
        size = _round_size(self.draw.log_uniform(*size_range))
        x = self._tensor(size, -1, f"param.{len(self.tensor_size)}")
        pool.append(x)
        return x

    def _readable(self, x: int, taken: set[int]) -> bool:
        return x not in taken and x not in self.consumed

    def _weight(self, size_range: tuple[float, float], taken: set[int]) -> int:
        """An earlier weight re-read, or a new one."""
        if self.weights and self.draw.chance(PARAM_REUSE_PROB):
            for _ in range(PICK_TRIES):
                x = self.weights[self.draw.index(len(self.weights))]
                if self._readable(x, taken):
                    return x
        return self._new_input(size_range, self.weights)

    def _hot_param(self) -> int:
        """One of the few hot scalar inputs (created on first use).

        An instruction reads at most one, and none is ever updated in place.
        """
        i = self.draw.index(HOT_PARAMS)
        if i < len(self.hot):
            return self.hot[i]
        return self._new_input(HOT_SIZE, self.hot)

    def _unread(self, taken: set[int]) -> int | None:
        """A recent output nobody has read yet (geometric in recency), if one is found.

        ``unread`` is cleaned lazily: entries read since they were added are dropped
        when drawn.
        """
        pending = self.unread
        for _ in range(PICK_TRIES):
            if not pending:
                return None
            i = len(pending) - min(self.draw.geometric(RECENT_P), len(pending))
            x = pending[i]
            if x in self.was_read or x in self.consumed:
                pending.pop(i)
            elif x not in taken:
                return x
        return None

    def _activation(self, taken: set[int]) -> int:
        """An unread recent output, or any recent output (geometric in recency), sometimes
        an old one (a skip connection); a new input when none is found."""
        x = self._unread(taken) if self.draw.chance(UNREAD_PROB) else None
        if x is not None:
            return x
        acts = self.activations
        n = len(acts)
        for _ in range(PICK_TRIES if n else 0):
            if n > SKIP_MIN_AGE and self.draw.chance(SKIP_PROB):
                x = acts[self.draw.index(n - SKIP_MIN_AGE)]
            else:
                x = acts[n - min(self.draw.geometric(RECENT_P), n)]
            if self._readable(x, taken):
                return x
        return self._new_input((MIN_SIZE, MAX_SIZE), self.weights)

    def _operand(self, role: str, op: _OpKind, taken: set[int]) -> int:
        if role == "target" and self.draw.chance(IN_PLACE_PARAM_PROB):
            return self._weight((MIN_SIZE, MAX_SIZE), taken)
        if role in ("target", "act"):
            return self._activation(taken)
        if role == "hot":
            return self._hot_param()
        return self._weight(op.param_size, taken)

    def _roles(self, op: _OpKind, remaining: int) -> tuple[list[str], int]:
        """Operand roles (in operand order) and number of outputs of a new instruction."""
        roles = ["target"] if op.in_place else []
        roles += ["act"] * (1 + self.draw.weighted(op.activations_cumulative))
        if op.param_prob and self.draw.chance(op.param_prob):
            roles.append("hot" if op.hot_param else "param")
        outputs = 2 if self.draw.chance(op.two_outputs) else 1
        return _fit(roles, outputs, remaining)

    def _output_size(self, op: _OpKind, main: int | None) -> int:
        """Bytes of a (not in-place) output given the main operand's size."""
        if main is None:
            return _round_size(self.draw.log_uniform(MIN_SIZE, MAX_SIZE))
        if op.shrink is not None:
            return _round_size(main / self.draw.log_uniform(*op.shrink))
        if self.draw.chance(SAME_SHAPE_PROB):
            return main
        return _round_size(self.draw.log_uniform(MIN_SIZE, MAX_SIZE))

    def _add_buffer(self, tensor: int, t: int, is_output: bool, alias: int | None) -> None:
        if alias is None:
            alias = self.num_groups
            self.num_groups += 1
        self.buf_tensor.append(tensor)
        self.buf_instr.append(t)
        self.buf_output.append(is_output)
        self.buf_alias.append(alias)

    def add_instruction(self, op: _OpKind, remaining: int) -> None:
        """Append one instruction of kind ``op`` with at most ``remaining`` buffers."""
        t = self.num_instructions
        roles, outputs = self._roles(op, remaining)
        in_place = bool(roles) and roles[0] == "target"
        # An in-place kind trimmed of its target (a one-buffer program) is a plain fusion.
        opcode = op.opcode if in_place or not op.in_place else "fusion"
        first = self.num_buffers
        taken: set[int] = set()
        operands = []
        for role in roles:
            x = self._operand(role, op, taken)
            taken.add(x)
            operands.append(x)
            self._add_buffer(x, t, False, None)
        self.was_read.update(operands)
        main = self.tensor_size[operands[0]] if operands else None
        name = f"{opcode}.{t}"
        produced = []
        for j in range(outputs):
            if j == 0 and in_place:
                size, alias = self.tensor_size[operands[0]], self.buf_alias[first]
            else:
                size, alias = self._output_size(op, main), None
            y = self._tensor(size, t, name if j == 0 else f"{name}.{j}")
            self._add_buffer(y, t, True, alias)
            self.activations.append(y)
            self.unread.append(y)
            produced.append(y)
        if in_place:
            self.in_place.append((operands[0], produced[0]))
            self.consumed.add(operands[0])
            if self.tensor_def[operands[0]] < 0 and self.draw.chance(RESULT_PROB_UPDATED_INPUT):
                self.results.add(produced[0])
        self.ins_opcode.append(opcode)
        self.ins_buffers.append(range(first, self.num_buffers))
        self.ins_intensity.append(self.draw.log_uniform(*op.intensity) if op.intensity else 0.0)


@dataclass(frozen=True)
class _LoopWindow:
    """Where a loop body goes, in buffers generated so far, and its trip count."""

    start: float
    end: float
    trip_count: int


def _plan_loop(draw: _Draw, num_buffers: int, loop: bool | None) -> _LoopWindow | None:
    """The loop body's window; ``loop`` None decides at random (probability LOOP_PROB).

    Every draw is made either way, so ``loop`` changes nothing else in the program.
    """
    coin = draw.chance(LOOP_PROB)
    start = num_buffers * (LOOP_START[0] + (LOOP_START[1] - LOOP_START[0]) * draw.uniform())
    length = num_buffers * (LOOP_LENGTH[0] + (LOOP_LENGTH[1] - LOOP_LENGTH[0]) * draw.uniform())
    trip = TRIP_COUNT[0] + draw.index(TRIP_COUNT[1] - TRIP_COUNT[0] + 1)
    wanted = coin if loop is None else loop
    if num_buffers < LOOP_MIN_BUFFERS or not wanted:
        return None
    return _LoopWindow(start, start + length, trip)


def _build_program(
    draw: _Draw, num_buffers: int, loop: bool | None
) -> tuple[_Builder, ProgramLoop | None]:
    """Generate instructions until the program has exactly ``num_buffers`` buffers."""
    builder = _Builder(draw)
    window = _plan_loop(draw, num_buffers, loop)
    first = last = None
    while builder.num_buffers < num_buffers:
        produced, t = builder.num_buffers, builder.num_instructions
        if window is not None:
            if first is None and produced >= window.start:
                first = t
            elif first is not None and last is None and produced >= window.end:
                last = t - 1
        builder.add_instruction(_OPS[draw.weighted(_OPS_CUMULATIVE)], num_buffers - produced)
    if first is None or window is None:
        return builder, None
    last = builder.num_instructions - 1 if last is None else last
    return builder, ProgramLoop(first=first, last=last, trip_count=window.trip_count)


def _live_ranges(
    b: _Builder, loop: ProgramLoop | None, draw: _Draw
) -> tuple[np.ndarray, np.ndarray]:
    """``last_use_time`` and ``live_out`` of every tensor."""
    steps = b.num_instructions
    def_time = np.array(b.tensor_def, dtype=np.int64)
    tensor = np.array(b.buf_tensor, dtype=np.int64)
    instr = np.array(b.buf_instr, dtype=np.int64)
    reads = ~np.array(b.buf_output, dtype=bool)
    last_read = np.full(len(def_time), -1, dtype=np.int64)
    np.maximum.at(last_read, tensor[reads], instr[reads])
    if loop is not None:
        in_body = reads & (instr >= loop.first) & (instr <= loop.last)
        np.maximum.at(last_read, tensor[in_body], loop.last)
    probability = np.where(last_read >= 0, RESULT_PROB_READ, RESULT_PROB_UNREAD)
    live_out = (def_time >= 0) & (draw.rng.random(len(def_time)) < probability)
    live_out[list(b.results)] = True
    live_out[def_time == steps - 1] = True
    live_out[list(b.consumed)] = False
    last_use = np.maximum(last_read, def_time)
    last_use[live_out] = steps - 1
    return last_use, live_out


def _program_instructions(b: _Builder, count: list[int]) -> tuple[ProgramInstruction, ...]:
    """Each instruction's operands and outputs (tensor ids, full tensor bytes) and flops:
    its arithmetic intensity times the bytes it moves."""
    out = []
    for t in range(b.num_instructions):
        span = b.ins_buffers[t]
        operands = tuple(b.buf_tensor[i] for i in span if not b.buf_output[i])
        outputs = tuple(b.buf_tensor[i] for i in span if b.buf_output[i])
        operand_bytes = tuple(b.tensor_size[x] for x in operands)
        output_bytes = tuple(b.tensor_size[x] for x in outputs)
        moved = float(sum(operand_bytes) + sum(output_bytes))
        out.append(
            ProgramInstruction(
                name=f"{b.ins_opcode[t]}.{t}",
                opcode=b.ins_opcode[t],
                operands=operands,
                outputs=outputs,
                operand_bytes=operand_bytes,
                output_bytes=output_bytes,
                flops=b.ins_intensity[t] * moved,
                count=count[t],
            )
        )
    return tuple(out)


def _alias_groups(b: _Builder, version: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The alias groups as ``(instruction, position)`` buffers, each group and the groups
    in game order: version 2, every buffer of the tensors an in-place chain joins; version
    1, each in-place operand buffer with its output buffer."""
    if version == 1:
        key = b.buf_alias
    else:
        root = list(range(len(b.tensor_size)))  # union-find over tensors

        def find(x: int) -> int:
            while root[x] != x:
                root[x] = root[root[x]]
                x = root[x]
            return x

        for operand, output in b.in_place:
            root[find(output)] = find(operand)
        joined = {x for pair in b.in_place for x in pair}
        # a buffer of a tensor no in-place update touches is a group of its own
        key = [find(x) if x in joined else -1 - i for i, x in enumerate(b.buf_tensor)]
    members: dict[int, list[tuple[int, int]]] = {}
    for t, span in enumerate(b.ins_buffers):
        for i in span:
            members.setdefault(key[i], []).append((t, i - span.start))
    return tuple(tuple(group) for group in members.values() if len(group) > 1)


def _default_name(version: int, num_buffers: int, seed: int, loop: bool | None) -> str:
    """``synthetic-vV/bB-sS``, and ``-loop`` or ``-noloop`` where ``loop`` was given: the
    instances of one seed with and without a loop are two programs, and two names."""
    choice = "" if loop is None else ("-loop" if loop else "-noloop")
    return f"synthetic-v{version}/b{num_buffers}-s{seed}{choice}"


def program(
    num_buffers: int,
    seed: int,
    *,
    name: str | None = None,
    loop: bool | None = None,
    version: int = LATEST,
) -> Program:
    """A random program shaped like a compiled ML program, with exactly ``num_buffers`` buffers.

    ``seed`` seeds :func:`numpy.random.default_rng`; equal arguments give equal
    programs. ``loop``: whether part of the program is a loop body (``None``: at
    random; programs under LOOP_MIN_BUFFERS buffers never have one). ``version`` (one of
    :data:`VERSIONS`) fixes the alias groups. ``name`` defaults to
    ``synthetic-v{version}/b{num_buffers}-s{seed}``, with ``-loop`` or ``-noloop`` where
    ``loop`` is given. Raises :class:`ValueError` for
    ``num_buffers < 1``, a seed that is not an integer from 0 (None would draw a new
    program each call under one name), a ``loop`` that is not ``True``, ``False`` or
    ``None`` (``"no"`` would be taken for true) or an unknown version.
    """
    if isinstance(num_buffers, bool) or not isinstance(num_buffers, int) or num_buffers < 1:
        raise ValueError(f"num_buffers must be an integer >= 1, got {num_buffers!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if loop is not None and not isinstance(loop, bool):
        raise ValueError(f"loop must be True, False or None, got {loop!r}")
    if isinstance(version, bool) or not isinstance(version, int) or version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    draw = _Draw(np.random.default_rng(seed))
    builder, body = _build_program(draw, num_buffers, loop)
    last_use, live_out = _live_ranges(builder, body, draw)
    count = [1] * builder.num_instructions
    if body is not None:
        count[body.first : body.last + 1] = [body.trip_count] * (body.last - body.first + 1)
    ends, outs = last_use.tolist(), live_out.tolist()
    tensors = tuple(
        ProgramTensor(i, tensor_name, size, def_time, ends[i], outs[i])
        for i, (tensor_name, size, def_time) in enumerate(
            zip(builder.tensor_name, builder.tensor_size, builder.tensor_def)
        )
    )
    return Program(
        name=name or _default_name(version, num_buffers, seed, loop),
        instructions=_program_instructions(builder, count),
        tensors=tensors,
        alias_groups=_alias_groups(builder, version),
        loops=() if body is None else (body,),
        source={
            "frontend": "synthetic",
            "model": f"{__name__} (synthetic-v{version})",
            "notes": f"seed={seed} num_buffers={num_buffers}",
        },
    )


def generate(
    num_buffers: int,
    seed: int,
    *,
    name: str | None = None,
    capacity_fraction: float = DEFAULT_CAPACITY_FRACTION,
    loop: bool | None = None,
    preset: HardwarePreset | str = DEFAULT_PRESET,
    version: int = LATEST,
) -> Instance:
    """The instance of :func:`program` on ``preset`` by :func:`mallocgame.costmodel.derive_instance`.

    The fast memory holds ``capacity_fraction`` of the program's peak live bytes (the
    cost model's capacity rule, capped by the preset's fast memory). Raises
    :class:`ValueError` where :func:`program` does and the cost model's
    :class:`~mallocgame.errors.InstanceError` for a ``capacity_fraction`` that is not a
    finite number > 0.
    """
    return derive_instance(
        program(num_buffers, seed, name=name, loop=loop, version=version),
        preset,
        capacity_fraction=capacity_fraction,
    )


def named(name: str) -> Instance:
    """The fixed synthetic workload ``name`` (one of :data:`SYNTHETIC_NAMES`)."""
    if name not in _NAMED:
        raise InputFileError(
            f"unknown synthetic workload {name!r} (known: {', '.join(SYNTHETIC_NAMES)})"
        )
    version, num_buffers = _NAMED[name]
    return generate(num_buffers, _NAMED_SEED, name=name, loop=True, version=version)
