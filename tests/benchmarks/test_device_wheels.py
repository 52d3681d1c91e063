"""The device call's wheel bundle: a wheel repacked without parts, its RECORD kept true."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

device_wheels = load_benchmark("device_wheels")


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(path: Path, files: dict[str, bytes]) -> None:
    record = "pkg-1.0.dist-info/RECORD"
    rows = [[n, _hash(d), str(len(d))] for n, d in files.items()] + [[record, "", ""]]
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(record, text.getvalue())


def test_a_slim_wheel_keeps_the_rest_and_a_true_record(tmp_path):
    files = {
        "pkg/__init__.py": b"x = 1\n",
        "pkg/jars/big.jar": b"J" * 5000,
        "pkg/web/client/app.js": b"js" * 100,
        "pkg/web/agent.py": b"agent = True\n",
        "pkg-1.0.dist-info/METADATA": b"Name: pkg\n",
    }
    _wheel(tmp_path / "pkg-1.0-py3-none-any.whl", files)
    out = tmp_path / "slim" / "pkg-1.0-py3-none-any.whl"
    out.parent.mkdir()
    removed, size = device_wheels.slim_wheel(
        tmp_path / "pkg-1.0-py3-none-any.whl", out, dropped=("pkg/jars/", "pkg/web/client/")
    )
    assert (removed, size) == (2, 5000 + 200)
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        assert names == {
            "pkg/__init__.py",
            "pkg/web/agent.py",
            "pkg-1.0.dist-info/METADATA",
            "pkg-1.0.dist-info/RECORD",
        }
        record = list(csv.reader(io.StringIO(z.read("pkg-1.0.dist-info/RECORD").decode())))
        listed = {row[0]: row[1:] for row in record}
        assert set(listed) == names
        for name in names - {"pkg-1.0.dist-info/RECORD"}:
            data = z.read(name)
            assert listed[name] == [_hash(data), str(len(data))]
    assert not list(out.parent.glob("*.partial"))


@pytest.mark.parametrize("out", ["afile", "afile/wheels"])
def test_a_file_at_or_above_out_is_one_line_before_any_download(
    out: str, tmp_path, monkeypatch, capsys
) -> None:
    """--out FILE/w was a NotADirectoryError traceback (--out FILE a FileExistsError)."""
    (tmp_path / "afile").write_text("a file")
    monkeypatch.setattr(device_wheels.subprocess, "run", lambda *a, **k: pytest.fail("pip ran"))
    with pytest.raises(SystemExit) as stop:
        device_wheels.main(["--out", str(tmp_path / out)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "cannot make the folder" in err.splitlines()[-1]
    assert "Traceback" not in err
