"""The main job: muzero-prod with its candidates, the comparison table and the files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from mallocgame.check import check_solution
from mallocgame.cli import main
from mallocgame.curves import normalized_upper_bound, work_text
from mallocgame.errors import OutputFileError, SolverError
from mallocgame.instance import Instance, load_instance
from mallocgame.latency import reward_normalizer
from mallocgame.optimize import (
    Outcome,
    comparison,
    format_comparison,
    optimize,
    output_paths,
    write_outputs,
)
from mallocgame.solution import load_solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.bound import upper_bound
from mallocgame.solvers.heuristic import HeuristicSolver
from mallocgame.workloads.registry import load_workload
from tests.frontends.libtpu_fixtures import SLICED_DUMP
from tests.solvers.muzero.test_muzero_train import TINY, TINY_ARGS


@pytest.fixture(scope="module")
def outcome():
    return optimize(load_workload("xla-v1/gru_infer"), games=4, seed=0, options=TINY)


def test_both_candidates_and_the_answer(outcome) -> None:
    info = outcome.answer.info
    if info["chosen"] != "msa-search":
        chosen = outcome.baseline if info["chosen"] == "heuristic" else outcome.agent
        assert outcome.answer.allocations == chosen.allocations
    assert outcome.baseline.solver == "heuristic" and outcome.agent.solver == "muzero"
    assert outcome.agent.work["games"] >= 4
    assert "order_evaluations" not in outcome.agent.work  # the order search's, not the agent's
    assert next(p.solver for p in outcome.curve) == "heuristic"
    assert [p.solver for p in outcome.curve][-3:] == ["heuristic", "muzero", "muzero-prod"]
    # the agent's last point holds the work it did by the end, as its answer file does
    assert outcome.curve[-2].work == work_text(outcome.agent.work)
    # ... and the info of its run as it ended: train_seconds and recent_mean were those of
    # the moment its best game was found (0.0 and None where a demonstration's game won)
    assert outcome.agent.info == outcome.answer.info["agent_info"]
    assert outcome.agent.info["train_seconds"] > 0
    assert outcome.agent.info["recent_mean"] is not None
    assert 0 < outcome.answer.normalized_reward <= outcome.bound_normalized


def test_the_comparison_table(outcome) -> None:
    heuristic, agent, searched, answer, bound = comparison(outcome)
    assert (
        searched.name == "msa-search" and searched.speedup >= 1.0
    )  # never slower than the heuristic
    assert heuristic.speedup == 1.0 and answer.speedup == max(
        heuristic.speedup, agent.speedup, searched.speedup
    )
    assert bound.latency_s is None and bound.gap_to_bound == 0.0
    assert all(0.0 <= row.gap_to_bound < 1.0 for row in (heuristic, agent, searched, answer))
    text = format_comparison(outcome)
    assert text.splitlines()[0].startswith("xla-v1/gru_infer: 70 buffers")
    played = outcome.agent.work["games"]  # the budget asked for, then what was played
    assert f"; budget 4 games ({played} games played), seed 0," in text.splitlines()[0]
    assert (
        len(text.splitlines()) == 7
        and f"muzero-prod (answer: {outcome.answer.info['chosen']})" in text
    )


def test_a_program_compiled_for_a_tpu_is_compared_with_xlas_own_answer() -> None:
    """tpu-v1's programs carry XLA's placement: its legal answer is a candidate and a row."""
    found = optimize(load_workload("tpu-v1/gru_infer_b512-v5e"), games=1, seed=0, options=TINY)
    rows = {r.name.split(" ")[0]: r for r in comparison(found)}
    assert "xla" in rows and "xla (XLA's own)" in format_comparison(found)
    assert found.answer.info["latency_s"] <= rows["xla"].latency_s
    assert found.answer.info["latency_s"] <= rows["heuristic"].latency_s


def test_a_program_whose_normalizer_is_negative_shows_no_minus_zero() -> None:
    from tests.builders import reversed_normalizer_instances

    found = optimize(reversed_normalizer_instances()["negative"], games=1, seed=0, options=TINY)
    assert found.answer.normalized_reward == 0.0  # 0 s over -4 s: -0.0
    # its rounding margin over -4 s would be a lower limit, not an upper bound: none shown
    assert found.bound_normalized is None and found.upper_bound_s is not None
    text = format_comparison(found)
    assert "-0.0" not in text and " 0.0000 " in text
    assert "%" not in text  # no gap to a bound that bounds nothing (it read 0.0% on each row)
    assert all(row.gap_to_bound is None for row in comparison(found))


def _outcome_of_the_heuristic(inst: Instance) -> Outcome:
    """An :class:`Outcome` without the agent's run: the heuristic's answer is the answer,
    dropping everything the agent's game."""
    heuristic = HeuristicSolver().solve(inst, SolveRequest(seed=0))
    drop = get_solver("drop").solve(inst, SolveRequest(seed=0))
    candidates = {
        s.solver if s is heuristic else "muzero": {
            "reward_s": s.reward_s,
            "normalized_reward": s.normalized_reward,
            "latency_s": 1e-3,
        }
        for s in (heuristic, drop)
    }
    info = {"candidates": candidates, "chosen": "heuristic", "latency_s": 1e-3}
    answer = replace(heuristic, solver="muzero-prod", info=info)
    bound_s = upper_bound(inst)
    bound = normalized_upper_bound(inst, bound_s)
    return Outcome(inst, answer, heuristic, drop, (), bound, None, 0.0, None, bound_s)


