"""A learning solver's files on disk: its checkpoint, and its best answer.

``muzero`` and ``egrl`` write their state as a flax msgpack document whose
``"fingerprint"`` names what the run is for (instance hash, seed, settings) and which
trainer wrote it (``"trainer"``). :func:`restore_checkpoint` reads it and refuses a
damaged file or one written for another run, with a
:class:`~mallocgame.errors.SolverError` naming the field (or the trainer that wrote it);
:func:`check_checkpoint` does the same from the fingerprint alone, before a run starts;
:func:`written_by` names the trainer of a fingerprint (one written before ``"trainer"``
existed included).
:func:`checkpoint_directory` refuses a checkpoint folder that is a file.

The best answer, ``best.solution.json`` beside the checkpoint, never gets worse
(:class:`BestAnswerFile`): a run writes it only when its answer beats the file on disk,
re-checked; a run resumed from an older checkpoint (after a kill) or started afresh
beside the file leaves a better one alone, and a file that fails to load or check is
moved aside, never overwritten.

What the two trainers share lives here, written once: the file names
(:data:`CHECKPOINT_NAME`, :data:`BEST_NAME`), the fingerprint (:class:`CheckpointFormat`:
version, instance hash, settings, seed, the trainer's own keys; the trainer's name when
written), writing and reading a checkpoint (:func:`write_checkpoint`,
:meth:`CheckpointFormat.restore`), the best answer and its reports (:class:`BestAnswer`),
the progress sink (:func:`stderr_log`) and JAX's compilation cache
(:func:`enable_compilation_cache`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mallocgame.errors import MallocGameError, SolverError
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import Improvement, solution_from_game

if TYPE_CHECKING:
    from mallocgame.game.state import Game

__all__ = [
    "TRAINER_KEY",
    "CHECKPOINT_NAME",
    "BEST_NAME",
    "CheckpointFormat",
    "write_checkpoint",
    "restore_checkpoint",
    "check_checkpoint",
    "read_fingerprint",
    "written_by",
    "checkpoint_directory",
    "BestAnswerFile",
    "BestAnswer",
    "stderr_log",
    "device_arrays",
    "enable_compilation_cache",
]

TRAINER_KEY = "trainer"
"""The fingerprint key naming the trainer that wrote a checkpoint (``"muzero"``, ``"egrl"``)."""

CHECKPOINT_NAME = "checkpoint.msgpack"
"""A trainer's checkpoint in its ``checkpoint_dir``."""

BEST_NAME = "best.solution.json"
"""A trainer's best answer (:class:`BestAnswerFile`) beside its checkpoint."""

RESUME_REMEDY = "use another checkpoint_dir or remove it"
"""What ends the message of a checkpoint a trainer refuses to resume."""

_LEGACY_TRAINERS = {"answer": "muzero", "settings": "egrl"}
"""A checkpoint written before :data:`TRAINER_KEY` existed: its trainer, from a key only
that trainer's fingerprint has."""


@dataclass(frozen=True)
class CheckpointFormat:
    """One trainer's checkpoints: the name it writes under :data:`TRAINER_KEY`, the
    version of their layout, and the fingerprint key its settings go under (with the
    settings in ``leave_out``, where a run writes, left out)."""

    trainer: str
    version: int
    settings_key: str
    leave_out: Collection[str] = ()

    def fingerprint(
        self, instance: Instance, settings: Mapping[str, Any], seed: int, **extra: Any
    ) -> dict[str, Any]:
        """What a checkpoint must match to be resumed, in this order: ``"version"``,
        ``"instance_sha256"``, the settings (but ``leave_out``) as JSON with sorted keys
        under :attr:`settings_key`, ``"seed"``, then the trainer's own ``extra`` keys.
        The trainer's name is not among them: :meth:`restore` checks it by its own rule
        (a checkpoint written before :data:`TRAINER_KEY` existed has none)."""
        return self.fingerprint_of(instance.sha256, settings, seed, **extra)

    def fingerprint_of(
        self, instance_sha256: str, settings: Mapping[str, Any], seed: int, **extra: Any
    ) -> dict[str, Any]:
        """:meth:`fingerprint` with the instance given by its hash (a run of many
        programs gives one hash of theirs)."""
        kept = {k: v for k, v in settings.items() if k not in self.leave_out}
        return {
            "version": self.version,
            "instance_sha256": instance_sha256,
            self.settings_key: json.dumps(kept, sort_keys=True),
            "seed": int(seed),
            **extra,
        }

    def written(self, fingerprint: Mapping[str, Any]) -> dict[str, Any]:
        """``fingerprint`` as a checkpoint holds it: with :data:`TRAINER_KEY` last."""
        return {**fingerprint, TRAINER_KEY: self.trainer}

    def restore(self, folder: Path, fingerprint: Mapping[str, Any]) -> dict[str, Any]:
        """The state of ``folder``'s checkpoint (:func:`restore_checkpoint`: this
        trainer's, matching ``fingerprint``, else refused ending in :data:`RESUME_REMEDY`)."""
        return restore_checkpoint(
            folder / CHECKPOINT_NAME, fingerprint, RESUME_REMEDY, trainer=self.trainer
        )


