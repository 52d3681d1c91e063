"""Hardware presets: figures, citations, assumptions, lookup errors."""

from __future__ import annotations

import math

import pytest

from mallocgame.errors import InstanceError, MallocGameError
from mallocgame.hardware import (
    PRESETS,
    HardwarePreset,
    UnknownPresetError,
    get_preset,
    preset_names,
)

NUMERIC = (
    "fast_memory_bytes",
    "alignment_bytes",
    "fast_bandwidth",
    "slow_bandwidth",
    "copy_bandwidth",
    "peak_flops",
    "peak_transcendentals",
    "fixed_s",
)


def test_required_presets_exist():
    assert {"tpu_v4i", "gpu_hbm_host", "dram_pmem"} <= set(PRESETS)
    assert preset_names() == sorted(PRESETS)
    for name, preset in PRESETS.items():
        assert preset.name == name
        assert get_preset(name) is preset


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_figures_are_positive_and_consistent(name):
    p = PRESETS[name]
    for key in NUMERIC:
        value = getattr(p, key)
        assert math.isfinite(value)
        assert value > 0, key
    assert isinstance(p.fast_memory_bytes, int) and isinstance(p.alignment_bytes, int)
    assert p.fast_memory_bytes % p.alignment_bytes == 0
    # The fast memory is the faster one for an instruction.
    assert p.fast_bandwidth > p.slow_bandwidth
    assert p.description
    assert set(p.figures()) == set(NUMERIC)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_figure_is_cited_or_assumed(name):
    p = PRESETS[name]
    assert p.sources and all(isinstance(s, str) and s for s in p.sources)
    assert p.assumptions and all(isinstance(a, str) and a for a in p.assumptions)
    cited = " ".join(s.split("--", 1)[0] for s in p.sources)
    for key in NUMERIC:
        assert key in cited or p.assumed(key), f"{name}.{key} has no source and no assumption"
    # Every assumption names the figure it concerns.
    for a in p.assumptions:
        assert a.split(":", 1)[0].strip() in (*NUMERIC, "slow_dot_tile", "slow_dot_staged"), a


def test_published_figures():
    tpu = PRESETS["tpu_v4i"]
    assert tpu.fast_memory_bytes == 128 * 2**20
    assert tpu.slow_bandwidth == 614e9
    assert tpu.peak_flops == 138e12
    assert tpu.assumed("fast_bandwidth") and tpu.assumed("copy_bandwidth")
    assert any("Jouppi" in s for s in tpu.sources)

    gpu = PRESETS["gpu_hbm_host"]
    assert gpu.fast_bandwidth == 1555e9
    assert gpu.peak_flops == 19.5e12
    assert gpu.slow_bandwidth == gpu.copy_bandwidth == 25e9  # achieved PCIe 4.0 x16
    assert gpu.assumed("slow_bandwidth") and gpu.assumed("copy_bandwidth")

    pm = PRESETS["dram_pmem"]
    assert pm.fast_memory_bytes == 2 * 2**30  # the DRAM the MARL machine leaves to its tasks
    assert pm.assumed("fast_memory_bytes")
    assert pm.copy_bandwidth == 13.9e9
    assert 13.9e9 < pm.slow_bandwidth < 39.4e9
    assert any("Izraelevitz" in s for s in pm.sources)
    assert pm.assumed("slow_bandwidth") and pm.assumed("peak_flops")


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(UnknownPresetError) as info:
        get_preset("tpu_v9")
    assert isinstance(info.value, InstanceError)
    assert isinstance(info.value, MallocGameError)
    message = str(info.value)
    assert "tpu_v9" in message
    for name in PRESETS:
        assert name in message


def test_invalid_preset_is_rejected():
    good = dict(
        name="x",
        fast_memory_bytes=1024,
        alignment_bytes=64,
        fast_bandwidth=10.0,
        slow_bandwidth=1.0,
        copy_bandwidth=1.0,
        peak_flops=1.0,
        peak_transcendentals=1.0,
        fixed_s=0.0,
    )
    HardwarePreset(**good)
    for key, bad in [
        ("fast_bandwidth", 0.0),
        ("copy_bandwidth", float("inf")),
        ("peak_flops", -1.0),
        ("alignment_bytes", 0),
        ("fast_memory_bytes", 0),
        ("fixed_s", -1e-6),
        ("alignment_bytes", True),  # a file would hold true, which no loader takes
        ("fast_memory_bytes", True),
        ("fast_bandwidth", "1e9"),
        ("fixed_s", None),
    ]:
        with pytest.raises(InstanceError):
            HardwarePreset(**{**good, key: bad})


def test_gpu_h100_host_is_the_measured_machine():
    # docs/results/gpu-real-h100/calibration.csv, copied with its method as the source.
    h = get_preset("gpu_h100_host")
    assert h.fast_memory_bytes == 81559 * 2**20  # as the driver reports the 80 GB HBM3
    assert h.fast_bandwidth == 2.78784e12
    assert h.slow_bandwidth == 5.09079e10  # a kernel reading host-mapped memory
    assert h.copy_bandwidth == 5.48806e10  # the slower copy direction (HBM -> host)
    assert h.peak_flops == 5.11571e13  # fp32 matmul, TF32 off
    assert h.fixed_s == 7.15024e-06
    assert h.slow_dot_tile == 64
    cited = " ".join(h.sources)
    assert "H100 80GB HBM3" in cited and "PCIe gen5 x16" in cited and "2026-11-26" in cited
    assert "kernel summing 268435456 B of host-mapped memory" in cited
    assert h.assumed("peak_transcendentals") and not h.assumed("slow_bandwidth")
    # Every other preset keeps the plain roofline.
    assert all(p.slow_dot_tile == 0 for p in PRESETS.values() if p is not h)


def test_staged_reads_are_a_flag_that_excludes_the_tile():
    fields = get_preset("gpu_h100_host").__dict__
    with pytest.raises(InstanceError, match="slow_dot_staged must be true or false"):
        HardwarePreset(**{**fields, "slow_dot_tile": 0, "slow_dot_staged": 1})
    with pytest.raises(InstanceError, match="two models of the same reads"):
        HardwarePreset(**{**fields, "slow_dot_staged": True})  # the tile is 64


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_slow_dot_tile_must_be_a_non_negative_integer(bad):
    fields = {**get_preset("gpu_h100_host").__dict__, "slow_dot_tile": bad}
    with pytest.raises(InstanceError, match="slow_dot_tile"):
        HardwarePreset(**fields)


def test_every_preset_has_a_row_in_the_cli_docs_table():
    """docs/cli.md's table of presets lists every one the tool takes, in PRESETS' order."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    table = text.split("| preset | fast memory |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("`")[1] for line in table.splitlines() if line.startswith("| `")]
    assert rows == list(PRESETS)
