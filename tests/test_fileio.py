"""JSON files: plain and gzip, atomic writes, the canonical hash, and every way a file
can be unreadable as one typed error; a study's lock."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from mallocgame.errors import FormatError, InputFileError, OutputFileError
from mallocgame.fileio import canonical_sha256, read_json, write_json


def test_plain_and_gzip_round_trip(tmp_path: Path) -> None:
    doc = {"b": [1, 2.5, None], "a": "ü"}
    for name in ("x.json", "x.json.gz"):
        write_json(tmp_path / name, doc)
        assert read_json(tmp_path / name) == doc
    assert gzip.decompress((tmp_path / "x.json.gz").read_bytes()).startswith(b"{")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_the_canonical_hash_ignores_key_order_and_spacing() -> None:
    assert canonical_sha256({"a": 1, "b": [1, 2]}) == canonical_sha256(
        json.loads('{ "b": [1,2], "a": 1 }')
    )
    assert canonical_sha256({"a": 1}) != canonical_sha256({"a": 2})


def _corrupt_gzip() -> bytes:
    """A gzip stream of a JSON document with 50 bytes of its body zeroed."""
    raw = bytearray(gzip.compress(json.dumps(list(range(2000))).encode(), mtime=0))
    raw[40:90] = bytes(50)
    return bytes(raw)


@pytest.mark.parametrize(
    "content, needle",
    [
        (None, "no such file"),
        (b"{", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b'{"a": -Infinity}', "-Infinity is not a JSON number"),
        (b'{"a": 1e400}', "1e400 is too large for a float"),
        (b'{"a": [-2.5E+999]}', "-2.5E.999 is too large for a float"),
        (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
        (b'{"a": ' + b"[" * 330 + b"]" * 330 + b"}", "nested more than 100 deep"),
        (b"[" * 101 + b"]" * 101, "nested more than 100 deep"),
        (b'{"name": "\\ud800bad"}', r"'\\ud800bad' holds an unpaired surrogate"),
        (b'{"\\udfff": 1}', "unpaired surrogate"),
        (b'[["\\ude00\\ud83d"]]', "unpaired surrogate"),  # a pair the wrong way round
        (b"\x1f\x8bnot gzip", "cannot read"),
        (_corrupt_gzip(), "cannot read: Error -3 while decompressing"),  # zlib.error
    ],
)
def test_an_unreadable_file_is_one_input_error(
    tmp_path: Path, content: bytes | None, needle: str
) -> None:
    path = tmp_path / "doc.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputFileError, match=needle):
        read_json(path)


def test_nesting_to_the_limit_and_paired_surrogates_are_read(tmp_path: Path) -> None:
    """Documents nested a few hundred deep were read, and crashed (RecursionError) the
    walks that copy and save them; a lone surrogate crashed printing (UnicodeEncodeError)."""
    path = tmp_path / "doc.json"
    path.write_bytes(b"[" * 100 + b"]" * 100)
    hundred_deep: list = []
    for _ in range(99):
        hundred_deep = [hundred_deep]
    assert read_json(path) == hundred_deep
    path.write_bytes(b'{"name": "\\ud83d\\ude00 and \\u00e9", "deep": [[[[]]]]}')
    assert read_json(path) == {"name": "\U0001f600 and \u00e9", "deep": [[[[]]]]}


def test_a_name_too_long_for_the_file_system_is_one_input_error() -> None:
    with pytest.raises(InputFileError, match="cannot read: File name too long"):
        read_json("a" * 300 + ".json")


def test_a_write_makes_the_missing_folders(tmp_path: Path) -> None:
    write_json(tmp_path / "a" / "b" / "doc.json", {"x": 1})
    assert read_json(tmp_path / "a" / "b" / "doc.json") == {"x": 1}


def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="a directory, not a file"):
        read_json(tmp_path)


@pytest.mark.parametrize("name", ["out/", "out//", "d/"])
def test_a_path_ending_in_a_separator_names_a_folder_and_is_not_written(
    tmp_path: Path, name: str
) -> None:
    """``out/`` was written as a file ``out`` (``Path`` drops the trailing separator)."""
    from mallocgame.fileio import check_writable, write_bytes_atomic

    (tmp_path / "d").mkdir()
    path = f"{tmp_path}/{name}"
    for write in (lambda: write_json(path, {"x": 1}), lambda: write_bytes_atomic(path, b"x")):
        with pytest.raises(OutputFileError, match="ends in /: it names a folder, give a file"):
            write()
    with pytest.raises(OutputFileError, match="ends in /: it names a folder"):
        check_writable(path)  # found before the work, as the write would refuse it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    assert (tmp_path / "d").is_dir() and not any((tmp_path / "d").iterdir())


@pytest.mark.parametrize("ending", [".", ".."])
def test_a_path_ending_in_a_dot_names_a_folder_and_is_not_written(
    tmp_path: Path, ending: str
) -> None:
    """``out/.`` was written as a file ``out`` (``Path`` drops the ``.``)."""
    from mallocgame.fileio import write_bytes_atomic

    (tmp_path / "d").mkdir()
    path = f"{tmp_path}/d/out/{ending}"
    with pytest.raises(OutputFileError, match=f"ends in {ending}: it names a folder"):
        write_bytes_atomic(path, b"x")
    assert not any((tmp_path / "d").iterdir())


def test_an_unwritable_place_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(InputFileError, match="cannot write"):  # a file where a folder goes
        write_json(tmp_path / "file" / "x.json", {})


def test_csv_rows_round_trip_and_bad_files(tmp_path: Path) -> None:
    from mallocgame.fileio import read_csv_rows, write_csv_atomic

    path = tmp_path / "r.csv"
    write_csv_atomic(path, ["a", "b"], [[1, "x,y"], [2, ""]])
    assert read_csv_rows(path, ["a", "b"], lambda r: (int(r[0]), r[1]), "table") == [
        (1, "x,y"),
        (2, ""),
    ]
    odd = ["two\nlines", "cr\r\nlf", "sep\u2028arated", "form\x0cfeed", "next\x85line"]
    write_csv_atomic(path, ["a", "b"], [[i, v] for i, v in enumerate(odd)])
    assert read_csv_rows(path, ["a", "b"], lambda r: r[1], "table") == odd  # as written
    long = tmp_path / ("L" * 245 + ".csv")  # a legal name: the temporary one must fit too
    write_csv_atomic(long, ["a"], [[1]])
    assert read_csv_rows(long, ["a"], tuple, "table") == [("1",)]
    write_csv_atomic(path, ["a", "b"], [[1, "x,y"], [2, ""]])
    with pytest.raises(FormatError, match="not a table .its header is not a,c"):
        read_csv_rows(path, ["a", "c"], tuple, "table")
    with pytest.raises(FormatError, match="not a table"):
        read_csv_rows(path, ["a", "b"], lambda r: int(r[1]), "table")
    with pytest.raises(InputFileError, match="cannot read it"):
        read_csv_rows(tmp_path / "missing.csv", ["a"], tuple, "table")
    # a field past the csv module's limit raised csv.Error (a traceback on the CLI)
    path.write_text('a,b\n"' + "x" * 140_000 + "\n")
    with pytest.raises(FormatError, match="not a table .field larger than field limit"):
        read_csv_rows(path, ["a", "b"], tuple, "table")


# ------------------------------------------------------------- special files and bad documents


def _read_fifo(path: Path, into: list[bytes]) -> None:
    with open(path, "rb") as fifo:
        into.append(fifo.read())


def test_a_fifo_is_written_through_never_replaced(tmp_path: Path) -> None:
    import os
    import stat
    import threading

    from mallocgame.fileio import write_bytes_atomic

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for write, expected in (
        (lambda: write_json(fifo, {"a": 1}), b'{"a":1}\n'),
        (lambda: write_bytes_atomic(fifo, b"x" * 200_000), b"x" * 200_000),
    ):
        got: list[bytes] = []
        reader = threading.Thread(target=_read_fifo, args=(fifo, got), daemon=True)
        reader.start()
        write()
        reader.join(timeout=30)
        assert not reader.is_alive() and got == [expected]  # more than a pipe's buffer, all of it
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary left beside it


def test_dev_null_is_written_through_and_stays_a_device() -> None:
    import os
    import stat

    from mallocgame.fileio import write_bytes_atomic

    before = os.stat("/dev/null")
    assert stat.S_ISCHR(before.st_mode)
    write_json("/dev/null", {"a": 1})
    write_bytes_atomic("/dev/null", b"picture")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_rdev, after.st_ino) == (before.st_rdev, before.st_ino)


def test_a_directory_or_socket_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    import socket

    from mallocgame.errors import OutputFileError

    (tmp_path / "d").mkdir()
    with pytest.raises(OutputFileError, match=r"d: a directory, not a file$"):
        write_json(tmp_path / "d", {})
    assert (tmp_path / "d").is_dir()
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "s"))
        with pytest.raises(OutputFileError, match="a special file .a block device or socket."):
            write_json(tmp_path / "s", {})
        assert (tmp_path / "s").is_socket()
    finally:
        server.close()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), {1, 2}])
def test_a_document_json_cannot_hold_is_refused_and_nothing_is_written(
    tmp_path: Path,
    value: object,
) -> None:
    from mallocgame.errors import OutputFileError

    path = tmp_path / "x.json"
    path.write_text('{"old": true}\n')
    with pytest.raises(OutputFileError, match="x.json: not written: the document is not JSON"):
        write_json(path, {"reward_s": [1.0, value]})
    assert json.loads(path.read_text()) == {"old": True}  # the file there stays as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_a_file_beside_an_output_keeps_the_whole_name() -> None:
    from mallocgame.fileio import output_beside

    assert output_beside("runs/study.v1", ".csv") == Path("runs/study.v1.csv")
    assert output_beside("runs/study.v1", ".lock") == Path("runs/study.v1.lock")
    assert output_beside("runs/curves", ".png") == Path("runs/curves.png")
    for ending in (".csv", ".png", ".json"):  # an ending of its own files is replaced
        assert output_beside(f"runs/curves{ending}", ".csv") == Path("runs/curves.csv")
    for nameless in ("", " ", ".", "..", "/"):
        with pytest.raises(OutputFileError, match="--out must name a file"):
            output_beside(nameless, ".csv")


def test_check_writable_finds_a_place_that_takes_no_file(tmp_path: Path, monkeypatch) -> None:
    import os
    import tempfile

    from mallocgame.errors import OutputFileError
    from mallocgame.fileio import check_writable

    check_writable(tmp_path / "new" / "deeper" / "x.json")  # folders still to make: fine
    assert not (tmp_path / "new").exists() and list(tmp_path.iterdir()) == []  # probe gone
    (tmp_path / "run.csv").write_text("a file")
    with pytest.raises(OutputFileError, match="run.csv is not a folder"):
        check_writable(tmp_path / "run.csv" / "x.json")
    # a link to nothing where a folder goes passed, and the write after the work failed
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputFileError, match="dangling is not a folder"):
        check_writable(tmp_path / "dangling" / "x.json")
    (tmp_path / "linked").symlink_to(tmp_path / "new-folder")
    (tmp_path / "new-folder").mkdir()
    check_writable(tmp_path / "linked" / "x.json")  # a link to a folder: fine
    # a folder at the path passed, and the write after the work failed
    with pytest.raises(OutputFileError, match="new-folder: a directory, not a file"):
        check_writable(tmp_path / "new-folder")
    with pytest.raises(OutputFileError, match="linked: a directory, not a file"):
        check_writable(tmp_path / "linked")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)  # a folder that takes no file
    with pytest.raises(OutputFileError, match="cannot write in .*Permission denied"):
        check_writable(tmp_path / "x.json")
    check_writable(fifo)  # a pipe or device is written through: its folder takes nothing
    monkeypatch.undo()
    if Path("/proc/self").exists():  # a file system that takes no files, even as root
        with pytest.raises(OutputFileError, match="cannot write in /proc"):
            check_writable("/proc/x.json")


def test_what_the_reader_refuses_is_not_written(tmp_path: Path) -> None:
    """A document nested 101 deep, or holding a lone surrogate, was written, and then
    refused by read_json: a file the project could not read back."""
    path = tmp_path / "doc.json"
    deep: list = []
    for _ in range(100):
        deep = [deep]
    for document, needle in (
        (deep, "nested more than 100 deep"),
        ({"name": "bad\udcff"}, r"'bad\\udcff' holds an unpaired surrogate"),
    ):
        with pytest.raises(OutputFileError, match=needle):
            write_json(path, document)
        assert not path.exists()
    write_json(path, deep[0])  # 100 deep
    write_json(tmp_path / "pair.json", {"name": "\U0001f600"})
    assert read_json(path) == deep[0]
    assert read_json(tmp_path / "pair.json") == {"name": "\U0001f600"}


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ([1], "f.json: expected a JSON object, got list"),
        ({"format": "other", "version": 1}, "f.json: format is 'other', expected 'fmt'"),
        ({"format": "fmt", "version": True}, "unsupported thing version True (this build reads 1)"),
        ({"format": "fmt", "version": 1.0}, "unsupported thing version 1.0 (this build reads 1)"),
        ({"format": "fmt"}, "unsupported thing version None (this build reads 1)"),
    ],
)
def test_a_document_of_another_format_or_version_is_a_format_error(doc, said: str) -> None:
    from mallocgame.fileio import check_header

    check_header(
        {"format": "fmt", "version": 1}, where="f.json", kind="thing", format_name="fmt", version=1
    )
    with pytest.raises(FormatError, match=re.escape(said)):
        check_header(doc, where="f.json", kind="thing", format_name="fmt", version=1)


def test_still_at_tells_a_removed_or_replaced_lock_file(tmp_path: Path) -> None:
    from mallocgame.fileio import _still_at

    lock = tmp_path / "t.lock"
    with open(lock, "w") as held:
        assert _still_at(lock, held.fileno())
        lock.unlink()
        assert not _still_at(lock, held.fileno())  # removed by the run that ended
        lock.write_text("")
        assert not _still_at(lock, held.fileno())  # a new one made by another run
