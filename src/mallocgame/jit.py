"""``jit``: the numba decorator of every compiled kernel, ``numba.njit(cache=True, nogil=True)``.

numba caches compiled code next to the sources (the package's ``__pycache__``) or, where
that cannot be written, in the user's cache folder. Where neither can be written (a
package installed by another user, and no writable home), :data:`jit` caches in a folder
of this user's under the temporary directory instead of failing on import. A
``NUMBA_CACHE_DIR`` set by the user always wins.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numba

__all__ = ["jit", "fallback_cache_dir"]


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _user_cache_dir() -> Path:
    """numba's user-wide cache folder on Linux and macOS (``$XDG_CACHE_HOME/numba``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "numba"


def fallback_cache_dir(package_dir: Path, user_cache_dir: Path) -> str | None:
    """None where numba can cache by itself (``package_dir/__pycache__`` or
    ``user_cache_dir`` writable), else a folder of this user's in the temporary directory."""
    if _writable(package_dir / "__pycache__") or _writable(user_cache_dir):
        return None
    return os.path.join(tempfile.gettempdir(), f"mallocgame-numba-cache-{os.getuid()}")


# numba.config's settings are attributes it sets at import, unknown to a type checker
if not numba.config.CACHE_DIR:  # type: ignore[attr-defined]
    _fallback = fallback_cache_dir(Path(__file__).parent, _user_cache_dir())
    if _fallback is not None:
        numba.config.CACHE_DIR = _fallback  # type: ignore[attr-defined]

jit = numba.njit(cache=True, nogil=True)
