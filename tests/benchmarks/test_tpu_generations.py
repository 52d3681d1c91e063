"""The TPU generations survey: a model outside the tpu-v1 suite is refused before any
compile, not recorded as libtpu's refusal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

tpu_generations = load_benchmark("tpu_generations")


def test_an_unknown_model_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    out = tmp_path / "records" / "generations.jsonl"
    argv = ["tpu_generations.py", "--models", "alexnet_nosuch", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(tpu_generations, "_survey", lambda *args: pytest.fail("compiled"))
    with pytest.raises(SystemExit) as stop:
        tpu_generations.main()
    assert stop.value.code == 2
    assert "--models alexnet_nosuch: not in the tpu-v1 suite" in capsys.readouterr().err
    assert not out.parent.exists()


def _run(monkeypatch, *argv: str) -> None:
    monkeypatch.setattr(sys, "argv", ["tpu_generations.py", *argv])
    tpu_generations.main()


FOUND = {"seconds": 1.0, "copies": 2, "spaces": [0, 1], "legal_ok": True}
RECORD = json.dumps({"model": "alexnet_train_b32", "target": "tpu-v5p", **FOUND}) + "\n"


def test_a_cut_off_last_line_is_left_out_and_the_run_goes_on(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A last line cut off by an interrupted run was a JSONDecodeError on resuming."""
    out = tmp_path / "generations.jsonl"
    out.write_text(RECORD + '{"model": "gru_infer_b512", "target": "tp')
    surveyed = []

    def survey(name, model, target):
        surveyed.append((name, target))
        return FOUND

    monkeypatch.setattr(tpu_generations, "_survey", survey)
    models = ["--models", "alexnet_train_b32", "gru_infer_b512", "--targets", "tpu-v5p"]
    _run(monkeypatch, *models, "--out", str(out))
    assert surveyed == [("gru_infer_b512", "tpu-v5p")]  # the whole record's pair skipped
    assert "its last line is cut off (an interrupted write)" in capsys.readouterr().err
    lines = out.read_text().splitlines()
    assert lines[0] == RECORD.strip() and len(lines) == 2  # the cut line gone
    assert json.loads(lines[1]) == {"model": "gru_infer_b512", "target": "tpu-v5p", **FOUND}
    _run(monkeypatch, "--summary", "--out", str(out))
    assert "| tpu-v5p | 2 | 0 | 2 | 4 | [0, 1] |" in capsys.readouterr().out


@pytest.mark.parametrize(
    "text, argv, needle",
    [
        ('{"model": "a"\n' + RECORD, [], "generations.jsonl: line 1 is not JSON"),
        ("[1]\n", ["--summary"], "line 1 is not a record"),
        (None, ["--summary"], "--summary of {out}: no such file"),
        ("folder", [], "{out}: a directory, not a file"),
    ],
)
def test_what_it_cannot_read_or_write_is_one_line_before_any_compile(
    tmp_path: Path, monkeypatch, capsys, text, argv: list[str], needle: str
) -> None:
    """A line that is not JSON was a traceback, a --summary of no file an empty table,
    and --out DIR an IsADirectoryError after the first compile."""
    out = tmp_path / "generations.jsonl"
    if text == "folder":
        out.mkdir()
    elif text is not None:
        out.write_text(text)
    monkeypatch.setattr(tpu_generations, "_survey", lambda *args: pytest.fail("compiled"))
    with pytest.raises(SystemExit) as stop:
        _run(monkeypatch, *argv, "--models", "alexnet_train_b32", "--out", str(out))
    err = capsys.readouterr().err
    assert stop.value.code == 2 and needle.format(out=out) in err.splitlines()[-1]
    assert "Traceback" not in err
