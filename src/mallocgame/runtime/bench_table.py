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

from mallocgame.errors import MallocGameError

__all__ = ["real_results_table"]

_HEADER = (
    "| program | placement | normalized reward | simulated | measured median (p10–p90) "
    "| peak HBM (plan) | beyond the plan | HBM cap |\n"
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def _ms(seconds: str) -> str:
    value = float(seconds) * 1e3
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def _mib(nbytes: str) -> str:
    return f"{float(nbytes) / 2**20:,.0f} MiB"


def _measured(row: dict[str, str]) -> str:
    error = row.get("error") or ""
    if error:
        return "out of memory" if "OutOfMemoryError" in error else f"failed: {error[:60]}"
    if not row.get("measured_median_s"):
        return "—"
    timed = (
        f"{_ms(row['measured_median_s'])} ms ({_ms(row['measured_p10_s'])}–"
        f"{_ms(row['measured_p90_s'])})"
    )
    if row.get("identical") == "False":  # a time of a run whose results are not the reference's
        return f"{timed}, results differ (max \\|diff\\| {float(row['max_abs_diff']):.3g})"
    return timed


def _row(row: dict[str, str]) -> str:
    reward = row.get("normalized_reward") or ""
    simulated = row.get("sim_latency_s") or ""
    peak = _mib(row["peak_hbm_bytes"]) if row.get("peak_hbm_bytes") else "—"
    plan = row.get("planned_hbm_peak_bytes") or ""
    over = row.get("hbm_over_plan_bytes") or ""
    cap = row.get("hbm_limit_bytes") or ""
    cells = [
        row["program"],
        f"`{row['placement']}`",
        f"{float(reward):.4f}" if reward else "—",
        f"{_ms(simulated)} ms" if simulated else "—",
        _measured(row),
        f"{peak} ({_mib(plan)})" if plan else peak,
        _mib(over) if over else "—",
        _mib(cap) if cap else "—",
    ]
    return "| " + " | ".join(cells) + " |"


def real_results_table(results_csv: Path) -> str:
    """The Markdown table of the module docstring for ``results_csv``; a file that cannot
    be read or is not a ``bench real`` results.csv is a :class:`MallocGameError`."""
    from mallocgame.runtime.bench import read_results_csv

    rows = read_results_csv(results_csv)
    if not rows:
        raise MallocGameError(f"{results_csv}: no row to tabulate")
    return "\n".join([_HEADER, *(_row(r) for r in rows)]) + "\n"
