"""``bench real``: run several answers of a few programs for real and compare with the simulator.

:func:`run_real_bench` is the whole job of ``benchmarks/device_real.py``: measure the
machine (:mod:`mallocgame.runtime.calibrate`), then for each program of
:data:`PROGRAMS` build the module on the device, capture it, derive its instance on the
preset (``gpu_hbm_host`` by default) with the fast memory a fraction of its peak live
bytes, compute the placements (the framework default, every answer of ``solvers``, and
answers given in files whose instance hash matches), check, simulate (on the preset and
on the preset calibrated from the measurements) and measure each, one CSV row at a time,
beside PyTorch's own eager step (:mod:`mallocgame.runtime.framework`; for a training
step also under ``save_on_cpu``); then the rank correlation and the mean relative error
per program, and the per-instruction times of the profiled placements
(:mod:`mallocgame.runtime.op_profile`).

Files under ``out`` (each written as it grows, flushed, so a stopped run leaves its data):
``calibration.csv``, ``results.csv`` (one row per program and placement or framework
baseline), ``summary.csv`` (per program and model: Spearman, mean relative error),
``ops.csv`` (per program, profiled placement and instruction: measured and simulated
seconds, and a matmul's operand layout,
:func:`~mallocgame.runtime.torch_graph.matmul_layout`), ``op_summary.csv`` (per program,
profiled placement and model), ``real.png`` (the figure, unless ``plot`` is off),
``real.md`` (the rows as a Markdown table: :mod:`mallocgame.runtime.bench_table`),
``programs.json.gz`` (each program, its instance and answers: to re-check, re-simulate,
or derive on another preset), ``hbm_steps.csv`` (per program, measured placement and
instruction: the HBM the plan holds and what a run held beyond it, where the backend
counts HBM), ``run.log`` (progress and each failure's traceback). A failure of one measurement is
logged and the rest go on; past ``seconds`` the job stops measuring and finishes its files.
A run that does not resume first removes an earlier run's ``real.md``, ``real.png`` and
``programs.json.gz`` from ``out``: one that measures nothing leaves none of them.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mallocgame.errors import MallocGameError
from mallocgame.fileio import write_bytes_atomic
from mallocgame.instance import Instance
from mallocgame.runtime.errors import ApplyError
from mallocgame.solution import Solution, solution_from_dict
from mallocgame.units import format_bytes

if TYPE_CHECKING:
    from mallocgame.frontends.torch import TrainingStep
    from mallocgame.hardware import HardwarePreset
    from mallocgame.runtime.plan import PlacementPlan

__all__ = [
    "PROGRAMS",
    "SizedProgram",
    "build_program",
    "load_solver",
    "solve_spec",
    "spearman",
    "mean_relative_error",
    "BenchConfig",
    "factory_program",
    "hbm_limit_fraction",
    "read_results_csv",
    "run_real_bench",
]

RESULT_COLUMNS = (
    "program",
    "placement",
    "solver",
    "seed",
    "normalized_reward",
    "check_ok",
    "sim_latency_s",
    "sim_calibrated_s",
    "measured_median_s",
    "measured_p10_s",
    "measured_p90_s",
    "steps",
    "peak_hbm_bytes",
    "planned_hbm_peak_bytes",
    "capacity_bytes",
    "host_bytes",
    "copy_in_bytes",
    "copy_out_bytes",
    "identical",
    "max_abs_diff",
    "staged_nodes",
    "hbm_limit_bytes",
    "hbm_over_plan_bytes",
    "dot_staged_bytes",
    "error",
)
STAGED_DOTS = "+staged-dots"
"""The label suffix of an answer's row measured with its matmuls' host operands staged."""

_MEASURED_COLUMN = {
    "median_s": "measured_median_s",
    "p10_s": "measured_p10_s",
    "p90_s": "measured_p90_s",
}
"""The columns of :class:`~mallocgame.runtime.measure.Measurement`'s step times (its other
fields keep their names; ``staged`` is ``staged_nodes``)."""

OP_COLUMNS = (
    "program",
    "placement",
    "index",
    "name",
    "opcode",
    "bytes",
    "measured_s",
    "sim_latency_s",
    "sim_calibrated_s",
    "layout",
)
OP_SUMMARY_COLUMNS = (
    "program",
    "placement",
    "model",
    "ops",
    "spearman",
    "mean_relative_error",
    "measured_total_s",
    "simulated_total_s",
    "top_opcodes",
)
HBM_STEP_COLUMNS = ("program", "placement", "index", "name", "planned_bytes", "over_plan_bytes")
"""``hbm_steps.csv``: per measured placement and instruction, the HBM the plan holds there
and what one run held beyond it (:func:`~mallocgame.runtime.measure.hbm_over_plan`)."""

SUMMARY_COLUMNS = (
    "program",
    "model",
    "placements",
    "spearman",
    "mean_relative_error",
    "instructions",
    "buffers",
    "capacity_bytes",
    "peak_live_bytes",
)


# --------------------------------------------------------------------------- programs


@dataclass(frozen=True)
class SizedProgram:
    """A program to run: a factory ``(device, tiny) -> (module, inputs)``; ``tiny`` gives
    the dry run's sizes (seconds on a CPU), else the device sizes (steps of a few ms to
    tens of ms on an H100, weights of a few hundred MiB). ``training``: the program is the
    module's training step (forward, the mean of its first output as the loss, backward
    to every parameter's gradient, then ``optimizer``'s update of every parameter:
    ``none``, ``sgd`` or ``adamw``), the module in eval mode (no dropout: every run
    computes the same)."""

    name: str
    make: Callable[[Any, bool], tuple[Any, tuple[Any, ...]]]
    what: str
    training: bool = False
    optimizer: str = "none"

    @property
    def training_step(self) -> TrainingStep | None:
        """The :class:`~mallocgame.frontends.torch.TrainingStep` it captures, None for
        inference."""
        from mallocgame.frontends.torch import TrainingStep

        return TrainingStep(TRAINING_LOSS, self.optimizer) if self.training else None

    @property
    def loss(self) -> str | None:
        """The training step's loss (:data:`TRAINING_LOSS`), None for inference."""
        return TRAINING_LOSS if self.training else None


TRAINING_LOSS = "mean"
"""The loss of the training programs: the mean of the module's first output."""


def _mlp(device: Any, tiny: bool) -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    layers, width, batch = (3, 64, 16) if tiny else (8, 4096, 1024)

    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = torch.nn.functional.gelu(layer(x))
            return x

    return Mlp().to(device).eval(), (torch.randn(batch, width, device=device),)


def _ffn(device: Any, tiny: bool) -> tuple[Any, tuple[Any, ...]]:
    """Transformer feed-forward blocks (up 2048 -> 8192, GELU, down 8192 -> 2048), batch 2048:
    other GEMM shapes than the mlp's (held out from the fit of ``slow_dot_tile``)."""
    import torch
    from torch import nn

    blocks, width, hidden, batch = (2, 32, 128, 8) if tiny else (4, 2048, 8192, 2048)

    class Ffn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = nn.ModuleList(nn.Linear(width, hidden) for _ in range(blocks))
            self.down = nn.ModuleList(nn.Linear(hidden, width) for _ in range(blocks))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for up, down in zip(self.up, self.down):
                x = x + down(torch.nn.functional.gelu(up(x)))
            return x

    return Ffn().to(device).eval(), (torch.randn(batch, width, device=device),)


def _bert_encoder(
    device: Any, tiny: bool, full: tuple[Any, int, int]
) -> tuple[Any, tuple[Any, ...]]:
    """A BERT encoder (``full``: its config, batch and sequence length; a 1-layer toy when
    ``tiny``) and token ids and types as inputs."""
    import torch

    from mallocgame.workloads.models_torch import Bert, BertConfig

    if tiny:
        full = (
            BertConfig(vocab=100, hidden=32, layers=1, heads=2, intermediate=64, max_positions=16),
            2,
            8,
        )
    config, batch, seq = full
    ids = torch.randint(0, config.vocab, (batch, seq), device=device)
    types_ = torch.zeros(batch, seq, dtype=torch.int64, device=device)
    return Bert(config).to(device).eval(), (ids, types_)


