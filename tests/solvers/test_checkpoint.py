"""Reading a learning solver's checkpoint: damaged files and other runs' files are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from mallocgame.errors import SolverError
from mallocgame.solvers.checkpoint import restore_checkpoint

serialization = pytest.importorskip("flax.serialization")


def _write(path: Path, state: object) -> Path:
    path.write_bytes(serialization.msgpack_serialize(state))
    return path


def test_a_checkpoint_of_this_run_is_read_back(tmp_path: Path) -> None:
    path = _write(tmp_path / "c", {"fingerprint": {"seed": 3, "instance": "abc"}, "step": 7})
    state = restore_checkpoint(path, {"seed": 3, "instance": "abc"}, "remove it")
    assert state["step"] == 7


def test_another_runs_checkpoint_names_the_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "c", {"fingerprint": {"seed": 3, "instance": "abc"}})
    with pytest.raises(SolverError, match=r"different seed \(use another --dir\)"):
        restore_checkpoint(path, {"instance": "abc", "seed": 4}, "use another --dir")
    with pytest.raises(SolverError, match="different instance"):
        restore_checkpoint(_write(tmp_path / "d", {"step": 1}), {"instance": "abc"}, "x")


@pytest.mark.parametrize("data", [b"not msgpack at all \xff\x00", serialization.msgpack_serialize([1, 2])])
def test_a_damaged_file_is_refused(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "c").write_bytes(data)
    with pytest.raises(SolverError, match="not a readable checkpoint"):
        restore_checkpoint(tmp_path / "c", {"seed": 0}, "x")
