"""One agent trained on many programs: answers, determinism, checkpoints, a start for init."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from mallocgame.check import check_solution
from mallocgame.cli import main
from mallocgame.errors import SolverError
from mallocgame.solvers.checkpoint import CHECKPOINT_NAME
from mallocgame.solvers.muzero.agent import AGENT_NAME, agent_checkpoint
from mallocgame.solvers.muzero.shared import SharedTrainer
from mallocgame.solvers.muzero.solver import MuZeroSolver
from mallocgame.solvers.muzero.train import Trainer
from mallocgame.workloads.registry import load_workload
from tests.solvers.muzero.test_muzero_train import TINY, TINY_ARGS

CONFIG = {**TINY, "demonstrations": "heuristic"}
PROGRAMS = ("synthetic-v1/small", "xla-v1/gru_infer")


@pytest.fixture(scope="module")
def programs():
    return [load_workload(name) for name in PROGRAMS]


def test_one_network_learns_from_every_program_and_answers_each(programs) -> None:
    trainer = SharedTrainer(programs, MuZeroSolver().config(CONFIG), seed=0)
    answers = trainer.run(games=24)
    assert trainer.counters.games >= 24 and trainer.counters.learner_steps > 0
    assert all(t.counters.games > 0 for t in trainer.trainers)  # round-robin reached both
    assert all(t.replay is trainer.replay for t in trainer.trainers)
    for inst, answer in zip(programs, answers):
        assert answer.instance == inst.name and check_solution(inst, answer).ok
        # the network every program's answer comes from: the shared learner's steps
        assert answer.work["learner_steps"] == trainer.counters.learner_steps
    assert sum(a.work["games"] for a in answers) == trainer.counters.games


def test_the_same_seed_and_work_give_the_same_answers(programs) -> None:
    config = MuZeroSolver().config(CONFIG)
    a = SharedTrainer(programs, config, seed=3).run(games=12)
    b = SharedTrainer(programs, config, seed=3).run(games=12)
    assert [s.allocations for s in a] == [s.allocations for s in b]


def test_a_shared_run_resumes_and_starts_a_run_on_another_program(tmp_path: Path, programs) -> None:
    config = MuZeroSolver().config(CONFIG)
    first = SharedTrainer(programs, config, seed=0, checkpoint_dir=tmp_path)
    first.run(games=12)
    resumed = SharedTrainer(programs, config, seed=0, checkpoint_dir=tmp_path)
    assert resumed.resumed and resumed.counters.games == first.counters.games
    assert [t.best_return for t in resumed.trainers] == [t.best_return for t in first.trainers]
    resumed.run(games=first.counters.games + 4)
    assert resumed.counters.games >= first.counters.games + 4
    with pytest.raises(SolverError, match="different"):  # the programs are in the fingerprint
        SharedTrainer(programs[:1], config, seed=0, checkpoint_dir=tmp_path)
    agent, saved = tmp_path / AGENT_NAME, tmp_path / CHECKPOINT_NAME
    assert agent.stat().st_size < saved.stat().st_size / 4  # the network alone
    assert agent_checkpoint(tmp_path) == agent
    unseen = load_workload("xla-v1/lstm_infer")
    start = Trainer(unseen, MuZeroSolver().config({**CONFIG, "init": str(tmp_path)}), seed=0)
    same = jax.tree_util.tree_map(lambda x, y: np.array_equal(x, y), start.params, resumed.params)
    assert all(jax.tree_util.tree_leaves(same))


def test_a_killed_shared_run_resumes_with_its_whole_training_time(tmp_path: Path, programs) -> None:
    """Each answer's info["train_seconds"] is the whole run's: after a kill, a resumed
    run's answers counted only the seconds since the resume (a program's seconds were
    left at 0 in the checkpoints written during a run)."""

    class Killed(Exception):
        pass

    config = MuZeroSolver().config(CONFIG)
    first = SharedTrainer(programs, config, seed=0, checkpoint_dir=tmp_path)
    write = first.save

    def save_and_die() -> None:  # the checkpoint at the first complete game, then a kill
        write()
        raise Killed

    first.save = save_and_die  # type: ignore[method-assign]
    with pytest.raises(Killed):
        first.run(games=100)
    resumed = SharedTrainer(programs, config, seed=0, checkpoint_dir=tmp_path)
    before = resumed.counters.seconds
    assert resumed.resumed and before > 0
    assert [t.counters.seconds for t in resumed.trainers] == [before, before]
    answers = resumed.run(games=resumed.counters.games + 2)
    assert resumed.counters.seconds > before
    assert [a.info["train_seconds"] for a in answers] == [round(resumed.counters.seconds, 3)] * 2


def test_a_shared_run_started_from_an_agent_resumes_without_it(tmp_path: Path, programs) -> None:
    import shutil

    first_agent = SharedTrainer(
        programs, MuZeroSolver().config(CONFIG), seed=0, checkpoint_dir=tmp_path / "a"
    )
    first_agent.run(games=4)
    config = MuZeroSolver().config({**CONFIG, "init": str(tmp_path / "a")})
    started = SharedTrainer(programs, config, seed=1, checkpoint_dir=tmp_path / "b")
    started.run(games=4)
    shutil.rmtree(tmp_path / "a")  # the agent it started from is gone: its checkpoint has all
    resumed = SharedTrainer(programs, config, seed=1, checkpoint_dir=tmp_path / "b")
    assert resumed.resumed and resumed.counters.games == started.counters.games
    same = jax.tree_util.tree_map(lambda x, y: np.array_equal(x, y), resumed.params, started.params)
    assert all(jax.tree_util.tree_leaves(same))


def test_no_program_or_one_given_twice_is_refused(programs) -> None:
    with pytest.raises(SolverError, match="at least one"):
        SharedTrainer([], MuZeroSolver().config(CONFIG))
    with pytest.raises(SolverError, match="given twice"):
        SharedTrainer([programs[0], programs[0]], MuZeroSolver().config(CONFIG))


def test_a_program_without_buffers_is_refused_by_name(programs) -> None:
    """Refused when the trainer is made, by its name, not at the run's first move ("search
    chose action 0, not allowed at buffer 0")."""
    from tests.builders import I, build

    empty = build([], [I()], name="empty")
    with pytest.raises(SolverError, match="^empty: no buffers to place, nothing to train on$"):
        SharedTrainer([programs[0], empty], MuZeroSolver().config(CONFIG))


