"""Residency of tensors in two solutions, and the re-fetches the paper's Figure 8 points at."""

from __future__ import annotations

import pytest

from mallocgame.game.state import COPY, DROP, NOCOPY, replay
from mallocgame.residency import compare_residency, format_residency_comparison, residency
from mallocgame.solvers.base import solution_from_game
from tests.builders import I, X, build


def _program():
    """Tensor 0 (an input of 100 B) read at instructions 1, 2 and 3; instruction 0 writes tensor 1."""
    return build(
        tensors=[X(100), X(50)],
        instructions=[I(writes=[1]), I(reads=[0]), I(reads=[0]), I(reads=[0])],
        capacity=4096,
        alignment=1,
    )


def _solution(inst, actions, solver):
    return solution_from_game(inst, replay(inst, actions), solver=solver, seed=0, wall_s=0.0)


def test_a_tensor_evicted_and_fetched_again_where_the_other_keeps_it() -> None:
    inst = _program()
    keeps = _solution(inst, [DROP, COPY, NOCOPY, NOCOPY], "keeps")
    refetches = _solution(inst, [DROP, COPY, DROP, COPY], "refetches")
    runs = residency(inst, refetches)[0]
    assert [(r.last, r.fetched) for r in runs] == [(1, True), (3, True)]  # each read fetched
    assert [(r.last, r.fetched) for r in residency(inst, keeps)[0]] == [
        (3, True)
    ]  # one run to the last read
    c = compare_residency(inst, keeps, refetches)
    assert (c.fast_in_a, c.fast_in_b) == (1, 1) and c.only_in_a == c.only_in_b == ()
    assert [(r.tensor, r.size, r.evicted_after, r.needed_at) for r in c.refetched_by_b] == [
        (0, 100, 1, 3)
    ]
    assert c.refetched_by_a == ()
    assert c.fast_byte_steps_a == c.fast_byte_steps_b == 4 * 100  # both hold it at steps 0-3
    assert c.fast_byte_steps_common == 400 and c.agreement == 1.0  # the same byte-steps
    text = format_residency_comparison(c)
    assert "re-fetched by refetches where keeps keeps them resident: 1" in text
    assert "(100 B): evicted after step 1, fetched again for step 3" in text
    assert "re-fetched by keeps where refetches keeps them resident: none" in text


def test_what_only_one_solution_keeps_and_no_refetch_without_a_resident_gap() -> None:
    inst = _program()
    slow = _solution(inst, [DROP, DROP, DROP, DROP], "slow")
    refetches = _solution(inst, [DROP, COPY, DROP, COPY], "refetches")
    c = compare_residency(inst, slow, refetches)
    assert c.fast_in_a == 0 and c.only_in_b == ((inst.tensors[0].name, 100),)
    assert c.refetched_by_b == ()  # slow never holds it: nothing B evicts is kept by A
    assert c.fast_byte_steps_common == 0 and c.agreement == 0.0
    assert compare_residency(inst, slow, slow).agreement == 1.0  # neither keeps anything
    text = format_residency_comparison(c)
    assert "only slow keeps in fast memory: none" in text
    assert "; no fast byte-steps in slow\n" in text and "nan" not in text  # not 400 / 0
    text = format_residency_comparison(compare_residency(inst, refetches, slow))
    assert "; no fast byte-steps in slow\n" in text
    text = format_residency_comparison(compare_residency(inst, slow, slow))
    assert "; no fast byte-steps in either\n" in text and "nan" not in text


def test_agreement_is_the_share_of_either_solutions_byte_steps_both_have() -> None:
    inst = _program()
    keeps = _solution(inst, [DROP, COPY, NOCOPY, NOCOPY], "keeps")  # tensor 0 at steps 0-3
    late = _solution(inst, [DROP, DROP, DROP, COPY], "late")  # fetched for step 3 only
    (run,) = residency(inst, late)[0]
    steps = run.last - run.first + 1
    assert run.last == 3 and 1 <= steps < 4
    c = compare_residency(inst, keeps, late)
    assert c.fast_byte_steps_common == 100 * steps
    assert c.agreement == pytest.approx(steps / 4)
    assert f"in common {steps / 4:.1%} of either's" in format_residency_comparison(c)


@pytest.mark.parametrize("against", [True, False])
def test_cli_show_against_draws_both_and_compares(tmp_path, capsys, against) -> None:
    from mallocgame.cli import main
    from mallocgame.solution import save_solution
    from mallocgame.solvers import get_solver
    from mallocgame.workloads.registry import load_workload

    inst = load_workload("xla-v1/lstm_infer")
    for name in ("heuristic", "greedy"):
        save_solution(get_solver(name).solve(inst), tmp_path / f"{name}.json")
    argv = [
        "show",
        "xla-v1/lstm_infer",
        str(tmp_path / "heuristic.json"),
        "--out",
        str(tmp_path / "l.png"),
    ]
    assert main(argv + (["--against", str(tmp_path / "greedy.json")] if against else [])) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "l.png").read_bytes()[:4] == b"\x89PNG"
    assert ("re-fetched by greedy where heuristic keeps them resident" in out) == against


_SELF = [
    ("xla-v1/stacked_rnn_infer", "heuristic"),  # fetches beginning at the eviction step
    ("xla-v1/resnet_infer", "greedy"),
    ("xla-v2/ddim_sampler_b16", "greedy"),  # two fetches beginning at one step
    ("xla-v2/wavenet_infer", "greedy"),
]


