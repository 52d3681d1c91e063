"""The compiled kernels' cache folder (mallocgame.jit)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mallocgame import jit as jit_module
from mallocgame.jit import fallback_cache_dir


def test_numba_caches_by_itself_where_it_can_write(tmp_path: Path) -> None:
    assert fallback_cache_dir(tmp_path / "package", tmp_path / "unused") is None
    assert (tmp_path / "package" / "__pycache__").is_dir()


def test_a_temporary_folder_where_neither_the_package_nor_home_can_be_written(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(jit_module, "_writable", lambda folder: False)
    folder = fallback_cache_dir(tmp_path / "package", tmp_path / "home")
    assert folder == os.path.join(tempfile.gettempdir(), f"mallocgame-numba-cache-{os.getuid()}")


def test_a_file_where_a_folder_should_be_is_not_writable(tmp_path: Path) -> None:
    (tmp_path / "package").write_text("not a folder")
    (tmp_path / "home").write_text("not a folder")
    assert fallback_cache_dir(tmp_path / "package", tmp_path / "home") is not None


def test_a_user_cache_dir_wins(tmp_path: Path) -> None:
    code = "import numba, mallocgame.jit; print(numba.config.CACHE_DIR)"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == str(tmp_path)