def _bert_small(device: Any, tiny: bool) -> tuple[Any, tuple[Any, ...]]:
    """A BERT encoder at GPT-2-small-like sizes: 6 layers of 768 (12 heads, FFN 3072),
    batch 16 x 256 (held out from the fit)."""
    from mallocgame.workloads.models_torch import BertConfig

    config = BertConfig(hidden=768, layers=6, heads=12, intermediate=3072)
    return _bert_encoder(device, tiny, (config, 16, 256))


def _bert(device: Any, tiny: bool) -> tuple[Any, tuple[Any, ...]]:
    """A BERT encoder: 4 layers of 1024 (16 heads, FFN 4096), batch 8 x 512."""
    from mallocgame.workloads.models_torch import BertConfig

    config = BertConfig(hidden=1024, layers=4, heads=16, intermediate=4096)
    return _bert_encoder(device, tiny, (config, 8, 512))


def _resnet(device: Any, tiny: bool) -> tuple[Any, tuple[Any, ...]]:
    import torch

    from mallocgame.workloads.models_torch import ResNet

    if tiny:
        model, x = ResNet((1, 1, 1, 1), num_classes=10), torch.randn(2, 3, 32, 32)
    else:
        model, x = ResNet((3, 4, 6, 3)), torch.randn(32, 3, 224, 224)
    return model.to(device).eval(), (x.to(device),)


PROGRAMS: dict[str, SizedProgram] = {
    p.name: p
    for p in (
        SizedProgram(
            "mlp", _mlp, "8 x Linear(4096, 4096) + GELU, batch 1024, fp32 (tiny: 3 x 64, batch 16)"
        ),
        SizedProgram(
            "bert",
            _bert,
            "BERT encoder, 4 layers of 1024 (16 heads, FFN 4096), batch 8 x 512, fp32",
        ),
        SizedProgram("resnet50", _resnet, "ResNet-50 inference, batch 32 x 3 x 224 x 224, fp32"),
        SizedProgram(
            "ffn", _ffn, "4 feed-forward blocks 2048 -> 8192 -> 2048 + GELU, batch 2048, fp32"
        ),
        SizedProgram(
            "bert-small",
            _bert_small,
            "BERT encoder, 6 layers of 768 (12 heads, FFN 3072), batch 16 x 256, fp32",
        ),
        SizedProgram(
            "mlp-train",
            _mlp,
            "the mlp's training step: forward, mean of the output, backward to its gradients",
            training=True,
        ),
        SizedProgram(
            "mlp-train-adamw",
            _mlp,
            "the mlp's training step with AdamW's update (its two moments kept between steps)",
            training=True,
            optimizer="adamw",
        ),
        SizedProgram(
            "bert-small-train",
            _bert_small,
            "bert-small's training step: forward, mean of the hidden states, backward",
            training=True,
        ),
    )
}


def build_program(name: str, device: Any, tiny: bool) -> tuple[Any, tuple[Any, ...]]:
    """The module and inputs of program ``name`` on ``device`` (seeded: the same each time)."""
    if name not in PROGRAMS:
        raise MallocGameError(f"unknown program {name!r} (have: {', '.join(PROGRAMS)})")
    return _build(PROGRAMS[name], device, tiny)


def _build(spec: SizedProgram, device: Any, tiny: bool) -> tuple[Any, tuple[Any, ...]]:
    import torch

    torch.manual_seed(0)
    return spec.make(device, tiny)


def factory_program(
    target: str, arg_specs: Sequence[str], *, training: bool = False, optimizer: str = "none"
) -> SizedProgram:
    """A user's module as a program of the job: ``target`` (``package.module:factory``) and
    ``arg_specs`` as for ``extract --torch``
    (:func:`~mallocgame.frontends.torch.resolve_factory`), its inputs seeded random normals
    (integers: zeros) on the device, the module in eval mode; named after the factory; the
    same sizes with and without ``tiny``; ``training`` and ``optimizer`` as for
    :class:`SizedProgram`. Bad specs and a factory that cannot be imported are refused now
    (:class:`~mallocgame.frontends.argspec.ArgSpecError`), an optimizer without a training
    step or not one of :data:`~mallocgame.frontends.torch.OPTIMIZERS`
    (:class:`~mallocgame.runtime.errors.ApplyError`); the factory runs when the job builds
    the program."""
    from mallocgame.frontends.argspec import parse_spec, resolve_function
    from mallocgame.frontends.torch import OPTIMIZERS

    if optimizer not in OPTIMIZERS or (optimizer != "none" and not training):
        raise ApplyError(
            f"optimizer {optimizer!r}: one of {', '.join(OPTIMIZERS)}, and only for a training step"
        )

    for spec in arg_specs:
        parse_spec(spec)
    resolve_function(target)  # a module that does not import: one error now, not a log line
    name = target.rpartition(":")[2] or target

    def make(device: Any, tiny: bool) -> tuple[Any, tuple[Any, ...]]:
        import torch

        from mallocgame.frontends.torch import resolve_factory
        from mallocgame.runtime.cli import _real_inputs
        from mallocgame.runtime.torch_graph import refuse_meta

        model = resolve_factory(target, list(arg_specs))
        refuse_meta(model.module, (), target)  # before it is moved (its inputs: shapes alone)
        return model.module.to(device).eval(), _real_inputs(torch, model.inputs, device)

    what = f"{target}({', '.join(arg_specs)})" + (", its training step" if training else "")
    if optimizer != "none":
        what += f" with {optimizer}'s update"
    return SizedProgram(name, make, what, training=training, optimizer=optimizer)


# --------------------------------------------------------------------------- solvers

AGENT_SECONDS = 30.0
"""Wall-clock budget of ``muzero-prod`` in the device script (the agents have no work
budget that a fixed number of games would make comparable across programs)."""


def load_solver(name: str) -> Any:
    """A solver by name (:func:`mallocgame.solvers.get_solver`). Loading needs no
    OR-Tools: only running ``exact`` imports it."""
    from mallocgame.solvers import get_solver

    return get_solver(name)


