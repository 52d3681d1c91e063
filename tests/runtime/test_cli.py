"""``mallocgame apply`` and ``bench real`` as functions the command line wires in."""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os

import pytest

torch = pytest.importorskip("torch")

from mallocgame.costmodel import derive_instance
from mallocgame.frontends.torch import resolve_factory
from mallocgame.instance import save_instance
from mallocgame.runtime.bench import load_solver
from mallocgame.runtime.cli import (
    _real_inputs,
    add_apply_parser,
    add_bench_real_parser,
)
from mallocgame.runtime.errors import (
    AnswerMismatchError,
    ApplyError,
    NoGpuError,
    ProgramMismatchError,
)
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
    assert "; peak HBM n/a, host " in line  # the CPU stand-in counts no fast memory


def test_apply_with_staged_dot_reads_says_how_much_it_staged(tmp_path, capsys):
    path, _ = heuristic_answer(tmp_path)
    argv = ["apply", str(path), "--torch", FACTORY, "--arg", "f32[16,32]", "--device", "cpu"]
    args = parser().parse_args([*argv, "--steps", "1", "--warmup", "1", "--stage-dot-reads"])
    assert args.func(args) == 0
    line = capsys.readouterr().out.strip()
    assert "; matmul operands staged: " in line and line.endswith("MiB")
    assert "results identical: True" in line


def test_apply_jax_refuses_staged_dot_reads(tmp_path):
    path, instance = jax_answer(tmp_path)
    args = parser().parse_args(
        ["apply", str(path), "--jax", JAX_FUNCTION, *JAX_ARGS, *instance, "--stage-dot-reads"]
    )
    with pytest.raises(ApplyError, match="--stage-dot-reads goes with --torch"):
        args.func(args)


def test_apply_refuses_an_answer_for_another_program(tmp_path):
    path, _ = heuristic_answer(tmp_path, fraction=0.5)  # another capacity: another instance
    args = parser().parse_args(
        ["apply", str(path), "--torch", FACTORY, "--arg", "f32[16,32]", "--device", "cpu"]
    )
    with pytest.raises(AnswerMismatchError, match="another program"):
        args.func(args)


def test_apply_refuses_a_module_on_the_meta_device(tmp_path):
    """Moving it to the device was a NotImplementedError traceback (exit 1), before the
    capture's own check of the meta device."""
    path, _ = heuristic_answer(tmp_path)
    meta = "tests.runtime.factory_module:on_meta"
    args = parser().parse_args(
        ["apply", str(path), "--torch", meta, "--arg", "f32[16,32]", "--device", "cpu"]
    )
    with pytest.raises(ApplyError, match="on_meta: a module or input on the meta device"):
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


JAX_FUNCTION = "tests.runtime.jax_function_module:mlp"
JAX_ARGS = ["--arg", "f32[32,64]", "--arg", "f32[64,16]", "--arg", "f32[8,32]"]


def jax_answer(tmp_path, solver="drop", fraction=0.25):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    jax = pytest.importorskip("jax")
    from mallocgame.frontends.xla import extract_jax
    from tests.runtime.jax_function_module import mlp

    avals = [jax.ShapeDtypeStruct(s, "float32") for s in ((32, 64), (64, 16), (8, 32))]
    inst = derive_instance(
        extract_jax(mlp, *avals, name="mlp"), "gpu_hbm_host", capacity_fraction=fraction
    )
    path = tmp_path / "jax-answer.json"
    save_solution(load_solver(solver).solve(inst, SolveRequest()), path)
    save_instance(inst, tmp_path / "jax-instance.json")
    return path, ["--instance", str(tmp_path / "jax-instance.json")]


def test_apply_runs_an_answer_for_a_jax_function(tmp_path, capsys):
    path, instance = jax_answer(tmp_path)
    args = parser().parse_args(
        [
            "apply",
            str(path),
            "--jax",
            JAX_FUNCTION,
            *JAX_ARGS,
            *instance,
            "--device",
            "cpu",
            "--steps",
            "2",
        ]
    )
    assert args.func(args) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("mlp: drop on cpu (JAX ")
    assert "inputs in host memory 3 of 3 (in the CUDA lowering 3)" in line
    assert line.endswith("results identical: True")


