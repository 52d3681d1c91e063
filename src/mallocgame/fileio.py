"""Reading and writing JSON documents (plain or gzip) and record CSVs: atomic writes, canonical hash."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import numbers
import os
import re
import stat
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from mallocgame.errors import (
    FormatError,
    InputFileError,
    InstanceError,
    OutputFileError,
    SolutionError,
    StaleRecordError,
)

T = TypeVar("T")

__all__ = [
    "check_header",
    "output_beside",
    "only_run",
    "refuse_folder_name",
    "read_json",
    "write_json",
    "write_bytes_atomic",
    "canonical_sha256",
    "write_csv_atomic",
    "read_csv_rows",
]


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # written files get the usual permissions, not mkstemp's 0600


def output_beside(out: str | os.PathLike[str], suffix: str) -> Path:
    """The file ``OUT{suffix}`` of a command's ``--out OUT`` (``.csv``, ``.png``,
    ``.lock``): the whole name kept, so ``study.v1`` and ``study.v2`` never share a file;
    where ``OUT`` already ends in ``.csv``, ``.png`` or ``.json``, that ending is replaced.
    Raises :class:`~mallocgame.errors.OutputFileError` where ``out`` names no file."""
    path = Path(out)
    if not str(out).strip() or path.name in ("", ".", ".."):
        raise OutputFileError(f"--out must name a file, not {str(out)!r}")
    if path.suffix in (".csv", ".png", ".json"):
        path = path.with_suffix("")
    return path.with_name(path.name + suffix)


def check_writable(path: str | os.PathLike[str]) -> None:
    """:class:`~mallocgame.errors.OutputFileError` unless a file can be written at ``path``:
    not a directory there, and its nearest existing folder takes a file (one is made and
    removed again, so a read-only folder, a file where a folder goes, or a file system that
    takes no files is found out before the work, not after it). Folders still missing are
    not made here, but by the write (:func:`write_bytes_atomic`)."""
    refuse_folder_name(path)
    try:  # a device or pipe (/dev/stdout) is written through, not beside: no folder needed
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0  # not there yet: a file to make
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return
    if stat.S_ISDIR(mode):  # what the write would refuse (write_bytes_atomic), found now
        raise OutputFileError(f"{path}: a directory, not a file")
    folder = Path(path).parent
    while not os.path.lexists(folder) and folder != folder.parent:  # a dangling link is there
        folder = folder.parent
    if not folder.is_dir():  # a file, or a link to nothing, where a folder goes
        raise OutputFileError(f"{path}: cannot write: {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".mallocgame-probe.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputFileError(f"{path}: cannot write in {folder}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)


@contextmanager
def only_run(lock: Path) -> Iterator[None]:
    """Hold ``lock`` (an ``OUT.lock`` beside a study's records: made, held with ``flock``
    while the block runs, then removed) for a run that rewrites records it read at its
    start: a second run on the same records is refused, not interleaved (it would write
    back what it read, without the first's cells), with
    :class:`~mallocgame.errors.StaleRecordError` ("another run of this study holds it"),
    leaving the first run's lock in place. Its folder must exist."""
    import fcntl  # (POSIX; imported here so that the rest of this module needs none)

    with open(lock, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not _still_at(lock, handle.fileno()):
                raise OSError
        except OSError:
            raise StaleRecordError(
                f"{lock}: another run of this study holds it; wait for it or give another --out"
            ) from None
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)


def _still_at(path: Path, fd: int) -> bool:
    """Whether the file open as ``fd`` is still the one at ``path``: a run that ended
    removes its lock, and another may have made a new one there since ``fd`` was opened."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


MAX_JSON_DEPTH = 100
"""The deepest a JSON document may nest objects and arrays (SPEC "Ranges"): far beyond
the project's own files (an instance nests 4 deep), and well inside what copying, saving
and printing a document in Python take."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""The text of a JSON escape of a UTF-16 surrogate, paired (an emoji) or not."""


def is_text(value: Any) -> bool:
    """``value`` is a ``str`` that UTF-8 holds (no unpaired surrogate), as a file's string."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def nested_deeper_than(value: Any, depth: int) -> bool:
    """Whether ``value`` (a parsed JSON value: dicts, lists, scalars) nests objects and
    arrays more than ``depth`` levels deep; a walk level by level, no recursion."""
    level = [value] if isinstance(value, (dict, list, tuple)) else []
    for _ in range(depth):
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            below += [c for c in children if isinstance(c, (dict, list, tuple))]
        if not below:
            return False
        level = below
    return bool(level)


def unpaired_surrogate(value: Any) -> str | None:
    """A string (a key or a value) of the parsed JSON ``value`` holding a UTF-16 surrogate
    that pairs with none (JSON's ``"\\ud800"``): no UTF-8 text holds it, so it can be
    neither printed nor written as such; ``None`` where there is none."""
    stack = [value]
    while stack:
        item = stack.pop()
        strings: list[Any] = []
        if isinstance(item, dict):
            strings = list(item)
            stack += item.values()
        elif isinstance(item, (list, tuple)):
            stack += item
        else:
            strings = [item]
        for text in strings:
            if isinstance(text, str) and not is_text(text):
                return text
    return None


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a ``.json`` or ``.json.gz`` file; raise :class:`InputFileError` on any failure,
    a number that is not finite as a float (``NaN``, ``Infinity``, ``1e400``), objects and
    arrays nested more than :data:`MAX_JSON_DEPTH` deep, and a string holding an unpaired
    surrogate (``"\\ud800"``) included, and an empty path (``Path("")`` is the current
    directory)."""
    if not os.fspath(path):
        raise InputFileError("an empty path names no file: give the file's path")
    path = Path(path)
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
    except OSError as exc:  # a name too long for the file system
        raise InputFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if is_dir:
        raise InputFileError(f"{path}: a directory, not a file")
    if not is_file:
        raise InputFileError(f"{path}: no such file")
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
        document = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputFileError(f"{path}: cannot read: {exc}") from exc
    except (UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise InputFileError(f"{path}: not valid JSON: {exc}") from exc
    except RecursionError:
        raise InputFileError(f"{path}: not valid JSON: nested too deeply") from None
    if nested_deeper_than(document, MAX_JSON_DEPTH):
        raise InputFileError(f"{path}: objects and arrays nested more than {MAX_JSON_DEPTH} deep")
    if _SURROGATE_ESCAPE.search(text):
        lone = unpaired_surrogate(document)
        if lone is not None:
            raise InputFileError(
                f"{path}: the string {lone!a:.60} holds an unpaired surrogate, "
                "which no UTF-8 text can"
            )
    return document


def is_finite_real(value: Any) -> bool:
    """A real number (NumPy's too, not a ``bool``) that is finite as a float (an integer
    too large for a float is not): what a number given in code may be."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def is_finite_number(value: Any) -> bool:
    """A JSON number (not a boolean) that is finite as a float (an integer too large for a
    float is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def read_document(path: str | os.PathLike[str], parse: Callable[[Any], T]) -> T:
    """``parse`` applied to the JSON document at ``path``; a :class:`FormatError`,
    :class:`InstanceError` or :class:`SolutionError` it raises is raised again, of the
    same type, with the file name in front of its message."""
    doc = read_json(path)
    try:
        return parse(doc)
    except (FormatError, InstanceError, SolutionError) as exc:
        raise type(exc)(f"{path}: {exc}") from None


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent as a float; one too large for a float
    (``1e400``, which Python would read as infinity) is refused: JSON numbers are finite."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a float")
    return value


def _refuse_constant(name: str) -> Any:
    """JSON has no NaN or infinities; Python's parser accepts them unless told not to."""
    raise ValueError(f"{name} is not a JSON number")


def check_header(doc: Any, *, where: str, kind: str, format_name: str, version: int) -> None:
    """:class:`~mallocgame.errors.FormatError` (naming ``where``) unless ``doc`` is a JSON
    object of ``format_name`` at ``version`` of the ``kind`` of file ("instance",
    "program", "solution"): a version of ``true`` or ``1.0`` is not ``1``, though each
    equals it."""
    if not isinstance(doc, Mapping):
        raise FormatError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != format_name:
        raise FormatError(f"{where}: format is {doc.get('format')!r}, expected '{format_name}'")
    found = doc.get("version")
    if type(found) is not int or found != version:
        raise FormatError(
            f"{where}: unsupported {kind} version {found!r} (this build reads {version})"
        )


def refuse_folder_name(path: str | os.PathLike[str]) -> None:
    """:class:`OutputFileError` where ``path``, the name of a file to write, ends in a path
    separator, or in ``.`` or ``..`` after one (``out/``, ``out/.``): it names a folder,
    and ``Path`` drops the ending, so it would be written as a file of that name. (``.``
    alone names a folder that exists, which every write refuses as such.)"""
    text = os.fspath(path)
    if text.endswith(("/", os.sep)):
        raise OutputFileError(f"{text!r} ends in {text[-1]}: it names a folder, give a file")
    if os.path.basename(text) in (".", "..") and os.path.dirname(text):
        raise OutputFileError(
            f"{text!r} ends in {os.path.basename(text)}: it names a folder, give a file"
        )


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place (the
    folders to ``path`` made where missing).

    A reader never sees a partially written file, and a failure leaves no file behind
    (the file that was at ``path`` stays as it was). A character device or a FIFO at
    ``path`` (``/dev/null``, ``/dev/stdout`` on a terminal or pipe, a named pipe) is
    written through, never replaced (a FIFO's write waits for its reader). A directory,
    a block device or a socket at ``path``, a ``path`` that ends in a separator
    (``out/``: a folder's name, never written as a file ``out``), or any failure of the
    system to write, is an :class:`OutputFileError` of one line naming ``path``.
    """
    refuse_folder_name(path)
    path = Path(path)
    try:
        mode = os.stat(path).st_mode  # follows a symbolic link to what it names
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as exc:
        raise OutputFileError(f"{path}: cannot write: {exc}") from None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISDIR(mode):
            raise OutputFileError(f"{path}: a directory, not a file")
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            _write_through(path, data)
            return
        raise OutputFileError(f"{path}: a special file (a block device or socket): not written")
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # the name's first 64 characters: a name near the system's limit must still fit
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:64]}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputFileError(f"{path}: cannot write: {exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutputFileError(f"{path}: cannot write: {exc}") from None
        raise


def _write_through(path: Path, data: bytes) -> None:
    """Write ``data`` into the character device or FIFO at ``path`` as it is (no
    temporary file, no rename, no truncation); :class:`OutputFileError` on failure."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise OutputFileError(f"{path}: cannot write: {exc}") from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise OutputFileError(f"{path}: cannot write: {exc}") from None
    finally:
        os.close(fd)


def write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = None) -> None:
    """Atomically write ``obj`` as JSON; gzip-compressed when ``path`` ends in ``.gz``.

    JSON has no NaN or infinity: ``obj`` holding one (or a value that is not JSON), or
    what :func:`read_json` refuses (nesting deeper than :data:`MAX_JSON_DEPTH`, a string
    holding an unpaired surrogate), is an :class:`OutputFileError`, and nothing is written:
    what is written can be read back."""
    try:
        separators = None if indent else (",", ":")
        text = json.dumps(obj, indent=indent, separators=separators, allow_nan=False)
    except (ValueError, TypeError, RecursionError) as exc:  # NaN; no JSON; nested too deep
        raise OutputFileError(f"{path}: not written: the document is not JSON ({exc})") from None
    if nested_deeper_than(obj, MAX_JSON_DEPTH):
        raise OutputFileError(
            f"{path}: not written: objects and arrays nested more than {MAX_JSON_DEPTH} deep"
        )
    if _SURROGATE_ESCAPE.search(text) and (lone := unpaired_surrogate(obj)) is not None:
        raise OutputFileError(
            f"{path}: not written: the string {lone!a:.60} holds an unpaired surrogate"
        )
    data = (text + "\n").encode("utf-8")
    if str(path).endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    write_bytes_atomic(path, data)


def canonical_sha256(obj: Any) -> str:
    """The SPEC section 7 hash: sha256 of the sorted, compact, ASCII JSON of ``obj``."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def write_csv_atomic(
    path: str | os.PathLike[str], header: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Atomically write a CSV: ``header``, then ``rows`` (values as ``str`` gives them)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows(rows)
    write_bytes_atomic(path, buffer.getvalue().encode())


def first_line(path: str | os.PathLike[str]) -> str:
    """The first line of ``path`` without its line break (``""`` where it cannot be read:
    the reader that follows says why); tells a file's header, hence its version."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return ""


def read_csv_rows(
    path: str | os.PathLike[str], header: Sequence[str], parse: Callable[[list[str]], T], what: str
) -> list[T]:
    """Every row after ``header`` of the CSV at ``path``, each through ``parse``.

    Raises :class:`InputFileError` for a file it cannot read and :class:`FormatError`
    ("not a WHAT") for another header or a row ``parse`` refuses (``ValueError``,
    ``IndexError``).
    """
    try:
        text = Path(path).read_bytes().decode()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(f"{path}: cannot read it ({exc})") from None
    try:  # the csv module's own line rules: a quoted field keeps its line breaks
        rows = list(csv.reader(io.StringIO(text, newline="")))
        if not rows or rows[0] != list(header):
            raise ValueError(f"its header is not {','.join(header)}")
        return [parse(row) for row in rows[1:]]
    except (ValueError, IndexError, csv.Error) as exc:  # csv.Error: a field past its limit
        raise FormatError(f"{path}: not a {what} ({exc})") from None