# --------------------------------------------------------------------------- statistics


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (ties get their mean rank); NaN below 2 pairs, for a
    constant side or where a value is not finite (NaN has no rank)."""
    if len(a) != len(b):
        raise ValueError(f"spearman: {len(a)} values against {len(b)}")
    if len(a) < 2 or not all(math.isfinite(v) for v in (*a, *b)):
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else float("nan")


def mean_relative_error(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """``mean(|predicted - measured| / measured)`` over the pairs measured above 0 (a time
    of 0 has no relative error); NaN for none."""
    if len(predicted) != len(measured):
        raise ValueError(f"mean_relative_error: {len(predicted)} values against {len(measured)}")
    pairs = [(p, m) for p, m in zip(predicted, measured) if m > 0]
    return sum(abs(p - m) / m for p, m in pairs) / len(pairs) if pairs else float("nan")


# --------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class BenchConfig:
    """What :func:`run_real_bench` does (see its module docstring).

    ``programs``: names of :data:`PROGRAMS`, each run once however often it is named;
    ``placements``: solver specs, ``NAME`` or ``NAME:SEED`` (``es`` and ``random`` with
    ``work`` games); ``answers``: a directory of solution files (any name, ``*.json``), or
    an earlier run's ``programs.json.gz`` (the answers it was given), used where their
    instance hash matches a program's; ``extra``: programs of the user's
    (:func:`factory_program`), run after ``programs``; ``framework``: measure the framework's
    own baselines too (:mod:`mallocgame.runtime.framework`); ``plot``: draw ``real.png``
    at the end (:mod:`mallocgame.runtime.bench_plot`); ``resume``: keep what an earlier
    run in ``out`` finished (whole programs, and its machine figures) and run the rest;
    ``hbm_limit`` (a GPU only): cap PyTorch's allocator, while a program is measured, at
    what it holds when the program is ready (the segments that hold its module, inputs and
    reference results: the allocator's cap counts segments, not tensors)
    plus this multiple of the instance's fast memory, so that the framework's own steps
    and the answers all run in the HBM the game gave (a step that does not fit is a row
    with an out-of-memory error: :func:`hbm_limit_fraction`);
    ``profile``: the placements
    whose per-instruction times are measured (:mod:`mallocgame.runtime.op_profile`, over
    ``profile_repeats`` runs; empty: none; ``None``: ``hbm-resident``, and ``drop`` where
    ``placements`` has it), each the label of a placement the run has
    (:func:`check_profile`); ``stage_dot_reads``: measure each answer a
    second time with its matmuls reading their host operands through an HBM scratch copy
    (:class:`~mallocgame.runtime.torch_run.PlacedRunner`), a row labelled
    ``LABEL`` + :data:`STAGED_DOTS`, simulated on the preset's
    :func:`~mallocgame.hardware.staged_variant` and summarized as a model of its own
    (``staged``).
    """

    out: Path
    device: str = "cuda"
    tiny: bool = False
    programs: tuple[str, ...] = ("mlp", "bert", "resnet50")
    preset: str = "gpu_hbm_host"
    capacity_fraction: float = 0.25
    placements: tuple[str, ...] = (
        "drop",
        "heuristic",
        "greedy",
        "first-touch",
        "random:0",
        "random:1",
        "random:2",
        "es:0",
    )
    work: int = 64
    warmup: int = 3
    steps: int = 15
    seconds: float = 330.0
    per_placement_s: float = 10.0
    calibrate: bool = True
    framework: bool = True
    plot: bool = True
    resume: bool = False
    hbm_limit: float | None = None
    profile: tuple[str, ...] | None = None
    profile_repeats: int = 3
    answers: Path | None = None
    extra: tuple[SizedProgram, ...] = ()
    host_alloc: str = "auto"
    stage_dot_reads: bool = False
    started: float = field(default_factory=time.perf_counter)


def hbm_limit_fraction(held_bytes: int, capacity_bytes: int, multiple: float, total: int) -> float:
    """The fraction of the GPU's ``total`` bytes for ``torch.cuda.set_per_process_memory_
    fraction`` that caps the allocator at ``held_bytes + multiple * capacity_bytes`` (at
    most 1)."""
    if multiple <= 0 or total <= 0:
        raise MallocGameError(f"an HBM limit needs a positive multiple and memory, got {multiple}")
    return min(1.0, (held_bytes + multiple * capacity_bytes) / total)


class _Csv:
    """A CSV file written a row at a time, flushed after each; ``kept``: rows of an earlier
    run written first. The header and ``kept`` replace the file at once: a row of another
    column is a ValueError that leaves the file as it was."""

    def __init__(self, path: Path, columns: Sequence[str], kept: Sequence[dict[str, Any]] = ()):
        start = io.StringIO()
        writer = csv.DictWriter(start, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(kept)
        write_bytes_atomic(path, start.getvalue().encode())
        self.file = path.open("a", newline="", encoding="utf-8")
        self.writer = csv.DictWriter(self.file, fieldnames=list(columns))

    def row(self, values: dict[str, Any]) -> None:
        self.writer.writerow(values)
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class _Log:
    def __init__(self, path: Path, started: float, append: bool = False):
        self.file = path.open("a" if append else "w")
        self.started = started

    def __call__(self, message: str) -> None:
        line = (
            f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - self.started:6.1f}s] {message}"
        )
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()

    def failure(self, what: str) -> str:
        text = traceback.format_exc()
        self(f"FAILED {what}: {text.strip().splitlines()[-1]}")
        self.file.write(text + "\n")
        self.file.flush()
        return text.strip().splitlines()[-1][:300]


_CSV_FILES = {
    "results.csv": RESULT_COLUMNS,
    "summary.csv": SUMMARY_COLUMNS,
    "ops.csv": OP_COLUMNS,
    "op_summary.csv": OP_SUMMARY_COLUMNS,
    "hbm_steps.csv": HBM_STEP_COLUMNS,
}


@dataclass(frozen=True)
class _Earlier:
    """What an earlier run in the same directory finished, for ``resume``: the programs
    whose summary rows are written (a program's last rows; a program cut short is run
    again), their rows of each CSV (by file name), their documents, and the machine's
    figures (reused, so that kept and new rows share one calibrated preset)."""

    programs: frozenset[str]
    rows: dict[str, list[dict[str, str]]]
    documents: dict[str, Any]
    figures: list[Any]


RESULT_TEXT = (
    "program",
    "placement",
    "solver",
    "seed",
    "check_ok",
    "identical",
    "staged_nodes",
    "error",
)
RESULT_NUMBERS = tuple(c for c in RESULT_COLUMNS if c not in RESULT_TEXT)
"""The columns of :data:`RESULT_COLUMNS` that :func:`read_results_csv` reads as numbers:
all but :data:`RESULT_TEXT`."""


RESULT_READ = ("program", "placement", "measured_median_s")
"""The columns of ``results.csv`` that its figure and its table need in every row (the
others they read where present)."""


def read_results_csv(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``results.csv`` this job wrote (its figure and its table read it), each
    column of :data:`RESULT_NUMBERS` a float (``None`` where the cell is empty or missing),
    the others strings as written. A file that cannot be read, whose header lacks a column
    of :data:`RESULT_READ`, with a row too short to have one, or with a cell of
    :data:`RESULT_NUMBERS` that is not a number (the message names its line and column) is
    a :class:`MallocGameError`."""
    rows: list[dict[str, Any]] = []
    try:
        with Path(path).open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in RESULT_READ if c not in (reader.fieldnames or ())]
            if missing:
                raise MallocGameError(
                    f"{path}: not a bench real results.csv (no column {', '.join(missing)})"
                )
            for row in reader:
                short = [c for c in RESULT_READ if row[c] is None]  # (None: past the row's end)
                if short:
                    raise MallocGameError(
                        f"{path}: line {reader.line_num}: no cell of column {short[0]}"
                    )
                parsed: dict[str, Any] = dict(row)
                for column in RESULT_NUMBERS:
                    text = row.get(column)
                    try:
                        parsed[column] = float(text) if text else None
                    except ValueError:
                        raise MallocGameError(
                            f"{path}: line {reader.line_num}, column {column}: {text!r} is not "
                            "a number"
                        ) from None
                rows.append(parsed)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        why = exc.strerror if isinstance(exc, OSError) else exc
        raise MallocGameError(f"{path}: cannot read ({why})") from None
    return rows


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _read_earlier(out: Path, config: BenchConfig, given: Sequence[Solution] = ()) -> _Earlier:
    """The finished part of the run in ``out`` (nothing where there is none). An earlier
    run on another preset or fast-memory fraction is a :class:`MallocGameError`: its rows
    cannot sit beside this run's; so is one whose kept rows have a column this job does not
    write (they could not be written back), and one that measured a finished program with
    other settings (:func:`_setup`), ``given`` (this run's ``--answers``) included: the
    given answers of the program's instance, as the earlier run kept it, by label and
    instance hash."""
    from mallocgame.fileio import canonical_sha256
    from mallocgame.runtime.calibrate import Figure

    try:
        done = {r["program"] for r in _read_csv(out / "summary.csv")}
        rows = {
            name: [r for r in _read_csv(out / name) if r.get("program") in done]
            for name in _CSV_FILES
        }
        documents: dict[str, Any] = {}
        if (out / "programs.json.gz").exists():
            with gzip.open(out / "programs.json.gz", "rt") as f:
                documents = {k: v for k, v in json.load(f).items() if k in done}
        figures = [
            Figure(r["name"], float(r["value"]), r["unit"], r["method"])
            for r in _read_csv(out / "calibration.csv")
        ]
    except (OSError, ValueError, KeyError, EOFError) as exc:
        raise MallocGameError(f"{out}: cannot resume the earlier run ({exc})") from None
    for name, columns in _CSV_FILES.items():  # kept rows are written back under columns
        other = {str(k) for row in rows[name] for k in row if k not in columns}
        if other:  # (a key None: cells beyond the header)
            raise MallocGameError(
                f"{out}: cannot resume the earlier run ({name} has columns this job does not "
                f"write: {', '.join(sorted(other))}): give another --out"
            )
    for name in sorted(done):
        source = documents.get(name, {}).get("instance", {}).get("source", {})
        earlier = (source.get("preset"), source.get("capacity_fraction"))
        if earlier != (config.preset, config.capacity_fraction):
            raise MallocGameError(
                f"{out}: the earlier run has {name} on preset {earlier[0]} at fast memory "
                f"{earlier[1]} of its peak, not {config.preset} at {config.capacity_fraction}: "
                "give another --out, or the earlier settings"
            )
        setup = documents.get(name, {}).get("setup")  # None: a run from before it was kept
        instance = documents.get(name, {}).get("instance")
        sha = canonical_sha256(instance) if isinstance(instance, dict) else None
        spec = (PROGRAMS | {p.name: p for p in config.extra}).get(name)
        now = _setup(config, spec, _answer_labels(given, sha))
        # what the document kept (a key it lacks was not kept yet, by a run of before)
        changed = sorted(k for k in (setup or {}) if k in now and setup[k] != now[k])
        if changed:
            raise MallocGameError(
                f"{out}: the earlier run measured {name} with other settings "
                f"({', '.join(changed)}): give another --out, or the earlier settings"
            )
    return _Earlier(frozenset(done), rows, documents, figures)


