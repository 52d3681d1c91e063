"""The bundled workloads' sizes, kept beside them so that listing them derives none.

``data/index.json`` holds, for every bundled workload
(:func:`~mallocgame.workloads.registry.workload_names`), its instruction count, buffer
count and fast memory in bytes, as deriving its instance gives them (:func:`summarize`);
deriving all of them takes seconds (the cost model over every program), reading the index
milliseconds. ``python -m mallocgame.workloads.listing`` writes it again after a suite is
frozen or the cost model changes; the tests hold every row to a fresh derivation. A
workload the index lacks is derived when it is listed.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from mallocgame.errors import MallocGameError
from mallocgame.fileio import write_json
from mallocgame.workloads.registry import load_workload, workload_names

__all__ = ["INDEX_PATH", "WorkloadSummary", "summarize", "read_index", "summaries", "write_index"]

INDEX_PATH = Path(__file__).resolve().parent / "data" / "index.json"


@dataclass(frozen=True)
class WorkloadSummary:
    """One row of ``mallocgame list``."""

    name: str
    instructions: int  # the program's instructions
    buffers: int  # the game's decisions
    fast_memory_bytes: int  # the fast memory of its instance's hardware, bytes


def summarize(name: str) -> WorkloadSummary:
    """The summary of bundled workload ``name``, from its derived instance."""
    inst = load_workload(name)
    return WorkloadSummary(
        name, inst.num_instructions, inst.num_buffers, inst.hardware.fast_memory_bytes
    )


def read_index(path: Path = INDEX_PATH) -> dict[str, WorkloadSummary]:
    """The summaries in the index file at ``path`` by name (none if it is missing)."""
    if not path.exists():
        return {}
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {row["name"]: WorkloadSummary(**row) for row in rows}


def summaries(path: Path = INDEX_PATH) -> Iterator[WorkloadSummary]:
    """Every bundled workload's summary in listing order: the index's row, or where it
    has none, the workload derived."""
    index = read_index(path)
    for name in workload_names():
        yield index[name] if name in index else summarize(name)


def write_index(path: Path = INDEX_PATH) -> None:
    """Derive every bundled workload and write the index (atomically) at ``path``."""
    rows = [asdict(summarize(name)) for name in workload_names()]
    write_json(path, rows, indent=1)


def main(argv: list[str] | None = None) -> None:
    """``python -m mallocgame.workloads.listing [PATH]``: :func:`write_index` at ``PATH``
    (default: the bundled index); a bad argument is one line and exit 2."""
    parser = argparse.ArgumentParser(
        prog="python -m mallocgame.workloads.listing",
        description="Derive every bundled workload and write the index of their sizes.",
    )
    parser.add_argument(
        "path", nargs="?", type=Path, default=INDEX_PATH, help=f"the index (default: {INDEX_PATH})"
    )
    args = parser.parse_args(argv)
    if args.path.is_dir():
        parser.error(f"{args.path} is a folder: give the index file's path")
    try:
        write_index(args.path)
    except MallocGameError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    main()
