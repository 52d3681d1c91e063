"""The wheels a device call carries: what the GPU machine's image lacks, small enough to travel.

The lent GPU machine (Python 3.12, x86-64, no network) has torch, JAX, flax, optax, chex,
numba, cupy, matplotlib and most of Ray's needs, but not ``mctx`` (for ``muzero`` and
``muzero-prod``), Ray itself, nor ``jsonschema`` and its dependencies (Ray's). A call's
working tree travels with at most 64 MiB, and Ray's wheel is 79 MB: :func:`slim_wheel`
repacks it without the parts a local cluster of self-play actors never loads (the Java
jars, the dashboard's web client, RLlib, Data, Serve, Tune, Train, LLM, AIR, the Cython
headers) and with its four native binaries stripped of symbols, about 35 MB, its
``RECORD`` rewritten to the files kept (new hashes for the stripped ones).

Usage (on this machine, with the package registries; writes ``OUT`` and nothing else)::

    python benchmarks/device_wheels.py --out .whl-device
    # then, in the device call: carry .whl-device and begin with
    # python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl-device/*.whl
    # export PYTHONPATH=/tmp/site:src RAY_AUTH_MODE=disabled

Checked on 2026-11-27 (Ray 2.60.0): ``ray.init`` with 4 and 9 CPUs, 4 actors, and the
16-core throughput run of ``benchmarks/distributed_selfplay.py`` on the H200 machine.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PINS = ("mctx==0.0.71", "ray==2.60.0", "jsonschema==4.26.0")
"""The wheels fetched (``pip download``, binary only, for CPython 3.12 on manylinux x86-64),
with the dependencies the machine lacks (``referencing``, ``rpds-py``,
``jsonschema-specifications``)."""

EXTRA = ("referencing==0.37.0", "rpds-py==2026.9.1", "jsonschema-specifications==2025.9.1")

RAY_DROPPED = (
    "ray/jars/",
    "ray/dashboard/client/",
    "ray/rllib/",
    "ray/data/",
    "ray/serve/",
    "ray/tune/",
    "ray/train/",
    "ray/llm/",
    "ray/air/",
    "ray/includes/",
    "ray/_raylet.pxd",
    "ray/_raylet.pyi",
)
"""What a local Ray cluster of actors does not load (the dashboard's Python code stays:
the raylet starts its agent)."""

RAY_STRIPPED = (
    "ray/core/src/ray/gcs/gcs_server",
    "ray/core/src/ray/raylet/raylet",
    "ray/_raylet.so",
    "ray/core/libjemalloc.so",
)


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _stripped(data: bytes) -> bytes:
    with tempfile.NamedTemporaryFile(delete=False) as handle:
        handle.write(data)
    try:
        subprocess.run(["strip", "--strip-unneeded", handle.name], check=True)
        return Path(handle.name).read_bytes()
    finally:
        os.unlink(handle.name)


def slim_wheel(
    source: Path,
    target: Path,
    *,
    dropped: tuple[str, ...],
    stripped: tuple[str, ...] = (),
) -> tuple[int, int]:
    """Write ``source`` (a wheel) to ``target`` without the entries that start with one of
    ``dropped``, the entries named in ``stripped`` run through ``strip --strip-unneeded``,
    and its ``RECORD`` listing what is kept, with hashes and sizes of the bytes written.
    Returns (entries dropped, their uncompressed bytes). ``target`` appears whole or not at
    all."""
    removed = removed_bytes = 0
    kept: dict[str, tuple[str, str]] = {}
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(source) as zin:
        record = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
            for info in zin.infolist():
                name = info.filename
                if name == record:
                    continue
                if name.startswith(dropped):
                    removed += 1
                    removed_bytes += info.file_size
                    continue
                data = zin.read(name)
                if name in stripped:
                    data = _stripped(data)
                entry = zipfile.ZipInfo(name, date_time=info.date_time)
                entry.external_attr = info.external_attr
                entry.create_system = info.create_system
                zout.writestr(entry, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
                kept[name] = (_record_hash(data), str(len(data)))
            rows = io.StringIO()
            writer = csv.writer(rows, lineterminator="\n")
            for row in csv.reader(io.StringIO(zin.read(record).decode())):
                if row and row[0] in kept:
                    writer.writerow([row[0], *kept.pop(row[0])])
            for name, (digest, size) in kept.items():  # entries the RECORD did not list
                writer.writerow([name, digest, size])
            writer.writerow([record, "", ""])
            entry = zipfile.ZipInfo(record, date_time=zin.getinfo(record).date_time)
            entry.external_attr = zin.getinfo(record).external_attr
            zout.writestr(entry, rows.getvalue(), compress_type=zipfile.ZIP_DEFLATED)
    os.replace(partial, target)
    return removed, removed_bytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="the folder of wheels")
    args = parser.parse_args(argv)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file at --out or on its way there, or a read-only folder
        parser.error(f"--out {args.out}: cannot make the folder ({exc.strerror or exc})")
    with tempfile.TemporaryDirectory(prefix="device-wheels-") as tmp:
        download = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *[f"--platform={p}" for p in ("manylinux_2_17_x86_64", "manylinux2014_x86_64")],
            "-d",
            tmp,
            *PINS,
            *EXTRA,
        ]
        done = subprocess.run(download, capture_output=True, text=True)
        if done.returncode != 0:
            print(
                f"device_wheels: pip download failed: {done.stderr.strip()[-300:]}", file=sys.stderr
            )
            return 2
        for wheel in sorted(Path(tmp).glob("*.whl")):
            if wheel.name.startswith("ray-"):
                removed, size = slim_wheel(
                    wheel, args.out / wheel.name, dropped=RAY_DROPPED, stripped=RAY_STRIPPED
                )
                print(f"{wheel.name}: {removed} files ({size / 1e6:.1f} MB) left out, stripped")
            else:
                (args.out / wheel.name).write_bytes(wheel.read_bytes())
    total = sum(p.stat().st_size for p in args.out.glob("*.whl"))
    print(f"{args.out}: {total / 2**20:.1f} MiB of wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
