"""The command line: exit codes, one-line errors, files written."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from mallocgame.cli import UsageError, main

CONFORMANCE = Path(__file__).parent / "data" / "conformance"


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("mallocgame: error:")
    return err


def test_list_shows_bundled_workloads(capsys) -> None:
    from mallocgame.workloads.registry import workload_names

    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "instructions", "buffers", "fast", "memory"]
    assert [line.split()[0] for line in lines[1:]] == workload_names()
    assert len({len(line) for line in lines}) == 1  # one column layout, fixed before loading
    small = next(line for line in lines if line.startswith("synthetic-v1/small "))
    assert small.split()[1:] == ["19", "60", "1.9", "MiB"]


def test_train_refuses_another_trainers_or_runs_checkpoint_in_one_line(
    tmp_path: Path, instance_file: Path, capsys
) -> None:
    serialization = pytest.importorskip("flax.serialization")
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.msgpack").write_bytes(
        serialization.msgpack_serialize(
            {"fingerprint": {"trainer": "muzero", "version": 2, "answer": "search"}}
        )
    )
    train = ["train", str(instance_file), "--dir", str(run), "--work", "1"]
    assert main([*train, "--solver", "egrl"]) == 2
    assert _one_line_error(capsys) == (
        f"mallocgame: error: {run}: holds a muzero run, which egrl "
        f"cannot resume (use another --dir or remove it)"
    )
    assert main(train) == 2
    assert _one_line_error(capsys).endswith(
        "checkpoint was written for a different instance_sha256 (use another --dir or remove it)"
    )
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.msgpack"]


def test_an_ambiguous_dump_names_the_module_flag(tmp_path: Path, capsys) -> None:
    from tests.frontends.test_xla import HANDMADE

    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "module_0001.first.cpu_after_optimizations.txt").write_text(HANDMADE)
    (dump / "module_0002.second.cpu_after_optimizations.txt").write_text(HANDMADE)
    assert main(["extract", "--dump", str(dump), "--out", str(tmp_path / "x.json")]) == 2
    err = _one_line_error(capsys)
    assert "2 modules are in the dump; pick one with --module NAME: " in err
    assert "module=" not in err
    assert not (tmp_path / "x.json").exists()


def test_extract_a_program_whose_flops_no_float_holds(tmp_path: Path, capsys) -> None:
    from tests.builders import tiny_program

    doc = tiny_program().to_dict()
    doc["instructions"][1]["flops"] = 10**400
    program = tmp_path / "big.program.json"
    program.write_text(json.dumps(doc))
    out = tmp_path / "x.json"
    assert main(["extract", "--program", str(program), "--out", str(out)]) == 2
    assert "an integer too large for a float" in _one_line_error(capsys)
    assert not out.exists()


def test_solve_check_show_roundtrip(tmp_path: Path, instance_file: Path, capsys) -> None:
    out = tmp_path / "sol.json"
    assert (
        main(
            [
                "solve",
                str(instance_file),
                "--solver",
                "random",
                "--seed",
                "3",
                "--work",
                "4",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "normalized reward" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["format"] == "mallocgame-solution" and doc["seed"] == 3
    assert doc["work"]["games"] == 4
    assert main(["check", str(instance_file), str(out)]) == 0
    assert capsys.readouterr().out.startswith("valid")
    picture = tmp_path / "layout.png"
    assert main(["show", str(instance_file), str(out), "--out", str(picture)]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc["reward_s"] *= 2  # now invalid: drawn all the same, and said so
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["show", str(instance_file), str(bad), "--out", str(tmp_path / "bad.png")]) == 1
    assert "invalid (drawn anyway): reward_mismatch" in capsys.readouterr().out
    assert (tmp_path / "bad.png").exists()


def test_solve_bundled_default_out(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["solve", "synthetic-v1/small", "--solver", "drop"]) == 0
    written = list((tmp_path / "out").glob("*.json"))
    assert [p.name for p in written] == ["synthetic-v1-small.drop.s0.json"]
    assert main(["check", "synthetic-v1/small", str(written[0])]) == 0


def test_solve_with_a_budget_loads_the_game_kernels_before_the_solvers_clock(
    tmp_path: Path, instance_file: Path, monkeypatch
) -> None:
    """A fresh process loads the game's kernels in about half a second: with --budget
    they load before the solver's clock starts (Solver.solve does it), not on it; without
    one, not at all; and bad options are refused before the loading."""
    import mallocgame.game.state as state
    import mallocgame.solvers.base as base

    calls: list[str] = []
    stopwatch = base.Stopwatch
    monkeypatch.setattr(state, "warm_game_kernels", lambda inst: calls.append("warm"))
    monkeypatch.setattr(base, "Stopwatch", lambda s: calls.append("clock") or stopwatch(s))
    out = str(tmp_path / "sol.json")
    argv = ["solve", str(instance_file), "--solver", "random", "--out", out]
    assert main([*argv, "--budget", "0.05"]) == 0
    assert calls == ["warm", "clock"]
    calls.clear()
    assert main([*argv, "--work", "2"]) == 0
    assert calls == ["clock"]
    calls.clear()
    assert main([*argv, "--budget", "0.05", "--option", "bogus=1"]) == 2
    assert calls == []


def test_solve_never_writes_its_answer_over_the_runs_own_files(tmp_path: Path, capsys) -> None:
    """solve --option checkpoint_dir=D --out D/checkpoint.msgpack replaced the checkpoint it
    had resumed from with a solution (the run could not resume again), and --out
    D/best.solution.json a better answer with a worse one; train refused both."""
    run = tmp_path / "run"
    for name in ("checkpoint.msgpack", "best.solution.json"):
        argv = ["solve", "synthetic-v1/small", "--solver", "muzero", "--work", "1"]
        argv += ["--option", f"checkpoint_dir={run}", "--out", str(run / name)]
        assert main(argv) == 2
        assert "is a file the run keeps in checkpoint_dir" in _one_line_error(capsys)
    assert not run.exists()
    argv = ["solve", "synthetic-v1/small", "--solver", "random", "--work", "1"]
    assert main([*argv, "--option", f"checkpoint_dir={run}"]) == 2  # not random's option
    assert "unknown option 'checkpoint_dir'" in _one_line_error(capsys)


def test_optimize_never_writes_its_answer_over_the_runs_own_files(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """optimize --option checkpoint_dir=D --out D/checkpoint.msgpack wrote its answer over
    the checkpoint it resumes from (later runs failed); it is refused as solve refuses it,
    and so is --out D itself."""
    run = tmp_path / "run"
    argv = ["optimize", "synthetic-v1/small", "--work", "1", "--option", f"checkpoint_dir={run}"]
    for name in ("checkpoint.msgpack", "best.solution.json"):
        assert main([*argv, "--out", str(run / name)]) == 2
        assert "is a file the run keeps in checkpoint_dir" in _one_line_error(capsys)
    assert not run.exists()
    # checkpoint_dir= or none: the run keeps no files, so no name is the run's own (the
    # refusal took the text for a folder: '' the current one); refused later for its budget
    monkeypatch.chdir(tmp_path)
    for off in ("", "none"):
        out = str(Path(off) / "best.solution.json")
        short = ["optimize", "synthetic-v1/small", "--budget", "0.5", "--out", out]
        assert main([*short, "--option", f"checkpoint_dir={off}"]) == 2
        assert "less than the 10 s it needs" in _one_line_error(capsys)


def test_optimize_refuses_a_checkpoint_dir_at_one_of_its_outputs_before_the_run(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """optimize --option checkpoint_dir=A/run.layouts.png --out A/run.json ran the whole
    job, then failed to write the picture where the folder was, leaving the candidates and
    the curve and no answer; a checkpoint_dir that is one of the files it writes, or inside
    one, is refused in one line before the run, nothing written."""
    from mallocgame.solvers.muzero.prod import MuZeroProdSolver

    monkeypatch.setattr(MuZeroProdSolver, "search", lambda *_: pytest.fail("it ran"))
    out = tmp_path / "A" / "run.json"
    argv = ["optimize", "synthetic-v1/small", "--work", "1", "--out", str(out)]
    for folder in (
        tmp_path / "A" / "run.layouts.png",
        tmp_path / "A" / "run.heuristic.json",
        tmp_path / "A" / "run.curve.csv" / "ck",
        out / "ck",
    ):
        assert main([*argv, "--option", f"checkpoint_dir={folder}"]) == 2
        where = "is" if folder.name != "ck" else f"is inside {folder.parent},"
        assert _one_line_error(capsys).endswith(
            f"checkpoint_dir {folder} {where} a file this command writes: give another"
        )
    assert list(tmp_path.iterdir()) == []


def test_solve_refuses_a_checkpoint_dir_inside_its_answer_before_the_run(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """solve --option checkpoint_dir=OUT/ck trained, then failed to write the answer where
    the folder was: refused in one line before the run, nothing written."""
    from mallocgame.solvers.muzero.solver import MuZeroSolver

    monkeypatch.setattr(MuZeroSolver, "search", lambda *_: pytest.fail("it ran"))
    out = tmp_path / "a.json"
    for folder, said in (
        (out, f"--out {out} is checkpoint_dir: give a file"),
        (out / "ck", f"checkpoint_dir {out / 'ck'} is inside {out}, a file this command writes"),
    ):
        argv = ["solve", "synthetic-v1/small", "--solver", "muzero", "--work", "1"]
        argv += ["--out", str(out), "--option", f"checkpoint_dir={folder}"]
        assert main(argv) == 2
        assert said in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_no_answer_is_written_over_the_agent_it_starts_from(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """optimize (and solve, and train) --option init=A --out A, or --out D/agent.msgpack
    and D/checkpoint.msgpack with init=D, replaced the trained agent with the answer; it is
    refused in one line before the run, as --out naming the workload is."""
    from mallocgame.solvers.muzero.prod import MuZeroProdSolver
    from mallocgame.solvers.muzero.solver import MuZeroSolver

    for solver in (MuZeroSolver, MuZeroProdSolver):
        monkeypatch.setattr(solver, "search", lambda *_: pytest.fail("it ran"))
    agent = tmp_path / "ini"
    agent.mkdir()
    for name in ("agent.msgpack", "checkpoint.msgpack"):
        (agent / name).write_bytes(b"a trained agent")
    runs = (
        ["optimize", "synthetic-v1/small", "--work", "1"],
        ["solve", "synthetic-v1/small", "--solver", "muzero", "--work", "1"],
        ["solve", "synthetic-v1/small", "--solver", "muzero-prod", "--work", "1"],
        ["train", "synthetic-v1/small", "--solver", "muzero", "--work", "1"],
    )
    for argv in runs:
        if argv[0] == "train":
            argv = [*argv, "--dir", str(tmp_path / "run")]
        for init, out in (
            (agent / "agent.msgpack", agent / "agent.msgpack"),
            (agent, agent / "agent.msgpack"),
            (agent, agent / "checkpoint.msgpack"),
        ):
            assert main([*argv, "--out", str(out), "--option", f"init={init}"]) == 2
            assert _one_line_error(capsys).endswith(
                f"--out {out} is the file this command reads: give another"
            )
    assert {p.read_bytes() for p in agent.iterdir()} == {b"a trained agent"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ini"]


def test_solve_and_check_an_xla_dump_directory(tmp_path: Path, capsys) -> None:
    from tests.frontends.test_xla import HANDMADE

    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "module_0001.handmade.cpu_after_optimizations.txt").write_text(HANDMADE)
    out = tmp_path / "sol.json"
    assert main(["solve", str(dump), "--solver", "greedy", "--out", str(out)]) == 0
    assert main(["check", str(dump), str(out)]) == 0
    assert main(["solve", "xla-v1/gru_infr", "--solver", "greedy"]) == 2
    assert "did you mean xla-v1/gru_infer" in capsys.readouterr().err


def test_check_rejects_corruptions(tmp_path: Path, instance_file: Path, capsys) -> None:
    good = tmp_path / "sol.json"
    assert main(["solve", str(instance_file), "--solver", "exhaustive", "--out", str(good)]) == 0
    doc = json.loads(good.read_text())
    assert len(doc["allocations"]) >= 2
    capsys.readouterr()

    moved = json.loads(json.dumps(doc))
    del moved["actions"]  # a mapping: only the physical check applies
    allocs = [a for a in moved["allocations"] if a["start"] is not None]
    pair = next(
        (a, b)
        for a in allocs
        for b in allocs
        if a["offset"] != b["offset"] and a["start"] <= b["end"] and b["start"] <= a["end"]
    )
    pair[1]["offset"] = pair[0]["offset"]  # moved onto another buffer's region
    bad = tmp_path / "moved.json"
    bad.write_text(json.dumps(moved))
    assert main(["check", str(instance_file), str(bad)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("invalid") and "overlap" in out

    changed = json.loads(json.dumps(doc))
    changed["actions"][0] = 2 if changed["actions"][0] != 2 else 0
    bad.write_text(json.dumps(changed))
    assert main(["check", str(instance_file), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "illegal_action" in out or "allocation_mismatch" in out


@pytest.mark.parametrize(
    "argv_tail, needle",
    [
        (["solve", "{missing}", "--solver", "random"], "neither a bundled workload"),
        (["solve", "{inst}", "--solver", "nope"], "unknown solver"),
        (["solve", "{inst}", "--solver", "egrll"], "unknown solver 'egrll' (valid: drop,"),
        (
            ["solve", "{inst}", "--solver", "random", "--seed", "x"],
            "argument --seed: not a whole number: 'x'",
        ),
        (
            ["solve", "{inst}", "--solver", "random", "--seed", "-1"],
            "argument --seed: must be a whole number from 0 to 2**63 - 1, not -1",
        ),
        (
            ["solve", "{inst}", "--solver", "random", "--seed", str(2**63)],
            f"argument --seed: must be a whole number from 0 to 2**63 - 1, not {2**63}",
        ),
        (
            ["solve", "{inst}", "--solver", "random", "--budget", "1e30"],
            "argument --budget: at most 604800 seconds (7 days), not '1e30'",
        ),
        (["solve", "{inst}", "--solver", "random", "--budget", "604801"], "at most 604800 seconds"),
        (
            ["solve", "{inst}", "--solver", "random", "--budget", "nan"],
            "positive, finite number of seconds",
        ),
        (
            ["solve", "{inst}", "--solver", "random", "--budget", "inf"],
            "positive, finite number of seconds",
        ),
        (
            ["solve", "{inst}", "--solver", "random", "--budget", "0"],
            "positive, finite number of seconds",
        ),
        (
            ["solve", "{inst}", "--solver", "random", "--work", "0"],
            "argument --work: must be at least 1",
        ),
        (["solve", "{inst}", "--solver", "random", "--out", ""], "--out must name a file"),
        (["solve", "{inst}", "--solver", "random", "--budget", "-1"], "--budget"),
        (["solve", "{inst}", "--solver", "random", "--option", "novalue"], "KEY=VALUE"),
        (
            ["solve", "{inst}", "--solver", "muzero", "--option", "num_simulations=many"],
            "option num_simulations must be a whole number",
        ),
        (["solve", "{inst}", "--solver", "es", "--option", "nope=1"], "es: unknown option"),
        (
            ["solve", "{inst}", "--solver", "es", "--option", "sigma=wide"],
            "es: option sigma must be a number, not 'wide'",
        ),
        (["solve", "{inst}", "--solver", "mcts", "--option", "c=-1"], "mcts: option c must be in"),
        (
            ["solve", "{inst}", "--solver", "random", "--option", "foo=1"],
            "random: unknown option 'foo' (valid: none)",
        ),
        (
            ["solve", "{inst}", "--solver", "exact", "--option", "worker=2"],
            "exact: unknown option 'worker' (valid: workers,",
        ),
        (["solve", "{inst}", "--solver", "exact", "--option", "workers=two"], "workers must be"),
        (
            ["solve", "{inst}", "--solver", "heuristic", "--option", "skip_unprofitable=maybe"],
            "must be true or false",
        ),
        (
            ["solve", "{inst}", "--solver", "best-of", "--option", "solvers=heuristic,nope"],
            "unknown solver 'nope'",
        ),
        (
            ["train", "{inst}", "--dir", "runs", "--solver", "random"],
            "train runs muzero, muzero-nosearch or egrl",
        ),
        (
            ["train", "{inst}", "--dir", "runs", "--budget", "inf"],
            "positive, finite number of seconds",
        ),
        (
            ["train", "{inst}", "--dir", "runs", "--budget", "nan"],
            "positive, finite number of seconds",
        ),
        (
            ["train", "{inst}", "--dir", "runs", "--seed", "-1"],
            "argument --seed: must be a whole number from 0",
        ),
        (
            ["train", "{inst}", "--dir", "runs", "--seed", str(2**63)],
            "argument --seed: must be a whole number",
        ),
        (
            ["train", "{inst}", "--dir", "runs", "--budget", "1e30"],
            "argument --budget: at most 604800 seconds",
        ),
        (
            ["train", "{inst}", "--dir", "{inst}"],
            "--dir {inst} is a file; give a directory (created if missing)",
        ),
        (
            ["train", "{inst}", "--dir", "{inst}/run"],
            "cannot hold checkpoints: {inst} is a file, not a directory",
        ),
        (
            ["train", "{inst}", "--dir", "runs", "--option", "learning_rate=inf"],
            "learning_rate must be a finite number",
        ),
        (
            ["solve", "{inst}", "--solver", "es", "--option", "population=2.5"],
            "population must be a whole number",
        ),
        (
            ["solve", "{inst}", "--solver", "es", "--option", "workers=true"],
            "workers must be a whole number",
        ),
        (
            ["solve", "{inst}", "--solver", "es", "--option", "sigma=nan"],
            "sigma must be a finite number",
        ),
        (["simulate", "{inst}", "{missing}"], "nope.json"),
        # an empty path was the current directory: ".: a directory, not a file"
        (["check", "{inst}", ""], "an empty path names no file: give the file's path"),
        (["simulate", "{inst}", ""], "an empty path names no file"),
        (["project", "{inst}", ""], "an empty path names no file"),
        (["show", "{inst}", "", "--out", "x.png"], "an empty path names no file"),
        (["show", "{inst}", "{inst}", "--out", ""], "--out must name a file"),
        (["bench", "tasks", "--program", ""], "an empty path names no file"),
        (["solve", "xla-v1/gru_infr", "--solver", "greedy"], "did you mean xla-v1/gru_infer"),
        (["check", "{inst}", "{malformed}"], "not valid JSON"),
        (["check", "{malformed}", "{inst}"], "not valid JSON"),
        (["check", "{wrongversion}", "{inst}"], "unsupported instance version"),
        (["check", "{impossible}", "{inst}"], "size -5 outside 0..2**53"),
        (["solve", "{deep}", "--solver", "drop"], "nested more than 100 deep"),  # RecursionError
        (["solve", "{surrogate}", "--solver", "drop"], "unpaired surrogate"),  # UnicodeEncodeError
        (["show", "{inst}", "{inst}", "--out", "x.png"], "format is"),
        (["bench", "tasks", "--tasks", "0"], "argument --tasks: must be at least 1"),
        (["bench", "tasks", "--program", "{missing}"], "not a program of the bundled suites"),
        (
            ["bench", "tasks", "--placements", "all-slow", "nope", "--out", "{missing}"],
            "unknown solver 'nope'",
        ),
        (
            ["bench", "tasks", "--limit", "0"],
            "argument --limit: must be a positive, finite number, not '0'",
        ),
        (["bench", "tasks", "--limit", "x"], "argument --limit: not a number: 'x'"),
        (["bench", "tasks", "--seeds", "0", str(2**63)], "argument --seeds: must be a whole"),
        (["bench", "tasks", "--budget", "1e30"], "argument --budget: at most 604800 seconds"),
        (["bench", "speedups", "--seeds", "-1"], "argument --seeds: must be a whole number from 0"),
        (["bench", "speedups", "--budget", "nan"], "argument --budget: must be a positive, finite"),
        (["bench", "speedups", "--budget", "1e30"], "argument --budget: at most 604800 seconds"),
        (
            ["bench", "versus", "a", "b", "--out", "x", "--seeds", str(2**63)],
            "argument --seeds: must be a whole",
        ),
        (
            ["bench", "versus", "a", "b", "--out", "x", "--budget", "0"],
            "argument --budget: must be a positive",
        ),
        (["bench", "correlation", "--seed", str(2**63)], "argument --seed: must be a whole number"),
        (
            ["bench", "rewards", "--programs", "p", "--seeds", "x"],
            "argument --seeds: not a whole number: 'x'",
        ),
        (["bench", "rewards", "--programs", "p", "--budget", "1e30"], "--budget: at most 604800"),
        (["bench", "speedups", "--workers", "-3"], "argument --workers: must be at least 1"),
        (["bench", "speedups", "--workers", "0"], "argument --workers: must be at least 1"),
        (["bench", "speedups", "--work", "0"], "argument --work: must be at least 1"),
        (  # was taken, and the agent trained until killed
            ["train-agent", "synthetic-v1/small", "--dir", "d", "--work", str(2**53 + 1)],
            f"argument --work: must be at most {2**53}",
        ),
        (["bench", "correlation", "--games", "0"], "argument --games: must be at least 2"),
        (["bench", "correlation", "--games", str(10**30)], "argument --games: must be at most"),
        (["solve", "{inst}", "--solver", "drop", "--out", "{inst}"], "is the file this command"),
        (["bogus"], "invalid choice"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, instance_file: Path, capsys, argv_tail: list[str], needle: str
) -> None:
    malformed = tmp_path / "malformed.json"
    malformed.write_text("{not json")
    doc = json.loads(gzip.decompress(instance_file.read_bytes()))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**doc, "version": 99}))
    impossible = tmp_path / "impossible.json"
    doc["tensors"][0]["size"] = -5
    impossible.write_text(json.dumps(doc))
    deep, surrogate = tmp_path / "deep.json", tmp_path / "surrogate.json"
    deep.write_text(json.dumps({**doc, "source": {"x": json.loads("[" * 330 + "]" * 330)}}))
    surrogate.write_text(json.dumps({**doc, "name": "\ud800bad"}))
    paths = {
        "missing": str(tmp_path / "nope.json"),
        "inst": str(instance_file),
        "malformed": str(malformed),
        "wrongversion": str(wrong),
        "impossible": str(impossible),
        "deep": str(deep),
        "surrogate": str(surrogate),
    }
    argv = [a.format(**paths) for a in argv_tail]
    assert main(argv) == 2
    assert needle.format(**paths) in _one_line_error(capsys)


def test_a_file_a_command_reads_is_never_its_out(
    tmp_path: Path, instance_file: Path, capsys
) -> None:
    kept = instance_file.read_bytes()
    answer = tmp_path / "answer.json"
    assert main(["solve", str(instance_file), "--solver", "greedy", "--out", str(answer)]) == 0
    capsys.readouterr()
    assert main(["solve", str(instance_file), "--solver", "drop", "--out", str(instance_file)]) == 2
    assert "is the file this command reads" in _one_line_error(capsys)
    projected = ["project", str(instance_file), str(answer), "--out"]
    for out in (instance_file, answer):
        assert main([*projected, str(out)]) == 2
        assert "is the file this command reads" in _one_line_error(capsys)
    assert instance_file.read_bytes() == kept


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--xla-solution", " "], "--xla-solution must name a file"),  # was a file named " "
        (["--xla-solution", ""], "--xla-solution must name a file"),  # was taken for none
        (["--preset", ""], "--preset must name a hardware preset"),  # was the default preset
        (["--labels", ""], "--labels must name the labels' shape"),  # was taken for none
    ],
)
def test_extract_refuses_a_blank_flag_value_in_one_line(
    tmp_path: Path, monkeypatch, capsys, argv: list[str], needle: str
) -> None:
    monkeypatch.chdir(tmp_path)
    extract = ["extract", "--program", "xla-v1/lstm_infer", "--out", "o.json"]
    assert main([*extract, *argv]) == 2
    assert needle in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_optimize_refuses_a_blank_jax_in_one_line(capsys) -> None:
    """``--jax ''`` was taken for no --jax (a message about a dump directory)."""
    assert main(["optimize", "--jax", "", "--target", "tpu-v4", "--work", "1"]) == 2
    assert "--jax must name MODULE:FUNCTION" in _one_line_error(capsys)


def test_optimize_refuses_an_output_it_cannot_write_before_running(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run.json"
    out.write_text("the answer of an earlier run")
    (tmp_path / "run.layouts.png").mkdir()  # one of the files it writes beside the answer
    argv = ["optimize", "xla-v1/lstm_infer", "--work", "1", "--out", str(out)]
    assert main(argv) == 2
    assert "run.layouts.png: a directory, not a file" in _one_line_error(capsys)
    assert out.read_text() == "the answer of an earlier run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "run.layouts.png"]


def test_show_leaves_out_an_allocation_of_a_buffer_the_instance_lacks(
    tmp_path: Path, instance_file: Path, capsys
) -> None:
    answer = tmp_path / "answer.json"
    assert main(["solve", str(instance_file), "--solver", "greedy", "--out", str(answer)]) == 0
    doc = json.loads(answer.read_text())
    for buffer in (10**6, -1):
        doc["allocations"][0]["buffer"] = buffer
        answer.write_text(json.dumps(doc))
        code = main(["show", str(instance_file), str(answer), "--out", str(tmp_path / "s.png")])
        assert code in (0, 1) and "Traceback" not in capsys.readouterr().err


def test_an_out_where_no_file_can_be_written_is_refused_before_the_work(
    tmp_path: Path, instance_file: Path, capsys
) -> None:
    (tmp_path / "run.csv").write_text("a file where a folder goes")
    out = str(tmp_path / "run.csv" / "x.json")
    for argv in (
        ["optimize", str(instance_file), "--work", "1", "--out", out],
        ["solve", str(instance_file), "--solver", "greedy", "--out", out],
    ):
        assert main(argv) == 2
        assert "run.csv is not a folder" in _one_line_error(capsys)
    assert {p.name for p in tmp_path.iterdir()} == {"run.csv", instance_file.name}


def test_a_default_out_stays_in_out_whatever_the_solver_is_named(
    tmp_path: Path, instance_file: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    answer = tmp_path / "answer.json"
    assert main(["solve", str(instance_file), "--solver", "greedy", "--out", str(answer)]) == 0
    doc = json.loads(answer.read_text())
    doc["solver"] = "x/../../../escaped"
    answer.write_text(json.dumps(doc))
    assert main(["project", str(instance_file), str(answer)]) == 0
    (written,) = (tmp_path / "out").iterdir()
    assert written.is_file() and "escaped-projected" in written.name
    assert not (tmp_path.parent / "escaped-projected.s0.json").exists()


def test_show_refuses_an_out_that_is_an_input_or_a_directory(
    tmp_path: Path, instance_file: Path, capsys
) -> None:
    answer = tmp_path / "answer.png"  # a solution's JSON under a picture's name
    assert main(["solve", str(instance_file), "--solver", "greedy", "--out", str(answer)]) == 0
    before = answer.read_bytes()
    capsys.readouterr()
    assert main(["show", str(instance_file), str(answer), "--out", str(answer)]) == 2
    assert "is the file this command reads" in _one_line_error(capsys)
    assert answer.read_bytes() == before
    (tmp_path / "pictures.png").mkdir()
    argv = ["show", str(instance_file), str(answer), "--out", str(tmp_path / "pictures.png")]
    assert main(argv) == 2
    assert "a directory, not a file" in _one_line_error(capsys)


def test_solve_creates_out_dir_and_leaves_no_temp_files(
    tmp_path: Path, instance_file: Path
) -> None:
    out = tmp_path / "missing-dir-is-created" / "sol.json"
    assert main(["solve", str(instance_file), "--solver", "drop", "--out", str(out)]) == 0
    assert [p.name for p in out.parent.iterdir()] == ["sol.json"]


def test_extract_jax_function(tmp_path: Path, monkeypatch, capsys) -> None:
    pytest.importorskip("jax")
    (tmp_path / "userprog.py").write_text(
        "import jax.numpy as jnp\n\ndef layer(w, x, b):\n    return jnp.tanh(x @ w + b)\n"
    )
    monkeypatch.chdir(tmp_path)
    out, program = tmp_path / "layer.json.gz", tmp_path / "layer.program.json"
    assert (
        main(
            [
                "extract",
                "--jax",
                "userprog:layer",
                "--arg",
                "f32[64,32]",
                "--arg",
                "f32[8,64]",
                "--arg",
                "f32[32]",
                "--out",
                str(out),
                "--program-out",
                str(program),
            ]
        )
        == 0
    )
    assert "2 instructions" in capsys.readouterr().out
    sol = tmp_path / "sol.json"
    assert main(["solve", str(out), "--solver", "random", "--out", str(sol)]) == 0
    assert main(["check", str(out), str(sol)]) == 0
    # the program file re-derives on another preset without JAX
    other = tmp_path / "layer.gpu.json"
    assert (
        main(
            ["extract", "--program", str(program), "--preset", "gpu_hbm_host", "--out", str(other)]
        )
        == 0
    )
    assert "gpu_hbm_host" in json.loads(other.read_text())["hardware"]["name"]


def test_extract_bundled_program_on_another_preset(tmp_path: Path, capsys) -> None:
    out = tmp_path / "lstm.dram.json"
    assert (
        main(
            [
                "extract",
                "--program",
                "xla-v1/lstm_infer",
                "--preset",
                "dram_pmem",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    assert doc["name"] == "xla-v1/lstm_infer" and doc["hardware"]["name"].startswith("dram_pmem")


def test_a_bundled_program_name_is_not_shadowed_by_a_file_of_that_name(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """``--program xla-v1/gru_infer`` (extract, bench tasks) reads the bundled program even
    where a file of that name is beside you, as a workload name does (load_workload)."""
    from mallocgame.bench import tasks
    from mallocgame.program import save_program
    from mallocgame.workloads.suite import suite_program

    monkeypatch.chdir(tmp_path)
    (tmp_path / "xla-v1").mkdir()
    save_program(suite_program("xla-v1/lstm_infer"), tmp_path / "xla-v1" / "gru_infer")
    argv = ["extract", "--program", "xla-v1/gru_infer", "--out", "gru.json"]
    assert main(argv) == 0
    assert json.loads((tmp_path / "gru.json").read_text())["name"] == "xla-v1/gru_infer"

    class Read(Exception):
        pass

    def study(program, *args, **kwargs):
        raise Read(program.name)

    monkeypatch.setattr(tasks, "run_tasks_study", study)
    with pytest.raises(Read, match="xla-v1/gru_infer"):
        main(["bench", "tasks", "--program", "xla-v1/gru_infer", "--out", "study/gru"])


def test_extract_on_the_physical_fast_memory(tmp_path: Path, capsys) -> None:
    out = tmp_path / "gru.json"
    argv = [
        "extract",
        "--program",
        "xla-v2/gru_infer_b512",
        "--preset",
        "tpu_v4i",
        "--physical",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    assert (
        doc["hardware"]["name"] == "tpu_v4i" and doc["hardware"]["fast_memory_bytes"] == 128 << 20
    )


def test_extract_a_tpu_dump_with_xlas_own_solution(tmp_path: Path, capsys) -> None:
    dump = Path(__file__).parent / "frontends" / "data" / "tpu_mlp"
    inst, xla = tmp_path / "mlp.json", tmp_path / "mlp.xla.json"
    argv = [
        "extract",
        "--dump",
        str(dump),
        "--preset",
        "tpu_v4i",
        "--physical",
        "--out",
        str(inst),
        "--xla-solution",
        str(xla),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "solution xla: 3 allocations, 3 copies of XLA's" in out and "check: valid" in out
    assert "not expressible in the game as XLA made it: fusion.1: the prefetch of Arg_1.2" in out
    assert json.loads(xla.read_text())["solver"] == "xla"
    assert main(["check", str(inst), str(xla)]) == 0
    assert main(["simulate", str(inst), str(xla)]) == 0
    # On a GPU's copy bandwidth the same copies do not fit their steps: the reading breaks
    # the copy-supply rule, so the written answer is its projection (legal), and that is said.
    argv[argv.index("tpu_v4i")] = "gpu_hbm_host"
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "breaks the game's rules (copy_supply x" in out and "check: valid" in out
    assert json.loads(xla.read_text())["info"]["raw_failures"]["copy_supply"] >= 1
    assert main(["check", str(inst), str(xla)]) == 0


def test_a_tpu_dump_read_in_another_fast_space_names_the_spaces_it_uses(
    tmp_path: Path, capsys
) -> None:
    """A TPU v4 module's fast memory is space 3: read in the default space 1, nothing of
    XLA's is fast, and the note names the spaces the module uses."""
    source = Path(__file__).parent / "frontends" / "data" / "libtpu" / "mlp_grad.tpu-v4.txt"
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "module_0001.jit_mlp_grad.tpu_after_optimizations.txt").write_text(source.read_text())
    argv = ["extract", "--dump", str(dump), "--out", str(tmp_path / "x.json")]
    assert main([*argv, "--xla-solution", str(tmp_path / "x.xla.json")]) == 0
    out = capsys.readouterr().out
    assert "no buffer or copy of the module is in memory space [1] (it uses memory spaces" in out
    assert "--xla-fast-spaces" in out and "a CPU dump" not in out