def test_results_of_a_jax_function_compare_nan_with_nan() -> None:
    import numpy as np

    from mallocgame.runtime.cli import _same_values

    a = np.array([np.nan, 1.0], dtype=np.float32)
    assert _same_values(a, a.copy()) and not _same_values(a, np.array([np.nan, 2.0], "f4"))
    assert not _same_values(a, a.astype(np.float64)) and not _same_values(a, a[:1])
    assert _same_values(np.arange(3), np.arange(3))


def test_apply_jax_refuses_an_answer_for_another_program(tmp_path):
    (tmp_path / "half").mkdir()
    path, _ = jax_answer(tmp_path / "half", solver="heuristic", fraction=0.5)
    _, instance = jax_answer(tmp_path)  # the quarter's instance
    args = parser().parse_args(
        ["apply", str(path), "--jax", JAX_FUNCTION, *JAX_ARGS, *instance, "--device", "cpu"]
    )
    with pytest.raises(AnswerMismatchError):
        args.func(args)


def test_apply_jax_refuses_a_function_that_is_not_the_instances_program(tmp_path):
    path, instance = jax_answer(tmp_path)
    wider = ["--arg", "f32[32,64]", "--arg", "f32[64,16]", "--arg", "f32[16,32]"]
    args = parser().parse_args(
        ["apply", str(path), "--jax", JAX_FUNCTION, *wider, *instance, "--device", "cpu"]
    )
    with pytest.raises(ProgramMismatchError):
        args.func(args)


def test_apply_jax_needs_the_instance(tmp_path):
    path, _ = jax_answer(tmp_path)
    args = parser().parse_args(
        ["apply", str(path), "--jax", JAX_FUNCTION, *JAX_ARGS, "--device", "cpu"]
    )
    with pytest.raises(ApplyError, match="needs --instance FILE"):
        args.func(args)


def test_apply_jax_on_cuda_without_a_gpu_is_a_typed_error(tmp_path):
    jax = pytest.importorskip("jax")
    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("a GPU is present")
    path, instance = jax_answer(tmp_path)
    args = parser().parse_args(["apply", str(path), "--jax", JAX_FUNCTION, *JAX_ARGS, *instance])
    with pytest.raises(NoGpuError, match="no CUDA device seen by JAX"):
        args.func(args)