def _setup(
    config: BenchConfig, spec: SizedProgram | None, answers: list[list[str]] | None = None
) -> dict[str, Any]:
    """What a finished program's rows depend on beside its preset and fast memory, as a
    program's document keeps it: a resumed run with other settings would mix its rows.
    ``spec``: the program (its definition: a user's factory, its inputs' shapes, its
    training step and optimizer), ``None`` where this run does not have it; ``answers``:
    the given answers (``--answers``) of the program's instance, :func:`_answer_labels`
    (a row each), ``None`` where its instance is not known."""
    return {
        "device": config.device,
        "tiny": config.tiny,
        "placements": list(config.placements),
        "work": config.work,
        "hbm_limit": config.hbm_limit,
        "stage_dot_reads": config.stage_dot_reads,
        **({"program": spec.what} if spec is not None else {}),
        **({"answers": answers} if answers is not None else {}),
    }


def _answer_labels(given: Sequence[Solution], sha256: str | None) -> list[list[str]] | None:
    """``[LABEL, INSTANCE_SHA256]`` of each of ``given`` whose instance is ``sha256`` (the
    program's: the answers it is measured with), sorted, ``LABEL`` as
    ``given:SOLVER:sSEED``; ``None`` where ``sha256`` is."""
    if sha256 is None:
        return None
    return sorted(
        [f"given:{s.solver}:s{s.seed}", s.instance_sha256]
        for s in given
        if s.instance_sha256 == sha256
    )


def _given_answers(directory: Path | None, log: Callable[[str], None]) -> list[Solution]:
    """The solutions of ``directory``'s ``*.json`` files, or of the one solution file it
    names, or, where it is an earlier run's ``programs.json.gz``, the answers that run
    was given (labelled ``given:...``)."""
    if directory is None:
        return []
    if not directory.exists():
        raise MallocGameError(f"--answers {directory}: no such file or directory")
    if directory.is_file() and directory.suffix == ".json":  # one solution file
        try:
            return [solution_from_dict(json.loads(directory.read_text()))]
        except (OSError, ValueError, MallocGameError) as exc:
            raise MallocGameError(f"--answers {directory}: not a solution file ({exc})") from None
    if directory.is_file() and not directory.name.endswith(".json.gz"):
        raise MallocGameError(
            f"--answers {directory}: neither a folder of solution files, a solution file "
            "nor an earlier run's programs.json.gz"
        )
    found = []
    if directory.is_file() and directory.name.endswith(".json.gz"):
        try:
            documents = json.loads(gzip.decompress(directory.read_bytes()))
            for doc in documents.values():
                for label, answer in doc["answers"].items():
                    if label.startswith("given:"):
                        found.append(solution_from_dict(answer))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, MallocGameError) as exc:
            raise MallocGameError(
                f"--answers {directory}: not an earlier run's programs.json.gz ({exc})"
            ) from None
        return found
    for path in sorted(directory.glob("*.json")):
        try:
            found.append(solution_from_dict(json.loads(path.read_text())))
        except (OSError, ValueError, MallocGameError) as exc:
            log(f"answer file {path.name} skipped: {exc}")
    return found


def solve_spec(spec: str, instance: Instance, work: int) -> tuple[str, Solution]:
    """Solve ``instance`` by ``spec`` (``NAME`` or ``NAME:SEED``; ``es``, ``random`` and
    ``mcts`` with a budget of ``work`` games, ``muzero-prod`` with :data:`AGENT_SECONDS`);
    returns the placement's label and the answer."""
    name, _, seed = spec.partition(":")
    solver = load_solver(name)
    from mallocgame.solvers.base import SolveRequest

    budget = work if name in ("es", "random", "mcts") else None
    seconds = AGENT_SECONDS if name == "muzero-prod" else None
    solution = solver.solve(
        instance, SolveRequest(seed=int(seed or 0), work=budget, seconds=seconds)
    )
    return (spec if seed else name), solution


@dataclass
class _Program:
    """One program of the job, built on the device and captured: its module and inputs, its
    instance on the preset (and on the calibrated preset, where there is one), its bound
    graph, its reference results (the exported module run once on ``inputs``, in the
    graph's order, with the new values of what it mutates: :func:`eager_results`; for a
    training step, whose joint graph has no module to call, the graph run once with
    everything in HBM) and the framework's (the module's outputs alone; for a training
    step, the same), its document in ``programs.json.gz``, the host copies its
    measurements share and, with ``stage_dot_reads``, its instance on the preset's
    :func:`~mallocgame.hardware.staged_variant` (the staged rows' simulation)."""

    name: str
    spec: SizedProgram
    module: Any
    inputs: tuple[Any, ...]
    captured: Any
    instance: Instance
    graph: Any
    reference: Any
    framework_reference: Any
    cal_instance: Instance | None
    doc: dict[str, Any]
    shared_host: dict[int, Any] = field(default_factory=dict)
    staged_instance: Instance | None = None


