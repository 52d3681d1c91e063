"""Reward-against-time curves."""

from __future__ import annotations

from pathlib import Path

from mallocgame.bench.rewards import final_table, plot_curves, reward_curve, write_csv
from mallocgame.cli import main


def test_curve_is_monotone_and_files_are_written(tmp_path: Path) -> None:
    points = reward_curve("xla-v1/lstm_infer", "random", seconds=0.5, seed=0)
    rewards = [p.normalized_reward for p in points]
    assert rewards == sorted(rewards) and points[-1].elapsed_s >= points[0].elapsed_s
    assert "games=" in points[-1].work
    write_csv(points, tmp_path / "r.csv")
    plot_curves(points, tmp_path / "r.png", bounds={"xla-v1/lstm_infer": 0.95})
    assert (tmp_path / "r.csv").read_text().startswith("program,solver,seed")
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert f"{rewards[-1]:.4f}" in final_table(points)


def test_cli_bench_rewards(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rw"
    assert main(["bench", "rewards", "--programs", "xla-v1/lstm_infer", "--solvers", "random", "greedy",
                 "--budget", "0.3", "--out", str(out)]) == 0
    assert "| xla-v1/lstm_infer |" in capsys.readouterr().out
    assert out.with_suffix(".csv").exists() and out.with_suffix(".png").exists()
