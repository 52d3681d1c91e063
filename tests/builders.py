"""A tiny DSL for writing small game instances by hand in tests.

Describe the program as tensors plus instructions that read and write them; the
builder fills in what an instance file needs: buffer ids in game order (operands
before outputs), each tensor's ``def_time`` (the instruction writing it, -1 for a
program input) and ``last_use_time`` (its last read, or ``def_time``), every buffer's
own alias group unless an ``alias`` key joins it to others, ``demand_s = size /
copy_bandwidth`` unless given, ``supply_s = 1.0`` unless given, and a roofline
latency with ``compute_s = fixed_s = 0`` unless given.

Example::

    inst = build(
        tensors=[X(100), X(50, live_out=True)],          # tensor ids 0, 1
        instructions=[
            I(writes=[1], supply=1.0),                    # instruction 0 defines tensor 1
            I(reads=[0, B(1, alias="g")], supply=0.5),    # instruction 1 reads both
        ],
        capacity=4096, alignment=1,
    )

Default hardware: ``fast_bandwidth = 1000``, ``slow_bandwidth = 100``,
``copy_bandwidth = 100`` bytes/s, so a 100-byte buffer costs 1 s to copy, 1 s to
read from slow memory and 0.1 s from fast memory (numbers easy to work by hand).

Also the other plain helpers the test modules share: the SPEC's conformance vectors
(:func:`conformance_vector`, :func:`conformance_instance`, :func:`trajectory_solution`),
two hand-worked programs (:func:`reward_instance`, :func:`tiny_program`), one whose
float64 sums cancel (:func:`cancelling_instance`), a random
policy, and a check that a folder holds only the files written to it. Fixtures are in
``tests/conftest.py``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from mallocgame.instance import Instance, instance_from_dict
from mallocgame.program import Program, ProgramInstruction, ProgramLoop, ProgramTensor
from mallocgame.solution import Solution, solution_from_dict

__all__ = [
    "X",
    "B",
    "I",
    "roofline",
    "table",
    "build_doc",
    "build",
    "buffer_ids",
    "CONFORMANCE",
    "CONFORMANCE_PATHS",
    "CONFORMANCE_NAMES",
    "conformance_vector",
    "conformance_instance",
    "trajectory_solution",
    "reward_instance",
    "tiny_program",
    "random_policy",
    "reversed_normalizer_instances",
    "assert_only_files",
]


@dataclass
class X:
    """A tensor: ``size`` bytes; ``last_use`` overrides the derived last use time."""

    size: int
    live_out: bool = False
    last_use: int | None = None
    name: str | None = None


@dataclass
class B:
    """One buffer of an instruction: reads or writes ``tensor``.

    ``alias``: any hashable key; buffers with equal keys form one alias group.
    ``size`` defaults to the tensor's size, ``demand`` to ``size / copy_bandwidth``.
    """

    tensor: int
    alias: Any = None
    size: int | None = None
    demand: float | None = None


@dataclass
class I:
    """One instruction. ``reads``/``writes``: tensor ids or :class:`B` specs.

    ``latency``: a dict from :func:`roofline` or :func:`table` (table ``varied``
    entries are positions in the instruction's buffer list in game order: its
    reads first, then its writes).
    """

    reads: Sequence[int | B] = ()
    writes: Sequence[int | B] = ()
    supply: float = 1.0
    count: int = 1
    latency: dict[str, Any] | None = None
    name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def roofline(compute_s: float = 0.0, fixed_s: float = 0.0) -> dict[str, Any]:
    return {"kind": "roofline", "compute_s": compute_s, "fixed_s": fixed_s}


def table(varied: Sequence[int], latency_s: Sequence[float]) -> dict[str, Any]:
    """``varied``: positions in the instruction's buffers (reads first, then writes)."""
    return {"kind": "table", "varied": list(varied), "latency_s": list(latency_s)}


def _spec(item: int | B) -> B:
    return item if isinstance(item, B) else B(item)