class _BenchRun:
    """State of one run of :func:`run_real_bench` (the job: the module docstring): the
    configuration, the output files, the log and the deadline; one method per phase."""

    def __init__(self, config: BenchConfig, torch: Any) -> None:
        self.config = config
        self.torch = torch
        clash = sorted({p.name for p in config.extra} & set(config.programs))
        if clash:
            raise MallocGameError(f"two programs named {clash[0]!r}: rename the factory")
        if config.hbm_limit is not None and config.device != "cuda":
            raise MallocGameError("an HBM limit caps PyTorch's CUDA allocator: it needs a GPU")
        skipped: list[str] = []  # answer files that do not read, logged once there is a log
        self.given = _given_answers(config.answers, skipped.append)  # bad --answers: no files
        check_profile(config, self.given)  # a given answer's label is known once it is read
        self.out = Path(config.out)
        blank = not str(config.out).strip()  # " ": a folder named by a space
        if blank or self.out == Path(".") or (self.out.exists() and not self.out.is_dir()):
            raise MallocGameError(
                f"--out {str(config.out)!r}: give a folder of the run's own (its ten files go "
                "there)"
            )
        # the device and the preset before anything is written (or an earlier log replaced)
        from mallocgame.hardware import get_preset
        from mallocgame.runtime.memory import make_memory

        self.preset = get_preset(config.preset)
        self.memory = make_memory(config.device, config.host_alloc)
        self.out.mkdir(parents=True, exist_ok=True)
        self.earlier = (
            _read_earlier(self.out, config, self.given)
            if config.resume
            else _Earlier(frozenset(), {}, {}, [])
        )
        self.log = _Log(self.out / "run.log", config.started, append=config.resume)
        for line in skipped:
            self.log(line)
        self.deadline = config.started + config.seconds  # time.perf_counter() seconds
        self.figures: list[Any] = []
        self.calibrated: HardwarePreset | None = None
        self.documents: dict[str, Any] = dict(self.earlier.documents)
        self.all_rows: list[dict[str, Any]] = list(self.earlier.rows.get("results.csv", []))
        self.summaries: list[dict[str, Any]] = list(self.earlier.rows.get("summary.csv", []))
        self.cut_short = False
        self.limit_bytes: int | None = None
        self.held_bytes = 0  # HBM a program holds when ready (its module, inputs, results)

    def run(self) -> dict[str, Any]:
        """The whole job; returns :func:`run_real_bench`'s ``{"rows", "summary",
        "calibration", "unbuilt"}`` (``unbuilt``: the programs whose build and capture
        failed, logged)."""
        config, torch = self.config, self.torch
        if not config.resume:  # the earlier run's: none of them would be this run's
            for name in ("real.md", "real.png", "programs.json.gz"):
                path = self.out / name
                if path.is_file() or path.is_symlink():
                    path.unlink()
        self._open_memory()
        self._calibrate()
        kept = self.earlier.rows
        self.rows_csv = _Csv(self.out / "results.csv", RESULT_COLUMNS, kept.get("results.csv", []))
        self.summary_csv = _Csv(
            self.out / "summary.csv", SUMMARY_COLUMNS, kept.get("summary.csv", [])
        )
        self.ops_csv = _Csv(self.out / "ops.csv", OP_COLUMNS, kept.get("ops.csv", []))
        self.op_summary_csv = _Csv(
            self.out / "op_summary.csv", OP_SUMMARY_COLUMNS, kept.get("op_summary.csv", [])
        )
        self.hbm_csv = _Csv(
            self.out / "hbm_steps.csv", HBM_STEP_COLUMNS, kept.get("hbm_steps.csv", [])
        )
        self.device = torch.device(config.device)
        self.by_name = PROGRAMS | {p.name: p for p in config.extra}
        self.unbuilt: list[str] = []  # programs whose build and capture failed
        # a program named twice is one program, run once (its rows would be repeated)
        for name in dict.fromkeys((*config.programs, *(p.name for p in config.extra))):
            if name in self.earlier.programs:
                self.log(f"{name}: finished by the earlier run, kept")
                continue
            if time.perf_counter() > self.deadline:
                self.log(f"time is up: {name} and later programs skipped")
                break
            program = self._prepare_program(name)
            if program is None:
                continue
            self._run_program(program)
            del program  # its module, graph and results go before the cache is emptied
            if config.device == "cuda":
                self.memory.release_dead()  # and what cycles hold, or the next program's
                torch.cuda.empty_cache()  # tensors share segments with them (fragmentation)
        tables = (self.rows_csv, self.summary_csv, self.ops_csv, self.op_summary_csv, self.hbm_csv)
        for table in tables:
            table.close()
        if self.all_rows:
            from mallocgame.runtime.bench_table import real_results_table

            table_md = real_results_table(self.out / "results.csv")
            write_bytes_atomic(self.out / "real.md", table_md.encode())
        if config.plot and any(r.get("measured_median_s") for r in self.all_rows):
            from mallocgame.runtime.bench_plot import plot_real_results

            try:
                plot_real_results(self.out / "results.csv", self.out / "real.png")
            except Exception:
                self.log.failure("the figure")
        self.log(f"done in {time.perf_counter() - config.started:.1f} s")
        return {
            "rows": self.all_rows,
            "summary": self.summaries,
            "calibration": self.figures,
            "unbuilt": self.unbuilt,
        }

    def _open_memory(self) -> None:
        """Log the machine whose memory (HBM and host memory) :meth:`__init__` opened."""
        config, torch = self.config, self.torch
        self.log(
            f"device {config.device}: "
            f"{torch.cuda.get_device_name() if config.device == 'cuda' else 'cpu'}; "
            f"torch {torch.__version__}; host memory {getattr(self.memory, 'host_alloc', 'cpu')}; "
            f"budget {config.seconds:g} s"
        )

    def _calibrate(self) -> None:
        """Measure the machine's figures into ``calibration.csv`` (unless ``calibrate`` is
        off; buffers of 64 KiB tiny, else 256 MiB) and derive the calibrated preset from them
        (with the GPU's whole memory as fast memory); a failure is logged and leaves none."""
        from mallocgame.runtime.calibrate import calibrate, calibrated_preset

        config, torch = self.config, self.torch
        cal_csv = _Csv(self.out / "calibration.csv", ("name", "value", "unit", "method"))
        if self.earlier.figures:
            self.figures = list(self.earlier.figures)
            self.log(f"the machine's {len(self.figures)} figures from the earlier run")
            for f in self.figures:
                cal_csv.row(
                    {"name": f.name, "value": f"{f.value:.10g}", "unit": f.unit, "method": f.method}
                )
        elif config.calibrate:
            try:
                size = 2**16 if config.tiny else 256 * 2**20
                self.figures = calibrate(
                    self.memory, size_bytes=size, matmul_n=64 if config.tiny else 8192, log=self.log
                )
                for f in self.figures:
                    cal_csv.row(
                        {
                            "name": f.name,
                            "value": f"{f.value:.10g}",
                            "unit": f.unit,
                            "method": f.method,
                        }
                    )
            except Exception:
                self.log.failure("calibration")
        cal_csv.close()
        if self.figures:
            total = (
                torch.cuda.get_device_properties(0).total_memory
                if config.device == "cuda"
                else None
            )
            try:
                self.calibrated = calibrated_preset(
                    self.figures, fast_memory_bytes=total, base=self.preset
                )
            except (KeyError, MallocGameError):  # a figure missing or out of range: the preset
                self.log.failure("the calibrated preset")

    def _prepare_program(self, name: str) -> _Program | None:
        """Build program ``name`` on the device, capture it, derive its instances, bind its
        graph and run it once for the reference results; None (logged) where any step fails."""
        from mallocgame.costmodel import derive_instance, peak_live_bytes
        from mallocgame.hardware import staged_variant
        from mallocgame.runtime.plan import PlacementPlan
        from mallocgame.runtime.torch_graph import bind, capture_torch, eager_results
        from mallocgame.runtime.torch_run import PlacedRunner

        config, torch = self.config, self.torch
        spec = self.by_name[name]
        try:
            module, inputs = _build(spec, self.device, config.tiny)
            step = spec.training_step
            captured = capture_torch(module, inputs, name=name, training_step=step)
            instance = derive_instance(
                captured.program, self.preset, capacity_fraction=config.capacity_fraction
            )
            graph = bind(captured, instance)
            reference: Sequence[Any]  # what the graph's results are compared with
            # and what the framework's own step's are
            framework_reference: Sequence[Any]
            if step is not None:
                reference = PlacedRunner(graph, PlacementPlan.all_fast(instance), self.memory).run()
                framework_reference = reference
                self.memory.join()
            else:
                eager = eager_results(graph)
                reference, framework_reference = eager.values, eager.outputs
            if config.device == "cuda":
                torch.cuda.synchronize()
            peak = peak_live_bytes(instance)
            self.log(
                f"{name}: {instance.num_instructions} instructions, {instance.num_buffers} "
                f"buffers, peak live {format_bytes(peak)}, fast memory "
                f"{format_bytes(instance.hardware.fast_memory_bytes)}"
            )
            cal_instance = (
                derive_instance(
                    captured.program, self.calibrated, capacity_fraction=config.capacity_fraction
                )
                if self.calibrated is not None
                else None
            )
            staged_instance = (
                derive_instance(
                    captured.program,
                    staged_variant(self.preset),
                    capacity_fraction=config.capacity_fraction,
                )
                if config.stage_dot_reads
                else None
            )
        except Exception:
            self.log.failure(f"{name}: build and capture")
            self.unbuilt.append(name)
            return None
        doc: dict[str, Any] = {
            "instance": instance.to_dict(),
            "answers": {},
            "program": captured.program.to_dict(),
            "setup": _setup(config, spec, _answer_labels(self.given, instance.sha256)),
        }
        self.documents[name] = doc
        return _Program(
            name,
            spec,
            module,
            inputs,
            captured,
            instance,
            graph,
            reference,
            framework_reference,
            cal_instance,
            doc,
            staged_instance=staged_instance,
        )

    def _run_program(self, program: _Program) -> None:
        """Solve, simulate and measure ``program``'s placements (one row each, until the
        deadline), summarize them and rewrite ``programs.json.gz``."""
        rows: list[dict[str, Any]] = []
        self.cut_short = False  # set where the deadline skips any of the program's work
        placements = self._solve_placements(program)
        self.limit_bytes = self._limit_hbm(program)
        try:
            self._measure_program(program, placements, rows)
        finally:
            if self.limit_bytes is not None:
                self.torch.cuda.set_per_process_memory_fraction(1.0)
        # the answers first, whole (a resumed run reads them back), then the summary rows
        write_bytes_atomic(
            self.out / "programs.json.gz", gzip.compress(json.dumps(self.documents).encode())
        )
        if self.cut_short:  # no summary: a rerun with resume runs the program again
            self.log(f"{program.name}: cut short, no summary")
        else:
            self._summarize(program, rows)  # last: a program with summary rows is finished

    def _limit_hbm(self, program: _Program) -> int | None:
        """With ``hbm_limit``: cap the allocator for ``program`` (see :class:`BenchConfig`);
        the cap in bytes, or None."""
        if self.config.hbm_limit is None:
            return None
        torch = self.torch
        self._settle(program)
        torch.cuda.empty_cache()  # (the first program's settling has no cap to empty for)
        self.held_bytes = torch.cuda.memory_allocated()
        held = torch.cuda.memory_reserved()  # the cap counts segments, not tensors
        capacity = program.instance.hardware.fast_memory_bytes
        total = torch.cuda.get_device_properties(0).total_memory
        fraction = hbm_limit_fraction(held, capacity, self.config.hbm_limit, total)
        torch.cuda.set_per_process_memory_fraction(fraction)
        limit = int(fraction * total)
        self.log(
            f"{program.name}: HBM capped at {limit / 2**20:.1f} MiB ({held / 2**20:.1f} MiB "
            f"held in segments, {self.held_bytes / 2**20:.1f} MiB of it by tensors, + "
            f"{self.config.hbm_limit:g} x the fast memory's {capacity / 2**20:.1f} MiB)"
        )
        return limit

    def _settle(self, program: _Program, before: str | None = None) -> None:
        """Start a row from the program's own HBM: drop the gradients an earlier step left
        on the module (one that ran out of memory mid-backward leaves some), free what only
        dead objects hold and, under a cap, the allocator's cached blocks; logs what an
        earlier row still holds beyond the program's own (``before``: the row's label)."""
        for p in program.module.parameters():
            p.grad = None
        self.memory.release_dead()
        if self.limit_bytes is None:
            return
        self.torch.cuda.empty_cache()
        extra = self.memory.allocated() - self.held_bytes
        if before is not None and extra > 2**20:
            self.log(f"{program.name}: {extra / 2**20:.1f} MiB of HBM still held before {before}")

    def _measure_program(
        self,
        program: _Program,
        placements: list[tuple[str, Solution | None, str]],
        rows: list[dict[str, Any]],
    ) -> None:
        """The framework baselines, then each placement's row (kept in ``rows`` when
        measured), then the per-op profiles."""
        if self.config.framework:
            self._measure_framework(program)
        runs = []  # (label, answer, error, staged matmul reads)
        for label, solution, error in placements:
            runs.append((label, solution, error, False))
            if self.config.stage_dot_reads and solution is not None and not error:
                runs.append((label + STAGED_DOTS, solution, error, True))
        for label, solution, error, stage in runs:
            if self._time_is_up(f"{program.name} placements from {label} on skipped"):
                break
            row: dict[str, Any] = {
                "program": program.name,
                "placement": label,
                "capacity_bytes": program.instance.hardware.fast_memory_bytes,
                "hbm_limit_bytes": self.limit_bytes,
                "error": error,
            }
            if error:  # its solver failed: the row says so, and is not one of the results
                self.rows_csv.row(row)
                continue
            self._settle(program, label)
            try:
                self._measure_placement(program, label, solution, row, stage)
                rows.append(row)
            except Exception:
                row["error"] = self.log.failure(f"{program.name}: {label}")
            self.rows_csv.row(row)
            self.all_rows.append(row)
        self._profile(program, {label: solution for label, solution, error in placements})

    def _time_is_up(self, skipped: str) -> bool:
        """Past the deadline: log what is ``skipped`` and mark the program cut short."""
        if time.perf_counter() <= self.deadline:
            return False
        self.log(f"time is up: {skipped}")
        self.cut_short = True
        return True

    def _measure_framework(self, program: _Program) -> None:
        """One row per framework baseline (:data:`~mallocgame.runtime.framework.
        FRAMEWORK_BASELINES`; ``eager-save-on-cpu`` for training steps only): the module
        run by PyTorch itself, measured, no simulation."""
        from mallocgame.runtime.framework import FRAMEWORK_BASELINES, measure_framework

        config, loss = self.config, program.spec.loss
        for baseline in FRAMEWORK_BASELINES:
            if baseline == "eager-save-on-cpu" and loss is None:
                continue
            if self._time_is_up(f"{program.name} framework baselines from {baseline} on"):
                return
            row: dict[str, Any] = {
                "program": program.name,
                "placement": baseline,
                "solver": "framework",
                "capacity_bytes": program.instance.hardware.fast_memory_bytes,
                "hbm_limit_bytes": self.limit_bytes,
            }
            self._settle(program, baseline)
            try:
                got = measure_framework(
                    program.module,
                    program.inputs,
                    self.memory,
                    program.framework_reference,
                    baseline=baseline,
                    loss=loss,
                    optimizer=program.spec.optimizer,
                    warmup=config.warmup,
                    steps=config.steps,
                    max_seconds=config.per_placement_s,
                    deadline=self.deadline,
                )
                m = got.measurement
                measured = {
                    _MEASURED_COLUMN.get(k, k): v
                    for k, v in asdict(m).items()
                    if k not in ("staged", "staged_why")
                }
                row.update(measured, host_bytes=got.host_bytes)
                self.log(
                    f"{program.name}: {baseline}: measured {m.median_s * 1e3:.3f} ms (p10 "
                    f"{m.p10_s * 1e3:.3f}, p90 {m.p90_s * 1e3:.3f}), peak HBM "
                    f"{m.peak_hbm_text()}, host "
                    f"{got.host_bytes / 2**20:.1f} MiB, max |diff| from the graph's results "
                    f"{m.max_abs_diff:.3g}"
                    + (
                        "; results not bit-equal (index: max |diff|): "
                        + ", ".join(f"{i}: {d:.3g}" for i, d in got.differing[:8])
                        if got.differing
                        else ""
                    )
                )
            except Exception:
                row["error"] = self.log.failure(f"{program.name}: {baseline}")
            self.rows_csv.row(row)
            self.all_rows.append(row)

    def _profile(self, program: _Program, solutions: dict[str, Solution | None]) -> None:
        """Per-instruction times of the placements of ``profile`` that ``program`` has (the
        framework default's answer is None), measured and simulated on each model, to
        ``ops.csv``, condensed in ``op_summary.csv``. A label ``LABEL`` + :data:`STAGED_DOTS`
        profiles answer ``LABEL`` run with staged matmul reads, simulated on the staged
        instance (with ``stage_dot_reads``; skipped without it). ``given:SOLVER:sSEED``
        profiles that given answer under its row's label (``given:SOLVER`` where it is the
        program's first of that solver), each row's profile once."""
        from mallocgame.runtime.op_profile import (
            op_rows,
            op_summary,
            profile_ops,
            simulated_op_seconds,
        )
        from mallocgame.runtime.plan import PlacementPlan, placement_plan
        from mallocgame.runtime.torch_graph import matmul_layout

        config, name = self.config, program.name
        layouts = [matmul_layout(op.node) for op in program.graph.ops]  # the graph's, once
        row_of = {  # a given answer by solver and seed -> its row's label
            f"given:{s.solver}:s{s.seed}": label
            for label, s in solutions.items()
            if s is not None and label.startswith("given:")
        }
        profiled: set[str] = set()
        for asked in _profiled(config):
            stage = asked.endswith(STAGED_DOTS)
            base = asked[: -len(STAGED_DOTS)] if stage else asked
            base = row_of.get(base, base)
            label = base + STAGED_DOTS if stage else base
            if label in profiled:
                continue
            profiled.add(label)
            if base not in solutions or (solutions[base] is None and base != "hbm-resident"):
                continue
            if stage and (solutions[base] is None or program.staged_instance is None):
                continue
            if self._time_is_up(f"{name} per-op profiles from {label} on skipped"):
                return
            self._settle(program, f"the per-op profile of {label}")
            solution = solutions[base]
            try:
                plan = (
                    PlacementPlan.all_fast(program.instance, label)
                    if solution is None
                    else placement_plan(program.instance, solution, label=label)
                )
                measured = profile_ops(
                    program.graph,
                    plan,
                    self.memory,
                    repeats=config.profile_repeats,
                    shared_host=program.shared_host,
                    stage_dot_reads=stage,
                )
            except Exception:
                self.log.failure(f"{name}: per-op profile of {label}")
                continue
            models: list[tuple[str, Instance]] = (
                [("preset", program.staged_instance)]
                if stage and program.staged_instance is not None
                else [("preset", program.instance)]
                + ([("calibrated", program.cal_instance)] if program.cal_instance else [])
            )
            simulated = {
                model: simulated_op_seconds(
                    inst, None if solution is None else solution.allocations
                )
                for model, inst in models
            }
            rows = {
                model: op_rows(program.instance, measured, simulated[model], layouts)
                for model, _ in models
            }
            for i, op in enumerate(rows["preset"]):
                self.ops_csv.row(
                    {
                        "program": name,
                        "placement": label,
                        "index": op.index,
                        "name": op.name,
                        "opcode": op.opcode,
                        "bytes": op.bytes,
                        "measured_s": f"{op.measured_s:.6g}",
                        "sim_latency_s": f"{op.simulated_s:.6g}",
                        "sim_calibrated_s": (
                            f"{rows['calibrated'][i].simulated_s:.6g}"
                            if "calibrated" in rows
                            else ""
                        ),
                        "layout": op.layout,
                    }
                )
            for model, _ in models:
                summary = op_summary(rows[model])
                self.op_summary_csv.row(
                    {"program": name, "placement": label, "model": model} | asdict(summary)
                )
                self.log(
                    f"{name}: {label}: per-op, {model} model: Spearman {summary.spearman:.3f}, "
                    f"mean relative error {summary.mean_relative_error:.3f}, measured "
                    f"{summary.measured_total_s * 1e3:.3f} ms against simulated "
                    f"{summary.simulated_total_s * 1e3:.3f} ms; {summary.top_opcodes}"
                )

    def _solve_placements(self, program: _Program) -> list[tuple[str, Solution | None, str]]:
        """The placements of ``program``, as ``(label, answer, error)``: the framework default
        (answer None), each of ``placements`` solved until the deadline (a failed one with its
        error and no answer), then the given answers whose instance hash matches."""
        name, instance = program.name, program.instance
        placements: list[tuple[str, Solution | None, str]] = [("hbm-resident", None, "")]
        for spec in self.config.placements:
            if self._time_is_up(f"{name} placements from {spec} on not solved"):
                break
            try:
                t0 = time.perf_counter()
                label, solution = solve_spec(spec, instance, self.config.work)
                self.log(
                    f"{name}: {label} solved in {time.perf_counter() - t0:.1f} s, normalized "
                    f"reward "
                    f"{solution.normalized_reward:.4f}"
                )
                placements.append((label, solution, ""))
            except Exception:
                placements.append((spec, None, self.log.failure(f"{name}: solve {spec}")))
        labels = [label for label, _, _ in placements]
        for solution in self.given:
            if solution.instance_sha256 == instance.sha256:
                label = f"given:{solution.solver}"  # a second of one solver: named by its seed
                label = label if label not in labels else f"{label}:s{solution.seed}"
                if label in labels:
                    raise MallocGameError(
                        f"{instance.name}: two given answers of {solution.solver} with seed "
                        f"{solution.seed}: give one"
                    )
                labels.append(label)
                placements.append((label, solution, ""))
        return placements

    def _simulate_placement(
        self,
        program: _Program,
        label: str,
        solution: Solution | None,
        row: dict[str, Any],
        stage: bool = False,
    ) -> PlacementPlan:
        """The plan of one placement (``solution`` None: the framework default); fills ``row``
        with its solver, reward and check, and its simulated latencies (seconds) on the preset
        and on the calibrated preset (``stage``: on the staged instance alone)."""
        from mallocgame.check import check_solution
        from mallocgame.runtime.plan import PlacementPlan, placement_plan
        from mallocgame.simulate import simulate

        instance, cal_instance = program.instance, program.cal_instance
        if solution is None:
            plan = PlacementPlan.all_fast(instance, label)
            row.update(
                solver="framework default",
                normalized_reward=1.0,
                check_ok="",
                sim_latency_s=sum(i.count * i.supply_s for i in instance.instructions),
            )
            if cal_instance is not None:
                row["sim_calibrated_s"] = sum(
                    i.count * i.supply_s for i in cal_instance.instructions
                )
            return plan
        if not stage:  # a staged row's answer is the row's before
            program.doc["answers"][label] = solution.to_dict()
        report = check_solution(instance, solution)
        row.update(
            solver=solution.solver,
            seed=solution.seed,
            normalized_reward=f"{solution.normalized_reward:.6g}",
            check_ok=report.ok,
        )
        if stage and program.staged_instance is not None:
            row["sim_latency_s"] = simulate(program.staged_instance, solution.allocations).latency_s
        else:
            row["sim_latency_s"] = simulate(instance, solution).latency_s
            if cal_instance is not None:
                row["sim_calibrated_s"] = simulate(cal_instance, solution.allocations).latency_s
        return placement_plan(instance, solution, label=label)

    def _measure_placement(
        self,
        program: _Program,
        label: str,
        solution: Solution | None,
        row: dict[str, Any],
        stage: bool = False,
    ) -> None:
        """Fill ``row`` for one placement: its plan's simulated latencies and planned bytes,
        then its measured step times (seconds), peak HBM bytes and results; logs them.
        ``stage``: matmuls read their host operands through an HBM scratch copy."""
        from mallocgame.runtime.measure import measure

        config, name = self.config, program.name
        plan = self._simulate_placement(program, label, solution, row, stage)
        copy_in, copy_out = plan.copy_bytes()
        row.update(
            planned_hbm_peak_bytes=max(plan.hbm_bytes(), default=0),
            host_bytes=plan.host_bytes(),
            copy_in_bytes=copy_in,
            copy_out_bytes=copy_out,
        )
        m = measure(
            program.graph,
            plan,
            self.memory,
            program.reference,
            warmup=config.warmup,
            steps=config.steps,
            max_seconds=config.per_placement_s,
            deadline=self.deadline,
            shared_host=program.shared_host,
            stage_dot_reads=stage,
        )
        measured = {
            _MEASURED_COLUMN.get(k, k): v
            for k, v in asdict(m).items()
            if k not in ("staged", "staged_why")
        }
        row.update(measured, staged_nodes=" ".join(m.staged))
        self.log(
            f"{name}: {label}: measured {m.median_s * 1e3:.3f} ms (p10 "
            f"{m.p10_s * 1e3:.3f}, p90 "
            f"{m.p90_s * 1e3:.3f}), simulated {row['sim_latency_s'] * 1e3:.3f} ms, "
            f"peak HBM {m.peak_hbm_text()}, identical {m.identical}, staged "
            f"{len(m.staged)}"
            + (f" ({'; '.join(m.staged_why)})" if m.staged_why else "")
            + (f", matmul operands staged {m.dot_staged_bytes / 2**20:.1f} MiB" if stage else "")
        )
        self._hbm_over_plan(program, label, plan, row, stage)

    def _hbm_over_plan(
        self,
        program: _Program,
        label: str,
        plan: PlacementPlan,
        row: dict[str, Any],
        stage: bool = False,
    ) -> None:
        """One more run of ``plan``, its HBM held beyond the plan's per instruction to
        ``hbm_steps.csv``, the most to ``row`` and the log (where the backend counts HBM;
        a failure is logged and leaves the row as measured)."""
        from mallocgame.runtime.measure import hbm_over_plan

        try:
            over = hbm_over_plan(
                program.graph,
                plan,
                self.memory,
                shared_host=program.shared_host,
                stage_dot_reads=stage,
            )
        except Exception:
            self.log.failure(f"{program.name}: {label}: HBM over the plan")
            return
        if not over:
            return
        planned = plan.hbm_bytes()
        names = [i.name for i in program.instance.instructions]
        for t, extra in enumerate(over):
            self.hbm_csv.row(
                {
                    "program": program.name,
                    "placement": label,
                    "index": t,
                    "name": names[t],
                    "planned_bytes": planned[t],
                    "over_plan_bytes": extra,
                }
            )
        worst = max(range(len(over)), key=over.__getitem__)
        row["hbm_over_plan_bytes"] = over[worst]
        self.log(
            f"{program.name}: {label}: HBM beyond the plan's at most "
            f"{over[worst] / 2**20:.1f} MiB (instruction {worst}, {names[worst]}, where the "
            f"plan holds {planned[worst] / 2**20:.1f} MiB)"
        )

    def _summarize(self, program: _Program, rows: list[dict[str, Any]]) -> None:
        """Per model (the preset, and the calibrated preset where there is one), the Spearman
        correlation and mean relative error of the simulated against the measured step times
        over the game's placements (not the framework default, nor a placement whose results
        differ from the reference: its time is not the program's); to ``summary.csv`` and
        the log."""
        from mallocgame.costmodel import peak_live_bytes

        name, instance = program.name, program.instance
        differ = [r["placement"] for r in rows if r.get("identical") is False]
        if differ:
            self.log(f"{name}: left out of the models, results differ: {', '.join(differ)}")
        measured = [
            r
            for r in rows
            if r.get("measured_median_s") is not None and r.get("identical") is not False
        ]
        models = (
            [("preset", "sim_latency_s", False)]
            + ([("calibrated", "sim_calibrated_s", False)] if program.cal_instance else [])
            + ([("staged", "sim_latency_s", True)] if program.staged_instance else [])
        )
        for model, key, staged in models:
            game = [
                r
                for r in measured
                if r["placement"] != "hbm-resident"
                and r["placement"].endswith(STAGED_DOTS) == staged
                and r.get(key) is not None
            ]
            summary = {
                "program": name,
                "model": model,
                "placements": len(game),
                "spearman": spearman(
                    [r[key] for r in game], [r["measured_median_s"] for r in game]
                ),
                "mean_relative_error": mean_relative_error(
                    [r[key] for r in game], [r["measured_median_s"] for r in game]
                ),
                "instructions": instance.num_instructions,
                "buffers": instance.num_buffers,
                "capacity_bytes": instance.hardware.fast_memory_bytes,
                "peak_live_bytes": peak_live_bytes(instance),
            }
            self.summary_csv.row(summary)
            self.summaries.append(summary)
            self.log(
                f"{name}: {model} model over {len(game)} answers: Spearman "
                f"{summary['spearman']:.3f}, "
                f"mean relative error {summary['mean_relative_error']:.3f}"
            )