def test_extract_for_a_tpu_target_with_xlas_own_solution(tmp_path: Path, capsys) -> None:
    """libtpu compiles the function for a TPU v4 (no TPU needed); XLA's own placement in
    the module, read in the v4's fast memory space (3), is written as a legal answer. The
    instance is on the v4's preset, with its whole CMEM (as XLA had it) by default."""
    inst, xla = tmp_path / "mlp.json", tmp_path / "mlp.xla.json"
    argv = ["extract", "--jax", "tests.frontends.libtpu_fixtures:mlp_grad", "--target", "tpu-v4"]
    for spec in ("f32[512,1024]", "f32[1024,512]", "f32[256,512]"):
        argv += ["--arg", spec]
    argv += ["--out", str(inst), "--xla-solution", str(xla)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "solution xla: " in out and "check: valid" in out
    doc = json.loads(xla.read_text())
    assert doc["solver"] == "xla" and doc["info"]["fast_spaces"] == [3] and doc["allocations"]
    instance = json.loads(inst.read_text())
    assert instance["source"]["target"] == "tpu-v4"
    assert instance["hardware"]["name"] == "tpu_v4"
    assert instance["hardware"]["fast_memory_bytes"] == 64 << 20
    assert main(["check", str(inst), str(xla)]) == 0


def test_extract_a_suite_for_another_tpu_generation(tmp_path: Path, capsys) -> None:
    """``--suite xla-v2 --target tpu-v5p --out-dir``: the models compiled for a v5p, each
    with XLA's placement, its instance on ``tpu_v5p`` and XLA's legal answer; the bundled
    suite is left alone."""
    argv = ["extract", "--suite", "xla-v2", "--model", "gru_infer_b512", "--target", "tpu-v5p"]
    assert main([*argv, "--out-dir", str(tmp_path)]) == 0
    assert "compiled 1 programs for tpu-v5p" in capsys.readouterr().out
    names = sorted(p.name for p in tmp_path.iterdir())
    stem = "gru_infer_b512-v5p"
    suffixes = (".json.gz", ".program.json.gz", ".xla-answer.json.gz", ".xla.json.gz")
    assert names == [stem + s for s in suffixes]
    instance = json.loads(gzip.decompress((tmp_path / f"{stem}.json.gz").read_bytes()))
    assert instance["hardware"]["name"] == "tpu_v5p"
    answer = tmp_path / f"{stem}.xla-answer.json.gz"
    assert main(["check", str(tmp_path / f"{stem}.json.gz"), str(answer)]) == 0


def test_bench_suite_prints_the_hardness_table(capsys) -> None:
    argv = [
        "bench",
        "suite",
        "--programs",
        "xla-v2/gru_infer_b512",
        "--random-games",
        "2",
        "--exact-seconds",
        "0",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "gru_infer_b512" in line).split("|")
    assert row[13].strip() == ""  # exact not run
    assert 0 < float(row[12]) <= float(row[14]) <= 1  # heuristic <= bound


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["extract", "--suite", "xla-v9"], "unknown suite 'xla-v9'"),
        (["extract", "--suite", "--model", "gru_infer"], "needs the suite named"),
        # --suite re-extracts the frozen suites in place: a flag it would drop is refused
        (["extract", "--suite", "xla-v1", "--model"], "needs the names of the programs"),
        (["extract", "--suite", "xla-v1", "--preset", "gpu_hbm_host"], "drop --preset"),
        (["extract", "--dump", "{empty}", "--out", "x.json", "--suite", "xla-v1"], "drop --dump"),
        (["extract", "--suite", "xla-v1", "--out-dir", "d"], "--out-dir goes with --suite and a"),
        (
            ["extract", "--model", "xla-v1/gru_infer", "xla-v1/lstm_infer", "--out", "x.json"],
            "--model takes one NAME",
        ),
        (
            ["extract", "--program", "xla-v1/../xla-v2/gru_infer_b512", "--out", "x.json"],
            "not a program of the bundled suites",
        ),
        (["extract", "--model", "xla-v2/nope", "--out", "x.json"], "unknown model 'xla-v2/nope'"),
        (["extract", "--model", "/gru_infer", "--out", "x.json"], "no suite before the '/'"),
        (
            ["extract", "--model", "gru_infer", "--model", "lstm_infer", "--out", "x.json"],
            "--model takes one NAME",
        ),
        # a setting this source or output would ignore is refused before any work
        (
            ["extract", "--program", "xla-v1/lstm_infer", "--module", "m", "--out", "x.json"],
            "--module goes with --dump DIR",
        ),
        (
            ["extract", "--program", "xla-v1/lstm_infer", "--arg", "f32[2]", "--out", "x.json"],
            "--arg goes with --jax or --torch",
        ),
        (
            ["extract", "--program", "xla-v1/lstm_infer", "--donate", "0", "--out", "x.json"],
            "--donate goes with --jax",
        ),
        (
            ["extract", "--program", "xla-v1/lstm_infer", "--program-out", "p.json", "--physical"],
            "--physical goes with --out FILE",
        ),
        (
            ["extract", "--program", "xla-v1/lstm_infer", "--out-dir", "d", "--out", "x.json"],
            "--out-dir goes with --suite",
        ),
        (
            ["extract", "--program", "xla-v1/lstm_infer", "--physical", "--out", "x.json"]
            + ["--capacity-fraction", "0.5"],
            "drop --capacity-fraction",
        ),
        (
            ["extract", "--program", "xla-v1/lstm_infer", "--capacity-fraction", "0"]
            + ["--out", "x.json", "--program-out", "p.json"],
            "--capacity-fraction must be a finite number above 0",
        ),
        (
            ["extract", "--program", "xla-v1/lstm_infer", "--out", "x.json"]
            + ["--program-out", "./x.json"],
            "must be three different files",
        ),
        (["extract", "--program", "xla-v1/lstm_infer", "--out", "{empty}"], "a directory"),
        (["bench", "suite", "--suite", "xla-v9"], "unknown suite 'xla-v9'"),
        (
            ["optimize", "xla-v1/lstm_infer", "--work", "1", "--arg", "f32[2]"],
            "--arg and --donate go with --jax",
        ),
        (
            ["bench", "suite", "--programs", "xla-v1/lstm_infer", "--suite", "xla-v2"],
            "give --programs or --suite, not both",
        ),
        (
            ["bench", "speedups", "--programs", "xla-v1/lstm_infer", "--work", "1", "--out", ""],
            "--out must name the records' folder",
        ),
        (
            ["train", "xla-v1/lstm_infer", "--solver", "muzero", "--dir", "d"]
            + ["--option", "progress=false"],
            "train sets progress itself (--dir): drop --option progress",
        ),
        (
            ["train-agent", "xla-v1/lstm_infer", "--dir", "d", "--option", "checkpoint_dir=e"],
            "train-agent sets checkpoint_dir itself (--dir): drop --option checkpoint_dir",
        ),
        (["bench", "suite", "--random-games", "0"], "--random-games"),
        (["bench", "suite", "--exact-seconds", "inf"], "--exact-seconds"),
        (["extract", "--out", "x.json"], "exactly one of"),
        (["extract", "--program", "xla-v1/lstm_infer"], "--out"),
        (
            ["extract", "--program", "xla-v1/lstm_infer", "--preset", "nope", "--out", "x.json"],
            "nope",
        ),
        (["extract", "--dump", "{empty}", "--out", "x.json"], "{empty}"),
        (["extract", "--jax", "userprog_missing:f", "--out", "x.json"], "cannot import"),
        (
            [
                "extract",
                "--program",
                "xla-v1/lstm_infer",
                "--out",
                "x.json",
                "--xla-solution",
                "s.json",
            ],
            "--xla-solution needs --dump DIR",
        ),
        (
            ["extract", "--dump", "{empty}", "--out", "x.json", "--xla-fast-spaces", "1,-2"],
            "--xla-fast-spaces",
        ),
        (
            ["extract", "--dump", "{empty}", "--target", "tpu-v4", "--out", "x.json"],
            "--target tpu-v4 goes with --jax or --model",
        ),
        (
            ["extract", "--model", "torch-v1/resnet152_infer_b256", "--target", "tpu-v5e"]
            + ["--out", "x.json"],
            "torch-v1/resnet152_infer_b256 is not a JAX program",
        ),
        (
            ["extract", "--jax", "tests.frontends.libtpu_fixtures:mlp_grad", "--arg", "f32[3,5]"]
            + ["--target", "tpu-v6e", "--out", "x.json"],
            "JAX could not compile it for tpu-v6e",
        ),
        (
            ["extract", "--suite", "xla-v2", "--target", "tpu-v5p"],
            "needs the suite named and --out-dir",
        ),
        (
            ["extract", "--suite", "torch-v1", "--target", "tpu-v5p", "--out-dir", "d"],
            "torch-v1 holds PyTorch models",
        ),
        (
            ["extract", "--suite", "xla-v2", "--model", "nope", "--target", "tpu-v5p"]
            + ["--out-dir", "d"],
            "nope: no such model program in xla-v2",
        ),
        (
            ["extract", "--suite", "xla-v2", "--model", "llama2_70b_decode", "--target", "tpu-v4"]
            + ["--out-dir", "d"],
            "llama2_70b_decode: sized for gpu_hbm_host, so not compiled for TPU targets",
        ),
    ],
)
def test_extract_errors(tmp_path: Path, monkeypatch, capsys, argv: list[str], needle: str) -> None:
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = [a.format(empty=empty) for a in argv]
    assert main(argv) == 2
    assert needle.format(empty=empty) in _one_line_error(capsys)
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "p.json").exists()
    assert not (tmp_path / "d").exists()  # (--out-dir d was made before --model was checked)


