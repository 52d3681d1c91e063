"""The one coercer of solver settings: names, types, choices, lists, nested settings,
range checks, and the documentation ``mallocgame solvers`` prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from mallocgame.errors import SolverError
from mallocgame.solvers import SOLVERS
from mallocgame.options import json_settings, option_docs, parse_config, setting, typed_options


@dataclass(frozen=True)
class Inner:
    size: int = setting(4, "cells")

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError("size must be at least 1")


@dataclass(frozen=True)
class Demo:
    count: int = setting(1, "things, a whole number")
    rate: float = setting(0.5, "per second")
    on: bool = setting(True, "a switch")
    mode: Literal["fast", "slow"] = setting("fast", "how")
    names: tuple[str, ...] = setting(("a", "b"), "a list")
    sizes: tuple[int, ...] = setting((1,), "a list of whole numbers")
    limit: float | None = setting(None, "seconds, or none")
    label: str = setting("x", "free text")
    inner: Inner = setting(factory=Inner, doc="nested")

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("count must be at least 1")


def test_values_from_the_command_line_are_typed() -> None:
    cfg = parse_config(Demo, {
        "count": "3", "rate": "1e-3", "on": "no", "mode": "slow", "names": " c, d ", "sizes": "2,3",
        "limit": "none", "label": "7", "inner.size": "8",
    }, "demo")
    assert cfg == Demo(3, 1e-3, False, "slow", ("c", "d"), (2, 3), None, "7", Inner(8))


def test_values_from_json_and_the_library_are_typed() -> None:
    cfg = parse_config(Demo, {"count": 3.0, "rate": 2, "on": 0, "names": ["e"], "sizes": 5, "limit": 1.5}, "demo")
    assert cfg == Demo(count=3, rate=2.0, on=False, names=("e",), sizes=(5,), limit=1.5)
    assert isinstance(cfg.rate, float) and isinstance(cfg.count, int)
    assert parse_config(Demo, {"names": ""}, "demo").names == ()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"cuont": 2}, r"^demo: unknown option 'cuont' \(valid: count, rate, on, mode, names, sizes, limit, "
                       r"label, inner\.size\)$"),
        ({"inner.sise": 2}, r"^demo: unknown option 'inner\.sise' \(valid: inner\.size\)$"),
        ({"inner": 2}, "unknown option 'inner'"),
        ({"count": "three"}, "^demo: option count must be a whole number, not 'three'$"),
        ({"count": 2.5}, "option count must be a whole number"),
        ({"count": True}, "option count must be a whole number"),
        ({"rate": "nan"}, "option rate must be a finite number"),
        ({"rate": float("inf")}, "option rate must be a finite number"),
        ({"on": "maybe"}, "option on must be true or false"),
        ({"on": 2}, "option on must be true or false"),
        ({"mode": "medium"}, "option mode must be one of 'fast', 'slow', not 'medium'"),
        ({"sizes": "1,x"}, "option sizes item must be a whole number"),
        ({"names": 3}, "option names must be a list of str"),
        ({"label": 3}, "option label must be a string"),
        ({"count": 0}, "^demo: count must be at least 1$"),
        ({"inner.size": 0}, "^demo: size must be at least 1$"),
    ],
)
def test_a_bad_name_or_value_is_one_line_naming_the_solver(options: dict, message: str) -> None:
    with pytest.raises(SolverError, match=message):
        parse_config(Demo, options, "demo")


def test_settings_and_typed_options_are_json() -> None:
    cfg = parse_config(Demo, {"sizes": "2,3", "inner.size": "8"}, "demo")
    settings = json_settings(cfg)
    assert settings["sizes"] == [2, 3] and settings["inner"] == {"size": 8} and settings["limit"] is None
    assert typed_options(cfg, {"sizes": "2,3", "inner.size": "8"}) == {"sizes": [2, 3], "inner.size": 8}


def test_option_docs_list_every_setting_with_its_kind_and_default() -> None:
    docs = {d.name: d for d in option_docs(Demo)}
    assert list(docs) == ["count", "rate", "on", "mode", "names", "sizes", "limit", "label", "inner.size"]
    assert docs["mode"].kind == "one of fast, slow" and docs["mode"].default == "fast"
    assert docs["limit"].kind == "float or none" and docs["names"].default == ["a", "b"]
    assert docs["inner.size"].doc == "cells"


@pytest.mark.parametrize("name", list(SOLVERS))
def test_every_solver_documents_every_setting(name: str) -> None:
    for doc in option_docs(SOLVERS[name].Config):
        assert doc.doc, f"{name}: option {doc.name} has no doc"
