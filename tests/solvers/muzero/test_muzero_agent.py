"""A trained agent as the start of a run (``init``), and zero-shot play (``learning=false``)."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from mallocgame.check import check_solution
from mallocgame.cli import main
from mallocgame.errors import SolverError
from mallocgame.solvers.checkpoint import CHECKPOINT_NAME
from mallocgame.solvers.muzero.agent import load_agent_params
from mallocgame.solvers.muzero.solver import MuZeroSolver
from mallocgame.solvers.muzero.train import Trainer
from tests.solvers.muzero.test_muzero_train import TINY, TINY_ARGS

HEURISTIC_ONLY = {**TINY, "demonstrations": "heuristic"}


def _trained(folder: Path, small) -> Trainer:
    trainer = Trainer(small, MuZeroSolver().config(HEURISTIC_ONLY), seed=0, checkpoint_dir=folder)
    trainer.run(games=3 * TINY["parallel_games"])
    assert trainer.counters.learner_steps > 0
    return trainer


def _same(a, b) -> bool:
    return all(
        jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda x, y: np.array_equal(x, y), a, b))
    )


def test_a_run_starts_from_the_agents_network_and_not_its_state(tmp_path: Path, small) -> None:
    trained = _trained(tmp_path / "agent", small)
    for init in (tmp_path / "agent", tmp_path / "agent" / CHECKPOINT_NAME):  # folder or file
        config = MuZeroSolver().config({**HEURISTIC_ONLY, "init": str(init)})
        fresh = Trainer(small, config, seed=1)
        assert _same(fresh.params, trained.params)
        assert fresh.counters.games == 0 and fresh.replay.positions == 0
    scratch = Trainer(small, MuZeroSolver().config(HEURISTIC_ONLY), seed=1)
    assert not _same(scratch.params, trained.params)


def test_a_resumed_run_keeps_its_own_network_not_the_agents(tmp_path: Path, small) -> None:
    trained = _trained(tmp_path / "agent", small)
    config = MuZeroSolver().config({**HEURISTIC_ONLY, "init": str(tmp_path / "agent")})
    first = Trainer(small, config, seed=1, checkpoint_dir=tmp_path / "run")
    first.run(games=3 * TINY["parallel_games"])
    resumed = Trainer(small, config, seed=1, checkpoint_dir=tmp_path / "run")
    assert resumed.resumed and _same(resumed.params, first.params)
    assert not _same(resumed.params, trained.params)


def test_zero_shot_play_never_trains(tmp_path: Path, small) -> None:
    trained = _trained(tmp_path / "agent", small)
    config = MuZeroSolver().config(
        {**TINY, "init": str(tmp_path / "agent"), "learning": "false", "demonstrations": ""}
    )
    zero_shot = Trainer(small, config, seed=0)
    answer = zero_shot.run(games=3 * TINY["parallel_games"])
    assert zero_shot.counters.learner_steps == 0 and _same(zero_shot.params, trained.params)
    assert check_solution(small, answer).ok


def test_a_checkpoint_written_before_the_trainer_key_is_an_agent(tmp_path: Path, small) -> None:
    """A one-program checkpoint without "trainer" in its fingerprint (written before the
    key existed: ``train`` resumes it, its "answer" naming muzero) starts a run too; it was
    refused as "not a muzero agent's checkpoint (written by None)"."""
    from flax import serialization

    trained = _trained(tmp_path / "agent", small)
    file = tmp_path / "agent" / CHECKPOINT_NAME
    state = serialization.msgpack_restore(file.read_bytes())
    del state["fingerprint"]["trainer"]
    file.write_bytes(serialization.msgpack_serialize(state))
    config = MuZeroSolver().config({**HEURISTIC_ONLY, "init": str(tmp_path / "agent")})
    assert _same(Trainer(small, config, seed=1).params, trained.params)


def test_an_agent_of_another_network_is_refused_by_name(tmp_path: Path, small) -> None:
    _trained(tmp_path / "agent", small)
    config = MuZeroSolver().config({**HEURISTIC_ONLY, "width": 64})
    template = Trainer(small, config, seed=0).params
    with pytest.raises(SolverError, match="width 32 \\(this run: 64\\)"):
        load_agent_params(tmp_path / "agent", config, template)


def test_a_missing_or_foreign_agent_is_refused(tmp_path: Path, small, capsys) -> None:
    with pytest.raises(SolverError, match="no muzero checkpoint"):
        load_agent_params(tmp_path / "nothing", MuZeroSolver().config(TINY), {})
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / CHECKPOINT_NAME).write_bytes(b"not msgpack")
    with pytest.raises(SolverError, match="not a readable checkpoint"):
        load_agent_params(tmp_path / "bad", MuZeroSolver().config(TINY), {})
    code = main(
        ["solve", "synthetic-v1/small", "--solver", "muzero", "--work", "1", *TINY_ARGS]
        + ["--option", f"init={tmp_path / 'nothing'}", "--out", str(tmp_path / "a.json")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "no muzero checkpoint" in err and "Traceback" not in err
    assert not (tmp_path / "a.json").exists()


def _int_bias(state: dict) -> None:
    bias = state["params"]["params"]["dynamics"]["Dense_0"]["bias"]
    state["params"]["params"]["dynamics"]["Dense_0"]["bias"] = np.zeros(bias.shape, np.int32)


def test_a_tampered_agent_is_refused_in_one_line(tmp_path: Path, small, capsys) -> None:
    """Settings that are no JSON object, parameters that are no mapping and an array of
    integers (of the right shape) are refused by name; they gave an AttributeError, and
    the integers JAX's TypeError at the first learner step."""
    from flax import serialization

    _trained(tmp_path / "agent", small)
    saved = (tmp_path / "agent" / CHECKPOINT_NAME).read_bytes()
    config = MuZeroSolver().config(HEURISTIC_ONLY)
    template = Trainer(small, config, seed=0).params
    tampered = tmp_path / "tampered.msgpack"
    for change, message in (
        (lambda state: state["fingerprint"].update(config="[1, 2]"), "not a JSON object"),
        (lambda state: state.update(params="weights"), "network is unreadable"),
        (_int_bias, "its network's arrays are int32, not floating point"),
    ):
        state = serialization.msgpack_restore(saved)
        change(state)
        tampered.write_bytes(serialization.msgpack_serialize(state))
        with pytest.raises(SolverError, match=message):
            load_agent_params(tampered, config, template)
        code = main(
            ["solve", "synthetic-v1/small", "--solver", "muzero", "--work", "1", *TINY_ARGS]
            + ["--option", f"init={tampered}", "--out", str(tmp_path / "a.json")]
        )
        err = capsys.readouterr().err
        assert code == 2 and message in err and "Traceback" not in err
        assert not (tmp_path / "a.json").exists()
    state = serialization.msgpack_restore(saved)  # another floating type: cast to this run's
    dense = state["params"]["params"]["dynamics"]["Dense_0"]
    dense["bias"] = dense["bias"].astype(np.float16)
    tampered.write_bytes(serialization.msgpack_serialize(state))
    bias = load_agent_params(tampered, config, template)["params"]["dynamics"]["Dense_0"]["bias"]
    assert bias.dtype == template["params"]["dynamics"]["Dense_0"]["bias"].dtype
