"""Steering XLA's TPU memory-space assignment (MSA) with an answer of the game.

libtpu's MSA places values in the fast memory one after another in its own priority
order. Its flag ``xla_tpu_msa_sort_order_overrides`` takes a text-format
``xla.memory_space_assignment.MsaSortOrderOverrides``: position matchers (an
instruction-name regex, a tuple index) with ``assign_first`` or ``assign_last``. That is
the lever here: an answer cannot be imposed on MSA (no libtpu flag of jax 0.10.2 /
libtpu 0.0.42.1 pins a value in the alternate memory), but the tensors it keeps in fast
memory can be put first in MSA's order and the ones it leaves out last.

:func:`steering_flags` builds the flag from an answer and XLA's own placement of the same
compile, in one of :data:`MODES`:

- ``"diff"`` (the default): only where the two disagree: the answer's tensors that XLA
  left in slow memory first, XLA's fast tensors that the answer leaves slow last.
- ``"first"``: every tensor the answer keeps in fast memory (at any step) is assigned
  first; the rest keep MSA's order after them (the order the heuristic's order search
  starts from: :func:`~mallocgame.solvers.order_search.order_from_mapping`). Without the
  ``assign_last`` half, MSA still takes what it took before wherever it has room
  (docs/tpu.md, "Steering").

Tensors are named by the instruction that defines them (``NAME`` or ``NAME{i}`` for
element ``i`` of a tuple), as the XLA frontend names them; the names of a compile with
the flag are the same (MSA runs after every pass that renames), which
:func:`steer_jax_tpu` checks. One matcher per tuple index, its regex the alternation of
the names, keeps the flag short and MSA's matching quick.

:func:`steer_jax_tpu` compiles a function with the flag and reads back what XLA then
placed: the share of the answer's fast-memory byte-steps XLA's placement has, before and
after, and the simulated latency of XLA's legal answers
(:func:`~mallocgame.solvers.xla_answer.xla_answer`) before and after.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mallocgame.frontends.tpu import extract_jax_tpu, fast_spaces_of
from mallocgame.frontends.xla_placement import (
    XlaPlacement,
    instance_structure_sha256,
    placement_solution,
    program_structure_sha256,
)
from mallocgame.instance import Instance
from mallocgame.residency import compare_residency, residency
from mallocgame.runtime.errors import ApplyError
from mallocgame.simulate import simulate
from mallocgame.solution import Solution
from mallocgame.solvers.xla_answer import XlaAnswer, xla_answer

__all__ = [
    "MODES",
    "SORT_ORDER_FLAG",
    "SteeringError",
    "SteeringFlags",
    "SteeringReport",
    "steering_flags",
    "steer_jax_tpu",
]

SORT_ORDER_FLAG = "xla_tpu_msa_sort_order_overrides"
MODES = ("diff", "first")
_LEAF = re.compile(r"(.*)\{(\d+(?:,\d+)*)\}")


class SteeringError(ApplyError):
    """The answer cannot steer this compile (an unknown mode, an answer of another
    program, a steered compile that is not the same program)."""


@dataclass(frozen=True)
class SteeringFlags:
    """The libtpu flag that puts ``promoted`` first and ``demoted`` last in MSA's order
    (tensor names, module docstring)."""

    sort_order_overrides: str  # text-format MsaSortOrderOverrides ("" when none)
    promoted: tuple[str, ...]
    demoted: tuple[str, ...]
    mode: str

    def compiler_options(self) -> dict[str, str]:
        """The flag as ``compiler_options`` of ``jax.jit(...).lower(...).compile()``
        (empty when there is nothing to steer)."""
        return {SORT_ORDER_FLAG: self.sort_order_overrides} if self.sort_order_overrides else {}


@dataclass(frozen=True)
class SteeringReport:
    """What XLA placed with the flags against without them, judged on ``instance``.

    ``followed_*``: the share of the answer's fast-memory byte-steps (bytes times steps)
    XLA's placement as it is also has; ``*_latency_s`` and ``*_reward``: the simulated
    latency and the normalized reward of XLA's legal answer, unsteered and steered.
    """

    flags: SteeringFlags
    followed_unsteered: float
    followed_steered: float
    unsteered_latency_s: float
    steered_latency_s: float
    answer_latency_s: float
    unsteered_reward: float
    steered_reward: float
    answer_reward: float
    steered_placement: XlaPlacement
    steered_copies: int
    unsteered_copies: int


def _fast_tensors(instance: Instance, solution: Solution) -> set[int]:
    """The tensors ``solution`` keeps in fast memory at some step."""
    return set(residency(instance, solution))


def _escaped(name: str) -> str:
    """``name`` as a regex literal inside a text-format string."""
    return re.escape(name).replace("\\", "\\\\").replace('"', '\\"')


def _overrides(names: Sequence[str], option: str) -> list[str]:
    """One ``overrides`` entry per tuple index, matching every name of ``names`` there."""
    by_index: dict[tuple[str, ...], list[str]] = {}
    for name in names:
        leaf = _LEAF.fullmatch(name)
        base, index = (leaf.group(1), tuple(leaf.group(2).split(","))) if leaf else (name, ())
        by_index.setdefault(index, []).append(base)
    entries = []
    for index, bases in sorted(by_index.items()):
        regex = "^(" + "|".join(_escaped(b) for b in sorted(set(bases))) + ")$"
        matcher = f'instruction_name_regex: "{regex}"'
        if index:
            matcher += " tuple_index { " + " ".join(f"index: {i}" for i in index) + " }"
        entries.append(
            f"overrides {{ hlo_position_matcher {{ {matcher} }} "
            f"override_options {{ {option}: true }} }}"
        )
    return entries


def steering_flags(
    instance: Instance,
    answer: Solution,
    placement: XlaPlacement,
    *,
    fast_spaces: frozenset[int],
    mode: str = "diff",
) -> SteeringFlags:
    """The flag that steers MSA towards ``answer`` (a solution of ``instance``, the
    program XLA placed as ``placement``), in ``mode`` (module docstring).

    Raises :class:`SteeringError` for an unknown ``mode`` and for an answer whose
    ``instance_sha256`` is not ``instance``'s: an empty one too (as ``check`` refuses it),
    since an answer that names no instance cannot be known to be one of this program.
    """
    if mode not in MODES:
        raise SteeringError(f"unknown steering mode {mode!r} (have: {', '.join(MODES)})")
    if answer.instance_sha256 != instance.sha256:
        recorded = answer.instance_sha256 or "none recorded"
        raise SteeringError(
            f"the answer is not a solution of {instance.name} (its instance_sha256: "
            f"{recorded}; the instance's: {instance.sha256})"
        )
    ours = _fast_tensors(instance, answer)
    xla = _fast_tensors(instance, placement_solution(instance, placement, fast_spaces=fast_spaces))
    promote, demote = (ours, set()) if mode == "first" else (ours - xla, xla - ours)
    promoted = tuple(sorted(instance.tensors[t].name for t in promote))
    demoted = tuple(sorted(instance.tensors[t].name for t in demote))
    entries = _overrides(promoted, "assign_first") + _overrides(demoted, "assign_last")
    return SteeringFlags(" ".join(entries), promoted, demoted, mode)


def _followed(instance: Instance, answer: Solution, xla: Solution) -> float:
    """The share of ``answer``'s fast-memory byte-steps that ``xla`` has too."""
    c = compare_residency(instance, answer, xla)
    return c.fast_byte_steps_common / c.fast_byte_steps_a if c.fast_byte_steps_a else 1.0


