"""The matmul layouts of a captured training step, and their per-op times grouped by layout."""

from __future__ import annotations

import csv

import pytest

from tests.benchmarks import BENCHMARKS, load_benchmark

torch = pytest.importorskip("torch")

layouts_script = load_benchmark("gpu_matmul_layouts")


class TwoLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4, bias=False)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.fixture(scope="module")
def exported():
    from mallocgame.frontends.torch import TrainingStep
    from mallocgame.runtime.torch_graph import capture_torch

    torch.manual_seed(0)
    step = TrainingStep("mean")
    return capture_torch(TwoLinear(), (torch.randn(32, 8),), training_step=step).exported


def test_a_training_step_has_forward_nt_input_grad_nn_and_weight_grad_tn(exported):
    found = {(m.opcode, m.layout, m.shapes) for m in layouts_script.matmul_layouts(exported)}
    # forward x @ W.T; the gradient of b's input grad @ W; the weights' x.T @ grad
    assert ("addmm", "NT", "32x8 @ 8x16") in found
    assert ("mm", "NT", "32x16 @ 16x4") in found
    assert ("mm", "NN", "32x4 @ 4x16") in found
    assert ("mm", "TN", "4x32 @ 32x16") in found
    assert ("mm", "TN", "16x32 @ 32x8") in found
    # a's input needs no gradient, so no NN matmul of a's weight
    assert len(found) == 5


def test_rows_group_per_layout_and_skip_other_programs_and_ops():
    m = layouts_script.MatmulLayout
    mms = [m("mm", "mm", "NN", "2x2 @ 2x2"), m("mm_1", "mm", "NN", "2x2 @ 2x2")]
    mms.append(m("mm_2", "mm", "TN", "2x2 @ 2x2"))

    def row(program, name, measured, simulated):
        return {
            "program": program,
            "placement": "drop",
            "name": name,
            "measured_s": str(measured),
            "sim_latency_s": str(simulated),
        }

    ops = [row("p", "mm", 1.0, 2.0), row("p", "mm_1", 3.0, 2.0), row("p", "mm_2", 1.0, 4.0)]
    ops += [row("q", "mm", 9.0, 1.0), row("p", "relu", 9.0, 1.0)]
    rows = layouts_script.layout_rows(mms, ops, "p")
    assert [(r.layout, r.ops) for r in rows] == [("NN", 2), ("TN", 1)]
    nn = rows[0]
    assert (nn.measured_s, nn.simulated_s) == (4.0, 4.0)
    assert (nn.ratio_median, nn.ratio_min, nn.ratio_max) == (1.0, 0.5, 1.5)
    assert rows[1].ratio_median == 0.25


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert layouts_script.main(["--ops", str(tmp_path / "missing.csv")]) == 2
    assert "cannot read" in capsys.readouterr().err
    wrong = tmp_path / "wrong.csv"
    with wrong.open("w", newline="") as f:
        csv.writer(f).writerows([["a", "b"], ["1", "2"]])
    assert layouts_script.main(["--ops", str(wrong)]) == 2
    assert "not a bench real ops.csv" in capsys.readouterr().err
    ops = BENCHMARKS.parent / "docs" / "results" / "gpu-real-h200" / "ops.csv"
    assert layouts_script.main(["--ops", str(ops), "--programs", "nope"]) == 2
    assert "not a program of bench real: nope" in capsys.readouterr().err
    # a placement no row has printed the table's header alone, exit 0
    assert layouts_script.main(["--ops", str(ops), "--placement", "nope"]) == 2
    err = capsys.readouterr().err
    assert "has placement nope (its placements: " in err and len(err.splitlines()) == 1