def test_extract_writes_no_file_when_the_instance_cannot_be_derived(tmp_path: Path, capsys) -> None:
    """The instance is derived (and so checked) before any output is written: a program
    whose step times are out of range leaves an existing --program-out as it was."""
    from mallocgame.program import save_program
    from tests.builders import tiny_program

    program = tmp_path / "p.json"
    save_program(tiny_program(), program)
    doc = json.loads(program.read_text())
    doc["instructions"][0]["flops"] = 1e30
    program.write_text(json.dumps(doc))
    pout, iout = tmp_path / "pout.json", tmp_path / "iout.json"
    pout.write_bytes(b"the file before")
    argv = ["extract", "--program", str(program), "--program-out", str(pout), "--out", str(iout)]
    assert main(argv) == 2
    assert "supply_s must be in 0..1e12 seconds" in _one_line_error(capsys)
    assert pout.read_bytes() == b"the file before" and not iout.exists()


def test_extract_writes_no_file_when_xlas_solution_cannot_be_made(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """XLA's answer is made before any output is written: where it fails, neither the
    program nor the instance is written."""
    import mallocgame.solvers.xla_answer
    from mallocgame.frontends.xla_placement import PlacementError

    def refused(*args, **kwargs):
        raise PlacementError("XLA's placement does not match")

    monkeypatch.setattr(mallocgame.solvers.xla_answer, "xla_answer", refused)
    dump = Path(__file__).parent / "frontends" / "data" / "tpu_mlp"
    pout, iout, xla = tmp_path / "p.json", tmp_path / "i.json", tmp_path / "x.json"
    pout.write_bytes(b"the file before")
    argv = ["extract", "--dump", str(dump), "--preset", "tpu_v4i", "--physical"]
    argv += ["--program-out", str(pout), "--out", str(iout), "--xla-solution", str(xla)]
    assert main(argv) == 2
    note, error = capsys.readouterr().err.splitlines()  # what the frontend assumed, the error
    assert (
        note.startswith("note: ") and error == "mallocgame: error: XLA's placement does not match"
    )
    assert pout.read_bytes() == b"the file before"
    assert not iout.exists() and not xla.exists()


@pytest.mark.parametrize(
    "command",
    [
        ["train", "xla-v1/lstm_infer", "--dir", "d"],
        ["train-agent", "xla-v1/lstm_infer", "--dir", "d"],
        ["optimize", "xla-v1/lstm_infer", "--out", "x.json"],
    ],
)
@pytest.mark.parametrize("ray", [[], ["--option", "ray=none"]])
def test_actors_without_ray_are_refused_as_an_option_too(
    tmp_path: Path, monkeypatch, capsys, command: list[str], ray: list[str]
) -> None:
    """``--option actors=N`` without Ray would be ignored: refused, as ``--actors N`` is."""
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--work", "1", "--option", "actors=3", *ray]) == 2
    assert "--option actors needs --ray (local, auto or HOST:PORT)" in _one_line_error(capsys)
    assert not (tmp_path / "d").exists() and not (tmp_path / "x.json").exists()


def test_simulate_reports_speedup_and_refuses_invalid(tmp_path: Path, capsys) -> None:
    sol = tmp_path / "sol.json"
    assert main(["solve", "xla-v1/resnet_infer", "--solver", "random", "--out", str(sol)]) == 0
    capsys.readouterr()
    assert main(["simulate", "xla-v1/resnet_infer", str(sol)]) == 0
    out = capsys.readouterr().out
    assert "speedup" in out and float(out.split("speedup ")[1].split(";")[0]) > 1.0
    doc = json.loads(sol.read_text())
    doc["reward_s"] *= 2
    sol.write_text(json.dumps(doc))
    assert main(["simulate", "xla-v1/resnet_infer", str(sol)]) == 1
    assert "reward_mismatch" in capsys.readouterr().out


def test_project_replays_a_mapping_as_a_game_and_reports_what_it_keeps(
    tmp_path: Path, capsys
) -> None:
    from mallocgame.workloads.registry import load_workload

    program = "xla-v1/inplace_update_loop"  # its heuristic mapping loses most of its reward as a plain game
    mapping, projected = tmp_path / "heuristic.json", tmp_path / "projected.json"
    assert main(["solve", program, "--solver", "heuristic", "--out", str(mapping)]) == 0
    capsys.readouterr()
    assert main(["project", program, str(mapping), "--out", str(projected)]) == 0
    out = capsys.readouterr().out
    source, game = json.loads(mapping.read_text()), json.loads(projected.read_text())
    assert len(game["actions"]) == load_workload(program).num_buffers  # a complete game
    kept = game["reward_s"] / source["reward_s"]
    info = game["info"]
    assert 0 < kept < 1 and info["kept_before_repair"] < kept  # the repair raised it
    assert (
        f"(kept {kept:.4f}, {info['kept_before_repair']:.4f} before {info['repairs_kept']} repairs "
        f"in {info['repair_replays']} replays)"
    ) in out
    assert f"{info['backups']} Drop-backups" in out
    assert main(["check", program, str(projected)]) == 0
    capsys.readouterr()
    plain = tmp_path / "plain.json"
    assert main(["project", program, str(mapping), "--out", str(plain), "--repairs", "0"]) == 0
    assert f"(kept {info['kept_before_repair']:.4f}); " in capsys.readouterr().out
    plain_info = json.loads(plain.read_text())["info"]
    assert plain_info["repair_replays"] == 0 and plain_info["backups"] > info["backups"]
    # a game trajectory is its own projection
    again = tmp_path / "again.json"
    assert main(["project", program, str(projected), "--out", str(again)]) == 0
    assert (
        "(kept 1.0000, 1.0000 before 0 repairs in 0 replays); 0 fallbacks, 0 Drop-backups"
        in capsys.readouterr().out
    )
    assert json.loads(again.read_text())["actions"] == game["actions"]
    assert main(["project", program, str(mapping), "--repairs", "-1"]) == 2
    _one_line_error(capsys)
    from mallocgame.solvers.projection import DEFAULT_REPAIRS

    with pytest.raises(SystemExit):
        main(["project", "--help"])
    assert f"default {DEFAULT_REPAIRS}," in " ".join(capsys.readouterr().out.split())


def test_project_refuses_an_invalid_mapping(tmp_path: Path, capsys) -> None:
    program = "xla-v1/gru_infer"
    mapping, projected = tmp_path / "heuristic.json", tmp_path / "projected.json"
    assert main(["solve", program, "--solver", "heuristic", "--out", str(mapping)]) == 0
    doc = json.loads(mapping.read_text())
    doc["reward_s"] *= 2
    mapping.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["project", program, str(mapping), "--out", str(projected)]) == 1
    assert capsys.readouterr().out.startswith("invalid (not projected)")
    assert not projected.exists()
    assert main(["project", program, str(tmp_path / "missing.json")]) == 2
    _one_line_error(capsys)


