"""Programs (mallocgame.program): the file document, round trips, and every structural
rule, each broken on :func:`tests.builders.tiny_program` and named by a typed error."""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from mallocgame.costmodel import derive_instance
from mallocgame.errors import FormatError, InputFileError, InstanceError, MallocGameError
from mallocgame.instance import save_instance
from mallocgame.program import (
    PROGRAM_FORMAT,
    PROGRAM_VERSION,
    Program,
    ProgramError,
    ProgramInstruction,
    ProgramLoop,
    load_program,
    program_from_dict,
    save_program,
    validate_program,
)
from tests.builders import assert_only_files, tiny_program

# ============================================================================ the document


def test_buffer_counts() -> None:
    program = tiny_program()
    # operands then outputs: 1 + 3 + 3 + 2
    assert [ins.num_buffers for ins in program.instructions] == [1, 3, 3, 2]
    assert program.num_buffers == 9


def test_document_by_hand() -> None:
    doc = tiny_program().to_dict()
    assert (
        (doc["format"], doc["version"])
        == (PROGRAM_FORMAT, PROGRAM_VERSION)
        == ("mallocgame-program", 1)
    )
    assert doc["name"] == "tiny" and doc["source"] == {"frontend": "hand", "model": "tiny"}
    assert doc["instructions"][1] == {
        "name": "dot.1",
        "opcode": "dot",
        "operands": [0, 1],
        "outputs": [2],
        "operand_bytes": [1000, 400],
        "output_bytes": [600],
        "flops": 2e6,
        "transcendentals": 0.0,
        "count": 3,
    }
    assert doc["tensors"][4] == {
        "id": 4,
        "name": "out",
        "size": 600,
        "def_time": 3,
        "last_use_time": 3,
        "live_out": True,
        "shape": "",
    }
    assert doc["alias_groups"] == [[[1, 2], [2, 0], [2, 2], [3, 0]]]
    assert doc["loops"] == [{"first": 1, "last": 2, "trip_count": 3}]
    json.dumps(doc)  # plain JSON values only


def test_dict_round_trip() -> None:
    program = tiny_program()
    assert program_from_dict(program.to_dict()) == program
    # through JSON text too (tuples become lists and back)
    assert program_from_dict(json.loads(json.dumps(program.to_dict()))) == program


def test_optional_keys_take_their_defaults() -> None:
    doc = tiny_program().to_dict()
    for key in ("source", "alias_groups", "loops"):
        del doc[key]
    for ins in doc["instructions"]:
        for key in ("flops", "transcendentals", "count"):
            del ins[key]
    for x in doc["tensors"]:
        del x["live_out"], x["shape"]
    program = program_from_dict(doc)
    assert program.source == {} and program.alias_groups == () and program.loops == ()
    assert all((i.flops, i.transcendentals, i.count) == (0.0, 0.0, 1) for i in program.instructions)
    assert not any(x.live_out for x in program.tensors) and all(
        x.shape == "" for x in program.tensors
    )


def test_save_refuses_a_program_load_would_refuse(tmp_path: Path) -> None:
    """save_program wrote a program of flops 10**400 that load_program then refused; now
    it is refused before a byte is written, and a file already there is kept."""
    program = tiny_program()
    big = dataclasses.replace(program.instructions[1], flops=10**400)
    broken = dataclasses.replace(
        program, instructions=(program.instructions[0], big, *program.instructions[2:])
    )
    path = tmp_path / "p.json"
    with pytest.raises(ProgramError, match="flops must be finite"):
        save_program(broken, path)
    assert_only_files(tmp_path)
    save_program(program, path)
    with pytest.raises(ProgramError):
        save_program(broken, path)
    assert load_program(path) == program
    assert_only_files(tmp_path, path.name)


