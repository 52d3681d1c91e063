"""``mallocgame apply`` and ``bench real`` as functions the command line wires in."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")

from mallocgame.costmodel import derive_instance
from mallocgame.frontends.torch import resolve_factory
from mallocgame.runtime.bench import load_solver
from mallocgame.runtime.cli import (
    _real_inputs,
    add_apply_parser,
    add_bench_real_parser,
)
from mallocgame.runtime.errors import AnswerMismatchError, NoGpuError
from mallocgame.runtime.torch_graph import capture_torch
from mallocgame.solution import save_solution
from mallocgame.solvers.base import SolveRequest

FACTORY = "tests.runtime.factory_module:block"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    add_apply_parser(sub)
    bench = sub.add_parser("bench").add_subparsers(dest="bench", required=True)
    add_bench_real_parser(bench)
    return p


def heuristic_answer(tmp_path, fraction=0.25):
    model = resolve_factory(FACTORY, ["f32[16,32]"])
    captured = capture_torch(model.module, _real_inputs(torch, model.inputs, "cpu"), name="block")
    inst = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=fraction)
    sol = load_solver("heuristic").solve(inst, SolveRequest())
    sol = dataclasses.replace(sol, instance="block")
    path = tmp_path / "answer.json"
    save_solution(sol, path)
    return path, sol


def test_apply_runs_an_answer_on_the_cpu(tmp_path, capsys):
    path, _ = heuristic_answer(tmp_path)
    args = parser().parse_args(
        [
            "apply",
            str(path),
            "--torch",
            FACTORY,
            "--arg",
            "f32[16,32]",
            "--device",
            "cpu",
            "--steps",
            "2",
            "--warmup",
            "1",
        ]
    )
    assert args.func(args) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("block: heuristic on cpu: measured ") and line.endswith(
        "results identical: True"
    )


def test_apply_refuses_an_answer_for_another_program(tmp_path):
    path, _ = heuristic_answer(tmp_path, fraction=0.5)  # another capacity: another instance
    args = parser().parse_args(
        ["apply", str(path), "--torch", FACTORY, "--arg", "f32[16,32]", "--device", "cpu"]
    )
    with pytest.raises(AnswerMismatchError, match="another program"):
        args.func(args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_apply_on_cuda_without_a_gpu_is_a_typed_error(tmp_path):
    path, _ = heuristic_answer(tmp_path)
    args = parser().parse_args(["apply", str(path), "--torch", FACTORY, "--arg", "f32[16,32]"])
    with pytest.raises(NoGpuError):
        args.func(args)


def test_bench_real_dry_run(tmp_path):
    args = parser().parse_args(
        ["bench", "real", "--dry-run", "--out", str(tmp_path), "--programs", "mlp"]
    )
    assert args.func(args) == 0
    assert (tmp_path / "results.csv").read_text().count(
        "\n"
    ) == 1 + 1 + 1 + 8  # header, eager, default, 8 answers
    docs = json.loads(__import__("gzip").open(tmp_path / "programs.json.gz").read())
    assert set(docs) == {"mlp"} and len(docs["mlp"]["answers"]) == 8


def test_bench_real_knows_the_bench_programs():
    from mallocgame.runtime.bench import PROGRAMS
    from mallocgame.runtime.cli import _BENCH_PROGRAMS

    assert set(_BENCH_PROGRAMS) == set(PROGRAMS)


def test_bench_real_refuses_an_unknown_program(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        parser().parse_args(["bench", "real", "--out", str(tmp_path), "--programs", "gpt5"])
    assert stop.value.code == 2 and "invalid choice: 'gpt5'" in capsys.readouterr().err


def test_bench_real_without_baselines_or_profiles(tmp_path):
    args = parser().parse_args(
        [
            "bench",
            "real",
            "--dry-run",
            "--out",
            str(tmp_path),
            "--programs",
            "mlp-train",
            "--placements",
            "heuristic",
            "--no-framework",
            "--profile",
        ]
    )
    assert args.func(args) == 0
    rows = (tmp_path / "results.csv").read_text().splitlines()
    assert [r.split(",")[1] for r in rows[1:]] == ["hbm-resident", "heuristic"]
    assert (tmp_path / "ops.csv").read_text().count("\n") == 1  # the header alone