def test_a_sweep_with_a_bad_solver_option_ends_with_one_error_line(
    tmp_path: Path, instance_file: Path, capsys
) -> None:
    argv = [
        "bench",
        "speedups",
        "--programs",
        str(instance_file),
        "--solvers",
        "es",
        "--work",
        "1",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
        "--option",
        "es:nope=1",
    ]
    assert main(argv) == 2
    assert _one_line_error(capsys).startswith("mallocgame: error: es: unknown option")
    assert not list(
        tmp_path.glob("*.json")
    )  # checked before any job: not even the baseline's record


def test_a_sweep_checks_every_solvers_options_before_any_job(
    tmp_path: Path, instance_file: Path, capsys
) -> None:
    out = tmp_path / "results"
    argv = [
        "bench",
        "speedups",
        "--programs",
        str(instance_file),
        "--baseline",
        "drop",
        "--solvers",
        "random",
        "exact",
        "--work",
        "1",
        "--workers",
        "1",
        "--out",
        str(out),
    ]
    assert main([*argv, "--option", "random:foo=1"]) == 2
    assert "random: unknown option 'foo' (valid: none)" in _one_line_error(capsys)
    assert main([*argv, "--option", "exact:worker=2"]) == 2
    assert "exact: unknown option 'worker'" in _one_line_error(capsys)
    assert not out.exists()  # nothing run, nothing written


