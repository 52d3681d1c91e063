"""Distributed MMap-MuZero on a local Ray cluster the tests start: two
self-play actors train, checkpoint, survive the kill of one actor, resume after the
whole run is killed, and give answers that the checker accepts.

One cluster serves the module (starting one takes seconds); the run killed as a whole is
a second driver on it, as a job on a real cluster is."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mallocgame.check import check_solution
from mallocgame.cli import main
from mallocgame.errors import SolverError
from mallocgame.solution import load_solution
from mallocgame.solvers.checkpoint import CHECKPOINT_NAME
from mallocgame.solvers.muzero.distributed import connect
from mallocgame.solvers.muzero.shared import SharedTrainer
from mallocgame.solvers.muzero.solver import MuZeroSolver
from mallocgame.solvers.muzero.train import Trainer
from mallocgame.workloads.registry import load_workload
from tests.solvers.muzero.test_muzero_train import TINY, TINY_ARGS, kill_after_first_checkpoint

ray = pytest.importorskip("ray")

DISTRIBUTED = {**TINY, "demonstrations": "heuristic", "ray": "local", "actors": 2}


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A one-node Ray cluster of this process with 3 CPUs (two self-play actors and
    the Reanalyse actor), ended after; its address, for other drivers."""
    connect("local", 3)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def test_two_actors_train_checkpoint_and_survive_the_kill_of_one(
    cluster, tmp_path: Path, small
) -> None:
    lines: list[str] = []
    trainer = Trainer(
        small,
        MuZeroSolver().config(DISTRIBUTED),
        seed=0,
        checkpoint_dir=tmp_path,
        log=lines.append,
    )
    killed: list[int] = []

    def kill_one(done, elapsed_s) -> None:
        if trainer.counters.games >= 8 and not killed:
            assert trainer.actors is not None
            ray.kill(trainer.actors.actors[0], no_restart=False)  # Ray restarts it
            killed.append(trainer.counters.games)

    try:
        answer = trainer.run(games=32, on_game=kill_one)
        actors = trainer.actors
        assert actors is not None
        # On a loaded machine the restarted actor and the Reanalyse actor (each compiling
        # its networks first) can come late to a run this short: play on until both have.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
            actors.reanalysed > 0 and all(calls > 2 for calls in actors.calls)
        ):
            answer = trainer.run(games=trainer.counters.games + 4)
        assert actors.deaths == 1
        assert any("self-play actor 0 died" in line for line in lines)
        assert trainer.counters.games >= 32 and trainer.counters.learner_steps > 0
        assert actors.reanalysed > 0  # the Reanalyse actor searched kept positions
        # both actors played after the kill: the restarted one too
        assert all(calls > 2 for calls in actors.calls)
    finally:
        trainer.close()
    assert check_solution(small, answer).ok
    assert (tmp_path / CHECKPOINT_NAME).exists()
    # the distributed run's checkpoint resumes in one process, and the other way round
    local = Trainer(
        small,
        MuZeroSolver().config(TINY | {"demonstrations": "heuristic"}),
        seed=0,
        checkpoint_dir=tmp_path,
    )
    assert local.resumed and local.counters.games == trainer.counters.games


def test_a_shared_agent_trains_on_actors(cluster) -> None:
    programs = [load_workload("synthetic-v1/small"), load_workload("xla-v1/gru_infer")]
    one_actor = DISTRIBUTED | {"actors": 1, "reanalyse_fraction": 0}  # one process to start
    trainer = SharedTrainer(programs, MuZeroSolver().config(one_actor), seed=0)
    try:
        answers = trainer.run(games=12)
    finally:
        trainer.close()
    assert all(t.counters.games > 0 for t in trainer.trainers)
    for inst, answer in zip(programs, answers):
        assert check_solution(inst, answer).ok


def test_a_cluster_with_fewer_cpus_than_actors_is_refused(cluster) -> None:
    with pytest.raises(SolverError, match="fewer than the 4096 actors"):
        connect("local", 4096)


