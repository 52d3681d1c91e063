"""The one coercer of solver settings: names, types, choices, lists, nested settings,
range checks, and the documentation ``mallocgame solvers`` prints."""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass, fields, is_dataclass
from typing import Literal

import pytest

from mallocgame.errors import SolverError
from mallocgame.options import (
    Interval,
    check_ranges,
    json_settings,
    option_docs,
    parse_config,
    setting,
    typed_options,
    unranged_options,
)
from mallocgame.solvers import SOLVERS


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
    cfg = parse_config(
        Demo,
        {
            "count": "3",
            "rate": "1e-3",
            "on": "no",
            "mode": "slow",
            "names": " c, d ",
            "sizes": "2,3",
            "limit": "none",
            "label": "7",
            "inner.size": "8",
        },
        "demo",
    )
    assert cfg == Demo(3, 1e-3, False, "slow", ("c", "d"), (2, 3), None, "7", Inner(8))


def test_a_negative_zero_is_zero() -> None:
    """-0 kept its sign: the same setting written -0 hashed to another sweep cell."""
    import math

    for text in ("-0", "-0.0", "0", "0e5"):
        rate = parse_config(Demo, {"rate": text}, "demo").rate
        assert rate == 0.0 and math.copysign(1.0, rate) == 1.0, text
    assert math.copysign(1.0, parse_config(Demo, {"rate": -0.0}, "demo").rate) == 1.0


def test_an_optional_setting_given_empty_is_unset() -> None:
    # ``--option checkpoint_dir=`` leaves the setting unset (no folder), not the path ""
    for empty in ("", "  ", "null"):
        assert parse_config(Demo, {"limit": empty}, "demo").limit is None


def test_values_from_json_and_the_library_are_typed() -> None:
    cfg = parse_config(
        Demo, {"count": 3.0, "rate": 2, "on": 0, "names": ["e"], "sizes": 5, "limit": 1.5}, "demo"
    )
    assert cfg == Demo(count=3, rate=2.0, on=False, names=("e",), sizes=(5,), limit=1.5)
    assert isinstance(cfg.rate, float) and isinstance(cfg.count, int)
    assert parse_config(Demo, {"names": ""}, "demo").names == ()


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"cuont": 2},
            r"^demo: unknown option 'cuont' \(valid: count, rate, on, mode, names, sizes, limit, "
            r"label, inner\.size\)$",
        ),
        ({"inner.sise": 2}, r"^demo: unknown option 'inner\.sise' \(valid: inner\.size\)$"),
        ({"inner": 2}, "unknown option 'inner'"),
        ({"count": "three"}, "^demo: option count must be a whole number, not 'three'$"),
        ({"count": 2.5}, "option count must be a whole number"),
        ({"count": True}, "option count must be a whole number"),
        ({"rate": "nan"}, "option rate must be a finite number"),
        ({"rate": float("inf")}, "option rate must be a finite number"),
        ({"rate": 10**400}, "option rate must be a finite number"),  # JSON's int, past a float
        ({"on": "maybe"}, "option on must be true or false"),
        ({"on": 2}, "option on must be true or false"),
        ({"mode": "medium"}, "option mode must be one of 'fast', 'slow', not 'medium'"),
        ({"sizes": "1,x"}, "option sizes item must be a whole number"),
        ({"sizes": "8,,16"}, "option sizes must be a list of int without an empty item"),
        ({"names": "c,"}, "option names must be a list of str without an empty item"),
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
    assert (
        settings["sizes"] == [2, 3]
        and settings["inner"] == {"size": 8}
        and settings["limit"] is None
    )
    assert typed_options(cfg, {"sizes": "2,3", "inner.size": "8"}) == {
        "sizes": [2, 3],
        "inner.size": 8,
    }


def test_option_docs_list_every_setting_with_its_kind_and_default() -> None:
    docs = {d.name: d for d in option_docs(Demo)}
    assert list(docs) == [
        "count",
        "rate",
        "on",
        "mode",
        "names",
        "sizes",
        "limit",
        "label",
        "inner.size",
    ]
    assert docs["mode"].kind == "one of fast, slow" and docs["mode"].default == "fast"
    assert docs["limit"].kind == "float or none" and docs["names"].default == ["a", "b"]
    assert docs["inner.size"].doc == "cells"


