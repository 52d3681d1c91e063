"""Steering XLA's TPU memory-space assignment with an answer: the flag, and what libtpu
does with it (compiles run libtpu itself: a few seconds each)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mallocgame.frontends.argspec import parse_arg_spec
from mallocgame.frontends.tpu import fast_spaces_of
from mallocgame.runtime.tpu_steer import (
    SORT_ORDER_FLAG,
    SteeringError,
    steer_jax_tpu,
    steering_flags,
)
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.suite import model_programs, suite_instance, suite_placement
from tests.frontends.libtpu_fixtures import MLP_ARGS, mlp_grad

LSTM = "tpu-v1/lstm_infer_b512-v4"


@pytest.fixture(scope="module")
def lstm_v4():
    """``tpu-v1/lstm_infer_b512-v4`` (on ``tpu_v4``), XLA's frozen placement, and the
    heuristic's answer, which keeps tensors in fast memory that XLA does not and the other
    way round."""
    instance = suite_instance(LSTM)
    placement = suite_placement(LSTM)
    answer = get_solver("heuristic").solve(instance, SolveRequest(seed=0))
    return instance, placement, answer


def test_the_flag_promotes_what_only_the_answer_keeps_and_demotes_what_only_xla_keeps(
    lstm_v4,
) -> None:
    instance, placement, answer = lstm_v4
    diff = steering_flags(instance, answer, placement, fast_spaces=fast_spaces_of("tpu-v4"))
    first = steering_flags(
        instance, answer, placement, fast_spaces=fast_spaces_of("tpu-v4"), mode="first"
    )
    assert diff.promoted and diff.demoted and not first.demoted
    assert set(diff.promoted) < set(first.promoted)
    assert not set(diff.promoted) & set(diff.demoted)
    text = diff.sort_order_overrides
    assert text.count("assign_first: true") >= 1 and text.count("assign_last: true") >= 1
    assert diff.compiler_options() == {SORT_ORDER_FLAG: text}
    # Names are regex literals in a text-format string: a dot is "\\." there.
    dotted = next(n for n in diff.promoted if "." in n)
    assert dotted.split("{")[0].replace(".", "\\\\.") in text


def test_tuple_elements_are_matched_by_their_index() -> None:
    from mallocgame.runtime.tpu_steer import _overrides

    (plain, indexed) = _overrides(["fusion.1", "fusion.2{1}", "copy.3{1}"], "assign_first")
    assert 'instruction_name_regex: "^(fusion\\\\.1)$"' in plain
    assert 'instruction_name_regex: "^(copy\\\\.3|fusion\\\\.2)$"' in indexed
    assert "tuple_index { index: 1 }" in indexed


def test_a_bad_mode_or_an_answer_of_another_program_is_refused(lstm_v4) -> None:
    instance, placement, answer = lstm_v4
    fast = fast_spaces_of("tpu-v4")
    with pytest.raises(SteeringError, match="unknown steering mode 'all'"):
        steering_flags(instance, answer, placement, fast_spaces=fast, mode="all")
    other = replace(answer, instance_sha256="0" * 64)
    with pytest.raises(SteeringError, match="not a solution of"):
        steering_flags(instance, other, placement, fast_spaces=fast)


def test_an_answer_that_names_no_instance_is_refused(lstm_v4) -> None:
    """An empty ``instance_sha256`` is a mismatch, as ``check`` and ``plan`` have it: before,
    it was let through, and an answer of another program steered this one."""
    instance, placement, answer = lstm_v4
    nameless = replace(answer, instance_sha256="")
    with pytest.raises(SteeringError, match="not a solution of .*none recorded"):
        steering_flags(instance, nameless, placement, fast_spaces=fast_spaces_of("tpu-v4"))


def test_libtpu_follows_the_answer_much_more_with_the_flag(lstm_v4) -> None:
    """Measured with libtpu 0.0.42.1: XLA alone has 27 % of the answer's fast byte-steps,
    steered 81 %, and its legal answer simulates faster."""
    instance, placement, answer = lstm_v4
    fn, example, jit_kwargs = model_programs("tpu-v1")["lstm_infer_b512"].build()
    report = steer_jax_tpu(
        fn,
        *example,
        target="tpu-v4",
        instance=instance,
        answer=answer,
        placement=placement,
        **jit_kwargs,
    )
    assert report.followed_unsteered < 0.5 < report.followed_steered
    assert report.steered_latency_s < report.unsteered_latency_s
    assert report.answer_latency_s <= report.steered_latency_s


def test_a_steered_compile_of_another_program_is_refused(lstm_v4) -> None:
    instance, placement, answer = lstm_v4
    args = [parse_arg_spec(a) for a in MLP_ARGS]
    with pytest.raises(SteeringError, match="the steered compile is not the same program"):
        steer_jax_tpu(
            mlp_grad,
            *args,
            target="tpu-v4",
            instance=instance,
            answer=answer,
            placement=placement,
        )


def test_a_steered_compile_with_other_sizes_is_refused_as_another_program(
    lstm_v4, monkeypatch
) -> None:
    """A compile of the same instructions with other tensor sizes passed the name check
    and failed later as a PlacementError, not the SteeringError the docs give; and a
    compile of as many instructions named otherwise was said to differ in their count."""
    import mallocgame.runtime.tpu_steer as tpu_steer
    from mallocgame.workloads.suite import suite_program

    instance, placement, answer = lstm_v4
    program = suite_program(LSTM)
    bigger = replace(program.tensors[0], size=program.tensors[0].size * 2)
    resized = replace(program, tensors=(bigger, *program.tensors[1:]))
    first = replace(program.instructions[0], name="renamed")
    renamed = replace(program, instructions=(first, *program.instructions[1:]))
    for compiled, needle in (
        (resized, "other tensors or sizes"),
        (renamed, f"instruction 0 is renamed, not {instance.instructions[0].name}"),
    ):
        monkeypatch.setattr(
            tpu_steer, "extract_jax_tpu", lambda *a, c=compiled, **k: (c, placement)
        )
        with pytest.raises(SteeringError, match=f"not the same program \\({needle}\\)"):
            steer_jax_tpu(
                mlp_grad, target="tpu-v4", instance=instance, answer=answer, placement=placement
            )