def write_checkpoint(folder: Path, state: Mapping[str, Any]) -> None:
    """Write ``state`` (its ``"fingerprint"`` first) as ``folder``'s checkpoint, a flax
    msgpack document, atomically; ``folder`` is created if missing."""
    from flax import serialization

    from mallocgame.fileio import write_bytes_atomic

    folder.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(folder / CHECKPOINT_NAME, serialization.msgpack_serialize(dict(state)))


def restore_checkpoint(
    path: Path,
    fingerprint: Mapping[str, Any],
    remedy: str,
    *,
    trainer: str | None = None,
) -> dict[str, Any]:
    """The state dict at ``path`` if it was written by ``trainer`` (``None``: any) and its
    fingerprint equals ``fingerprint`` on every key; ``remedy`` ends the message of a
    mismatch (e.g. ``"use another checkpoint_dir or remove it"``)."""
    from flax import serialization

    try:
        state = serialization.msgpack_restore(path.read_bytes())
    except Exception as exc:  # msgpack raises several types for a damaged file
        raise SolverError(f"{path}: not a readable checkpoint ({type(exc).__name__})") from None
    if not isinstance(state, dict):
        raise SolverError(f"{path}: not a readable checkpoint (not a mapping)")
    _compare(path, state.get("fingerprint", {}), fingerprint, remedy, trainer)
    return state


def read_fingerprint(path: Path) -> dict[str, Any]:
    """The fingerprint of the checkpoint at ``path`` (``{}`` if it has none), read
    without decoding the rest of the file (the fingerprint is its first entry)."""
    import msgpack

    try:
        with path.open("rb") as handle:
            unpacker = msgpack.Unpacker(handle, raw=False)
            for _ in range(unpacker.read_map_header()):
                if unpacker.unpack() == "fingerprint":
                    found = unpacker.unpack()
                    return found if isinstance(found, dict) else {}
                unpacker.skip()
    except Exception as exc:  # msgpack raises several types for a damaged file
        raise SolverError(f"{path}: not a readable checkpoint ({type(exc).__name__})") from None
    return {}


def check_checkpoint(
    path: Path,
    fingerprint: Mapping[str, Any],
    remedy: str,
    *,
    trainer: str | None = None,
) -> bool:
    """Whether a run would resume from the checkpoint at ``path``: ``False`` where there
    is none, ``True`` where it is this run's; otherwise the :class:`SolverError`
    :func:`restore_checkpoint` would raise (checked from the fingerprint alone)."""
    if not path.exists():
        return False
    _compare(path, read_fingerprint(path), fingerprint, remedy, trainer)
    return True


def written_by(fingerprint: Any) -> str | None:
    """The trainer that wrote a checkpoint of ``fingerprint``: its :data:`TRAINER_KEY`, else
    (a checkpoint written before that key existed) the trainer whose own key it has
    (:data:`_LEGACY_TRAINERS`), else ``None`` (or where ``fingerprint`` is not a mapping)."""
    if not isinstance(fingerprint, Mapping):
        return None
    wrote = fingerprint.get(TRAINER_KEY)
    if isinstance(wrote, str):
        return wrote
    return next((name for key, name in _LEGACY_TRAINERS.items() if key in fingerprint), None)


