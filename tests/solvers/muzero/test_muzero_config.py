"""MuZero settings from solver options."""

from __future__ import annotations

import pytest

from mallocgame.errors import SolverError
from mallocgame.solvers.muzero.config import MuZeroConfig, config_from_options


def test_options_by_field_name() -> None:
    cfg = config_from_options({"num_simulations": "32", "learning_rate": 3e-4, "conv_channels": "4,8",
                               "obs_grid_steps": 16, "search": "muzero", "rescale_q": "true",
                               "greedy_games": 1})
    assert cfg.num_simulations == 32 and cfg.learning_rate == 3e-4 and cfg.conv_channels == (4, 8)
    assert cfg.observation.grid_steps == 16 and cfg.search == "muzero" and cfg.rescale_q is True
    assert cfg.greedy_games == 1
    assert MuZeroConfig().num_simulations == 16  # defaults untouched


@pytest.mark.parametrize(
    "options, message",
    [
        ({"nope": 1}, "unknown muzero option"),
        ({"num_simulations": "many"}, "cannot use"),
        ({"num_simulations": 0}, "at least 1"),
        ({"search": "alphazero"}, "search must be"),
        ({"discount": 1.5}, "discount"),
        ({"obs_grid_steps": 7}, "observation options"),
        ({"reanalyse_fraction": 0.5}, "Reanalyse"),
        ({"greedy_games": 17}, "greedy_games"),
    ],
)
def test_bad_options_are_solver_errors(options: dict, message: str) -> None:
    with pytest.raises(SolverError, match=message):
        config_from_options(options)