def test_the_gap_is_in_seconds_and_shown_only_under_a_positive_normalizer() -> None:
    """A table latency program of R = -13.8 s (tests/data): the heuristic's reward, 4.59 s,
    is 0.33 of R below zero and the LP bound over R is -3.9e8, a lower limit; every row
    read gap 0.0% (1 - reward / bound was taken only where bound > 0). Now no gap and no
    normalized bound are shown; under R > 0 the gap is 1 - reward_s / bound_s."""
    data = Path(__file__).parent / "data"
    negative = _outcome_of_the_heuristic(load_instance(data / "exact_huge_count_table.json"))
    assert reward_normalizer(negative.instance) < 0 and negative.baseline.reward_s > 0
    rows = comparison(negative)
    assert [r.gap_to_bound for r in rows] == [None] * 4
    assert rows[-1].normalized_reward is None
    text = format_comparison(negative)
    assert "%" not in text and text.splitlines()[-1].split()[-3:] == ["—"] * 3

    positive = _outcome_of_the_heuristic(load_workload("xla-v1/lstm_infer"))
    bound_s = positive.upper_bound_s
    assert bound_s is not None and bound_s > 0
    heuristic, agent, answer, bound = comparison(positive)
    gap = 1 - positive.baseline.reward_s / bound_s
    assert 0 < gap < 1 and heuristic.gap_to_bound == answer.gap_to_bound == gap
    assert agent.gap_to_bound == 1.0 and bound.gap_to_bound == 0.0
    assert bound.normalized_reward == bound_s / reward_normalizer(positive.instance)
    assert "%" in format_comparison(positive)


def test_the_table_says_when_the_order_search_was_left_out() -> None:
    """A run whose budget was spent before the order search could start (a resumed agent's
    setup overran its share) printed the table without the msa-search row, saying nothing;
    a line under it now says the order search was left out, and why."""
    ran = _outcome_of_the_heuristic(load_workload("xla-v1/lstm_infer"))
    assert "left out" not in format_comparison(ran)
    info = {**ran.answer.info, "left_out": ["msa-search"]}
    short = replace(ran, answer=replace(ran.answer, info=info))
    lines = format_comparison(short).splitlines()
    assert lines[-2].startswith("bound (LP)") and lines[-1] == (
        "msa-search: left out, the budget was spent before it could start"
    )


def test_every_path_beside_the_answer_keeps_its_whole_name() -> None:
    # a dotted name is no suffix to strip: two runs' files never meet
    v1, v2 = output_paths("runs/study.v1"), output_paths("runs/study.v2")
    assert v1.checkpoint == Path("runs/study.v1.checkpoint")
    assert v1.steer == Path("runs/study.v1.steer.json")
    assert v1.curve_csv == Path("runs/study.v1.curve.csv")
    assert not {v1.checkpoint, v1.steer, *v1.files()} & {v2.checkpoint, v2.steer, *v2.files()}
    for nameless in ("", "."):  # names no file: refused, not written beside "."
        with pytest.raises(OutputFileError, match="--out must name a file"):
            output_paths(nameless)
    json_out = output_paths("runs/answer.json")
    assert (json_out.checkpoint, json_out.steer) == (
        Path("runs/answer.checkpoint"),
        Path("runs/answer.steer.json"),
    )


