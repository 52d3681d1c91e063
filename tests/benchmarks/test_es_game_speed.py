"""The es game benchmark: three ways of playing give one game, and a row a program."""

from __future__ import annotations

import sys

import pytest

from tests.benchmarks import load_benchmark

es_game_speed = load_benchmark("es_game_speed")


def test_a_row_for_a_program_whose_game_backs_up(monkeypatch, capsys) -> None:
    argv = ["es_game_speed.py", "--programs", "xla-v1/lstm_lm_train", "--repeat", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    es_game_speed.main()
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[:3] == ["xla-v1/lstm_lm_train", "1083", "65"]  # buffers, back-ups
    assert len(row) == 6 and all(cell.endswith("s") for cell in row[3:])


def test_the_full_replay_is_put_back() -> None:
    bench = es_game_speed
    short = bench.es_module.DropBackup
    inst = bench.load_workload("xla-v1/gru_infer")
    shape = bench.LinearPolicyShape(0)
    theta = shape.initial(bench.EsConfig(), bench.np.random.default_rng(0))
    bench._play(bench._Player(inst, None, shape), theta, "full replay")
    assert bench.es_module.DropBackup is short


@pytest.mark.parametrize("repeat", ["0", "-1", "1.5"])
def test_repeat_is_a_whole_number_of_at_least_one(repeat: str, monkeypatch, capsys) -> None:
    argv = ["es_game_speed.py", "--programs", "xla-v1/gru_infer", "--repeat", repeat]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(es_game_speed, "load_workload", lambda name: pytest.fail("played"))
    with pytest.raises(SystemExit) as stop:
        es_game_speed.main()
    assert stop.value.code == 2 and "argument --repeat" in capsys.readouterr().err


def test_an_unknown_program_is_a_usage_error_before_any_game(monkeypatch, capsys) -> None:
    argv = ["es_game_speed.py", "--programs", "xla-v1/gru_infer", "xla-v1/nosuch"]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(es_game_speed, "load_workload", lambda name: pytest.fail("played"))
    with pytest.raises(SystemExit) as stop:
        es_game_speed.main()
    assert stop.value.code == 2 and "xla-v1/nosuch: neither" in capsys.readouterr().err