def test_save_refuses_an_empty_alias_group(tmp_path: Path) -> None:
    """validate_program passed an alias group of no members, so save_program wrote a file
    whose group load_program refused; now it is refused before anything is written."""
    broken = dataclasses.replace(tiny_program(), alias_groups=((),))
    needle = "alias group 0 is not a non-empty list of members"
    with pytest.raises(ProgramError, match=needle):
        validate_program(broken)
    with pytest.raises(ProgramError, match=needle):
        save_program(broken, tmp_path / "p.json")
    assert_only_files(tmp_path)
    doc = broken.to_dict()  # the file it would have written: the loader's own refusal
    with pytest.raises(ProgramError, match=needle):
        program_from_dict(doc)


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_file_round_trip(tmp_path: Path, suffix: str) -> None:
    program = tiny_program()
    path = tmp_path / f"tiny{suffix}"
    save_program(program, path)
    assert_only_files(tmp_path, path.name)  # written atomically: no temporary left
    raw = path.read_bytes()
    if suffix == ".json.gz":
        assert raw[:2] == b"\x1f\x8b"
        raw = gzip.decompress(raw)
    assert json.loads(raw) == program.to_dict()
    assert load_program(path) == program
    save_program(load_program(path), str(path))  # over itself, from a str path
    assert load_program(path) == program
    assert_only_files(tmp_path, path.name)


# =========================================================================== bad documents


@pytest.mark.parametrize(
    "doc, needle",
    [
        ([1, 2], "expected a JSON object"),
        (
            {**tiny_program().to_dict(), "format": "mallocgame-instance"},
            "format is 'mallocgame-instance'",
        ),
        ({k: v for k, v in tiny_program().to_dict().items() if k != "format"}, "format is None"),
        ({**tiny_program().to_dict(), "version": 2}, "unsupported program version 2"),
        ({**tiny_program().to_dict(), "version": 1.0}, "unsupported program version 1.0"),
        ({**tiny_program().to_dict(), "version": True}, "unsupported program version True"),
    ],
)
def test_wrong_kind_of_document_is_a_format_error(doc: Any, needle: str) -> None:
    with pytest.raises(FormatError, match=needle):
        program_from_dict(doc)


def _drop(*keys: Any) -> Callable[[dict], None]:
    """Delete ``doc[k0][k1]...`` (the last key is removed)."""

    def mutate(doc: dict) -> None:
        node = doc
        for k in keys[:-1]:
            node = node[k]
        del node[keys[-1]]

    return mutate


@pytest.mark.parametrize(
    "mutate",
    [
        _drop("name"),
        _drop("instructions"),
        _drop("tensors", 2, "size"),
        _drop("instructions", 1, "operand_bytes"),
        lambda doc: doc["tensors"][0].update(size="big"),
        lambda doc: doc["instructions"].__setitem__(0, 7),
        lambda doc: doc["loops"][0].update(first=None),
        lambda doc: doc["tensors"][0].update(size=512.9),  # never truncated to 512
        lambda doc: doc["tensors"][0].update(size=float("inf")),  # JSON's 1e400
        lambda doc: doc["tensors"][0].update(live_out="false"),  # never taken for true
        lambda doc: doc["instructions"][0].update(count=True),
        lambda doc: doc["instructions"][0].update(flops="1e9"),
        lambda doc: doc.update(alias_groups=[[[0, 1, 12345]]]),  # never cut to [0, 1]
        lambda doc: doc.update(alias_groups=[[]]),
        lambda doc: doc.update(alias_groups=[[0, 1]]),
    ],
    ids=[
        "name",
        "instructions",
        "tensor-size",
        "operand-bytes",
        "size-text",
        "instruction-int",
        "loop-none",
        "size-fraction",
        "size-infinite",
        "live-out-text",
        "count-bool",
        "flops-text",
        "alias-member-of-three",
        "alias-group-empty",
        "alias-member-not-a-pair",
    ],
)
def test_a_malformed_document_is_a_program_error(mutate: Callable[[dict], None]) -> None:
    doc = tiny_program().to_dict()
    mutate(doc)
    with pytest.raises(ProgramError, match="program: malformed program document"):
        program_from_dict(doc)


@pytest.mark.parametrize("key", ["flops", "transcendentals"])
def test_a_number_too_large_for_a_float_is_a_program_error(key: str) -> None:
    doc = tiny_program().to_dict()
    doc["instructions"][1][key] = 10**400  # JSON holds it; no float does
    with pytest.raises(ProgramError, match="an integer too large for a float"):
        program_from_dict(doc)