def run_real_bench(config: BenchConfig) -> dict[str, Any]:
    """Run the job of the module docstring; returns ``{"rows": [...], "summary": [...],
    "calibration": [...], "unbuilt": [...]}`` (``unbuilt``: the programs whose build and
    capture failed, each logged; the others are measured). The placements and profiles are checked first
    (:func:`check_placements`, :func:`check_profile`): a typo ends the job before anything
    runs."""
    import torch

    check_placements(config)
    return _BenchRun(config, torch).run()


def check_placements(config: BenchConfig) -> None:
    """:class:`MallocGameError` for a placement that is no ``NAME`` or ``NAME:SEED`` of a
    known solver (a whole-number seed), or for two placements that are one answer (the same
    solver and seed: ``random:01`` is ``random:1``, ``drop`` is ``drop:0``; each would be a
    row of its own and count twice in the summary)."""
    seen: dict[tuple[str, int], str] = {}  # (solver, seed) -> the spec that asked for it
    for spec in config.placements:
        name, colon, seed = spec.partition(":")
        load_solver(name)  # SolverError (a MallocGameError) names the known solvers
        if colon and not (seed.isdigit() and seed.isascii()):
            raise MallocGameError(f"placement {spec!r}: the seed after ':' must be a whole number")
        key = (name, int(seed or 0))  # the seed solve_spec solves with
        if key in seen:
            raise MallocGameError(
                f"placements {seen[key]!r} and {spec!r} are one answer ({name} with seed "
                f"{key[1]}): give it once"
            )
        seen[key] = spec