def build_doc(
    tensors: Sequence[X | int],
    instructions: Sequence[I],
    *,
    capacity: int = 4096,
    alignment: int = 1,
    fast_bw: float = 1000.0,
    slow_bw: float = 100.0,
    copy_bw: float = 100.0,
    name: str = "built",
) -> dict[str, Any]:
    """The SPEC section 7 document of the described program (not validated)."""
    xs = [t if isinstance(t, X) else X(t) for t in tensors]
    def_time = [-1] * len(xs)
    last_read = [None] * len(xs)
    for t, ins in enumerate(instructions):
        for w in ins.writes:
            def_time[_spec(w).tensor] = t
        for r in ins.reads:
            last_read[_spec(r).tensor] = t

    buffers: list[dict[str, Any]] = []
    ins_docs: list[dict[str, Any]] = []
    alias_ids: dict[Any, int] = {}
    for t, ins in enumerate(instructions):
        specs = [(s, False) for s in map(_spec, ins.reads)] + [
            (s, True) for s in map(_spec, ins.writes)
        ]
        ids = []
        for s, is_out in specs:
            b = len(buffers)
            size = xs[s.tensor].size if s.size is None else s.size
            if s.alias is None:
                alias = len(alias_ids)
                alias_ids[("__own__", b)] = alias
            else:
                alias = alias_ids.setdefault(s.alias, len(alias_ids))
            buffers.append(
                {
                    "id": b,
                    "instruction": t,
                    "tensor_id": s.tensor,
                    "alias_id": alias,
                    "is_output": is_out,
                    "size": size,
                    "demand_s": size / copy_bw if s.demand is None else s.demand,
                    "benefit_s": 0.0,
                }
            )
            ids.append(b)
        lat = copy.deepcopy(ins.latency) if ins.latency is not None else roofline()
        if lat["kind"] == "table":
            lat["varied"] = [ids[i] for i in lat["varied"]]
        doc = {
            "name": ins.name or f"i{t}",
            "opcode": "fusion",
            "count": ins.count,
            "supply_s": ins.supply,
            "buffers": ids,
            "latency": lat,
        }
        doc.update(ins.extra)
        ins_docs.append(doc)

    tensor_docs = []
    for i, x in enumerate(xs):
        last = x.last_use
        if last is None:
            last = last_read[i] if last_read[i] is not None else def_time[i]
        tensor_docs.append(
            {
                "id": i,
                "name": x.name or f"x{i}",
                "size": x.size,
                "def_time": def_time[i],
                "last_use_time": last,
                "live_out": x.live_out,
            }
        )
    return {
        "format": "mallocgame-instance",
        "version": 1,
        "name": name,
        "source": {"frontend": "tests.builders"},
        "hardware": {
            "name": "toy",
            "fast_memory_bytes": capacity,
            "alignment_bytes": alignment,
            "fast_bandwidth": fast_bw,
            "slow_bandwidth": slow_bw,
            "copy_bandwidth": copy_bw,
        },
        "instructions": ins_docs,
        "tensors": tensor_docs,
        "buffers": buffers,
    }


def build(tensors: Sequence[X | int], instructions: Sequence[I], **kwargs: Any) -> Instance:
    """The validated :class:`Instance` of the described program (see :func:`build_doc`)."""
    return instance_from_dict(build_doc(tensors, instructions, **kwargs))


def reversed_normalizer_instances() -> dict[str, Instance]:
    """Two programs SPEC allows whose normalizer R is not positive: ``"negative"``, fast
    memory slower than slow (R = -4 s; the best answer is all slow, reward 0), and
    ``"zero"``, table latencies under which a fast write saves what a fast read costs
    (R = 0; the best answer's reward is 1 s)."""
    chain = [I(writes=[0]), I(reads=[0], writes=[1]), I(reads=[1])]
    balanced = [
        I(writes=[0], latency=table([0], [2.0, 1.0])),
        I(reads=[0], latency=table([0], [1.0, 2.0])),
    ]
    return {
        "negative": build([X(100), X(100)], chain, fast_bw=50.0, name="negative-r"),
        "zero": build([X(100)], balanced, name="zero-r"),
    }


def cancelling_instance() -> Instance:
    """A program whose float64 sums of per-instruction gains rank games wrongly: buffers 1
    and 3 (alias group ``g``) gain 1e12 s at one instruction and lose it at another, so
    the game ``[0, 0, 2, 0]`` (buffers 0 and ``g`` fast) sums, in instruction order, to
    0.000244140625 s where its reward is 1.9e-4 s, above the optimum ``[0, 2, 0, 2]``
    (buffers 0 and 2 fast, ``g`` slow; reward 2.3e-4 s, which its sum gives). Eight
    complete games (capacity 2 holds buffer 2 only while buffer 0 is gone)."""
    big = 1e12
    return build(
        [X(1), X(1), X(2)],
        [
            I(supply=1.0),
            I(reads=[0], latency=table([0], [1.9e-4, 0.0])),
            I(reads=[B(1, alias="g")], latency=table([0], [big, 0.0])),
            I(reads=[2], latency=table([0], [0.4e-4, 0.0])),
            I(reads=[B(1, alias="g")], latency=table([0], [0.0, big])),
        ],
        capacity=2,
        name="cancelling",
    )