def test_an_option_given_twice_with_two_values_is_refused(
    tmp_path: Path, instance_file: Path, capsys
) -> None:
    """--option es:workers=1 --option es:workers=2 ran the jobs with workers=2, the last
    silently winning over the first; the same text twice is one setting, two texts of one
    value (0.2 and 0.20) are refused like two values (docs/cli.md)."""
    from mallocgame.cli import _options, _solver_options

    out = tmp_path / "results"
    argv = ["bench", "speedups", "--programs", str(instance_file), "--solvers", "es"]
    argv += ["--work", "1", "--workers", "1", "--out", str(out)]
    assert main([*argv, "--option", "es:workers=1", "--option", "es:workers=2"]) == 2
    err = _one_line_error(capsys)
    assert "--option es:workers given twice, as '1' and '2'" in err
    assert not out.exists()  # nothing run, nothing written
    solve = ["solve", str(instance_file), "--solver", "es", "--work", "1"]
    solve += ["--out", str(tmp_path / "a.json"), "--option", "workers=1"]
    assert main([*solve, "--option", "workers= 2"]) == 2
    assert "--option workers given twice" in _one_line_error(capsys)
    assert not (tmp_path / "a.json").exists()
    assert _options(["workers=2", " workers = 2"]) == {"workers": "2"}
    assert _solver_options(["es:workers=2", "es:workers=2"], ["es"]) == {"es": {"workers": "2"}}
    with pytest.raises(UsageError, match="given twice, as '0.2' and '0.20'"):
        _options(["sigma=0.2", "sigma=0.20"])


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "speedups", "--programs"],
        ["bench", "speedups", "--programs", "--solvers", "random"],
        ["bench", "correlation", "--programs"],
        ["bench", "suite", "--programs"],
        ["bench", "xla", "--programs"],
        ["bench", "versus", "a", "b", "--out", ".", "--programs"],
        ["bench", "versus", "a", "b", "--out", ".", "--seeds"],
    ],
)
def test_an_empty_list_given_explicitly_is_refused_not_read_as_everything(
    argv: list[str], tmp_path: Path, monkeypatch, capsys
) -> None:
    """bench speedups --programs with nothing after it ran the whole xla-v1 suite; now
    one line, exit 2, and the default is only for a flag not given."""
    import mallocgame.workloads.registry as registry
    import mallocgame.workloads.suite as suite

    def everything(*_args: object) -> list[str]:
        raise AssertionError("an empty --programs read as every program")

    monkeypatch.setattr(suite, "suite_names", everything)
    monkeypatch.setattr(registry, "workload_names", everything)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert "expected at least one argument" in _one_line_error(capsys)


