"""The self-play throughput benchmark: each measurement is printed and written as soon as
it is made, and the default program is the one of the committed results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import mallocgame.solvers.muzero.distributed as distributed
from tests.benchmarks import BENCHMARKS, load_benchmark

distributed_selfplay = load_benchmark("distributed_selfplay")

COMMITTED = BENCHMARKS.parent / "docs" / "results" / "distributed" / "selfplay-2core.jsonl"


def test_each_row_is_out_as_soon_as_it_is_measured(tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "runs" / "selfplay.jsonl"
    programs, seen = [], []

    def written() -> list[str]:
        return [json.loads(line)["measure"] for line in out.read_text().splitlines()]

    def selfplay(program, seconds, actors, seed):
        programs.append(program)
        seen.append(written() if out.exists() else [])
        assert len(capsys.readouterr().out.splitlines()) == (1 if actors else 0)
        return {"measure": "selfplay", "actors": actors or 0, "steps_per_s": 10.0, "trainer": 0}

    def learner(trainer, steps, device):
        seen.append(written())
        return {"measure": "learner", "device": str(device)}

    monkeypatch.setattr(distributed_selfplay, "_selfplay", selfplay)
    monkeypatch.setattr(distributed_selfplay, "_learner", learner)
    monkeypatch.setattr(distributed, "connect", lambda *args: None)  # no Ray
    argv = ["distributed_selfplay.py", "--actors", "1", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    distributed_selfplay.main()
    assert seen[:3] == [[], ["selfplay"], ["selfplay", "selfplay"]]
    committed = json.loads(COMMITTED.read_text().splitlines()[0])
    assert programs == [committed["program"]] * 2  # the default: what was run


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--seconds", "-1"], "argument --seconds: seconds must be a finite number"),
        (["--actors", "0"], "argument --actors: must be at least 1, not 0"),
        (["--learner-steps", "0"], "argument --learner-steps: must be at least 1, not 0"),
        (["--seed", "-2"], "argument --seed: must be at least 0, not -2"),
    ],
)
def test_a_bad_argument_is_a_usage_error(argv, said, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["distributed_selfplay.py", *argv])
    with pytest.raises(SystemExit) as stop:
        distributed_selfplay.main()
    assert stop.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--program", "xla-v1/nosuch"], "xla-v1/nosuch: neither a bundled workload"),
        (["--out", "{tmp}"], "a directory, not a file"),
        (["--out", "{tmp}/file/selfplay.jsonl"], "file is not a folder"),
    ],
)
def test_a_program_or_out_it_cannot_use_is_refused_before_ray_starts(
    argv, said, tmp_path: Path, monkeypatch, capsys
) -> None:
    """An unknown program was a traceback after Ray had started, and a bad --out one before."""
    (tmp_path / "file").write_text("a file")
    monkeypatch.setattr(distributed, "connect", lambda *args: pytest.fail("Ray started"))
    monkeypatch.setattr(distributed_selfplay, "_selfplay", lambda *args: pytest.fail("trained"))
    argv = [a.format(tmp=tmp_path) for a in argv]
    monkeypatch.setattr(sys, "argv", ["distributed_selfplay.py", *argv])
    with pytest.raises(SystemExit) as stop:
        distributed_selfplay.main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err.splitlines()[-1] and "Traceback" not in err