def _compare(
    path: Path,
    theirs: Any,
    fingerprint: Mapping[str, Any],
    remedy: str,
    trainer: str | None,
) -> None:
    if not isinstance(theirs, dict):
        theirs = {}
    if trainer is not None:
        wrote = written_by(theirs)
        if wrote is not None and wrote != trainer:
            raise SolverError(
                f"{path.parent}: holds a {wrote} run, which {trainer} cannot resume ({remedy})"
            )
    for key, value in fingerprint.items():
        if theirs.get(key) != value:
            raise SolverError(f"{path}: checkpoint was written for a different {key} ({remedy})")


def checkpoint_directory(path: str | os.PathLike[str]) -> Path:
    """``path`` as the folder of a run's checkpoints: refused with a :class:`SolverError`
    where it (or a folder above it) is something other than a directory; a missing one
    is created when the run first writes."""
    folder = Path(path)
    for above in (folder, *folder.parents):
        if above.exists() and not above.is_dir():
            what = "it is" if above == folder else f"{above} is"
            raise SolverError(f"{folder}: cannot hold checkpoints: {what} a file, not a directory")
    return folder


class BestAnswerFile:
    """The best answer for one instance in a file (a run's ``best.solution.json``),
    which a write never makes worse.

    :meth:`offer` writes a solution only where it scores higher than the file on disk
    (``score``: a solution's measure, higher is better; by default ``reward_s``). The
    file on disk is loaded and checked against the instance (:func:`mallocgame.check.
    check_solution`) before its score counts; one that fails to load or check (damaged,
    tampered with, of another instance) is moved aside to ``NAME.aside.json`` (or
    ``NAME.aside-2.json``, ...), never overwritten, and ``log`` says so. A file this
    object read or wrote last is not read again until it changes on disk.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        instance: Instance,
        *,
        score: Callable[[Solution], float] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.instance = instance
        self.score = score or (lambda solution: solution.reward_s)
        self.log = log or (lambda _line: None)
        self._known: tuple[tuple[int, int, int], float] | None = None  # (file stat, its score)

    def offer(self, solution: Solution) -> bool:
        """Write ``solution`` (atomically) if it scores higher than the file on disk or
        there is none; returns whether it was written."""
        from mallocgame.solution import save_solution

        mine = self.score(solution)
        theirs = self.on_disk()
        if theirs is not None and not mine > theirs:
            return False
        save_solution(solution, self.path)
        self._known = (_stat(self.path), mine)
        return True

    def on_disk(self) -> float | None:
        """The score of the file on disk (``None`` where there is none, or it was moved
        aside because it does not load or check)."""
        from mallocgame.check import check_solution
        from mallocgame.solution import load_solution

        try:
            stat = _stat(self.path)
        except FileNotFoundError:
            return None
        if self._known is not None and self._known[0] == stat:
            return self._known[1]
        try:
            solution = load_solution(self.path)
            failures = check_solution(self.instance, solution).failures
            problem = f"{failures[0].kind}: {failures[0].message}" if failures else ""
        except MallocGameError as exc:
            problem = str(exc)
        if not problem:
            self._known = (stat, self.score(solution))
            return self._known[1]
        aside = self._set_aside()
        self.log(
            f"{self.path} is not a valid answer for {self.instance.name} "
            f"({problem.splitlines()[0]}): moved to {aside.name}"
        )
        return None

    def solution_on_disk(self) -> Solution | None:
        """The solution in the file, loaded and checked (``None`` where there is none, or
        where it does not load or check: :meth:`on_disk` has moved it aside then)."""
        from mallocgame.solution import load_solution

        return None if self.on_disk() is None else load_solution(self.path)

    def _set_aside(self) -> Path:
        name = self.path.name
        stem = name[: -len(".json")] if name.endswith(".json") else name
        for n in range(1, 10_000):
            aside = self.path.with_name(f"{stem}.aside{'' if n == 1 else f'-{n}'}.json")
            if os.path.lexists(aside):
                continue
            try:
                os.rename(self.path, aside)
            except OSError as exc:
                why = f"cannot move it aside to {aside.name}: {exc.strerror or exc}"
                raise SolverError(f"{self.path}: {why}") from None
            return aside
        raise SolverError(f"{self.path}: cannot move it aside: every {stem}.aside-N.json is taken")


class BestAnswer:
    """A run's best answer: the :class:`Solution` of its best game so far, the file
    :data:`BEST_NAME` in ``folder`` (none where ``folder`` is ``None``), and the reports
    of it to a request's callback.

    The trainer decides what is better (its own measure); :meth:`improve` records what
    it was given. ``score`` and ``log``: those of the :class:`BestAnswerFile`.
    """

    def __init__(
        self,
        instance: Instance,
        *,
        solver: str,
        seed: int,
        folder: Path | None,
        score: Callable[[Solution], float] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.instance = instance
        self.solver = solver
        self.seed = seed
        self.solution: Solution | None = None
        self.file = (
            None
            if folder is None
            else BestAnswerFile(folder / BEST_NAME, instance, score=score, log=log)
        )

    def improve(
        self,
        game: Game,
        elapsed_s: float,
        callback: Callable[[Improvement], None] | None,
        *,
        work: Mapping[str, int],
        info: Mapping[str, Any],
    ) -> Solution:
        """Make the complete ``game`` the best answer: its solution (:meth:`answer_of`),
        written to the file where it beats the one on disk, then passed to ``callback``;
        returns it."""
        solution = self.answer_of(game, elapsed_s, work=work, info=info)
        self.take(solution, elapsed_s, callback)
        return solution

    def answer_of(
        self,
        game: Game,
        elapsed_s: float,
        *,
        work: Mapping[str, int],
        info: Mapping[str, Any] | None = None,
    ) -> Solution:
        """The solution of the complete ``game``, named ``solver``, with ``seed``,
        ``wall_s=elapsed_s``, ``work`` and ``info`` (not made the best answer)."""
        return solution_from_game(
            self.instance,
            game,
            solver=self.solver,
            seed=self.seed,
            wall_s=elapsed_s,
            work=work,
            info=info,
        )

    def take(
        self,
        solution: Solution,
        elapsed_s: float,
        callback: Callable[[Improvement], None] | None,
    ) -> None:
        """Make ``solution`` (of a complete game of this instance, as :meth:`improve`
        makes it) the best answer: written to the file where it beats the one on disk,
        then passed to ``callback``."""
        self.solution = solution
        if self.file is not None:  # written only where it beats the file on disk
            self.file.offer(solution)
        self.report(elapsed_s, callback)

    def report(self, elapsed_s: float, callback: Callable[[Improvement], None] | None) -> None:
        """Pass the best answer (if any) to ``callback`` (if any): after an improvement,
        and a resumed run's best to a new caller."""
        if self.solution is not None and callback is not None:
            callback(Improvement(self.solution, elapsed_s, self.solution.work))