@pytest.mark.parametrize("name", list(SOLVERS))
def test_every_solver_documents_every_setting(name: str) -> None:
    for doc in option_docs(SOLVERS[name].Config):
        assert doc.doc, f"{name}: option {doc.name} has no doc"


# ------------------------------------------------------------------------------ ranges


@dataclass(frozen=True)
class Ranged:
    share: float = setting(0.5, "a probability", within="[0, 1]")
    rate: float = setting(1.0, "per second", within="(0, 10)")
    count: int = setting(2, "things", within="[1, 8]")
    limit: float | None = setting(None, "seconds, or none", within="(0, 1e3]")
    sizes: tuple[int, ...] = setting((4,), "a list of sizes", within="[1, 64]", length=(1, 3))
    names: tuple[str, ...] = setting((), "a list of names", length=(0, 2))
    inner: Inner = setting(factory=Inner, doc="nested, unranged")

    def __post_init__(self) -> None:
        check_ranges(self)


def test_an_interval_reads_its_open_and_closed_ends() -> None:
    closed, half = Interval.parse("[0, 1]"), Interval.parse(" (0 ,1e3] ")
    assert 0 in closed and 1 in closed and 0.5 in closed and 1.01 not in closed and -0.0 in closed
    assert 0 not in half and 1e-300 in half and 1000 in half and 1000.5 not in half
    assert str(half) == "(0, 1e3]" and str(Interval.parse("[-5,5)")) == "[-5, 5)"
    assert True not in closed and "0.5" not in closed and float("nan") not in closed
    for bad in (
        "0, 1",
        "[0, 1",
        "[1, 0]",
        "[0, inf]",
        "[0, NaN]",
        "[0, 1, 2]",
        "[a, 1]",
        "[]",
        "[0, true]",
    ):
        with pytest.raises(TypeError, match="setting range"):
            Interval.parse(bad)
    with pytest.raises(TypeError, match="setting length"):
        setting((), "x", length=(3, 1))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"share": 1.5}, r"^demo: option share must be in \[0, 1\], not 1\.5$"),
        ({"share": "-1"}, r"^demo: option share must be in \[0, 1\], not -1\.0$"),
        ({"rate": 0}, r"^demo: option rate must be in \(0, 10\), not 0\.0$"),
        ({"rate": 10}, r"^demo: option rate must be in \(0, 10\), not 10\.0$"),
        ({"rate": 1e308}, r"^demo: option rate must be in \(0, 10\), not 1e\+308$"),
        ({"count": 0}, r"^demo: option count must be in \[1, 8\], not 0$"),
        ({"count": "9"}, r"^demo: option count must be in \[1, 8\], not 9$"),
        ({"limit": -1}, r"^demo: option limit must be in \(0, 1e3\], not -1\.0$"),
        ({"sizes": ""}, r"^demo: option sizes must hold 1 to 3 items, not 0$"),
        ({"sizes": "1,2,3,4"}, r"^demo: option sizes must hold 1 to 3 items, not 4$"),
        ({"sizes": [8, 0]}, r"^demo: option sizes items must be in \[1, 64\], not 0$"),
        ({"names": "a,b,c"}, r"^demo: option names must hold 0 to 2 items, not 3$"),
    ],
)
def test_a_value_out_of_its_range_is_one_line_naming_the_option_and_range(
    options: dict,
    message: str,
) -> None:
    with pytest.raises(SolverError, match=message):
        parse_config(Ranged, options, "demo")


def test_values_in_range_and_none_pass_and_a_direct_config_checks_its_ranges() -> None:
    cfg = parse_config(
        Ranged,
        {"share": "1", "rate": 9.5, "count": 8, "limit": "none", "sizes": "1,64,2", "names": ""},
        "demo",
    )
    assert cfg == Ranged(1.0, 9.5, 8, None, (1, 64, 2), ())
    assert parse_config(Ranged, {"limit": 1e3}, "demo").limit == 1e3
    with pytest.raises(ValueError, match=r"^option share must be in \[0, 1\], not 2$"):
        Ranged(share=2)
    with pytest.raises(ValueError, match=r"^option sizes must hold 1 to 3 items, not 0$"):
        Ranged(sizes=())