def test_apply_takes_one_source(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        parser().parse_args(["apply", "a.json", "--jax", JAX_FUNCTION, "--torch", FACTORY])
    assert stop.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_bench_real_with_an_hbm_limit_on_the_cpu_is_refused(tmp_path):
    from mallocgame.errors import MallocGameError

    args = parser().parse_args(
        ["bench", "real", "--dry-run", "--out", str(tmp_path), "--hbm-limit", "1.5"]
    )
    with pytest.raises(MallocGameError, match="needs a GPU"):
        args.func(args)


def test_bench_real_runs_your_own_module(tmp_path):
    args = parser().parse_args(
        [
            "bench",
            "real",
            "--dry-run",
            "--out",
            str(tmp_path),
            "--torch",
            FACTORY,
            "--arg",
            "f32[16,32]",
            "--training-step",
            "--optimizer",
            "adamw",
            "--placements",
            "heuristic",
            "--profile",
        ]
    )
    assert args.func(args) == 0
    programs = json.loads(gzip.decompress((tmp_path / "programs.json.gz").read_bytes()))
    opcodes = {i["opcode"] for i in programs["block"]["instance"]["instructions"]}
    assert "adamw_update" in opcodes  # the step ends with AdamW's update
    rows = list(__import__("csv").DictReader((tmp_path / "results.csv").open()))
    assert [(r["program"], r["placement"]) for r in rows] == [
        ("block", "eager"),
        ("block", "eager-save-on-cpu"),
        ("block", "hbm-resident"),
        ("block", "heuristic"),
    ]
    assert all(r["error"] == "" for r in rows) and rows[-1]["identical"] == "True"


def test_bench_real_optimizer_without_training_step_is_refused(tmp_path):
    argv = ["bench", "real", "--dry-run", "--out", str(tmp_path), "--torch", FACTORY]
    args = parser().parse_args([*argv, "--arg", "f32[16,32]", "--optimizer", "sgd"])
    with pytest.raises(ApplyError, match="--optimizer goes with --training-step"):
        args.func(args)
    assert not (tmp_path / "results.csv").exists()


def test_bench_real_arg_without_torch_is_refused(tmp_path):
    args = parser().parse_args(
        ["bench", "real", "--dry-run", "--out", str(tmp_path), "--arg", "f32[2]"]
    )
    with pytest.raises(ApplyError, match="go with --torch"):
        args.func(args)


def test_bench_real_refuses_a_bad_input_spec_before_running(tmp_path):
    from mallocgame.frontends.argspec import ArgSpecError

    args = parser().parse_args(
        [
            "bench",
            "real",
            "--dry-run",
            "--out",
            str(tmp_path),
            "--torch",
            FACTORY,
            "--arg",
            "f33[2]",
        ]
    )
    with pytest.raises(ArgSpecError):
        args.func(args)
    assert not (tmp_path / "results.csv").exists()


def test_bench_real_refuses_an_unknown_preset(tmp_path):
    from mallocgame.errors import MallocGameError

    args = parser().parse_args(
        ["bench", "real", "--dry-run", "--out", str(tmp_path), "--preset", "tpu_v9"]
    )
    with pytest.raises(MallocGameError, match="tpu_v9"):
        args.func(args)


def test_bench_real_refuses_a_factory_that_does_not_import(tmp_path):
    from mallocgame.frontends.argspec import ArgSpecError

    args = parser().parse_args(
        ["bench", "real", "--dry-run", "--out", str(tmp_path), "--torch", "no_such_mod:f"]
    )
    with pytest.raises(ArgSpecError, match="cannot import no_such_mod"):
        args.func(args)
    assert not (tmp_path / "results.csv").exists()


def test_bench_real_that_could_not_build_a_program_says_so_and_exits_1(tmp_path, capsys):
    """A factory that gives no example inputs, without --arg: the build failed (logged),
    and the command said "done" with exit 0."""
    args = parser().parse_args(
        ["bench", "real", "--dry-run", "--no-framework", "--out", str(tmp_path)]
        + ["--torch", FACTORY, "--placements", "drop"]
    )
    assert args.func(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"mallocgame: 1 program(s) could not be built: block (why: {tmp_path}/run.log)"]
    assert "give them with --arg" in (tmp_path / "run.log").read_text()


@pytest.mark.parametrize("factory", ["accumulator", "scales_its_input", "copies_its_input"])
def test_apply_a_module_that_mutates_its_buffer_or_input(tmp_path, capsys, factory):
    """Its mutations are results of the graph: the placed run computes them as the module
    does, and the reference leaves the state the run starts from as it was."""
    model = resolve_factory(f"tests.runtime.factory_module:{factory}", ["f32[16,32]"])
    captured = capture_torch(model.module, _real_inputs(torch, model.inputs, "cpu"), name=factory)
    inst = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=0.25)
    path = tmp_path / "answer.json"
    save_solution(load_solver("heuristic").solve(inst, SolveRequest()), path)
    argv = ["apply", str(path), "--torch", f"tests.runtime.factory_module:{factory}"]
    args = parser().parse_args([*argv, "--arg", "f32[16,32]", "--device", "cpu", "--steps", "2"])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip().endswith("results identical: True")


