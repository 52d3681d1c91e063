"""Tests of workloads by name, file or dump directory (mallocgame.workloads.registry)."""

from __future__ import annotations

import pytest

from mallocgame.costmodel import derive_instance
from mallocgame.errors import InputFileError
from mallocgame.frontends.xla import extract_dump, extract_module
from mallocgame.instance import save_instance
from mallocgame.workloads.registry import (
    DUMP_PRESET,
    check_workload,
    load_workload,
    workload_names,
)
from tests.frontends.test_xla import HANDMADE


def test_names_cover_both_suites() -> None:
    names = workload_names()
    assert "xla-v1/gru_infer" in names and "synthetic-v1/small" in names
    assert len(names) == len(set(names))


def test_an_instance_file(tmp_path, small) -> None:
    path = tmp_path / "inst.json.gz"
    save_instance(small, path)
    assert load_workload(str(path)).sha256 == small.sha256


def test_a_dump_directory_is_extracted_on_the_default_preset(tmp_path) -> None:
    (tmp_path / "module_0001.handmade.cpu_after_optimizations.txt").write_text(HANDMADE)
    inst = load_workload(str(tmp_path))
    assert inst.sha256 == derive_instance(extract_dump(tmp_path), DUMP_PRESET).sha256
    assert inst.num_buffers == extract_module(HANDMADE).num_buffers
    assert inst.source["preset"] == DUMP_PRESET


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("synthetic/small", "synthetic-v1/small"),
        ("xla-v1/gru_infr", "xla-v1/gru_infer"),
        ("xla-v1/lstm-infer", "xla-v1/lstm_infer"),
    ],
)
def test_a_misspelt_name_gets_the_closest_ones(name: str, suggestion: str) -> None:
    with pytest.raises(InputFileError, match="did you mean") as err:
        load_workload(name)
    assert suggestion in str(err.value) and "\n" not in str(err.value)


def test_nothing_close_points_to_the_list() -> None:
    with pytest.raises(InputFileError, match="see 'mallocgame list'"):
        load_workload("/no/such/file.json")


@pytest.mark.parametrize(
    "value, needle",
    [
        (None, r"^a workload is a bundled name or a path \(a string\), not None$"),
        (42, r"^a workload is a bundled name or a path \(a string\), not 42$"),
        (
            b"xla-v1/gru_infer",
            r"^a workload is a bundled name or a path \(a string\), not b'xla-v1/gru_infer'$",
        ),
        ("", r"^'': not a workload name or path"),
        ("a\0b", r"^'a\\x00b': not a workload name or path"),
        ("a" * 300, r"^a{300}: cannot read: File name too long$"),
    ],
)
def test_what_is_not_a_name_or_path_is_one_input_error(value, needle: str) -> None:
    for refuse in (load_workload, check_workload):
        with pytest.raises(InputFileError, match=needle):
            refuse(value)


def test_check_workload_reads_no_file_and_gives_the_name(tmp_path, monkeypatch) -> None:
    import mallocgame.workloads.registry as registry

    monkeypatch.setattr(registry, "load_instance", lambda path: pytest.fail("read a file"))
    (tmp_path / "garbage.json").write_text("{")  # its faults are load_workload's to find
    assert check_workload(tmp_path / "garbage.json") == str(tmp_path / "garbage.json")
    assert check_workload("synthetic-v2/small") == "synthetic-v2/small"
    with pytest.raises(InputFileError, match="did you mean xla-v1/gru_infer"):
        check_workload("xla-v1/gru_infr")


def test_a_path_object_is_read_like_its_string(tmp_path, small) -> None:
    path = tmp_path / "inst.json"
    save_instance(small, path)
    assert load_workload(path).sha256 == small.sha256


@pytest.mark.parametrize("name", ["xla-v1/gru_infer", "synthetic-v1/small"])
def test_a_bundled_name_comes_before_a_folder_of_that_name(tmp_path, monkeypatch, name) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).mkdir(parents=True)  # not a dump: read first, it would fail
    assert load_workload(name).name == name