def test_local_starts_a_cluster_here_even_where_ray_address_names_one(monkeypatch) -> None:
    """``local`` is a cluster started in this process: Ray is told so, for without an
    address it joins the cluster ``RAY_ADDRESS`` (or the last ``ray start``) names and
    refuses the CPU count there; a cluster Ray cannot start is one line. (``ray.init`` is
    a stand-in: no cluster starts.)"""
    calls: list[dict] = []
    failure: list[Exception] = []

    def init(**kwargs) -> None:
        calls.append(kwargs)
        if failure:
            raise failure[0]

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 4.0})
    connect("local", 3)
    assert calls[0]["address"] == "local" and calls[0]["num_cpus"] >= 3
    failure.append(RuntimeError("the raylet died\nmore of its log"))
    with pytest.raises(SolverError, match=r"^ray local: .*RuntimeError: the raylet died\)$"):
        connect("local", 3)


@pytest.mark.parametrize(
    ("address", "message"),
    [("127.0.0.1:1", "no Ray cluster answers there"), ("nowhere", "give local, auto or HOST:PORT")],
)
def test_an_address_without_a_cluster_is_one_line_at_once(
    tmp_path: Path, capsys, address: str, message: str
) -> None:
    argv = ["train", "synthetic-v1/small", "--dir", str(tmp_path), "--work", "1"]
    assert main([*argv, "--ray", address, *TINY_ARGS]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / CHECKPOINT_NAME).exists()  # refused before anything ran


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--ray", "local", "--option", "actors=5"], "give actors once"),
        (["--ray", "local", "--option", "ray=auto"], "give ray once"),
        (["--ray", "none", "--actors", "3"], "--ray needs local, auto or HOST:PORT"),
        (["--ray", "", "--actors", "3"], "--ray needs local, auto or HOST:PORT"),
    ],
)
def test_a_setting_the_ray_flags_would_override_is_refused(
    tmp_path: Path, capsys, extra: list[str], needle: str
) -> None:
    for command in (["train", "synthetic-v1/small"], ["train-agent", "synthetic-v1/small"]):
        argv = [*command, "--dir", str(tmp_path / command[0]), "--work", "1", *extra]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err
        assert not (tmp_path / command[0]).exists()


def test_a_killed_distributed_run_resumes(cluster: str, tmp_path: Path, capsys) -> None:
    """The whole run (its driver, and with it its actors) is killed once its first
    checkpoint holds a game; the same command resumes and finishes (run here, a driver
    on the same cluster: starting a second process would only repeat the imports)."""
    run_dir = tmp_path / "run"
    args = [
        "train",
        "synthetic-v1/small",
        "--dir",
        str(run_dir),
        "--ray",
        cluster,
        "--actors",
        "2",
        *TINY_ARGS,
        "--option",
        "reanalyse_fraction=0",  # the two self-play actors alone: fewer processes to start
        "--option",
        "checkpoint_seconds=0.5",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "mallocgame.cli", *args, "--work", "100000"]
    kill_after_first_checkpoint(command, run_dir, env, timeout_s=300)
    inst = load_workload("synthetic-v1/small")
    config = MuZeroSolver().config(TINY | {"reanalyse_fraction": 0})  # the command's settings
    saved = Trainer(inst, config, seed=0, checkpoint_dir=run_dir)
    assert saved.resumed and saved.counters.games > 0
    done_before = saved.counters.games
    capsys.readouterr()
    assert main([*args, "--work", str(done_before + 8)]) == 0
    err = capsys.readouterr().err
    assert "resumed from" in err and f"self-play on 2 Ray actors ({cluster})" in err
    final = load_solution(run_dir / "final.solution.json")
    assert check_solution(inst, final).ok
    assert final.work["games"] >= done_before + 8
    assert final.reward_s >= saved.best_return - 1e-12