@pytest.mark.parametrize(
    "argv, module, work",
    [
        (["suite"], "suite_table", "suite_row"),
        (["correlation"], "correlation", "reward_latency_correlation"),
        (["correlation", "--training", "1", "--out", "OUT"], "correlation", "training_correlation"),
    ],
)
def test_a_program_named_twice_is_run_once(
    argv: list[str], module: str, work: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """bench suite and bench correlation ran (and tabled) a program named twice twice."""
    import importlib
    import types

    bench = importlib.import_module(f"mallocgame.bench.{module}")
    ran: list[str] = []

    def fake(program: str, *_args: object, **_kwargs: object) -> types.SimpleNamespace:
        ran.append(program)
        return types.SimpleNamespace(pearson=0.5, games=2)

    monkeypatch.setattr(bench, work, fake)
    for name in ("format_suite_table", "format_correlation", "format_training_correlation"):
        monkeypatch.setattr(bench, name, lambda rows: "table", raising=False)
    for name in ("write_training_csv", "plot_training_correlation"):
        monkeypatch.setattr(bench, name, lambda rows, path: None, raising=False)
    argv = [a.replace("OUT", str(tmp_path / "c")) for a in argv]
    programs = ["synthetic-v1/small", "xla-v1/lstm_infer", "synthetic-v1/small"]
    assert main(["bench", *argv, "--programs", *programs]) == 0
    assert ran == ["synthetic-v1/small", "xla-v1/lstm_infer"]


def test_a_closed_pipe_ends_quietly(monkeypatch, capsys) -> None:
    import mallocgame.cli as cli

    def closed(args) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "_cmd_list", closed)
    assert main(["list"]) == 141
    assert capsys.readouterr().err == ""