def test_option_docs_show_each_range() -> None:
    docs = {d.name: d.kind for d in option_docs(Ranged)}
    assert docs["share"] == "float in [0, 1]" and docs["limit"] == "float in (0, 1e3] or none"
    assert docs["sizes"] == "list of int (comma-separated), 1 to 3 items, each in [1, 64]"
    assert docs["names"] == "list of str (comma-separated), 0 to 2 items"
    assert docs["inner.size"] == "int"


def test_unranged_options_names_numbers_and_lists_without_a_range() -> None:
    assert unranged_options(Ranged) == ["inner.size"]
    assert unranged_options(Demo) == ["count", "rate", "names", "sizes", "limit", "inner.size"]


@pytest.mark.parametrize("name", SOLVERS)
def test_every_solver_declares_a_range_for_every_setting(name: str) -> None:
    assert unranged_options(SOLVERS[name].Config) == []


def _ranged_fields(cls: type, prefix: str = ""):
    """(option name, field metadata, default) of every ranged setting of ``cls``."""
    hints = typing.get_type_hints(cls)
    defaults = cls()
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            yield from _ranged_fields(hints[f.name], f"{prefix}{f.name}.")
        elif "within" in f.metadata or "length" in f.metadata:
            yield prefix + f.name, f.metadata, getattr(defaults, f.name)


def _outside(metadata) -> list:
    """Values just outside a setting's range, below and above it (list settings: too few or
    too many items, an item outside its interval)."""
    within, length = metadata.get("within"), metadata.get("length")
    if length is not None:
        item = "x" if within is None else within.high  # a list of names, or of numbers
        out = [(item,) * (length[1] + 1)] + ([()] if length[0] > 0 else [])
        if within is not None:
            out.append((within.low - 1,) * max(length[0], 1))
        return out
    below = within.low if within.low_open else within.low - 1
    above = within.high if within.high_open else within.high + max(1, abs(within.high))
    return [below, above]


@pytest.mark.parametrize("name", list(SOLVERS))
def test_every_default_is_in_range_and_every_value_out_of_range_is_refused(name: str) -> None:
    cls = SOLVERS[name].Config
    solver = SOLVERS[name]()
    for option, metadata, default in _ranged_fields(cls):
        within, length = metadata.get("within"), metadata.get("length")
        if default is not None:
            if length is not None:
                assert length[0] <= len(default) <= length[1], f"{name}: default {option}"
            values = default if isinstance(default, tuple) else (default,)
            assert within is None or all(v in within for v in values), f"{name}: default {option}"
        for value in _outside(metadata):
            needle = rf"^{re.escape(name)}: option {re.escape(option)} (items )?must "
            with pytest.raises(SolverError, match=needle):
                solver.check_options({option: list(value) if isinstance(value, tuple) else value})


def _configs(cls: type):
    """``cls`` and every settings dataclass nested in it."""
    yield cls
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            yield from _configs(hints[f.name])


@pytest.mark.parametrize("name", list(SOLVERS))
def test_every_config_made_directly_refuses_a_value_out_of_range(name: str) -> None:
    """A ``Config`` (or a settings dataclass nested in one) made in code checks the ranges
    its fields declare, as the coercer does: ``ValueError`` naming the field."""
    for cls in _configs(SOLVERS[name].Config):
        for f in fields(cls):
            if "within" not in f.metadata and "length" not in f.metadata:
                continue
            for value in _outside(f.metadata):
                needle = rf"^option {re.escape(f.name)} (items )?must "
                with pytest.raises(ValueError, match=needle):
                    cls(**{f.name: value})


