"""The first-run benchmark: a child process with an empty numba cache reports its solve
time and each kernel it compiled; the table names every source compared."""

from __future__ import annotations

from tests.benchmarks import load_benchmark

kernel_compile = load_benchmark("kernel_compile")


def test_a_cold_child_reports_the_kernels_it_compiled() -> None:
    # random on the smallest program: the game's kernels, in a few seconds
    got = kernel_compile.run_cold(None, "synthetic-v1/small", ("random",))
    assert got["solve_s"] > 0
    assert {"analyze", "apply"} <= set(got["kernels"])  # compiled: the cache was empty
    assert all(seconds >= 0 for seconds in got["kernels"].values())


def test_the_table_has_a_line_per_source_and_its_slowest_kernels(monkeypatch, capsys) -> None:
    runs = iter([{"solve_s": 3.0, "kernels": {"apply": 2.0, "analyze": 1.0}}] * 4)
    seen: list = []

    def fake(src):
        seen.append(src)
        return next(runs)

    monkeypatch.setattr(kernel_compile, "run_cold", fake)
    kernel_compile.main(["--runs", "2", "--src", "a/src", "b/src", "--top", "1"])
    out = capsys.readouterr().out.splitlines()
    assert [str(s) for s in seen] == ["a/src", "b/src", "a/src", "b/src"]  # alternating
    assert out[1] == "a/src: first solve 3.0 s (median; runs 3.0, 3.0)"
    assert out[2].split() == ["2.00", "s", "apply"] and out[3].startswith("b/src")