def test_apply_a_module_whose_example_inputs_hold_a_dict_and_an_int(tmp_path, capsys):
    """Each tensor among a factory's example inputs, in a dict too, gets seeded values; a
    non-tensor (an int) is passed on as it is."""
    factory = "tests.runtime.factory_module:dict_and_int"
    model = resolve_factory(factory)
    inputs = _real_inputs(torch, model.inputs, "cpu")
    assert inputs[1] == 3 and not torch.equal(inputs[0]["x"], inputs[0]["y"])
    captured = capture_torch(model.module, inputs, name="dict_and_int")
    inst = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=0.25)
    path = tmp_path / "answer.json"
    save_solution(load_solver("heuristic").solve(inst, SolveRequest()), path)
    args = parser().parse_args(["apply", str(path), "--torch", factory, "--device", "cpu"])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip().endswith("results identical: True")


@pytest.mark.parametrize("factory", ["accumulator", "scales_its_input", "copies_its_input"])
def test_bench_real_runs_a_module_that_mutates_its_buffer_or_input(tmp_path, factory):
    """The framework's eager step and every placement start from the module's own state and
    inputs, which the steps before them (the reference's, the framework's) leave as they were."""
    argv = ["bench", "real", "--dry-run", "--out", str(tmp_path)]
    argv += ["--torch", f"tests.runtime.factory_module:{factory}", "--arg", "f32[16,32]"]
    args = parser().parse_args([*argv, "--placements", "heuristic"])
    assert args.func(args) == 0
    rows = list(__import__("csv").DictReader((tmp_path / "results.csv").open()))
    assert [r["placement"] for r in rows] == ["eager", "hbm-resident", "heuristic"]
    assert all(r["error"] == "" and r["identical"] == "True" for r in rows)