def _profiled(config: BenchConfig) -> tuple[str, ...]:
    """The labels ``config`` profiles: its ``profile``, or by default ``hbm-resident`` and
    ``drop`` where ``placements`` has it."""
    if config.profile is not None:
        return config.profile
    return ("hbm-resident",) + (("drop",) if "drop" in config.placements else ())


def check_profile(config: BenchConfig, given: Sequence[Solution] = ()) -> None:
    """:class:`MallocGameError` for a label of ``profile`` that names no placement the run
    can have: ``hbm-resident``, a spec of ``placements`` as written (``random:1``; a spec is
    its row's label), or one of the ``given`` answers (``given:SOLVER``, the label of a
    program's first answer of that solver, or ``given:SOLVER:sSEED``, that answer whatever
    its row's label: ``given:SOLVER`` where it is the first); each also as
    ``LABEL`` + :data:`STAGED_DOTS`, with ``stage_dot_reads`` only (the framework
    default's staged label is accepted and profiles nothing: it has no host operand). A
    label that names a placement is profiled for the programs that have its answer."""
    labels = ["hbm-resident", *config.placements]
    for solution in given:
        labels += [f"given:{solution.solver}", f"given:{solution.solver}:s{solution.seed}"]
    for label in _profiled(config):
        stage = label.endswith(STAGED_DOTS)
        if stage and not config.stage_dot_reads:
            raise MallocGameError(
                f"profile {label!r}: staged reads are measured only with --stage-dot-reads"
            )
        if (label[: -len(STAGED_DOTS)] if stage else label) not in labels:
            raise MallocGameError(
                f"profile {label!r}: no placement of this run has that label (have: "
                f"{', '.join(dict.fromkeys(labels))}"
                + (f"; each also LABEL{STAGED_DOTS}" if config.stage_dot_reads else "")
                + ")"
            )
