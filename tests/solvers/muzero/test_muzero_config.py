"""MuZero settings from solver options."""

from __future__ import annotations

import pytest

from mallocgame.errors import SolverError
from mallocgame.solvers.muzero.config import MuZeroConfig
from mallocgame.solvers.muzero.solver import MuZeroSolver


def test_options_by_field_name() -> None:
    cfg = MuZeroSolver().config(
        {
            "num_simulations": "32",
            "learning_rate": 3e-4,
            "conv_channels": "4,8",
            "observation.grid_steps": 16,
            "search": "muzero",
            "rescale_q": "true",
            "greedy_games": 1,
        }
    )
    assert cfg.num_simulations == 32 and cfg.learning_rate == 3e-4 and cfg.conv_channels == (4, 8)
    assert cfg.observation.grid_steps == 16 and cfg.search == "muzero" and cfg.rescale_q is True
    assert cfg.greedy_games == 1
    assert MuZeroConfig().num_simulations == 16  # defaults untouched


@pytest.mark.parametrize(
    "options, message",
    [
        ({"nope": 1}, "muzero: unknown option 'nope'"),
        ({"num_simulations": "many"}, "option num_simulations must be a whole number"),
        (
            {"num_simulations": 0},
            r"^muzero: option num_simulations must be in \[1, 10000\], "
            r"not 0$",
        ),
        ({"search": "alphazero"}, "option search must be one of 'gumbel', 'muzero'"),
        ({"discount": 1.5}, "discount"),
        ({"observation.grid_steps": 7}, "grid_window .128. must be a multiple of grid_steps"),
        ({"reanalyse_fraction": 1.0}, "reanalyse_fraction"),
        ({"reanalyse_fraction": -0.1}, "reanalyse_fraction"),
        ({"reanalyse_fraction": 0.5, "demonstrations": "heuristic,xla"}, "unknown demonstration"),
        ({"greedy_games": 17}, "greedy_games"),
        ({"q_scale": 0}, "q_scale"),
        ({"q_scale_per_buffer": -0.001}, "q_scale_per_buffer"),
        ({"imitation": -0.1}, "imitation"),
        ({"restart_fraction": 1.5}, "restart_fraction"),
        ({"restart_fraction": -0.5}, "restart_fraction"),
        ({"restart_window": -1}, r"option restart_window must be in \[0, 1000000000\], not -1"),
        ({"restart_window": 8}, "restart_window windows restarts: it needs restart_fraction > 0"),
        (
            {"window_records": True},
            "window_records trains on windowed restarts: it needs restart_window > 0",
        ),
        ({"es_workers": 0}, "es_workers"),
        ({"actors": 3}, "actors=3 counts Ray's self-play actors: it needs ray"),
        ({"actors": 3, "ray": "none"}, "actors=3 counts Ray's self-play actors: it needs ray"),
        ({"es_share": 0}, "es_share"),
        ({"width": 1}, r"option width must be in \[2, 8192\], not 1"),
        ({"demonstrations": "greedy,greedy"}, "demonstrations names one source twice"),
        (
            {"replay_size": 100, "min_replay": 200},
            "min_replay 200 exceeds replay_size 100: the replay would never hold enough",
        ),
    ],
)
def test_bad_options_are_solver_errors(options: dict, message: str) -> None:
    with pytest.raises(SolverError, match=message):
        MuZeroSolver().config(options)


def test_demonstrations_are_a_list() -> None:
    cfg = MuZeroSolver().config(
        {"reanalyse_fraction": "0.5", "demonstrations": " heuristic, greedy "}
    )
    assert cfg.demonstration_sources == ("heuristic", "greedy") and cfg.reanalyse_fraction == 0.5
    assert MuZeroConfig().demonstration_sources == ("heuristic", "greedy", "es")  # the defaults
    assert MuZeroConfig().imitation == 0.5
    assert (
        MuZeroConfig().restart_fraction == 0.0
    )  # an option: a wash over the suite (docs/muzero-experiments.md)
    assert MuZeroConfig().reanalyse_fraction == 0.5  # Table 6
    assert MuZeroSolver().config({"demonstrations": ""}).demonstration_sources == ()
    assert MuZeroSolver().config({"demonstrations": ["es"]}).demonstrations == ("es",)


def test_search_q_scale_is_fixed_or_grows_with_the_buffers() -> None:
    assert MuZeroConfig().search_q_scale(900) == 0.1  # mctx's c_scale
    assert MuZeroConfig(q_scale=0.25).search_q_scale(900) == 0.25
    per_buffer = MuZeroConfig(q_scale=0.25, q_scale_per_buffer=0.002)
    assert per_buffer.search_q_scale(70) == pytest.approx(0.14)
    assert per_buffer.search_q_scale(900) == pytest.approx(1.8)


def test_the_solver_checks_its_options_without_training() -> None:
    from mallocgame.solvers.muzero.solver import MuZeroSolver

    MuZeroSolver().check_options(
        {
            "checkpoint_dir": "runs/x",
            "progress": "true",
            "num_simulations": "8",
            "observation.grid_steps": 16,
        }
    )
    for bad, message in (
        ({"num_simulation": 8}, "unknown option 'num_simulation'"),
        ({"progress": "maybe"}, "progress"),
    ):
        with pytest.raises(SolverError, match=message):
            MuZeroSolver().check_options(bad)