def _strip_none(hint):
    """``X`` for ``X | None``, else ``hint``."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if len(args) == 1 and len(typing.get_args(hint)) == 2 else hint


@pytest.mark.parametrize("name", list(SOLVERS))
def test_every_config_made_directly_refuses_a_bad_choice_or_a_non_bool_switch(name: str) -> None:
    """A ``Config`` (or a settings dataclass nested in one) made in code holds each
    ``Literal`` setting to its choices and each ``bool`` setting to a bool, as the coercer
    does: ``ValueError`` naming the field, never a value that runs as another one."""
    for cls in _configs(SOLVERS[name].Config):
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            inner = _strip_none(hints[f.name])
            if typing.get_origin(inner) is Literal:
                bad: list = [str(typing.get_args(inner)[0]) + "s", 0]
                expected = "one of " + ", ".join(map(repr, typing.get_args(inner)))
            elif inner is bool:
                bad, expected = ["false", "true", 0, 1, None], "true or false"
            else:
                continue
            for value in bad:
                needle = rf"^option {re.escape(f.name)} must be {re.escape(expected)}, not "
                with pytest.raises(ValueError, match=needle):
                    cls(**{f.name: value})


def test_a_heuristic_config_refuses_what_it_would_have_run_as_another_setting() -> None:
    """``max_overlap_basis="buffers"`` ran as "memory" and ``skip_unprofitable="false"``
    as True; both are refused, in the coercer's words."""
    from mallocgame.solvers.heuristic import HeuristicConfig

    with pytest.raises(
        ValueError,
        match=r"^option max_overlap_basis must be one of 'memory', 'buffer', not 'buffers'$",
    ):
        HeuristicConfig(max_overlap_basis="buffers")
    with pytest.raises(
        ValueError, match=r"^option skip_unprofitable must be true or false, not 'false'$"
    ):
        HeuristicConfig(skip_unprofitable="false")
    assert HeuristicConfig(max_overlap_basis="buffer", skip_unprofitable=False) == parse_config(
        HeuristicConfig, {"max_overlap_basis": "buffer", "skip_unprofitable": "false"}, "h"
    )


def test_a_count_made_directly_must_be_an_int() -> None:
    """``OrderSearchConfig(max_moves=2.5)`` was taken and its search then failed with a
    plain TypeError inside ``range``; a float (whole or not) or a bool where an ``int`` is
    declared is now refused as the coercer refuses its text."""
    from mallocgame.solvers.order_search import OrderSearchConfig

    for bad in (2.5, 7.0, True, "3"):
        with pytest.raises(ValueError, match=r"^option max_moves must be a whole number, not "):
            OrderSearchConfig(max_moves=bad)
    assert OrderSearchConfig(max_moves=7) == parse_config(
        OrderSearchConfig, {"max_moves": "7.0"}, "msa-search"
    )
    from mallocgame.solvers.muzero.config import MuZeroConfig

    for items in ((8.5, 16), (8, True), (8, None)):  # 8.5 failed inside JAX's conv
        with pytest.raises(ValueError, match=r"^option conv_channels items must be whole numbers"):
            MuZeroConfig(conv_channels=items)
    assert MuZeroConfig(conv_channels=(8, 16)).conv_channels == (8, 16)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"noise_fraction": 1.5}, r"option noise_fraction must be in \[0, 1\], not 1\.5"),
        ({"noise_fraction": -1}, r"option noise_fraction must be in \[0, 1\], not -1\.0"),
        ({"noise_alpha": 0}, r"option noise_alpha must be in \[1e-3, 1e3\], not 0\.0"),
        ({"init_temperature": 0}, r"option init_temperature must be in \[1e-3, 1e3\], not 0\.0"),
        (
            {"final_temperature": -0.5},
            r"option final_temperature must be in \[1e-3, 1e3\], not -0\.5",
        ),
        ({"gumbel_scale": -1}, r"option gumbel_scale must be in \[0, 100\], not -1\.0"),
        ({"checkpoint_seconds": -1}, r"option checkpoint_seconds must be in \(0, 1e9\], not -1\.0"),
        ({"conv_channels": ""}, r"option conv_channels must hold 1 to 8 items, not 0"),
        ({"value_scale": 1e308}, r"option value_scale must be in \(0, 1e6\], not 1e\+308"),
        ({"learning_rate": 1e308}, r"option learning_rate must be in \(0, 1\], not 1e\+308"),
    ],
)
def test_the_issue_37_muzero_options_are_refused_without_a_warning(
    options: dict,
    message: str,
) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SolverError, match=f"^muzero: {message}$"):
            SOLVERS["muzero"]().check_options(options)


def test_key_values_reads_settings_and_refuses_two_texts_of_one_key() -> None:
    """The one reader of KEY=VALUE items (the CLI's --option, bench's solver specs)."""
    from mallocgame.options import key_values

    assert key_values([" sigma = 0.2", "workers=1", "sigma=0.2"]) == {
        "sigma": "0.2",
        "workers": "1",
    }
    with pytest.raises(ValueError, match=r"^es:sigma given twice, as '0.2' and '0.20'"):
        key_values(["sigma=0.2", "sigma=0.20"], "es:")
    for bad in ("sigma", "=1"):
        with pytest.raises(ValueError, match="is not KEY=VALUE"):
            key_values([bad])