def stderr_log(line: str) -> None:
    """A progress sink printing to stderr."""
    print(line, file=sys.stderr, flush=True)


def device_arrays(tree: Any) -> Any:
    """``tree`` with every leaf (numpy arrays, numbers) put on JAX's default device as it is
    (JAX's canonical dtypes: float32, int32 without x64; a Python number weakly typed).
    ``jnp.asarray`` gives the same arrays but compiles a program for every shape it meets
    (tens of milliseconds each on a small CPU, seconds for a network's parameters)."""
    import jax

    return jax.tree_util.tree_map(jax.device_put, tree)


def enable_compilation_cache() -> None:
    """Keep XLA's compiled networks (search, learner) on disk between runs.

    Compiling them takes 10-40 s on a 2-core CPU; JAX's persistent cache turns that
    into a load for every later run with the same shapes. The directory is
    ``$MALLOCGAME_XLA_CACHE`` (``off`` disables it), else ``~/.cache/mallocgame/xla``;
    a cache directory the user configured for JAX is left alone.
    """
    import jax

    where = os.environ.get("MALLOCGAME_XLA_CACHE", "")
    # JAX's way to read a flag; its Config class does not declare its flags for a type checker
    if where.lower() == "off" or jax.config.jax_compilation_cache_dir:  # type: ignore[attr-defined]
        return
    path = Path(where) if where else Path.home() / ".cache" / "mallocgame" / "xla"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # no writable cache: compile every time
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def _stat(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size, st.st_ino
