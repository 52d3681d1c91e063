"""The GPU study's table, written from its ``results.csv`` (:mod:`mallocgame.runtime.bench`).

:func:`real_results_table` gives one Markdown row per program and placement, in the file's
order: the answer's normalized reward, its simulated step time on the preset, the measured
median step time with its 10th-90th percentile spread, the peak HBM beside the plan's,
the most HBM a run held beyond the plan (:func:`~mallocgame.runtime.measure.
hbm_over_plan`, a GPU only) and the HBM cap the row ran under (``--hbm-limit``). A row
that failed says so (``out of memory``, or the error's first words) rather than being
left out: under a cap, a step that does not fit is a result. Reads no GPU and runs no
model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mallocgame.errors import MallocGameError

__all__ = ["real_results_table"]

_HEADER = (
    "| program | placement | normalized reward | simulated | measured median (p10–p90) "
    "| peak HBM (plan) | beyond the plan | HBM cap |\n"
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def _ms(seconds: float) -> str:
    value = seconds * 1e3
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.0f} MiB"


def _measured(row: dict[str, Any]) -> str:
    error = row.get("error") or ""
    if error:
        return "out of memory" if "OutOfMemoryError" in error else f"failed: {error[:60]}"
    median, p10, p90 = (row.get(f"measured_{k}_s") for k in ("median", "p10", "p90"))
    if median is None:
        return "—"
    timed = f"{_ms(median)} ms" + (
        f" ({_ms(p10)}–{_ms(p90)})" if p10 is not None and p90 is not None else ""
    )
    if row.get("identical") == "False":  # a time of a run whose results are not the reference's
        diff = row.get("max_abs_diff")
        return f"{timed}, results differ" + (
            f" (max \\|diff\\| {diff:.3g})" if diff is not None else ""
        )
    return timed


def _row(row: dict[str, Any]) -> str:
    reward, simulated = row.get("normalized_reward"), row.get("sim_latency_s")
    peak = _mib(row["peak_hbm_bytes"]) if row.get("peak_hbm_bytes") is not None else "—"
    plan, over, cap = (
        row.get(k) for k in ("planned_hbm_peak_bytes", "hbm_over_plan_bytes", "hbm_limit_bytes")
    )
    cells = [
        row["program"],
        f"`{row['placement']}`",
        f"{reward:.4f}" if reward is not None else "—",
        f"{_ms(simulated)} ms" if simulated is not None else "—",
        _measured(row),
        f"{peak} ({_mib(plan)})" if plan is not None else peak,
        _mib(over) if over is not None else "—",
        _mib(cap) if cap is not None else "—",
    ]
    return "| " + " | ".join(cells) + " |"


def real_results_table(results_csv: Path) -> str:
    """The Markdown table of the module docstring for ``results_csv``; a file that cannot
    be read, is not a ``bench real`` results.csv or holds a cell that should be a number
    and is not (:func:`~mallocgame.runtime.bench.read_results_csv`) is a
    :class:`MallocGameError`."""
    from mallocgame.runtime.bench import read_results_csv

    rows = read_results_csv(results_csv)
    if not rows:
        raise MallocGameError(f"{results_csv}: no row to tabulate")
    return "\n".join([_HEADER, *(_row(r) for r in rows)]) + "\n"
