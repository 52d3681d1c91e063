"""The index of the bundled workloads' sizes: a row per workload, each what deriving the
workload gives, written and read back; a workload it lacks is derived."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mallocgame.workloads import listing
from mallocgame.workloads.registry import workload_names
from tests.builders import bundled_instance


def test_the_index_has_a_row_for_every_workload_in_listing_order() -> None:
    rows = json.loads(listing.INDEX_PATH.read_text())
    assert [row["name"] for row in rows] == workload_names()


@pytest.mark.parametrize("name", workload_names())
def test_every_row_is_what_deriving_the_workload_gives(name: str) -> None:
    inst = bundled_instance(name)  # shared with the heuristic's tests (one process)
    assert listing.read_index()[name] == listing.WorkloadSummary(
        name, inst.num_instructions, inst.num_buffers, inst.hardware.fast_memory_bytes
    ), "stale: run python -m mallocgame.workloads.listing"


def test_written_and_read_back_and_a_missing_row_is_derived(tmp_path: Path, monkeypatch) -> None:
    from mallocgame.workloads import registry

    names = ["synthetic-v1/small", "xla-v1/lstm_infer"]
    monkeypatch.setattr(listing, "workload_names", lambda: names)
    index = tmp_path / "index.json"
    listing.write_index(index)
    written = listing.read_index(index)
    assert list(written) == names and written["synthetic-v1/small"].buffers == 60
    monkeypatch.setattr(listing, "workload_names", lambda: [*names, "synthetic-v1/1k"])
    loaded: list[str] = []
    monkeypatch.setattr(
        listing, "load_workload", lambda name: loaded.append(name) or registry.load_workload(name)
    )
    got = list(listing.summaries(index))
    assert [row.name for row in got] == [*names, "synthetic-v1/1k"]
    assert loaded == ["synthetic-v1/1k"] and got[2] == listing.summarize("synthetic-v1/1k")
    assert listing.read_index(tmp_path / "missing.json") == {}


def test_the_command_takes_one_path_and_refuses_an_option_it_does_not_know(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """``--help`` was taken for the index's path: after deriving every workload (12 s)
    the index was written to a file named ``--help``, exit 0."""
    written: list[Path] = []
    monkeypatch.setattr(listing, "write_index", written.append)
    monkeypatch.chdir(tmp_path)
    for argv, code in ((["--help"], 0), (["--bogus"], 2), ([str(tmp_path)], 2)):
        with pytest.raises(SystemExit) as ended:
            listing.main(argv)
        assert ended.value.code == code
    assert "is a folder" in capsys.readouterr().err
    assert written == [] and list(tmp_path.iterdir()) == []
    listing.main([str(tmp_path / "index.json")])
    listing.main([])
    assert written == [tmp_path / "index.json", listing.INDEX_PATH]