def test_solvers_lists_every_option_with_its_default(capsys) -> None:
    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    assert (
        out.count("(work unit: ") == 17
        and "muzero-prod  (work unit: games)" in out
        and "xla  (work unit: passes)" in out
        and "exhaustive  (work unit: moves)" in out
    )
    assert '    optimizer = "adam"  [one of adam, sgd]' in out
    (prod,) = [line for line in out.splitlines() if line.startswith("muzero-prod  ")]
    assert prod.endswith(".")  # the docstring's first paragraph whole, not its first line
    assert "    observation.grid_steps = 32  [int in [1, 1024]]" in out
    assert main(["solvers", "mcts"]) == 0
    assert capsys.readouterr().out.startswith("mcts  (work unit: simulations)")
    assert main(["solvers", "mctz"]) == 2
    assert "did you mean 'mcts'" in capsys.readouterr().err


def test_ctrl_c_during_a_pool_is_one_line_and_ends_the_workers(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    argv = [
        sys.executable,
        "-m",
        "mallocgame.cli",
        "solve",
        "xla-v1/gru_infer",
        "--solver",
        "es",
        "--option",
        "workers=2",
        "--work",
        "100000",
        "--progress",
        "--out",
        str(tmp_path / "es.json"),
    ]
    proc = subprocess.Popen(
        argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        first = proc.stderr.readline()  # the first new best: the workers are playing
        assert "normalized reward" in first, first
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
        rest = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    lines = [line for line in rest.splitlines() if "normalized reward" not in line]
    assert lines == ["mallocgame: interrupted"], rest
    assert not (tmp_path / "es.json").exists()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # no worker (nor the fork server) is left in the group
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("processes of the interrupted run are still alive")


@pytest.mark.parametrize("command", ["check", "simulate", "show", "project", "solve"])
def test_an_instance_outside_the_ranges_is_one_line_in_every_command(
    tmp_path: Path, instance_file: Path, command: str, capsys
) -> None:
    """Issue 21: supplies of 1e308 made the checker's sums overflow and say 'valid'."""
    sol = tmp_path / "sol.json"
    assert main(["solve", str(instance_file), "--solver", "greedy", "--out", str(sol)]) == 0
    doc = json.loads(gzip.decompress(instance_file.read_bytes()))
    for t, ins in enumerate(doc["instructions"]):
        ins["supply_s"] = 1e308 if t < 2 else 0.0
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps(doc))
    capsys.readouterr()
    argv = {
        "solve": ["solve", str(huge), "--solver", "greedy", "--out", str(tmp_path / "x.json")],
        "show": ["show", str(huge), str(sol), "--out", str(tmp_path / "x.png")],
    }.get(command, [command, str(huge), str(sol)])
    assert main(argv) == 2
    assert "supply_s must be in 0..1e12" in _one_line_error(capsys)
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "x.png").exists()


_TORCH_PROGRAM = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