def test_bench_real_refuses_a_placement_given_twice_in_one_line(tmp_path, capsys):
    """``random:01`` is ``random:1``: two rows of one answer would count twice in the
    summary, so the command stops before it runs anything."""
    from mallocgame.cli import main

    argv = ["bench", "real", "--dry-run", "--out", str(tmp_path / "out"), "--programs", "mlp"]
    assert main([*argv, "--placements", "drop", "random:1", "random:01"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'random:1' and 'random:01' are one answer" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("out", ["", " ", ".", "file"])
def test_bench_real_refuses_an_out_that_is_no_folder_of_its_own(out, tmp_path, capsys, monkeypatch):
    from mallocgame.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    argv = ["bench", "real", "--dry-run", "--out", out, "--programs", "mlp", "--placements", "drop"]
    assert main(argv) == 2
    assert "give a folder of the run's own" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing written


def test_bench_real_refuses_a_blank_torch_in_one_line(tmp_path, capsys):
    """``--torch ''`` was taken for no --torch: the default programs ran."""
    from mallocgame.cli import main

    argv = ["bench", "real", "--dry-run", "--out", str(tmp_path / "out"), "--torch", ""]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--torch must name MODULE:FACTORY" in err
    assert not (tmp_path / "out").exists()


def test_a_refused_bench_real_leaves_the_last_runs_log_as_it_was(tmp_path, capsys):
    from mallocgame.cli import main

    (tmp_path / "run.log").write_text("the last run\n")
    argv = ["bench", "real", "--dry-run", "--out", str(tmp_path), "--programs", "mlp"]
    assert main([*argv, "--placements", "drop", "--preset", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err
    assert (tmp_path / "run.log").read_text() == "the last run\n"


def test_bench_real_refuses_a_mistyped_profile_in_one_line(tmp_path, capsys):
    from mallocgame.cli import main

    argv = ["bench", "real", "--dry-run", "--out", str(tmp_path / "out"), "--programs", "mlp"]
    assert main([*argv, "--placements", "drop", "--profile", "hbm-resident", "dorp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "profile 'dorp': no placement of this run" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "source, given, needle",
    [
        ("jax", ["--preset", "nosuch"], "--preset goes with --torch"),
        ("jax", ["--capacity-fraction", "0.25"], "--capacity-fraction goes with --torch"),
        ("torch", ["--instance", "{instance}"], "--instance goes with --jax"),
    ],
)
def test_apply_refuses_an_option_of_the_other_source(tmp_path, capsys, source, given, needle):
    """An option the source does not read is refused in one line, not ignored (before,
    each of these ran the answer as if the option were not there)."""
    from mallocgame.cli import main

    path, instance = jax_answer(tmp_path)
    if source == "jax":
        argv = ["apply", str(path), "--jax", JAX_FUNCTION, *JAX_ARGS, *instance]
    else:
        path, _ = heuristic_answer(tmp_path)
        argv = ["apply", str(path), "--torch", FACTORY, "--arg", "f32[16,32]"]
    given = [g.format(instance=instance[1]) for g in given]
    assert main([*argv, *given, "--device", "cpu", "--steps", "1", "--warmup", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and needle in captured.err


@pytest.mark.parametrize(
    "given, needle",
    [
        (["--jax", ""], "--jax must name MODULE:FUNCTION"),
        (["--jax", " "], "--jax must name MODULE:FUNCTION"),
        (["--torch", ""], "--torch must name MODULE:FACTORY"),
        (["--torch", FACTORY, "--instance", ""], "--instance must name a file"),
    ],
)
def test_apply_refuses_a_blank_source_or_instance_in_one_line(tmp_path, capsys, given, needle):
    """``--jax ''`` was taken for no --jax: the torch path ran without a module (an
    AttributeError traceback); ``--instance ''`` for no --instance."""
    from mallocgame.cli import main

    path, _ = heuristic_answer(tmp_path)
    assert main(["apply", str(path), *given, "--device", "cpu", "--steps", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and needle in captured.err


def test_apply_refuses_a_module_that_fails_on_its_inputs_in_one_line(tmp_path, capsys):
    """Integer inputs to a float layer: the capture (on fake tensors) takes them, the eager
    run that gives the reference results does not (a RuntimeError traceback before)."""
    from mallocgame.cli import main

    path, _ = heuristic_answer(tmp_path)
    argv = ["apply", str(path), "--torch", FACTORY, "--arg", "s32[16,32]", "--device", "cpu"]
    assert main([*argv, "--steps", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1
    assert "block: the module failed on its inputs: RuntimeError: " in captured.err


def test_apply_torch_reads_the_derivation_options_it_is_given(tmp_path, capsys):
    path, _ = heuristic_answer(tmp_path, fraction=0.5)
    argv = ["apply", str(path), "--torch", FACTORY, "--arg", "f32[16,32]", "--device", "cpu"]
    given = ["--preset", "gpu_hbm_host", "--capacity-fraction", "0.5", "--steps", "1"]
    args = parser().parse_args([*argv, *given])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip().endswith("results identical: True")


def test_bench_real_derives_on_the_defaults_unless_told(tmp_path, monkeypatch):
    from mallocgame.runtime import bench

    seen = []
    monkeypatch.setattr(bench, "run_real_bench", lambda c: seen.append(c) or {"unbuilt": []})
    argv = ["bench", "real", "--dry-run", "--out", str(tmp_path)]
    for extra in ([], ["--preset", "gpu_h100_host", "--capacity-fraction", "0.5"]):
        args = parser().parse_args([*argv, *extra])
        assert args.func(args) == 0
    assert [(c.preset, c.capacity_fraction) for c in seen] == [
        ("gpu_hbm_host", 0.25),
        ("gpu_h100_host", 0.5),
    ]


def test_apply_states_that_warmup_counts_from_one(tmp_path, capsys):
    """The first untimed run is the checked one: ``--warmup 0`` would run it anyway (as
    ``--warmup 1``), so the parser's range starts at 1."""
    with pytest.raises(SystemExit) as stop:
        parser().parse_args(["apply", "a.json", "--torch", FACTORY, "--warmup", "0"])
    assert stop.value.code == 2 and "argument --warmup: 0 is not in [1," in capsys.readouterr().err