def _set(where: str, value: Any) -> Callable[[dict], None]:
    """Set one field: ``where`` is ``"section.index.key"`` or ``"section.index"``."""

    def mutate(doc: dict) -> None:
        section, index, *key = where.split(".")
        if key:
            doc[section][int(index)][key[0]] = value
        else:
            doc[section][int(index)] = value

    return mutate


def _add_tensor(doc: dict) -> None:
    doc["tensors"].append({"id": 5, "name": "ghost", "size": 8, "def_time": 0, "last_use_time": 0})


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda doc: doc.update(name=None), "'name' must be a string, got None"),
        (lambda doc: doc.update(name=5), "'name' must be a string, got 5"),
        (lambda doc: doc.update(source=[["frontend", "x"]]), "'source' must be an object"),
        (lambda doc: doc.update(instructions={}), "'instructions' must be a list, got {}"),
        (lambda doc: doc.update(tensors={}), "'tensors' must be a list, got {}"),
        (lambda doc: doc.update(alias_groups={}), "'alias_groups' must be a list, got {}"),
        (lambda doc: doc.update(loops={}), "'loops' must be a list, got {}"),
        (lambda doc: doc.update(loops="ab"), "'loops' must be a list, got 'ab'"),
        (_set("instructions.3.name", [1]), r"'name' must be a string, got \[1\]"),
        (_set("instructions.3.opcode", None), "'opcode' must be a string, got None"),
        (_set("instructions.3.operands", {}), "'operands' must be a list, got {}"),
        (_set("tensors.1.name", {"k": 1}), "'name' must be a string, got {'k': 1}"),
        (_set("tensors.1.shape", 5), "'shape' must be a string, got 5"),
        (_set("tensors.1.shape", None), "'shape' must be a string, got None"),
    ],
)
def test_a_field_of_another_type_is_refused_not_converted(
    mutate: Callable[[dict], None], needle: str
) -> None:
    """The loader turned a name of null into "None", pairs into a source, {} into no
    loops (str(), dict(), iteration); now each is refused, as the instance loader does."""
    doc = tiny_program().to_dict()
    mutate(doc)
    with pytest.raises(ProgramError, match=f"program: malformed program document .*{needle}"):
        program_from_dict(doc)


