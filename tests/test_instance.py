"""Instance files (SPEC sections 1, 2 and 7): round trips, the canonical hash, and
validation errors that are typed and name the problem."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mallocgame.errors import FormatError, InputFileError, InstanceError, MallocGameError
from mallocgame.instance import instance_from_dict, load_instance, save_instance, validate
from tests.builders import (
    CONFORMANCE_NAMES,
    B,
    I,
    X,
    assert_only_files,
    build_doc,
    conformance_vector,
    table,
)


def spec_hash(doc) -> str:
    """SPEC section 7, literally."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _nested(depth: int) -> list:
    """An array ``depth`` arrays deep."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_document_nested_too_deep_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    """A source nested 330 deep crashed loading with RecursionError (and 600 deep under an
    unknown key, saving), inside the depth the JSON parser itself takes."""
    doc = _doc() | {"source": {"x": _nested(330)}}
    with pytest.raises(InstanceError, match="nested more than 100 deep"):
        instance_from_dict(doc)
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(_doc() | {"own key": _nested(600)}))
    with pytest.raises(InputFileError, match="nested more than 100 deep"):
        load_instance(path)
    doc = _doc() | {"source": {"x": _nested(98)}}  # the source's object and x: 100 deep
    save_instance(instance_from_dict(doc), path)
    assert load_instance(path).source["x"] == _nested(98)
    # a source made in code 100 deep is 101 in the document: it was saved, then refused
    inst = instance_from_dict(_doc())
    with pytest.raises(InstanceError, match="source: objects and arrays nested more than 99"):
        replace(inst, source={"x": _nested(99)})


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"name": "bad\ud800"}, r"instance\.name: the string 'bad\\ud800' holds an unpaired"),
        ({"source": {"note": "\udcff"}}, r"source\.note: the string .* unpaired surrogate"),
        ({"source": {"\udcff": 1}}, r"the key .* is not a string \(UTF-8 text\)"),
    ],
)
def test_a_string_no_utf8_holds_is_refused_as_the_loader_refuses_it(change, needle) -> None:
    """An instance named "bad\\ud800" (or with such a source string) made in code was
    valid and saved, and its file then refused by load_instance."""
    with pytest.raises(InstanceError, match=needle):
        instance_from_dict(_doc() | change)
    with pytest.raises(InstanceError, match=r"instance: name 'bad\\ud800' holds an unpaired"):
        validate(replace(instance_from_dict(_doc()), name="bad\ud800"))


def _doc():
    # Program input P read at 1 (in place into Y, one alias group); Y read at 2 (live_out);
    # instruction 2 has a table latency over its one buffer.
    doc = build_doc(
        tensors=[X(100), X(100, live_out=True)],
        instructions=[
            I(),
            I(reads=[B(0, alias="g")], writes=[B(1, alias="g")], count=3),
            I(reads=[1], latency=table([0], [2.0, 1.0])),
        ],
        alignment=64,
        capacity=1024,
        name="résumé-π",  # non-ASCII: the hash escapes it (ensure_ascii)
    )
    doc["loops"] = [{"first": 1, "last": 1, "trip_count": 3}]
    doc["x-extra"] = {"note": "unknown keys are kept and hashed", "ü": [1, 2.5, None]}
    return doc


# ============================================================================ round trips


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_round_trip_and_atomic_write(tmp_path, suffix):
    doc = _doc()
    inst = instance_from_dict(doc)
    path = tmp_path / f"inst{suffix}"
    save_instance(inst, path)
    assert_only_files(tmp_path, path.name)  # no temp file left
    raw = path.read_bytes()
    if suffix == ".json.gz":
        assert raw[:2] == b"\x1f\x8b"
        raw = gzip.decompress(raw)
    assert json.loads(raw) == doc
    back = load_instance(path)
    assert back.sha256 == inst.sha256 == spec_hash(doc)
    assert back == inst
    assert back.to_dict() == doc
    # Saving again over the file is atomic too and leaves it identical.
    save_instance(back, path)
    assert_only_files(tmp_path, path.name)
    assert load_instance(path).sha256 == inst.sha256


def test_round_trip_json_to_gz_keeps_the_hash(tmp_path):
    inst = instance_from_dict(_doc())
    save_instance(inst, tmp_path / "a.json")
    save_instance(load_instance(tmp_path / "a.json"), tmp_path / "a.json.gz")
    assert load_instance(tmp_path / "a.json.gz").sha256 == inst.sha256


def test_canonical_hash_is_the_spec_formula():
    doc = _doc()
    inst = instance_from_dict(doc)
    assert inst.sha256 == spec_hash(doc)
    # Unknown keys are covered by the hash but ignored by the rules.
    other = copy.deepcopy(doc)
    other["x-extra"]["note"] = "changed"
    changed = instance_from_dict(other)
    assert changed.sha256 != inst.sha256
    assert changed.buffers == inst.buffers and changed.instructions == inst.instructions


def test_hash_of_a_file_is_over_the_parsed_document(tmp_path):
    # Key order and whitespace of the file do not matter; the parsed object does.
    doc = _doc()
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(doc, indent=3, ensure_ascii=False), encoding="utf-8")
    assert load_instance(path).sha256 == spec_hash(doc)
    for name in ("tiny_pair", "tiny_alias"):
        doc = conformance_vector(name)["instance"]
        assert instance_from_dict(doc).sha256 == spec_hash(doc)


# ============================================================================= validation


def _mutate(fn):
    doc = _doc()
    fn(doc)
    return doc


def _swap_buffers_within_instruction(doc):
    # Instruction 1 lists [0, 1]: buffer 0 reads P, buffer 1 writes Y. Exchanging their
    # contents (keeping ids) gives the output the lower id: not game order.
    b = doc["buffers"]
    b[0], b[1] = dict(b[1], id=0), dict(b[0], id=1)


def _ids_across_instructions(doc):
    # Buffer 2 (instruction 2) and buffer 1 (instruction 1) swap their ids.
    b = doc["buffers"]
    b[1], b[2] = dict(b[2], id=1), dict(b[1], id=2)
    doc["instructions"][1]["buffers"] = [0, 2]
    doc["instructions"][2]["buffers"] = [1]
    doc["instructions"][2]["latency"]["varied"] = [1]


def _set(path, value):
    def fn(doc):
        obj = doc
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value

    return fn


INVALID = [
    ("wrong format", _set(["format"], "mallocgame-solution"), FormatError, "format"),
    ("wrong version", _set(["version"], 2), FormatError, "version"),
    ("version true", _set(["version"], True), FormatError, "unsupported instance version True"),
    ("version as text", _set(["version"], "1"), FormatError, "unsupported instance version '1'"),
    ("game order in an instruction", _swap_buffers_within_instruction, InstanceError, "game order"),
    ("game order across instructions", _ids_across_instructions, InstanceError, "game order"),
    ("buffer id not its index", _set(["buffers", 0, "id"], 7), InstanceError, "id"),
    ("dangling tensor", _set(["buffers", 1, "tensor_id"], 9), InstanceError, "tensor"),
    ("dangling instruction", _set(["buffers", 1, "instruction"], 9), InstanceError, "instruction"),
    ("dangling buffer", _set(["instructions", 2, "buffers"], [2, 9]), InstanceError, "buffer"),
    ("negative tensor size", _set(["tensors", 0, "size"], -1), InstanceError, "size"),
    ("negative buffer size", _set(["buffers", 0, "size"], -4), InstanceError, "size"),
    (
        "zero fast bandwidth",
        _set(["hardware", "fast_bandwidth"], 0),
        InstanceError,
        "fast_bandwidth",
    ),
    (
        "zero slow bandwidth",
        _set(["hardware", "slow_bandwidth"], 0.0),
        InstanceError,
        "slow_bandwidth",
    ),
    (
        "zero copy bandwidth",
        _set(["hardware", "copy_bandwidth"], 0),
        InstanceError,
        "copy_bandwidth",
    ),
    ("zero alignment", _set(["hardware", "alignment_bytes"], 0), InstanceError, "alignment"),
    (
        "table too long",
        _set(["instructions", 2, "latency", "latency_s"], [2.0, 1.0, 0.5]),
        InstanceError,
        "table",
    ),
    (
        "table too short",
        _set(["instructions", 2, "latency", "latency_s"], [2.0]),
        InstanceError,
        "table",
    ),
    (
        "defining output off def_time",
        _set(["tensors", 1, "def_time"], 0),
        InstanceError,
        "def_time",
    ),
    (
        "read outside live range",
        _set(["tensors", 1, "last_use_time"], 1),
        InstanceError,
        "live range",
    ),
    (
        "no defining output",
        lambda d: d["tensors"].append(dict(d["tensors"][1], id=2, def_time=2, last_use_time=2)),
        InstanceError,
        "defining output",
    ),
    (
        "an output of a program input",
        _set(["buffers", 0, "is_output"], True),
        InstanceError,
        "def_time",
    ),
    ("negative demand", _set(["buffers", 0, "demand_s"], -1.0), InstanceError, "demand"),
    ("negative supply", _set(["instructions", 0, "supply_s"], -0.5), InstanceError, "supply"),
    ("zero count", _set(["instructions", 1, "count"], 0), InstanceError, "count"),
    (
        "unknown latency kind",
        _set(["instructions", 0, "latency", "kind"], "magic"),
        InstanceError,
        "latency",
    ),
    # The ranges of SPEC section 1: outside them sums overflow or lose exactness.
    (
        "supply past the range",
        _set(["instructions", 0, "supply_s"], 1e308),
        InstanceError,
        "supply_s must be in 0..1e12",
    ),
    (
        "compute past the range",
        _set(["instructions", 1, "latency", "compute_s"], 1e308),
        InstanceError,
        "compute_s",
    ),
    (
        "a table latency past the range",
        _set(["instructions", 2, "latency", "latency_s"], [2.0, 1e13]),
        InstanceError,
        "table",
    ),
    ("a size of 2**63", _set(["tensors", 0, "size"], 2**63), InstanceError, "outside 0..2**53"),
    (
        "a buffer size of 2**64",
        _set(["buffers", 0, "size"], 2**64),
        InstanceError,
        "outside 0..2**53",
    ),
    (
        "a capacity of 2**63",
        _set(["hardware", "fast_memory_bytes"], 2**63),
        InstanceError,
        "fast_memory_bytes",
    ),
    (
        "a capacity of 1e30",
        _set(["hardware", "fast_memory_bytes"], 1e30),
        InstanceError,
        "fast_memory_bytes",
    ),
    (
        "a tiny slow bandwidth",
        _set(["hardware", "slow_bandwidth"], 1e-308),
        InstanceError,
        "slow_bandwidth",
    ),
    ("a count of 2**31", _set(["instructions", 1, "count"], 2**31), InstanceError, "count"),
    (
        "a trip count of 10**30",
        lambda d: d.update(loops=[{"first": 1, "last": 2, "trip_count": 10**30}]),
        InstanceError,
        "trip_count",
    ),
    ("a demand of 10**400", _set(["buffers", 0, "demand_s"], 10**400), InstanceError, "demand_s"),
    (
        "a table latency of 10**400",
        _set(["instructions", 2, "latency", "latency_s"], [2.0, 10**400]),
        InstanceError,
        "'latency_s' holds a non-finite or non-number",
    ),
    (
        "sizes summing past 2**53",
        lambda d: [b.update(size=2**52) for b in d["buffers"]],
        InstanceError,
        "sum to",
    ),
    # A name is a string where the key is present: the loader refuses, never str()s, any other.
    (
        "a tensor name null",
        _set(["tensors", 0, "name"], None),
        InstanceError,
        "tensor 0: 'name' must be a string, got None",
    ),
    (
        "a hardware name that is an object",
        _set(["hardware", "name"], {"a": 1}),
        InstanceError,
        "hardware: 'name' must be a string",
    ),
    (
        "an instruction name that is a list",
        _set(["instructions", 0, "name"], [1]),
        InstanceError,
        "instruction 0: 'name' must be a string, got [1]",
    ),
    (
        "an instruction opcode false",
        _set(["instructions", 1, "opcode"], False),
        InstanceError,
        "instruction 1: 'opcode' must be a string, got False",
    ),
]


@pytest.mark.parametrize("what, mutate, error, word", INVALID, ids=[row[0] for row in INVALID])
def test_validation_errors(what, mutate, error, word):
    doc = _mutate(mutate)
    with pytest.raises(error) as info:
        instance_from_dict(doc)
    assert word in str(info.value)
    assert isinstance(info.value, MallocGameError)


def test_absent_names_and_opcodes_take_their_defaults():
    doc = _doc()
    del doc["tensors"][1]["name"], doc["instructions"][2]["name"]
    del doc["instructions"][2]["opcode"]
    inst = instance_from_dict(doc)
    assert (inst.tensors[1].name, inst.instructions[2].name) == ("t1", "i2")
    assert inst.instructions[2].opcode == ""


@pytest.mark.parametrize(
    "change, needle",
    [
        (
            lambda i: {"buffers": (replace(i.buffers[0], size=4.5), *i.buffers[1:])},
            "buffer 0: size must be an int, got 4.5 (float)",
        ),
        (
            lambda i: {"hardware": replace(i.hardware, fast_memory_bytes=1024.5)},
            "hardware: fast_memory_bytes must be an int",
        ),
        (
            lambda i: {"buffers": (replace(i.buffers[0], is_output=0), *i.buffers[1:])},
            "buffer 0: is_output must be a bool, got 0 (int)",
        ),
        (
            lambda i: {"tensors": (replace(i.tensors[0], size=np.int64(100)), *i.tensors[1:])},
            "tensor 0: size must be an int, got np.int64(100) (int64)",
        ),
        (
            lambda i: {"hardware": replace(i.hardware, copy_bandwidth=np.float32(1e9))},
            "copy_bandwidth must be a float",
        ),
        (
            lambda i: {"tensors": (replace(i.tensors[0], name=7), *i.tensors[1:])},
            "tensor 0: name must be a str, got 7 (int)",
        ),
        (lambda i: {"name": None}, "instance: name must be a str, got None (NoneType)"),
        (  # a str where an int goes is no surrogate
            lambda i: {"tensors": (replace(i.tensors[0], size="100"), *i.tensors[1:])},
            "tensor 0: size must be an int, got '100' (str)",
        ),
        (  # (was "name must be a str, got 't\\ud800' (str)")
            lambda i: {"tensors": (replace(i.tensors[0], name="t\ud800"), *i.tensors[1:])},
            "tensor 0: name 't\\ud800' holds an unpaired surrogate",
        ),
    ],
)
def test_an_instance_made_in_code_is_held_to_the_file_types(change, needle):
    """What the loader refuses, validate refuses in an instance made in code; an int where
    a float goes is a JSON number like any other."""
    inst = instance_from_dict(_doc())
    with pytest.raises(InstanceError, match=re.escape(needle)):
        validate(replace(inst, **change(inst)))
    validate(replace(inst, hardware=replace(inst.hardware, copy_bandwidth=10**9)))


def test_the_instance_keeps_its_own_document():
    doc = _doc()
    inst = instance_from_dict(doc)
    capacity = inst.hardware.fast_memory_bytes
    doc["hardware"]["fast_memory_bytes"] = 1  # the caller's document, after the parse
    inst.to_dict()["buffers"][0]["size"] = 999_999  # a copy the caller was given
    assert inst.to_dict() == _doc() and inst.sha256 == spec_hash(_doc())
    assert inst.hardware.fast_memory_bytes == capacity


def test_an_alias_id_past_int64_checks_like_any_other():
    from mallocgame.check import check_solution
    from mallocgame.game import Game
    from mallocgame.solvers.base import solution_from_game

    doc = _doc()
    for b in doc["buffers"]:
        b["alias_id"] = 10**30 + b["alias_id"]
    inst, plain = instance_from_dict(doc), instance_from_dict(_doc())
    for action in (0, 1, 2):  # every buffer the action, where legal, else Drop
        reports = []
        for i in (inst, plain):
            g = Game(i)
            while not g.done:
                g.step(action if g.legal_mask()[action] else 2)
            answer = solution_from_game(i, g, solver="t", seed=0, wall_s=0.0)
            reports.append(check_solution(i, answer).ok)
        assert reports == [True, True]


def test_not_an_object():
    with pytest.raises(FormatError):
        instance_from_dict([1, 2, 3])


@pytest.mark.parametrize(
    "what, mutate, error, word", INVALID[:4], ids=[row[0] for row in INVALID[:4]]
)
def test_file_errors_name_the_file(tmp_path, what, mutate, error, word):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_mutate(mutate)))
    with pytest.raises(error) as info:
        load_instance(path)
    assert "bad.json" in str(info.value) and word in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(InputFileError) as info:
        load_instance(tmp_path / "nowhere.json")
    assert "nowhere.json" in str(info.value)


@pytest.mark.parametrize(
    "name, data",
    [
        ("bad.json", b'{"format": "mallocgame-instance", "version": 1,'),
        ("bad.json", b"\xff\xfe not text"),
        ("bad.json.gz", gzip.compress(b"{not json}", mtime=0)),
        ("bad.json.gz", gzip.compress(json.dumps({"a": 1}).encode(), mtime=0)[:-10]),  # truncated
    ],
)
def test_malformed_files(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputFileError) as info:
        load_instance(path)
    assert name in str(info.value)


def test_conformance_instances_load(tmp_path):
    for name in CONFORMANCE_NAMES:
        doc = conformance_vector(name)["instance"]
        out = tmp_path / f"{name}.json.gz"
        save_instance(instance_from_dict(doc), out)
        assert load_instance(out).sha256 == spec_hash(doc)


def test_a_shared_instance_s_source_cannot_be_changed_by_one_holder() -> None:
    """load_workload hands out one instance per name: a caller that changed its source
    (a dict) changed every later load's, under the file's hash."""
    import pickle

    from mallocgame.workloads.registry import load_workload

    inst = load_workload("xla-v1/gru_infer")
    assert inst.source  # the frontend's and the cost model's account
    nested = next(k for k, v in inst.source.items() if isinstance(v, dict))
    for change in (
        lambda s: s.__setitem__("model", "mine"),
        lambda s: s.update(model="mine"),
        lambda s: s.pop(next(iter(s))),
        lambda s: s.clear(),
        lambda s: s[nested].__setitem__("x", 1),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change(inst.source)
    listed = replace(inst, source={"notes": ["a"]})
    with pytest.raises(TypeError, match="read-only"):
        listed.source["notes"].append("b")
    assert listed.source == {"notes": ["a"]}  # still equal to the plain values
    mine = dict(inst.source)  # a copy is the caller's to change
    mine["model"] = "mine"
    assert load_workload("xla-v1/gru_infer").source == inst.source != mine
    # it travels (pickled to workers, copied) and serializes as the plain values do
    assert pickle.loads(pickle.dumps(inst)).source == inst.source
    assert copy.deepcopy(inst).source == inst.source
    assert json.loads(json.dumps(inst.source)) == json.loads(json.dumps(dict(inst.source)))
    built = replace(inst, document=None, source={"notes": ["a"], "cost": {"x": 1}})
    doc = built.to_dict()  # the caller's own copy, changeable all the way down
    doc["source"]["notes"].append("b")
    doc["source"]["cost"]["x"] = 2
    assert built.source == {"notes": ["a"], "cost": {"x": 1}}


@pytest.mark.parametrize(
    "value",
    [{1, 2}, b"raw", float("nan"), float("inf"), np.int64(3), {"k": {1: "a"}}, [object()]],
    ids=["set", "bytes", "nan", "inf", "numpy int", "int key", "object"],
)
def test_a_value_no_json_file_holds_is_refused_when_the_instance_is_made(value) -> None:
    """Unknown keys were kept unchecked: the hash then raised a bare TypeError (a set,
    bytes) or hashed a NaN no file can hold."""
    doc = _doc()
    doc["extra"] = value
    with pytest.raises(InstanceError, match=r"instance\.extra.*is no JSON value|is not a string"):
        instance_from_dict(doc)


def test_a_version_that_is_no_whole_number_is_refused() -> None:
    """ "version": 1.0 was read as 1 (a solution's 1.0 is refused)."""
    for version in (1.0, True, "1"):
        doc = _doc()
        doc["version"] = version
        with pytest.raises(FormatError, match="unsupported instance version"):
            instance_from_dict(doc)


def test_an_instance_made_in_code_with_nested_numbers_of_no_file_type_is_refused() -> None:
    """validate() checked the records' own fields only: NumPy numbers in an instruction's
    buffers or latency passed, then hashing or saving the instance failed (and a string
    compute_s raised TypeError)."""
    from mallocgame.instance import RooflineLatency, TableLatency

    inst = instance_from_dict(_doc())
    t_table = next(
        t for t, i in enumerate(inst.instructions) if isinstance(i.latency, TableLatency)
    )
    t_roof = next(
        t for t, i in enumerate(inst.instructions) if isinstance(i.latency, RooflineLatency)
    )
    t_read = next(t for t, i in enumerate(inst.instructions) if i.buffers)

    def changed(t: int, **fields) -> object:
        instructions = list(inst.instructions)
        instructions[t] = replace(instructions[t], **fields)
        return replace(inst, instructions=tuple(instructions), document=None)

    table_lat = inst.instructions[t_table].latency
    roof = inst.instructions[t_roof].latency
    cases = [
        (
            changed(t_read, buffers=tuple(np.int64(b) for b in inst.instructions[t_read].buffers)),
            "buffers",
        ),
        (
            changed(
                t_table,
                latency=replace(table_lat, varied=tuple(np.int64(v) for v in table_lat.varied)),
            ),
            "latency varied",
        ),
        (
            changed(
                t_table,
                latency=replace(
                    table_lat, latency_s=tuple(np.float32(v) for v in table_lat.latency_s)
                ),
            ),
            "latency latency_s",
        ),
        (
            changed(t_roof, latency=replace(roof, compute_s=np.float32(roof.compute_s))),
            "latency compute_s",
        ),
        (changed(t_roof, latency=replace(roof, fixed_s="0")), "latency fixed_s"),
    ]
    for bad, needle in cases:
        with pytest.raises(InstanceError, match=needle):
            validate(bad)


@pytest.mark.parametrize(
    "source, needle",
    [
        (None, "source must be an object"),
        ([("a", 1)], "source must be an object"),
        ({"n": np.int64(3)}, r"source\.n: .*3\)? \(int64\) is no JSON value"),
        ({"s": {"t": {1, 2}}}, r"source\.s\.t: .* is no JSON value"),
        ({1: "a", "1": "b"}, "the key 1 is not a string"),
        ({"x": float("nan")}, r"source\.x: nan"),
        ({"deep": _nested(330)}, "source: objects and arrays nested more than 99 deep"),
    ],
)
def test_an_instance_made_in_code_refuses_a_source_no_file_holds(source, needle) -> None:
    """A source that is not a JSON object was kept: the instance then saved a file the
    loader refuses (None, a list), or its hash raised a bare TypeError (NumPy numbers,
    sets, mixed keys) or covered a NaN."""
    inst = instance_from_dict(_doc())
    with pytest.raises(InstanceError, match=needle):
        replace(inst, source=source)