def steer_jax_tpu(
    fn: Callable[..., Any],
    *example_args: Any,
    target: str,
    instance: Instance,
    answer: Solution,
    placement: XlaPlacement,
    mode: str = "diff",
    unsteered: XlaAnswer | None = None,
    **jit_kwargs: Any,
) -> SteeringReport:
    """Compile ``fn`` for ``target`` with the flags of :func:`steering_flags` and compare
    what XLA placed with its unsteered ``placement`` (module docstring). ``instance`` is
    the program of the unsteered compile on the preset to judge on; ``unsteered``: XLA's
    legal answer of ``placement`` where the caller has it already (computed otherwise;
    its projection can take a minute on large programs); ``jit_kwargs``:
    ``donate_argnums`` / ``static_argnums`` as for
    :func:`~mallocgame.frontends.tpu.compile_for_tpu`."""
    fast = fast_spaces_of(target)
    flags = steering_flags(instance, answer, placement, fast_spaces=fast, mode=mode)
    program, steered = extract_jax_tpu(
        fn,
        *example_args,
        target=target,
        name=instance.name,
        compiler_options=flags.compiler_options(),
        **jit_kwargs,
    )
    names = [i.name for i in program.instructions]
    ours = [i.name for i in instance.instructions]
    if len(names) != len(ours):
        why = f"{len(names)} instructions against {len(ours)}"
    elif names != ours:
        t = next(t for t, (a, b) in enumerate(zip(names, ours)) if a != b)
        why = f"instruction {t} is {names[t]}, not {ours[t]}"
    elif program_structure_sha256(program) != instance_structure_sha256(instance):
        why = "other tensors or sizes"
    else:
        why = ""
    if why:
        raise SteeringError(f"{instance.name}: the steered compile is not the same program ({why})")
    before = xla_answer(instance, placement, fast) if unsteered is None else unsteered
    after = xla_answer(instance, steered, fast)
    return SteeringReport(
        flags=flags,
        followed_unsteered=_followed(instance, answer, before.raw),
        followed_steered=_followed(instance, answer, after.raw),
        unsteered_latency_s=simulate(instance, before.solution).latency_s,
        steered_latency_s=simulate(instance, after.solution).latency_s,
        answer_latency_s=simulate(instance, answer).latency_s,
        unsteered_reward=before.solution.normalized_reward,
        steered_reward=after.solution.normalized_reward,
        answer_reward=answer.normalized_reward,
        steered_placement=steered,
        steered_copies=len(steered.copies),
        unsteered_copies=len(placement.copies),
    )