def test_train_agent_on_the_command_line(tmp_path: Path, capsys) -> None:
    argv = ["train-agent", *PROGRAMS, "--dir", str(tmp_path / "agent"), "--work", "8"]
    assert main(argv + [*TINY_ARGS, "--option", "demonstrations=heuristic"]) == 0
    out = capsys.readouterr().out
    assert "synthetic-v1/small" in out and "xla-v1/gru_infer" in out
    assert f"init={tmp_path / 'agent'}" in out
    assert (tmp_path / "agent" / CHECKPOINT_NAME).exists()
    assert f"agent -> {tmp_path / 'agent' / AGENT_NAME}" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--split", "train"], "--split chooses among the programs of --suite"),
        (["--actors", "2", "synthetic-v1/small"], "--actors needs --ray"),
        ([], "no programs to train on"),
        (
            ["synthetic-v1/small", "--max-buffers", "1"],
            "none of the 1 programs has at most 1 buffers (--max-buffers; the smallest has 60)",
        ),
        (  # it was ignored: the progress lines came all the same
            ["synthetic-v1/small", "--work", "1", *TINY_ARGS, "--option", "progress=false"],
            "train-agent sets progress itself (--dir): drop --option progress",
        ),
    ],
)
def test_train_agent_refuses_bad_arguments_in_one_line(
    tmp_path: Path, capsys, argv: list[str], message: str
) -> None:
    assert main(["train-agent", "--dir", str(tmp_path / "a"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_train_agent_refuses_a_program_without_buffers(tmp_path: Path, capsys) -> None:
    from mallocgame.instance import save_instance
    from tests.builders import I, build

    empty = tmp_path / "empty.json"
    save_instance(build([], [I()]), empty)
    argv = ["train-agent", str(empty), "synthetic-v1/small", "--dir", str(tmp_path / "a")]
    assert main([*argv, "--work", "1"]) == 2
    err = capsys.readouterr().err
    assert "no buffers to place, nothing to train on" in err and "Traceback" not in err
    assert not (tmp_path / "a").exists()


def test_a_folder_with_an_agent_but_no_checkpoint_is_refused(tmp_path: Path, programs, capsys):
    """An agent copied into --dir (its checkpoint left behind) was replaced by a new run's
    without a word; now refused in one line, naming init= to start from it."""
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / AGENT_NAME).write_bytes(b"someone's agent")
    argv = ["train-agent", *PROGRAMS, "--dir", str(folder), "--work", "1", *TINY_ARGS]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--option init={folder} and another --dir" in err
    assert [p.name for p in folder.iterdir()] == [AGENT_NAME]
    assert (folder / AGENT_NAME).read_bytes() == b"someone's agent"
    with pytest.raises(SolverError, match=f"holds an agent .* init={folder}"):
        SharedTrainer(programs, MuZeroSolver().config(CONFIG), checkpoint_dir=folder)