def buffer_ids(inst: Instance, t: int) -> list[int]:
    """Buffer ids of instruction ``t`` in game order."""
    return sorted(inst.instructions[t].buffers)


# ---------------------------------------------------------------- conformance vectors

CONFORMANCE = Path(__file__).parent / "data" / "conformance"
"""The SPEC's conformance vectors (from an independent implementation)."""
CONFORMANCE_PATHS = sorted(CONFORMANCE.glob("*.json"))
CONFORMANCE_NAMES = [p.stem for p in CONFORMANCE_PATHS]


def conformance_vector(name: str) -> dict[str, Any]:
    """The whole document of vector ``name`` (``instance``, ``trajectories``,
    ``infeasible_prefix``, ``optimal_reward_s``); a fresh copy on every call."""
    return json.loads((CONFORMANCE / f"{name}.json").read_text())


@cache
def conformance_instance(name: str) -> Instance:
    """The instance of vector ``name`` (read once; instances are immutable)."""
    return instance_from_dict(conformance_vector(name)["instance"])


def trajectory_solution(
    name: str, k: int = 0, *, with_actions: bool = True
) -> tuple[Instance, Solution]:
    """Vector ``name``'s instance and its ``k``-th recorded trajectory as a Solution
    (seed 0, no time; without ``actions`` when ``with_actions`` is false)."""
    inst = conformance_instance(name)
    traj = conformance_vector(name)["trajectories"][k]
    doc = {
        "format": "mallocgame-solution",
        "version": 1,
        "instance": inst.name,
        "instance_sha256": inst.sha256,
        "solver": traj["kind"],
        "allocations": traj["allocations"],
        "reward_s": traj["reward_s"],
        "normalized_reward": traj["normalized_reward"],
    }
    if with_actions:
        doc["actions"] = traj["actions"]
    return inst, solution_from_dict(doc)


# ------------------------------------------------------------ hand-worked programs


def reward_instance() -> Instance:
    """Two instructions whose rewards are worked by hand (all demands 0: Copy is always
    legal; capacity 1 MiB: everything fits).

    Buffers in game order: instruction 0 (count 3, roofline compute 2.5 s, fixed 0.25 s)
    reads P = buffer 0 (100 B) and Q = buffer 1 (200 B), writes O = buffer 2 (100 B);
    instruction 1 (count 2, a table over [R2, P2]: index = R2 + 2 * P2, latencies
    8, 5, 6, 1 s) reads P2 = 3, Q2 = 4, R2 = 5 (100 B each), writes O2 = 6 (100 B).

    Instruction 0: ``L(empty) = 0.25 + max(2.5, 1 + 2 + 1) = 4.25``, all fast
    ``0.25 + max(2.5, 0.4) = 2.75``; instruction 1: 8 s empty, 1 s with R2 and P2.
    So ``R = 3 * 1.5 + 2 * 7 = 18.5``.
    """
    return build(
        tensors=[X(100), X(200), X(100), X(100), X(100), X(100), X(100), X(100)],
        instructions=[
            I(
                reads=[B(0, demand=0.0), B(1, demand=0.0)],
                writes=[B(2, demand=0.0)],
                count=3,
                latency=roofline(compute_s=2.5, fixed_s=0.25),
            ),
            I(
                reads=[B(3, demand=0.0), B(4, demand=0.0), B(5, demand=0.0)],
                writes=[B(6, demand=0.0)],
                count=2,
                latency=table([2, 0], [8.0, 5.0, 6.0, 1.0]),
            ),
        ],
        capacity=1 << 20,
    )


def tiny_program() -> Program:
    """Four instructions; a parameter W; an in-place update (alias group); a loop of 3.

    t0 x = iota()            -> buffer 0
    t1 y = dot(W, x)   x3    -> buffers 1 (W), 2 (x), 3 (y)
    t2 z = dus(y, W[slice]) in place of y, x3 -> buffers 4 (y), 5 (W, 200 B), 6 (z)
    t3 out = exp(z)          -> buffers 7 (z), 8 (out, a program result)
    Alias group: y's definition and read, z's definition and read: buffers 3, 4, 6, 7.
    """
    tensors = (
        ProgramTensor(0, "W", 1000, -1, 2),
        ProgramTensor(1, "x", 400, 0, 1),
        ProgramTensor(2, "y", 600, 1, 2),
        ProgramTensor(3, "z", 600, 2, 3),
        ProgramTensor(4, "out", 600, 3, 3, live_out=True),
    )
    instructions = (
        ProgramInstruction("iota.0", "iota", (), (1,), (), (400,)),
        ProgramInstruction("dot.1", "dot", (0, 1), (2,), (1000, 400), (600,), flops=2e6, count=3),
        ProgramInstruction(
            "dus.2",
            "dynamic-update-slice",
            (2, 0),
            (3,),
            (600, 200),
            (600,),
            transcendentals=1e5,
            count=3,
        ),
        ProgramInstruction("exp.3", "exponential", (3,), (4,), (600,), (600,), transcendentals=150),
    )
    return Program(
        name="tiny",
        instructions=instructions,
        tensors=tensors,
        alias_groups=(((1, 2), (2, 0), (2, 2), (3, 0)),),
        loops=(ProgramLoop(1, 2, 3),),
        source={"frontend": "hand", "model": "tiny"},
    )