# Each mutation of tiny_program breaks one rule (four instructions, five tensors:
# W = 0 input read at 1 and 2; x = 1 by 0; y = 2 by 1; z = 3 by 2; out = 4 by 3).
RULES = {
    "no instructions": (
        lambda doc: doc.update(instructions=[], tensors=[], alias_groups=[], loops=[]),
        "program has no instructions",
    ),
    "tensor id": (_set("tensors.3.id", 7), r"tensor 3: id is 7, expected its index"),
    "negative size": (_set("tensors.1.size", -1), r"tensor 1 \(x\): negative size -1"),
    "def_time range": (_set("tensors.4.def_time", 4), r"tensor 4 \(out\): def_time 4 out of range"),
    "def_time below -1": (
        _set("tensors.0.def_time", -2),
        r"tensor 0 \(W\): def_time -2 out of range",
    ),
    "last use before def": (
        _set("tensors.2.last_use_time", 0),
        r"tensor 2 \(y\): last_use_time 0 outside 1..3",
    ),
    "last use past the end": (
        _set("tensors.4.last_use_time", 4),
        r"tensor 4 \(out\): last_use_time 4 outside 3..3",
    ),
    "count": (_set("instructions.2.count", 0), r"instruction 2 \(dus.2\): count must be >= 1"),
    "negative flops": (
        _set("instructions.1.flops", -1.0),
        r"instruction 1 \(dot.1\): flops must be finite and >= 0, got -1.0",
    ),
    "flops not a number": (
        _set("instructions.1.flops", float("nan")),
        r"instruction 1 \(dot.1\): flops must be finite and >= 0, got nan",
    ),
    "infinite flops": (
        _set("instructions.1.flops", float("inf")),
        r"instruction 1 \(dot.1\): flops must be finite and >= 0, got inf",
    ),
    "negative transcendentals": (
        _set("instructions.3.transcendentals", -1.0),
        r"instruction 3 \(exp.3\): transcendentals must be finite and >= 0, got -1.0",
    ),
    "operand bytes": (_set("instructions.1.operand_bytes", [1000]), "operand_bytes length differs"),
    "output bytes": (_set("instructions.0.output_bytes", []), "output_bytes length differs"),
    "negative bytes": (_set("instructions.3.output_bytes", [-600]), "negative bytes"),
    "dangling operand": (_set("instructions.3.operands", [9]), "dangling operand tensor 9"),
    "read after last use": (
        _set("instructions.3.operands", [1]),
        r"instruction 3 \(exp.3\): reads tensor 1 \(x\) outside its live range \(0, 1\]",
    ),
    "read at its definition": (
        _set("instructions.1.operands", [0, 2]),
        r"reads tensor 2 \(y\) outside its live range \(1, 2\]",
    ),
    "dangling output": (_set("instructions.3.outputs", [5]), "dangling output tensor 5"),
    "defined twice": (
        lambda doc: doc["instructions"][0].update(outputs=[1, 1], output_bytes=[400, 400]),
        r"instruction 0 \(iota.0\): tensor 1 is already defined by instruction 0",
    ),
    "defined by two": (
        _set("instructions.3.outputs", [3]),
        "tensor 3 is already defined by instruction 2",
    ),
    "def_time disagrees": (
        _set("instructions.0.outputs", [4]),
        r"instruction 0 \(iota.0\): defines tensor 4 whose def_time is 3",
    ),
    "no definition": (_add_tensor, r"tensor 5 \(ghost\): no defining instruction"),
    "alias buffer": (
        _set("alias_groups.0", [[1, 2], [3, 2]]),
        r"alias group 0: no buffer \(3, 2\)",
    ),
    "alias instruction": (_set("alias_groups.0", [[4, 0]]), r"alias group 0: no buffer \(4, 0\)"),
    "alias twice": (
        lambda doc: doc["alias_groups"].append([[2, 0]]),
        r"alias group 1: buffer \(2, 0\) is in two groups",
    ),
    "loop range": (_set("loops.0.last", 4), r"loop 0: body 1..4 out of range"),
    "loop order": (_set("loops.0.first", 3), r"loop 0: body 3..2 out of range"),
    "trip count": (_set("loops.0.trip_count", 0), "loop 0: trip_count must be >= 1"),
    # SPEC section 1's upper ends: 2**53 bytes, 2**31-1 executions.
    "size above 2**53": (
        lambda doc: doc["tensors"][1].update(size=2**53 + 1, shape="u8[9007199254740993]"),
        r"tensor 1 \(x, u8\[9007199254740993\]\): size 9007199254740993 bytes is more than 2\*\*53",
    ),
    "bytes above 2**53": (
        _set("instructions.3.output_bytes", [2**53 + 1]),
        r"instruction 3 \(exp.3\): moves more than 2\*\*53 bytes for one buffer",
    ),
    "count above 2**31-1": (
        _set("instructions.2.count", 2**31),
        r"instruction 2 \(dus.2\): count 2147483648 is more than 2\*\*31-1",
    ),
    "trip count above 2**31-1": (
        _set("loops.0.trip_count", 2**31),
        r"loop 0: trip_count 2147483648 is more than 2\*\*31-1",
    ),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_broken_rule_is_named(rule: str) -> None:
    mutate, needle = RULES[rule]
    doc = tiny_program().to_dict()
    mutate(doc)
    with pytest.raises(ProgramError, match=needle):
        program_from_dict(doc)


def test_validate_checks_a_program_built_in_code() -> None:
    program = tiny_program()
    validate_program(program)  # the hand-written program is valid
    bad = ProgramInstruction("exp.3", "exponential", (3,), (4,), (600,), (600,), count=0)
    broken = Program(
        program.name,
        program.instructions[:3] + (bad,),
        program.tensors,
        program.alias_groups,
        program.loops,
    )
    with pytest.raises(ProgramError, match="count must be >= 1"):
        validate_program(broken)
    # what no file can hold, refused where it is made, not after a save and a load
    import dataclasses

    dot = program.instructions[1]
    out = program.tensors[3]
    for change, needle in [
        (
            {
                "instructions": (
                    *program.instructions[:1],
                    dataclasses.replace(dot, count=1.5),
                    *program.instructions[2:],
                )
            },
            "count 1.5 is no integer",
        ),
        (
            {
                "instructions": (
                    *program.instructions[:1],
                    dataclasses.replace(dot, count=True),
                    *program.instructions[2:],
                )
            },
            "count True is no integer",
        ),
        (
            {
                "tensors": (
                    *program.tensors[:3],
                    dataclasses.replace(out, last_use_time=3.5),
                    *program.tensors[4:],
                )
            },
            "last_use_time 3.5 is no integer",
        ),
        ({"alias_groups": (((1, 2, 0),),)}, r"member \(1, 2, 0\) is no \(instruction, position\)"),
    ]:
        with pytest.raises(ProgramError, match=needle):
            validate_program(dataclasses.replace(program, **change))


def _with_instruction(t: int, **change: Any) -> Program:
    program = tiny_program()
    ins = list(program.instructions)
    ins[t] = dataclasses.replace(ins[t], **change)
    return dataclasses.replace(program, instructions=tuple(ins))


def _with_tensor(i: int, **change: Any) -> Program:
    program = tiny_program()
    tensors = list(program.tensors)
    tensors[i] = dataclasses.replace(tensors[i], **change)
    return dataclasses.replace(program, tensors=tuple(tensors))


# Programs made in code with what no file holds: validate_program names each, so that
# derive_instance never refuses (a NumPy integer) or crashes on (None, a float id, a shape
# that is no string) a program it passed, and save_program never meets a NumPy integer.
NOT_OF_THEIR_FILE_TYPE = {
    "numpy size": (
        _with_tensor(1, size=np.int64(400)),
        r"tensor 1 \(x\): size \S*400\S* is no integer",
    ),
    "numpy tensor id": (
        _with_tensor(1, id=np.int64(1)),
        r"tensor 1 \(x\): id \S*1\S* is no integer",
    ),
    "numpy bytes": (
        _with_instruction(1, operand_bytes=(np.int64(1000), 400)),
        r"instruction 1 \(dot.1\): a byte count is no integer",
    ),
    "numpy count": (
        _with_instruction(1, count=np.int64(3)),
        r"instruction 1 \(dot.1\): count \S*3\S* is no integer",
    ),
    "numpy operand": (
        _with_instruction(1, operands=(np.int64(0), 1)),
        r"instruction 1 \(dot.1\): a tensor id is no integer",
    ),
    "none operand": (
        _with_instruction(1, operands=(None, 1)),
        r"instruction 1 \(dot.1\): a tensor id is no integer",
    ),
    "float output": (
        _with_instruction(0, outputs=(1.0,)),
        r"instruction 0 \(iota.0\): a tensor id is no integer",
    ),
    "numpy loop bound": (
        dataclasses.replace(tiny_program(), loops=(ProgramLoop(np.int64(1), 2, 3),)),
        "loop 0: first, last and trip_count must be integers",
    ),
    "none loop bound": (
        dataclasses.replace(tiny_program(), loops=(ProgramLoop(None, 0, 1),)),
        "loop 0: first, last and trip_count must be integers",
    ),
    "numpy alias member": (
        dataclasses.replace(tiny_program(), alias_groups=(((np.int64(1), 2),),)),
        r"alias group 0: member .* is no \(instruction, position\)",
    ),
    "alias member no pair": (
        dataclasses.replace(tiny_program(), alias_groups=((5,),)),
        r"alias group 0: member 5 is no \(instruction, position\)",
    ),
    "tensor name": (_with_tensor(1, name=5), "tensor 1: name 5 is no string"),
    "live_out": (_with_tensor(4, live_out="no"), r"tensor 4 \(out\): live_out 'no' is no bool"),
    "shape none": (_with_tensor(2, shape=None), r"tensor 2 \(y\): shape None is no string"),
    "shape int": (_with_tensor(2, shape=5), r"tensor 2 \(y\): shape 5 is no string"),
    "instruction name": (_with_instruction(3, name=3), "instruction 3: name 3 or opcode"),
    "opcode": (_with_instruction(3, opcode=None), "instruction 3: name 'exp.3' or opcode None"),
    "program name": (dataclasses.replace(tiny_program(), name=None), "program: name None is no"),
    # passed validation, then failed to derive or to save (or a bare TypeError)
    "program name no text": (
        dataclasses.replace(tiny_program(), name="bad\ud800"),
        "program: name .* is no string \\(UTF-8 text\\)",
    ),
    "tensor name no text": (_with_tensor(1, name="t\ud800"), "tensor 1: name .*UTF-8 text"),
    "opcode no text": (_with_instruction(3, opcode="op\udcff"), "instruction 3: name .*UTF-8"),
    "operands a list": (
        _with_instruction(1, operands=[0, 1]),
        r"instruction 1: operands \[0, 1\] is no tuple",
    ),
    "loops none": (dataclasses.replace(tiny_program(), loops=None), "loops must be a tuple of"),
    "loop a tuple": (
        dataclasses.replace(tiny_program(), loops=((1, 2, 3),)),
        "loops must be a tuple of",
    ),
    "alias groups none": (
        dataclasses.replace(tiny_program(), alias_groups=None),
        "alias_groups must be a tuple of groups",
    ),
    "source none": (dataclasses.replace(tiny_program(), source=None), "source None is no object"),
    "source nan": (
        dataclasses.replace(tiny_program(), source={"x": float("nan")}),
        r"program: source\.x: nan",
    ),
    "source numpy": (
        dataclasses.replace(tiny_program(), source={"x": np.int64(3)}),
        r"program: source\.x: .* is no JSON value",
    ),
    "source too deep": (
        dataclasses.replace(tiny_program(), source={"x": json.loads("[" * 99 + "]" * 99)}),
        "program: source: objects and arrays nested more than 99 deep",
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_OF_THEIR_FILE_TYPE))
def test_validate_refuses_what_no_file_holds(case: str) -> None:
    program, needle = NOT_OF_THEIR_FILE_TYPE[case]
    with pytest.raises(ProgramError, match=needle):
        validate_program(program)
    with pytest.raises(ProgramError, match=needle):
        derive_instance(program, "gpu_h100_host")


def test_a_valid_program_derives_and_saves(tmp_path: Path) -> None:
    program = _with_tensor(2, shape="f32[10,15]")  # the dot's output: a shape the cost model reads
    validate_program(program)
    save_instance(derive_instance(program, "gpu_h100_host"), tmp_path / "i.json")
    save_program(program, tmp_path / "p.json")
    assert load_program(tmp_path / "p.json") == program
    # a source of other Mappings, deep down: it was copied one level, and json.dumps refused
    proxy = dataclasses.replace(program, source={"x": MappingProxyType({"y": (1, 2)})})
    validate_program(proxy)
    save_program(proxy, tmp_path / "proxy.json")
    assert dict(load_program(tmp_path / "proxy.json").source) == {"x": {"y": [1, 2]}}


def test_the_largest_sizes_and_counts_of_spec_are_valid() -> None:
    doc = tiny_program().to_dict()
    doc["tensors"][1]["size"] = 2**53
    doc["instructions"][0]["output_bytes"] = [2**53]
    doc["instructions"][2]["count"] = 2**31 - 1
    doc["loops"][0]["trip_count"] = 2**31 - 1
    program = program_from_dict(doc)
    assert program.tensors[1].size == 2**53 and program.loops[0].trip_count == 2**31 - 1


def test_a_program_error_is_an_instance_error() -> None:
    assert issubclass(ProgramError, InstanceError) and issubclass(ProgramError, MallocGameError)


# ================================================================================ bad files


def test_missing_or_unreadable_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        load_program(tmp_path / "nowhere.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(InputFileError, match="not valid JSON"):
        load_program(tmp_path / "broken.json")
    (tmp_path / "broken.json.gz").write_bytes(b"\x1f\x8bnot gzip")
    with pytest.raises(InputFileError):
        load_program(tmp_path / "broken.json.gz")


def test_errors_of_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "instance.json"
    path.write_text(json.dumps({**tiny_program().to_dict(), "format": "mallocgame-instance"}))
    with pytest.raises(FormatError, match=f"^{path}: program: format is 'mallocgame-instance'"):
        load_program(path)
    doc = tiny_program().to_dict()
    doc["loops"][0]["trip_count"] = 0
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(ProgramError, match=f"^{path}: loop 0: trip_count must be >= 1"):
        load_program(path)