def test_the_files(outcome, tmp_path: Path) -> None:
    paths = write_outputs(outcome, tmp_path / "run" / "answer.json")
    assert paths == output_paths(tmp_path / "run" / "answer.json")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "answer.curve.csv",
        "answer.curve.png",
        "answer.heuristic.json",
        "answer.json",
        "answer.layouts.png",
        "answer.muzero.json",
    ]
    inst = outcome.instance
    for path in (paths.answer, paths.baseline, paths.agent):
        assert check_solution(inst, load_solution(path)).ok
    rows = paths.curve_csv.read_text().splitlines()
    assert rows[0] == "program,solver,seed,budget_s,elapsed_s,normalized_reward,work"
    assert len(rows) == len(outcome.curve) + 1


def test_no_file_is_written_where_one_of_them_cannot_be(outcome, tmp_path: Path) -> None:
    """write_outputs to an existing directory wrote the candidates, the curve and the
    layouts beside it before finding that the answer's place is a directory; every file is
    checked before the first is written."""
    folder = tmp_path / "outdir"
    folder.mkdir()
    with pytest.raises(OutputFileError, match="outdir: a directory, not a file"):
        write_outputs(outcome, folder)
    (tmp_path / "run.layouts.png").mkdir()  # the last written before the answer
    with pytest.raises(OutputFileError, match="run.layouts.png: a directory, not a file"):
        write_outputs(outcome, tmp_path / "run.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outdir", "run.layouts.png"]
    assert not any(folder.iterdir()) and not any((tmp_path / "run.layouts.png").iterdir())