# -------------------------------------------------------------------------- the rest


def random_policy(rng: int | np.random.Generator) -> Callable[[Any, np.ndarray], int]:
    """A policy ``(game, allowed) -> action`` drawing uniformly among the allowed
    actions (``rng``: a generator, or a seed for a fresh one)."""
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)

    def policy(game: Any, allowed: np.ndarray) -> int:
        return int(gen.choice(np.flatnonzero(allowed)))

    return policy


def assert_only_files(directory: Path, *names: str) -> None:
    """``directory`` holds exactly ``names``: an atomic write left no temporary file."""
    assert sorted(p.name for p in Path(directory).iterdir()) == sorted(names)


@cache
def bundled_instance(name: str) -> Any:
    """The bundled workload ``name``'s instance, derived once per test process (the
    workloads' own cache keeps fewer than there are)."""
    from mallocgame.workloads.registry import load_workload

    return load_workload(name)


@cache
def heuristic_answer(name: str) -> tuple[Any, Any]:
    """``(instance, the heuristic's answer)`` of the bundled workload ``name``, computed once
    per test process (both are immutable): several modules test on the heuristic's
    mapping of every bundled program, and solving the largest takes seconds. ``pytest -n`` runs the
    tests that share it in one process (``PROCESS_GROUPS`` in ``tests/conftest.py``)."""
    from mallocgame.solvers.heuristic import HeuristicSolver

    inst = bundled_instance(name)
    return inst, HeuristicSolver().solve(inst)


TPU_SAMPLE = (
    "tpu-v1/gru_infer_b512-v5e",
    "tpu-v2/gru_infer_b512-v5e",
    "tpu-v2/mixer_b16_infer_b64-v4",
)
"""The tpu-v1 and tpu-v2 programs the suite-wide solver tests take: the suites repeat
xla-v2's models compiled otherwise (tpu-v2 is tpu-v1 with convolution flops counted
again), so three (each target, small) stand for them there;
``tests/workloads/test_suite_tpu.py`` checks every program of tpu-v2."""


HF_SAMPLE = ("hf-v1/distilbert_infer_b64_s512", "hf-v1/gpt2_infer_b8_s1024")
"""The hf-v1 programs the suite-wide solver tests take: its layers are those of torch-v1's
BERT and xla-v2's transformers, captured from transformers, and a game on its large
training steps takes 7 to 21 s, so two small ones (one a causal LM with its KV cache)
stand for it there; ``tests/workloads/test_suite_hf.py`` has ``heuristic``, ``es`` and
``muzero-prod`` answer every one of its programs."""


def suite_wide(names: Iterable[str]) -> list[str]:
    """``names`` with tpu-v1 and tpu-v2 cut to :data:`TPU_SAMPLE` and hf-v1 to
    :data:`HF_SAMPLE` (the suite-wide solver tests)."""
    return [
        n
        for n in names
        if not n.startswith(("tpu-v1/", "tpu-v2/", "hf-v1/")) or n in TPU_SAMPLE or n in HF_SAMPLE
    ]


LARGE_LEFT_OUT = (
    "xla-v1/transformer_train_bf16",
    "xla-v1/transformer_nmt_train",
    "xla-v1/gpt_train_deep",
    "xla-v2/bert_base_train_b32",
    "xla-v2/transformer_base_train",
    "xla-v2/gpt2_train_b2",
    "xla-v2/llama2_70b_prefill",
    "xla-v2/vit_b16_train_b24",
    "xla-v2/resnet152_train_b16",
)
"""Programs of 5,000 buffers or more that the every-program tests of the projection and of
``egrl``'s answer leave out (each costs them 0.5 to 5 s; the smaller programs have the same
layers): xla-v1/resnet50_train, xla-v2/resnet50_train_b32,
xla-v2/transformer_base_train_bf16 and xla-v2/llama2_70b_decode stay for their size
(tests/solvers/test_projection.py checks this list)."""