def test_a_trainer_starts_its_actors_once_and_only_with_ray() -> None:
    from types import SimpleNamespace

    from mallocgame.solvers.muzero.distributed import RayActorsOwner

    class Owner(RayActorsOwner):
        def __init__(self, ray_address: str | None) -> None:
            self.config = SimpleNamespace(ray=ray_address)  # type: ignore[assignment]
            self.started: list[SimpleNamespace] = []

        def _start_actors(self):  # type: ignore[override]
            actors = SimpleNamespace(closed=0)
            actors.close = lambda: setattr(actors, "closed", actors.closed + 1)
            self.started.append(actors)
            return actors

    alone = Owner(None)
    assert alone.self_play_actors() is None and alone.started == []
    alone.close()  # nothing to end

    owner = Owner("local")
    first = owner.self_play_actors()
    assert owner.self_play_actors() is first and owner.started == [first]
    owner.close()
    owner.close()
    assert first.closed == 1 and owner.actors is None
    assert owner.self_play_actors() is not first and len(owner.started) == 2


class _FakeRay:
    """Ray as :class:`SelfPlayActors` uses it, with each call's result given by the test:
    ``results[n]`` for the n-th call sent (absent: still running)."""

    exceptions = ray.exceptions

    def __init__(self, results: dict[int, object]) -> None:
        self.results = results
        self.timeouts: list[float | None] = []

    def wait(self, refs, num_returns, timeout=None):
        self.timeouts.append(timeout)
        ready = [r for r in refs if r in self.results][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref):
        result = self.results[ref]
        if isinstance(result, BaseException):
            raise result
        return result

    def put(self, value):
        return value


def _fake_actors(fake: _FakeRay, log: list[str]):
    """One self-play actor on ``fake``, without a cluster: the n-th call sent is ref n."""
    from types import SimpleNamespace

    from mallocgame.solvers.muzero.distributed import SelfPlayActors

    sent = iter(range(100))
    handle = SimpleNamespace(play=SimpleNamespace(remote=lambda *args: next(sent)))
    actors = object.__new__(SelfPlayActors)  # __init__ would start Ray actors
    vars(actors).update(
        _ray=fake,
        config=SimpleNamespace(train_every=1),
        restart_actions=lambda program: (),
        log=log.append,
        programs=[[0]],
        actors=[handle],
        calls=[0],
        reanalysed=0,
        deaths=0,
        _down=set(),
        _pending={},
        _params_ref=None,
        _params_version=-1,
        _reanalysis=None,
        reanalyse_actor=None,
    )
    return actors


def test_collect_waits_at_most_a_second_so_the_trainer_sees_its_clock() -> None:
    from mallocgame.solvers.muzero.distributed import WAIT_S

    fake = _FakeRay({})  # the call never finishes
    actors = _fake_actors(fake, [])
    assert actors.collect(params=[0.0], version=0, temperature=1.0) == []
    assert fake.timeouts == [WAIT_S] and WAIT_S <= 1.0
    assert actors.calls == [1]  # the call in flight is left running, not sent again
    assert actors.collect(params=[0.0], version=0, temperature=1.0) == [] and actors.calls == [1]


def test_a_result_lost_with_its_node_is_a_death_and_the_run_goes_on() -> None:
    lost = ray.exceptions.ObjectLostError("ab" * 14, "", "")
    log: list[str] = []
    fake = _FakeRay({0: lost, 1: "moves"})
    actors = _fake_actors(fake, log)
    assert actors.collect(params=[0.0], version=0, temperature=1.0) == []
    assert actors.deaths == 1 and "self-play actor 0 died (ObjectLostError)" in log[0]
    assert actors.collect(params=[0.0], version=0, temperature=1.0) == ["moves"]
    assert actors.calls == [3]  # the next call is sent with each result


def test_an_actor_whose_call_raises_ends_the_run_in_one_line() -> None:
    bug = ray.exceptions.RayTaskError("play", "Traceback ...", ValueError("boom\nmore"))
    actors = _fake_actors(_FakeRay({0: bug.as_instanceof_cause()}), [])
    with pytest.raises(SolverError, match=r"^self-play actor 0 failed: ValueError: boom$"):
        actors.collect(params=[0.0], version=0, temperature=1.0)
