"""The TPU generations survey: a model outside the tpu-v1 suite is refused before any
compile, not recorded as libtpu's refusal."""

from __future__ import annotations

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
