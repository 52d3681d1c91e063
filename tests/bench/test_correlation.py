"""Reward against simulated latency."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mallocgame.bench.correlation import (
    format_correlation,
    format_training_correlation,
    plot_training_correlation,
    reward_latency_correlation,
    training_correlation,
    write_training_csv,
)
from mallocgame.cli import main
from mallocgame.errors import MallocGameError


def test_reward_and_latency_are_negatively_correlated() -> None:
    row = reward_latency_correlation("xla-v1/resnet_infer", random_games=8)
    assert row.solutions == 10
    assert row.pearson < -0.5  # more reward, less latency
    assert 1.0 < row.min_speedup <= row.max_speedup
    assert "xla-v1/resnet_infer | 10 |" in format_correlation([row])


def test_the_cli_docs_name_every_solution_scored() -> None:
    """docs/cli.md's ``bench correlation`` says what the --games + 2 solutions are: the
    random games, the heuristic's mapping and its projection onto a game."""
    docs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    line = " ".join(docs.split("- `bench correlation`:", 1)[1].split(";", 1)[0].split())
    assert "random games, the heuristic's mapping and its projection onto a game" in line


def test_training_correlation_samples_games_across_one_run(tmp_path: Path) -> None:
    from tests.solvers.muzero.test_muzero_train import TINY

    options = {**TINY, "demonstrations": ""}
    row = training_correlation("xla-v1/lstm_infer", games=12, seed=0, samples=5, options=options)
    assert row.games >= 12 and len(row.samples) == 5
    assert (
        next(s.game for s in row.samples) == 1 and row.samples[-1].game == row.games
    )  # first to last game
    times = [s.elapsed_s for s in row.samples]
    assert times == sorted(times)
    for s in row.samples:
        assert 0.0 <= s.normalized_reward <= 1.0 and s.latency_s > 0 and s.speedup > 0
    assert row.distinct_rewards > 1 and -1.0 <= row.pearson < 0  # more reward, less latency
    assert row.answer_speedup > 0
    again = training_correlation("xla-v1/lstm_infer", games=12, seed=0, samples=5, options=options)
    assert [s.normalized_reward for s in again.samples] == [
        s.normalized_reward for s in row.samples
    ]
    write_training_csv([row], tmp_path / "t.csv")
    plot_training_correlation([row], tmp_path / "t.png")
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert (
        lines[0] == "program,seed,game,elapsed_s,normalized_reward,latency_s,speedup"
        and len(lines) == 6
    )
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert "| xla-v1/lstm_infer |" in format_training_correlation([row])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"games": 4, "samples": 1}, "samples must be at least 2"),
        ({}, "needs a budget"),
        ({"seconds": float("nan"), "games": 4}, "seconds must be a finite number of seconds"),
        ({"seconds": -1.0}, "seconds must be a finite number of seconds"),
        ({"games": 4, "options": {"checkpoint_dir": "d"}}, "drop the setting checkpoint_dir"),
        ({"games": 4, "options": {"progress": "true"}}, "drop the setting progress"),
    ],
)
def test_training_correlation_refuses_bad_settings(kwargs, message) -> None:
    with pytest.raises(MallocGameError, match=message):
        training_correlation("xla-v1/lstm_infer", **kwargs)


@pytest.mark.parametrize(
    "options", [{"progress": "false"}, {"checkpoint_dir": ""}, {"checkpoint_dir": "none"}]
)
def test_training_correlation_takes_settings_that_ask_for_what_it_does(options) -> None:
    """progress=false and checkpoint_dir= (none) were refused as settings it would ignore,
    though they ask for what the run does; the refusal stands only for asking otherwise.
    (An unknown program, read after the settings, shows they passed.)"""
    with pytest.raises(MallocGameError, match="nope/x"):
        training_correlation("nope/x", games=4, options=options)


def test_a_program_name_with_dollars_is_drawn_as_written(tmp_path: Path) -> None:
    """The program's name (a panel's title) holding ``$...$`` is drawn letter for letter,
    not read as mathematics (an error where it is not TeX)."""
    from mallocgame.bench.correlation import TrainingCorrelation, TrainingSample

    samples = tuple(
        TrainingSample("d/gru$x^$", float(i), i + 1, 0.1 * i, 1e-3 * (5 - i), 1.0) for i in range(3)
    )
    row = TrainingCorrelation("d/gru$x^$", 1.0, 0, 3, samples, -1.0, 1.0)
    plot_training_correlation([row], tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_a_correlation_of_equal_latencies_is_not_available(tmp_path: Path) -> None:
    """No fast memory: every answer is all-slow, so Pearson is undefined (no warning)."""
    import warnings

    with pytest.raises(MallocGameError, match="random_games must be"):
        reward_latency_correlation("xla-v1/lstm_infer", random_games=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        row = reward_latency_correlation(str(_no_fast_memory(tmp_path)), random_games=2)
    assert np.isnan(row.pearson) and row.solutions == 4
    assert "| 4 | n/a | 1.000 – 1.000 |" in format_correlation([row])


def _no_fast_memory(folder: Path) -> Path:
    """xla-v1/lstm_infer with a fast memory of 0 bytes, as a file in ``folder``."""
    import dataclasses

    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    inst = load_workload("xla-v1/lstm_infer")
    hardware = dataclasses.replace(inst.hardware, fast_memory_bytes=0)
    save_instance(dataclasses.replace(inst, hardware=hardware, document=None), folder / "0.json")
    return folder / "0.json"


def test_cli_training_correlation_checks_its_outputs_before_training(tmp_path, capsys) -> None:
    (tmp_path / "afile").write_text("")
    argv = ["--training", "5", "--programs", "xla-v1/lstm_infer"]
    assert main(["bench", "correlation", *argv, "--out", str(tmp_path / "afile" / "t")]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "games" not in err  # no training ran


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--training", "5", "--out", "x"], "--training needs --programs"),
        (["--training", "5", "--programs", "xla-v1/lstm_infer"], "--training needs --out"),
        (["--out", "x"], "--out, --option, --samples and --seed go with --training"),
        (["--out", ""], "--out, --option, --samples and --seed go with --training"),  # was taken
        (["--seed", "3"], "--out, --option, --samples and --seed go with --training"),
        (["--samples", "5"], "--out, --option, --samples and --seed go with --training"),
        (
            ["--training", "5", "--programs", "xla-v1/lstm_infer", "--out", "x", "--games", "9"],
            "--games is the random games' count: drop it with --training",
        ),
        (
            [
                "--training",
                "5",
                "--programs",
                "xla-v1/lstm_infer",
                "--out",
                "x",
                "--option",
                "nonsense=1",
            ],
            "nonsense",
        ),
        (
            ["--training", "5", "--programs", "xla-v1/lstm_infer", "--out", "x"]
            + ["--option", "progress_seconds=1"],
            "prints no progress lines: drop the setting progress_seconds",
        ),
    ],
)
def test_cli_training_correlation_bad_options(argv, message, capsys) -> None:
    assert main(["bench", "correlation", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