@pytest.mark.parametrize("program,solver", _SELF)
def test_a_solution_compared_with_itself_has_no_refetch(program: str, solver: str) -> None:
    from mallocgame.solvers import get_solver
    from mallocgame.workloads.registry import load_workload

    inst = load_workload(program)
    solution = get_solver(solver).solve(inst)
    runs = residency(inst, solution)
    # the case this guards: a fetch beginning no later than the run before it ends
    assert any(b.fetched and b.first <= a.last for rs in runs.values() for a, b in zip(rs, rs[1:]))
    c = compare_residency(inst, solution, solution)
    assert c.refetched_by_a == c.refetched_by_b == ()
    assert c.only_in_a == c.only_in_b == () and c.fast_byte_steps_a == c.fast_byte_steps_b


def test_cli_show_against_itself_reports_no_refetch(tmp_path, capsys) -> None:
    from mallocgame.cli import main
    from mallocgame.solution import save_solution
    from mallocgame.solvers import get_solver
    from mallocgame.workloads.registry import load_workload

    inst = load_workload("xla-v1/stacked_rnn_infer")
    save_solution(get_solver("heuristic").solve(inst), tmp_path / "h.json")
    argv = [
        "show",
        inst.name,
        str(tmp_path / "h.json"),
        "--out",
        str(tmp_path / "l.png"),
        "--against",
        str(tmp_path / "h.json"),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    named = f"heuristic ({tmp_path / 'h.json'})"  # one solver's two answers: named by file
    assert out.count(f"re-fetched by {named} where {named} keeps them resident: none") == 2
    assert f"tensors in fast memory: {named} " in out


def test_an_interval_past_the_programs_end_is_compared_within_it() -> None:
    """An invalid answer's memory interval to step 10**9 (a legal file) is counted to the
    program's last step, not listed step by step."""
    import dataclasses

    inst = _program()
    keeps = _solution(inst, [DROP, COPY, NOCOPY, NOCOPY], "keeps")
    last = keeps.allocations[-1]
    far = dataclasses.replace(
        keeps, allocations=(*keeps.allocations[:-1], dataclasses.replace(last, end=10**9))
    )
    c = compare_residency(inst, keeps, far)
    assert c.fast_byte_steps_b == c.fast_byte_steps_a == c.fast_byte_steps_common
    assert c.agreement == 1.0


def test_a_fetch_extended_by_later_reads_is_a_refetch_for_the_read_it_serves() -> None:
    """B fetches tensor 0 again for its read at 3 and keeps it for the reads at 4 and 5
    (NoCopy extends the fetch's allocation); A holds it over 0-3 only: B re-fetches it for
    step 3, where A keeps it."""
    inst = build(
        tensors=[X(100), X(50)],
        instructions=[I(writes=[1])] + [I(reads=[0]) for _ in range(5)],
        capacity=4096,
        alignment=1,
    )
    a = _solution(inst, [DROP, COPY, NOCOPY, NOCOPY, DROP, DROP], "a")
    b = _solution(inst, [DROP, COPY, DROP, COPY, NOCOPY, NOCOPY], "b")
    (_, extended) = residency(inst, b)[0]
    assert extended.fetched and extended.fetched_for == 3 and extended.last == 5
    c = compare_residency(inst, a, b)
    assert [(r.evicted_after, r.needed_at) for r in c.refetched_by_b] == [(1, 3)]
    keeps_on = _solution(inst, [DROP, COPY, NOCOPY, NOCOPY, NOCOPY, NOCOPY], "keeps on")
    again = compare_residency(inst, keeps_on, b)  # the window ends at 3, not at 5
    assert [(r.evicted_after, r.needed_at) for r in again.refetched_by_b] == [(1, 3)]


def test_an_allocation_of_a_buffer_the_instance_lacks_is_left_out() -> None:
    import dataclasses

    from mallocgame.solution import Allocation

    inst = _program()
    keeps = _solution(inst, [DROP, COPY, NOCOPY, NOCOPY], "keeps")
    for buffer in (10**6, -1):  # the checker names it; the comparison leaves it out
        stray = Allocation(buffer, "Copy", 0, 0, 1, (0, 0))
        odd = dataclasses.replace(keeps, allocations=(*keeps.allocations, stray))
        assert residency(inst, odd) == residency(inst, keeps)
        assert compare_residency(inst, odd, keeps) == compare_residency(inst, keeps, keeps)


def test_a_solution_of_another_instance_is_refused_not_compared() -> None:
    import dataclasses

    from mallocgame.errors import SolutionError

    inst = _program()
    keeps = _solution(inst, [DROP, COPY, NOCOPY, NOCOPY], "keeps")
    other = build(
        tensors=[X(100), X(60)],
        instructions=[I(writes=[1]), I(reads=[0]), I(reads=[0])],
        capacity=4096,
        alignment=1,
    )
    theirs = _solution(other, [DROP, COPY, NOCOPY], "theirs")
    with pytest.raises(SolutionError, match=r"b \(theirs\) is a solution of another instance"):
        compare_residency(inst, keeps, theirs)
    with pytest.raises(SolutionError, match=r"a \(theirs\) is a solution of another instance"):
        compare_residency(inst, theirs, keeps)
    edited = dataclasses.replace(keeps, instance_sha256="0" * 64)  # its name is this one's
    with pytest.raises(SolutionError, match="instance_sha256 000000000000"):
        compare_residency(inst, keeps, edited)