def test_optimize_on_the_command_line(tmp_path: Path, capsys) -> None:
    out = tmp_path / "gru.json"
    args = ["optimize", "xla-v1/gru_infer", "--work", "4", "--out", str(out), *TINY_ARGS]
    assert main(args) == 0
    printed = capsys.readouterr()
    games = load_solution(tmp_path / "gru.muzero.json").work["games"]
    assert printed.err.rstrip().splitlines()[-1].endswith(f"({games} games)")
    lines = printed.out.splitlines()
    assert lines[0].startswith("xla-v1/gru_infer: 70 buffers") and lines[1].split()[:2] == [
        "normalized",
        "reward",
    ]
    assert lines[6].startswith("bound (LP)") and "layouts ->" in lines[-1]
    assert lines[7].startswith(
        "tensors in fast memory: heuristic "
    )  # what differs between the layouts
    assert any(
        line.startswith("re-fetched by muzero where heuristic keeps them resident: ")
        for line in lines
    )
    assert "optimize xla-v1/gru_infer" in printed.err and "heuristic" in printed.err
    assert main(["check", "xla-v1/gru_infer", str(out)]) == 0
    assert (tmp_path / "gru.checkpoint" / "checkpoint.msgpack").exists()
    capsys.readouterr()
    assert main([*args[:3], "8", *args[4:]]) == 0  # twice the games: the agent resumes
    assert "resuming the agent from" in capsys.readouterr().err
    assert main([*args, "--seed", "1"]) == 2  # another run's checkpoint: refused before it runs
    checkpoint = tmp_path / "gru.checkpoint" / "checkpoint.msgpack"
    assert capsys.readouterr().err.splitlines() == [
        f"mallocgame: error: {checkpoint}: checkpoint was written for a different seed "
        f"(delete it to start over, or give another --out)"
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--budget", "nan"], "--budget"),
        (["--work", "0"], "--work"),
        (["--seed", "-1"], "--seed"),
        (["--seed", str(2**63)], "argument --seed: must be a whole number from 0 to 2**63 - 1"),
        (["--budget", "1e30"], "argument --budget: at most 604800 seconds (7 days), not '1e30'"),
        (["--budget", "0"], "argument --budget: must be a positive"),
        (["--budget", "-5"], "argument --budget: must be a positive"),
        (["--budget", "inf"], "argument --budget: must be a positive"),
        (["--out", ""], "--out must name a file"),
        (["--option", "bogus=1"], "bogus"),
        (["--option", "num_simulations=lots"], "num_simulations"),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str, tmp_path: Path, capsys) -> None:
    assert main(["optimize", "xla-v1/gru_infer", "--work", "1", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("budget", ["1e-9", "2", "13"])  # 13 s: 9.75 s for the agent
def test_a_budget_too_short_for_the_agent_is_one_line_before_the_run(
    budget: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    from mallocgame.solvers.muzero.prod import MuZeroProdSolver

    monkeypatch.setattr(MuZeroProdSolver, "search", lambda *_: pytest.fail("it ran"))
    out = tmp_path / "answer.json"
    assert main(["optimize", "xla-v1/gru_infer", "--budget", budget, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mallocgame: error: a budget of {float(budget):g} s gives the agent")
    assert "less than the 10 s it needs to start (agent_min_seconds)" in err
    assert len(err.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seconds", ["20", True, -5.0, 0, float("nan"), 1e30])
def test_a_budget_that_is_no_budget_is_solve_requests_error(seconds, monkeypatch) -> None:
    """optimize(seconds="20") raised a TypeError, seconds=True was taken for 1 s and -5.0
    for a budget too short for the agent: it is checked as SolveRequest checks it, before
    the agent's share is worked out."""
    from mallocgame.solvers.muzero.prod import MuZeroProdSolver

    monkeypatch.setattr(MuZeroProdSolver, "search", lambda *_: pytest.fail("it ran"))
    with pytest.raises(SolverError) as refused:
        SolveRequest(seconds=seconds)
    with pytest.raises(SolverError) as error:
        optimize(load_workload("synthetic-v1/small"), seconds=seconds, options=TINY)
    assert str(error.value) == str(refused.value)
    assert str(error.value).startswith("seconds (the wall-clock budget) must be ")


def test_a_budget_the_heuristic_spends_is_refused_before_the_order_search(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """The heuristic may still take the agent's share of a budget that was long enough:
    refused, one line, as soon as its answer is in, not after the order search has had the
    budget (neither it nor the agent runs)."""
    import mallocgame.solvers.muzero.prod as prod

    search = prod.MuZeroProdSolver.search
    ran: list[str] = []

    def slow_heuristic(self, instance, config, run):  # as if it took 1.2 of the 2 s
        run.clock.start -= 1.2
        return search(self, instance, config, run)

    def refused(name: str):
        def run(*_, **__):
            ran.append(name)
            raise AssertionError(f"{name} ran")

        return run

    monkeypatch.setattr(prod.MuZeroProdSolver, "search", slow_heuristic)
    monkeypatch.setattr(prod, "search_order", refused("the order search"))
    monkeypatch.setattr(prod.MuZeroProdSolver, "train", refused("the agent"))
    out = tmp_path / "answer.json"
    argv = ["optimize", "xla-v1/gru_infer", "--budget", "2", "--out", str(out)]
    assert main([*argv, "--option", "agent_min_seconds=1"]) == 2  # 1.5 s the agent's
    assert ran == []
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("mallocgame: error: the budget of 2 s left the agent no time to start")
    assert "give a larger budget" in last and list(tmp_path.iterdir()) == []
    seen: list[str] = []  # the library's: a SolverError, the heuristic's answer seen
    with pytest.raises(SolverError, match="left the agent no time to start"):
        optimize(
            load_workload("xla-v1/gru_infer"),
            seconds=2,
            options={"agent_min_seconds": 1},
            on_improvement=lambda improvement: seen.append(improvement.solution.solver),
        )
    assert seen == ["heuristic"] and ran == []


def test_a_budget_is_given_after_the_game_kernels_are_loaded(monkeypatch) -> None:
    """With a wall-clock budget the game's kernels load before muzero-prod's clock starts
    (a fresh process takes about half a second for them); with games only, not at all."""
    import mallocgame.optimize as optimize_module
    from mallocgame.solvers.muzero.prod import MuZeroProdSolver

    class Stop(Exception):
        pass

    calls: list[str] = []

    def solve(*_):
        calls.append("solve")
        raise Stop

    monkeypatch.setattr(optimize_module, "warm_game_kernels", lambda inst: calls.append("warm"))
    monkeypatch.setattr(MuZeroProdSolver, "solve", solve)
    gru = load_workload("xla-v1/gru_infer")
    with pytest.raises(Stop):
        optimize(gru, seconds=60)
    assert calls == ["warm", "solve"]
    calls.clear()
    with pytest.raises(Stop):
        optimize(gru, games=1)
    assert calls == ["solve"]


def test_an_unknown_workload(capsys) -> None:
    assert main(["optimize", "xla-v2/gru_infer"]) == 2
    assert "did you mean" in capsys.readouterr().err


def test_optimize_a_jax_function_for_a_tpu_and_steer_xla(tmp_path: Path, capsys) -> None:
    """``--jax ... --target``: libtpu compiles it, the table has XLA's own row, and
    ``--steer`` writes the flags and reports what XLA placed with them."""
    out = tmp_path / "mlp.json"
    argv = ["optimize", "--jax", "tests.frontends.libtpu_fixtures:mlp_grad", "--target", "tpu-v5e"]
    for spec in ("f32[512,1024]", "f32[1024,512]", "f32[256,512]"):
        argv += ["--arg", spec]
    argv += ["--work", "1", "--steer", "--out", str(out), *TINY_ARGS]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("mlp_grad: 14 buffers, tpu_v5e;") and "xla (XLA's own)" in printed
    flags = json.loads((tmp_path / "mlp.steer.json").read_text())
    assert set(flags) <= {"xla_tpu_msa_sort_order_overrides"}
    assert (
        "steering flags (diff; tensors assigned first: " in printed
        and "XLA with the flags follows " in printed
    )
    assert load_solution(out).solver == "muzero-prod"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["xla-v1/gru_infer", "--steer"], "--jax and --steer go with --target TPU"),
        (["--jax", "m:f"], "--jax and --steer go with --target TPU"),
        ([], "give a workload"),
        (["--target", "tpu-v4"], "give --jax MODULE:FUNCTION (compiled for it) or an XLA dump"),
        (["xla-v1/gru_infer", "--target", "tpu-v4"], "is not an XLA dump directory"),
        (["--steer", "all"], "argument --steer: invalid choice: 'all'"),
        (
            [str(SLICED_DUMP), "--target", "tpu-v4"],
            "--target tpu-v4: no buffer or copy of the dump's module is in memory space [3], "
            "tpu-v4's fast memory (it uses memory spaces [0, 1]: a dump of another "
            "generation?)",
        ),
    ],
)
def test_bad_target_input_is_one_line(argv: list[str], message: str, capsys) -> None:
    assert main(["optimize", "--work", "1", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_dump_is_optimized_for_its_own_generation(tmp_path: Path, capsys) -> None:
    """A v5e dump with ``--target tpu-v5e`` has XLA's own answer in the table, read in the
    v5e's fast space (with ``--target tpu-v4`` it is refused: the bad-input test above)."""
    out = tmp_path / "dump.json"
    argv = ["optimize", str(SLICED_DUMP), "--target", "tpu-v5e", "--work", "1"]
    assert main([*argv, "--out", str(out), *TINY_ARGS]) == 0
    printed = capsys.readouterr().out
    (row,) = [line for line in printed.splitlines() if "xla (XLA's own)" in line]
    assert float(row.split("xla (XLA's own)")[1].split()[0]) > 0


def test_a_dump_with_helper_modules_is_read_at_its_largest(tmp_path: Path, capsys) -> None:
    """A real script's dump holds helper modules beside its step: ``optimize DUMP --target``
    takes the largest, as a plain dump workload does, and does not refuse the dump."""
    dump = tmp_path / "dump"
    dump.mkdir()
    (module,) = SLICED_DUMP.iterdir()
    (dump / module.name).write_text(module.read_text())
    (dump / "module_0001.jit_convert_element_type.after_optimizations.txt").write_text(
        "HloModule jit_convert_element_type, is_scheduled=true\n\n"
        "ENTRY %main (x: f32[8]) -> bf16[8] {\n"
        "  %x = f32[8]{0} parameter(0)\n"
        "  ROOT %c = bf16[8]{0} convert(%x)\n"
        "}\n"
    )
    argv = ["optimize", str(dump), "--target", "tpu-v5e", "--work", "1"]
    assert main([*argv, "--out", str(tmp_path / "dump.json"), *TINY_ARGS]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("jit_three_layers: 10 buffers, tpu_v5e;")
    assert "xla (XLA's own)" in printed