class Loss(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Block()

    def forward(self, x, labels):
        return (nn.functional.cross_entropy(self.net(x), labels),)


def block():
    return Block()


def training():
    return Loss(), (torch.zeros(4, 3, 16, 16), torch.zeros(4, dtype=torch.int64))


class Branchy(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x


def branchy():
    return Branchy()


class Out:
    # an output container torch.export does not know, as a ModelOutput or a cache
    def __init__(self, logits, cache):
        self.logits = logits
        self.cache = cache


class Lm(nn.Module):
    # a causal LM's shape: token ids in, logits and a cache of tensors out, its weights tied

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 50, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        hidden = torch.tanh(self.embed(ids))
        return Out(self.head(hidden), [hidden])


def lm():
    return Lm()
"""


def test_extract_torch_module(tmp_path: Path, monkeypatch, capsys) -> None:
    pytest.importorskip("torch")
    (tmp_path / "usernet.py").write_text(_TORCH_PROGRAM)
    monkeypatch.chdir(tmp_path)
    out, program = tmp_path / "block.json.gz", tmp_path / "block.program.json"
    assert (
        main(
            [
                "extract",
                "--torch",
                "usernet:block",
                "--arg",
                "f32[4,3,16,16]",
                "--preset",
                "dram_pmem",
                "--out",
                str(out),
                "--program-out",
                str(program),
            ]
        )
        == 0
    )
    assert "5 instructions" in capsys.readouterr().out  # conv, batch norm, relu, mean, addmm
    doc = json.loads(program.read_text())
    assert doc["source"]["frontend"] == "torch" and doc["source"]["mode"] == "eval"
    sol = tmp_path / "sol.json"
    assert main(["solve", str(out), "--solver", "heuristic", "--out", str(sol)]) == 0
    assert main(["check", str(out), str(sol)]) == 0
    node = tmp_path / "node.program.json"
    assert (
        main(
            [
                "extract",
                "--torch",
                "usernet:block",
                "--arg",
                "f32[4,3,16,16]",
                "--granularity",
                "node",
                "--program-out",
                str(node),
            ]
        )
        == 0
    )
    assert json.loads(node.read_text())["source"]["granularity"] == "node"
    train = tmp_path / "train.program.json"
    assert (
        main(["extract", "--torch", "usernet:training", "--train", "--program-out", str(train)])
        == 0
    )
    doc = json.loads(train.read_text())
    assert doc["source"]["mode"] == "training_step" and doc["alias_groups"]  # running statistics


_LM = ["--torch", "usernet:lm", "--arg", "s64[4,16]"]
"""The causal LM of ``_TORCH_PROGRAM`` (written as ``usernet.py``), as ``extract`` is given it."""


def test_extract_a_causal_lm_training_step_with_a_named_loss(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("torch")
    (tmp_path / "usernet.py").write_text(_TORCH_PROGRAM)
    monkeypatch.chdir(tmp_path)
    inference = tmp_path / "lm.program.json"
    assert main(["extract", *_LM, "--program-out", str(inference)]) == 0
    assert "outputs read for their tensors" in json.loads(inference.read_text())["source"]["notes"]
    out, sol = tmp_path / "step.json.gz", tmp_path / "sol.json"
    argv = ["extract", *_LM, "--train", "--loss", "cross-entropy"]
    assert (
        main(
            [
                *argv,
                "--labels",
                "s64[4,16]",
                "--optimizer",
                "adamw",
                "--preset",
                "dram_pmem",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert (doc["source"]["loss"], doc["source"]["optimizer"]) == ("cross-entropy", "adamw")
    assert main(["solve", str(out), "--solver", "heuristic", "--out", str(sol)]) == 0
    assert main(["check", str(out), str(sol)]) == 0


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--torch", "usernet"], "expected module:function"),
        (["--torch", "no_such_module_xyz:f"], "cannot import no_such_module_xyz"),
        (["--torch", "usernet:nothing"], "has no attribute"),
        (["--torch", "usernet:block"], "give them with --arg"),
        (["--torch", "usernet:block", "--arg", "f32[4,3"], "bad argument spec"),
        (["--torch", "usernet:branchy", "--arg", "f32[3]"], "torch.export could not capture it"),
        (["--torch", "usernet:block", "--arg", "f32[4,3,16,16]", "--train"], "scalar loss"),
        (["--torch", "usernet:block", "--arg", "f32[4,3,16,16]", "--name", ""], "--name must"),
        (["--torch", "usernet:block", "--arg", "f32[4,3,16,16]", "--name", " "], "--name must"),
        ([*_LM, "--loss", "sum"], "go with --train"),
        ([*_LM, "--train", "--loss", "cross-entropy"], "needs --labels"),
        (
            [*_LM, "--train", "--labels", "s64[4,16]"],
            "--labels goes with --loss model or cross-entropy",
        ),
        ([*_LM, "--train", "--loss", "model", "--labels", "s64[4,16]"], "takes no labels="),
        (
            [*_LM, "--train", "--loss", "cross-entropy", "--labels", "s64[4]"],
            "need labels of shape [4, 16]",
        ),
        ([*_LM, "--train", "--loss", "cross-entropy", "--labels", "s64[4,"], "bad argument spec"),
        (
            ["--program", "xla-v1/lstm_infer", "--train"],
            "--train and --granularity go with --torch",
        ),
    ],
)
def test_extract_torch_bad_input_exits_2(tmp_path: Path, monkeypatch, capsys, argv, needle) -> None:
    pytest.importorskip("torch")
    (tmp_path / "usernet.py").write_text(_TORCH_PROGRAM)
    monkeypatch.chdir(tmp_path)
    assert main(["extract", *argv, "--out", str(tmp_path / "x.json")]) == 2
    assert needle in _one_line_error(capsys)


def test_extract_torch_without_torch_exits_2(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["extract", "--torch", "usernet:block", "--out", str(tmp_path / "x.json")]) == 2
    assert "pip install 'mallocgame[torch]'" in _one_line_error(capsys)


def test_bench_tasks_runs_the_multi_task_study(tmp_path: Path, capsys) -> None:
    from mallocgame.program import save_program
    from tests.builders import tiny_program

    program = tmp_path / "tiny.program.json"
    save_program(tiny_program(), program)
    out = tmp_path / "study" / "tiny"
    argv = [
        "bench",
        "tasks",
        "--program",
        str(program),
        "--tasks",
        "1",
        "2",
        "--placements",
        "all-slow",
        "fast-only",
        "memory-mode",
        "first-touch",
        "--out",
        str(out),
        "--limit",
        "1.5",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "| tasks | all-slow | fast-only | memory-mode | first-touch |" in printed.out
    assert "tasks that fit" in printed.out and "tasks under the limit" in printed.out
    assert "2 tasks, first-touch s0" in printed.err
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "tiny.csv",
        "tiny.png",
        "tiny.solutions",
    ]
    assert main(argv) == 0  # a rerun reads its records
    assert "first-touch s0" not in capsys.readouterr().err


def test_extract_says_what_the_frontend_assumed(tmp_path: Path, capsys) -> None:
    from tests.frontends.test_xla_malformed import LOOP, _trip

    dump = tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt"
    unknown = LOOP.replace(", backend_config=" + _trip("3"), "")  # no stated trip count,
    unknown = unknown.replace("compare(%i.1, %n)", "compare(%i.1, %i.1)")  # none to derive
    dump.write_text(unknown)
    assert main(["extract", "--dump", str(dump), "--out", str(tmp_path / "x.json")]) == 0
    assert "note: while loop: trip count unknown, counted once" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            [
                "train",
                "synthetic-v1/small",
                "--dir",
                "{tmp}/run",
                "--out",
                "{tmp}/run",
                "--work",
                "1",
            ],
            "--out {tmp}/run is --dir: give a file",
        ),
        (
            [
                "train",
                "synthetic-v1/small",
                "--dir",
                "{tmp}/run",
                "--work",
                "1",
                "--out",
                "{tmp}/run/checkpoint.msgpack",
            ],
            "is a file the run keeps in --dir",
        ),
        (
            [
                "bench",
                "speedups",
                "--programs",
                "xla-v1/lstm_infer",
                "--solvers",
                "random",
                "--work",
                "1",
                "--out",
                "{tmp}/sw",
                "--csv",
                "{tmp}/file/x.csv",
            ],
            "is not a folder",
        ),
        (
            [
                "bench",
                "speedups",
                "--programs",
                "xla-v1/lstm_infer",
                "--solvers",
                "random",
                "--work",
                "1",
                "--out",
                "{tmp}/sw",
                "--ray",
                "",
            ],
            "--ray needs local, auto or HOST:PORT",
        ),
        (
            ["bench", "correlation", "--programs", "xla-v1/lstm_infer", "xla-v1/nosuch"],
            "xla-v1/nosuch: neither",
        ),
        (
            [
                "bench",
                "rewards",
                "--programs",
                "xla-v1/lstm_infer",
                "xla-v1/nosuch",
                "--solvers",
                "random",
                "--budget",
                "1",
                "--out",
                "{tmp}/rw",
            ],
            "xla-v1/nosuch: neither",
        ),
        (
            [
                "extract",
                "--jax",
                "jax.numpy:add",
                "--arg",
                "f32[4]",
                "--arg",
                "f32[4]",
                "--donate",
                "-1",
                "--out",
                "{tmp}/i.json",
            ],
            "argument --donate: must be at least 0",
        ),
        (
            [
                "extract",
                "--program",
                "xla-v1/lstm_infer",
                "--out",
                "",
                "--program-out",
                "{tmp}/p.json",
            ],
            "--out must name a file",
        ),
        (
            ["show", "xla-v1/lstm_infer", "{tmp}/file", "--against", "", "--out", "{tmp}/z.png"],
            "--against must name a solution file",
        ),
        (
            ["bench", "suite", "--programs", "xla-v1/lstm_infer", "--exact-seconds", "-1"],
            "must be 0 or a positive, finite number of seconds",
        ),
    ],
)
def test_what_can_be_refused_before_the_work_is(argv, needle, tmp_path: Path, capsys) -> None:
    """Each refused in one line before any program, sweep, training or file is touched."""
    (tmp_path / "file").write_text("")
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle.format(tmp=tmp_path) in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing written


def test_exact_seconds_takes_zero_written_any_way() -> None:
    from mallocgame.cli import _seconds_or_zero

    assert [_seconds_or_zero(t) for t in ("0", "-0", "0e0", "0.0", "2.5")] == [0, 0, 0, 0, 2.5]


def test_project_checks_its_output_before_projecting(tmp_path: Path, capsys, monkeypatch) -> None:
    import mallocgame.solvers.projection as projection
    from mallocgame.solution import save_solution
    from mallocgame.solvers import get_solver
    from mallocgame.workloads.registry import load_workload

    inst = load_workload("xla-v1/lstm_infer")
    save_solution(get_solver("heuristic").solve(inst), tmp_path / "h.json")
    monkeypatch.setattr(projection, "project", lambda *_a, **_k: pytest.fail("it projected"))
    (tmp_path / "adir").mkdir()
    argv = ["project", inst.name, str(tmp_path / "h.json"), "--out", str(tmp_path / "adir")]
    assert main(argv) == 2
    assert "a directory, not a file" in capsys.readouterr().err
    # projecting its own default output again: that default is the input; no --out was given
    monkeypatch.chdir(tmp_path)
    default = Path("out") / f"{inst.name.replace('/', '-')}.heuristic-projected.s0.json"
    save_solution(get_solver("heuristic").solve(inst), default)
    assert main(["project", inst.name, str(default)]) == 2
    assert "the default output (give --out)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["solve", "xla-v1/gru_infer", "--solver", "greedy", "--out", "OUT/"],
        ["bench", "rewards", "--programs", "xla-v1/gru_infer", "--out", "OUT/"],
        ["extract", "--suite", "xla-v1", "--model", "gru_infer", "--out", "OUT/"],
    ],
)
def test_an_out_ending_in_a_separator_names_a_folder_and_is_refused(
    argv: list[str], tmp_path: Path, capsys
) -> None:
    """--out newdir/ wrote a file called newdir (Path drops the slash)."""
    argv = [str(tmp_path / "newdir") + "/" if a == "OUT/" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "it names a folder, give a file" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "newdir").exists()
