"""Hyperparameters of MMap-MuZero (paper appendix C, Table 6), with CPU-sized defaults.

:class:`MuZeroConfig` is one frozen dataclass; every field has a documented default.
Where the paper's value (Table 6) does not fit a 2-core CPU the default is smaller
and the paper's value is given in the comment:

==========================  ===========  ==========  =====================================
field                       paper        default     why the default differs
==========================  ===========  ==========  =====================================
discount                    0.9999       0.9999
num_simulations             400          16          400 simulations per move is ~25x the
                                                     CPU time per move; 16 with Gumbel
                                                     MuZero (which improves the policy even
                                                     with few simulations)
init/final temperature      1.0 / 0.2    1.0 / 0.2   (``muzero_policy`` search only)
temperature_decay_steps     400,000      400,000
noise_fraction / alpha      0.25 / 0.03  0.25 / 0.03 (``muzero_policy`` search only)
training_steps              1,000,000    budget      runs stop at a work or time budget
optimizer                   adam         adamw       Adam with decoupled weight decay
batch_size                  512          64          512-sample unrolls take ~8x longer
                                                     per step on 2 cores
learning_rate               2e-4         1e-3        a smaller batch and a run of minutes
                                                     rather than a day
weight_decay                1e-4         1e-4
replay_size                 20,000       20,000      positions
reanalyse_fraction          0.5          0.5         (the kept games: demonstrations and
                                                     the best self-play game)
(demonstrations)            none         heuristic,  our choice, measured (below; the
                                         greedy, es  paper learned without them)
==========================  ===========  ==========  =====================================

Not in Table 6 (MuZero's usual values or chosen here): ``unroll_steps`` 5,
``td_steps`` 100 (rewards are dense and games are finite, so long n-step returns are
nearly unbiased), the value/reward support, ``value_scale`` (rewards are seconds, about
1e-6: every reward is multiplied by ``value_scale / R``, ``R`` the instance's reward
normalizer of SPEC section 5, so a whole game's return lies in about
``[0, value_scale]``; the atoms cover scaled values in ``[-support_max, support_max]``
and targets beyond are clipped, so ``value_scale`` above ``support_max`` saturates the
value head), the network widths, ``parallel_games`` 16.

Two search settings differ from mctx's and the paper's Gumbel MuZero, measured on
four suite programs of 420 to 929 buffers and then on the 19 suite programs up to
1,000 buffers (docs/muzero-experiments.md, "Making it learn"):

- ``rescale_q`` False: Q is not min-max normalized before ``sigma``. A move's reward
  is about 1e-3 of a game's value here, so normalizing turned model noise into
  near-deterministic policy targets (0.06 to 0.16 nats) and the self-play return did
  not rise; without it the targets stay broad and the return climbs.
- ``greedy_games`` 2: two of the 16 games play the improved policy's most probable
  action rather than a Gumbel sample. They follow the network's best line, where the
  best answers come from; their moves are trained on like the others.

Two more are options, not defaults: ``value_scale=100`` (without min-max
normalization ``sigma(Q)`` is proportional to Q, so this scale sets how far the
search's Q differences move the policy targets from the prior) and
``policy_init_bias=1`` (initial policy logits leaning (1, 0.5, 0) to Copy, NoCopy,
Drop, the greedy order ``es`` starts from; our choice, not the paper's). Both helped
on programs of 262 to 929 buffers and did worse on the two smallest suite programs
(``gru_infer`` 0.89 → 0.48-0.56), where one seed does not separate settings well; see
docs/muzero-experiments.md. With ``value_scale`` above ``support_max`` the value
targets of most of a game are clipped, so those runs also made the search nearly
myopic.

Reanalyse (``reanalyse_fraction`` 0.5, Table 6's value; see ``reanalyse.py``) is the
default since it was measured on the 19 suite programs up to 1,000 buffers at 120 s
(docs/muzero-experiments.md), first with the ``heuristic`` and ``greedy``
demonstrations and the best self-play game (better best game than without Reanalyse
on 13, worse on 4), then, the default since the sixth session, with ``es``'s best
game as a third demonstration and ``imitation`` 0.5 (better than that on 17, worse on
2; mean best game 0.697 against 0.644 and ``es``'s 0.696):

- ``demonstrations=...,es`` plays evolution strategies first, for ``es_share`` (0.25)
  of a wall-clock budget, or ``es_games`` games without one (so a work budget stays
  reproducible), on ``es_workers`` processes, and keeps its best game;
- ``imitation=w`` makes a kept game's policy target ``(1 - w)`` the search's policy
  plus ``w`` on the kept game's own action (behaviour cloning of the kept games: the
  demonstrations and the best self-play game).

The answer is always one of the agent's own self-play games. The paper's agent learned
without expert guidance: ``demonstrations= imitation=0`` keeps only the best self-play
game, which alone was a wash (10 better, 8 worse than no Reanalyse).

``q_scale`` is mctx's ``c_scale`` (0.1) of ``sigma(Q) = (50 + max N) c_scale Q``;
``q_scale_per_buffer=k`` sets ``c_scale = k N`` for an ``N``-buffer program, so that a
decision's share of the return moves the policy targets alike on small and large
programs. Measured on the 19 suite programs up to 1,000 buffers at 120 s with
``k = 0.0015`` (docs/muzero-experiments.md): better on 10, worse on 9, mean best
game 0.641 against the defaults' 0.635; an option, not a default.

``restart_fraction=p`` starts a new game in a sampling slot, with probability ``p``,
at a random state of the agent's best self-play game (its first ``t`` decisions
replayed without search; ``selfplay.py``): a local search around the best game, the
way ``es`` improves its own. Measured with ``p = 0.5`` on the 19 suite programs up to
1,000 buffers at 120 s (docs/muzero-experiments.md): better on 9, worse on 7, mean
best game 0.698 against the defaults' 0.697; with a second seed on 10 programs, better
on 6, worse on 4. A wash: an option, not a default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from mallocgame.errors import SolverError
from mallocgame.game.observe import ObservationConfig

__all__ = ["MuZeroConfig", "config_from_options", "coerce_option", "DEMONSTRATION_SOURCES"]

DEMONSTRATION_SOURCES = ("heuristic", "greedy", "es")
"""Solvers whose trajectories can be demonstrations (see ``reanalyse.py``)."""


@dataclass(frozen=True)
class MuZeroConfig:
    """Everything that shapes an MMap-MuZero run (see the module docstring for sources)."""

    # --- self-play and search
    parallel_games: int = 16  # games played in one batch (one search call per move)
    search: str = "gumbel"  # "gumbel" (mctx.gumbel_muzero_policy) or "muzero" (mctx.muzero_policy)
    num_simulations: int = 16  # per move
    discount: float = 0.9999
    init_temperature: float = 1.0  # muzero_policy: visit-count temperature at the start
    final_temperature: float = 0.2
    temperature_decay_steps: int = 400_000  # learner steps from init to final (linear)
    noise_fraction: float = 0.25  # muzero_policy: Dirichlet noise mixed into the root prior
    noise_alpha: float = 0.03
    gumbel_scale: float = 1.0  # gumbel_muzero_policy: 0 = deterministic top action
    rescale_q: bool = False  # gumbel_muzero_policy: min-max normalize Q before sigma (mctx's default: True)
    greedy_games: int = 2  # slots that play the improved policy's argmax (no sampling)
    q_scale: float = 0.1  # gumbel_muzero_policy: c_scale of sigma(Q) = (50 + max N) c_scale Q (mctx's default 0.1)
    q_scale_per_buffer: float = 0.0  # > 0: c_scale is this times the program's buffer count (replaces q_scale)
    restart_fraction: float = 0.0  # share of non-greedy games started at a random state of the best game (selfplay.py)
    # --- targets
    value_scale: float = 10.0  # a full game's return / R, times this, is the value target scale
    td_steps: int = 100  # n of the n-step value targets
    unroll_steps: int = 5  # K of the learned-model unroll
    support_size: int = 41  # atoms of the categorical value and reward heads
    support_max: float = 20.0  # largest |scaled value| the atoms cover (before MuZero's transform)
    # --- networks (the representation of paper Figure 4, CPU-sized)
    latent_size: int = 64
    width: int = 128
    conv_channels: tuple[int, ...] = (8, 16)
    policy_init_bias: float = 0.0  # initial policy logits' bias: this times (1, 1/2, 0) for Copy, NoCopy, Drop
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    # --- learner
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    value_loss_weight: float = 0.25
    replay_size: int = 20_000  # positions
    min_replay: int = 512  # positions before the learner starts
    train_every: int = 4  # one learner step per this many self-play batch moves
    # --- Reanalyse (paper section 3, Table 6; see reanalyse.py)
    reanalyse_fraction: float = 0.5  # share of each training batch drawn from the kept, reanalysed games (0: off)
    demonstrations: str = "heuristic,greedy,es"  # comma-separated, "" for none; kept and reanalysed, never answers
    reanalyse_best: bool = True  # keep and reanalyse the best self-play game
    imitation: float = 0.5  # share of a kept game's policy target put on the kept game's own action
    es_share: float = 0.25  # demonstration "es": its share of a wall-clock budget (played first)
    es_games: int = 2000  # demonstration "es": its games when the run has no wall-clock budget
    es_workers: int = 2  # demonstration "es": processes it plays on (at most the machine's cores)
    # --- run control
    checkpoint_seconds: float = 60.0  # wall-clock between checkpoints (and one at the end)
    progress_seconds: float = 10.0  # wall-clock between progress lines
    eval_every: int = 200  # learner steps between no-search evaluation games (policy answer)

    def __post_init__(self) -> None:
        if self.search not in ("gumbel", "muzero"):
            raise SolverError(f"search must be 'gumbel' or 'muzero', not {self.search!r}")
        positive = ("parallel_games", "num_simulations", "unroll_steps", "support_size", "latent_size",
                    "width", "batch_size", "replay_size", "train_every", "eval_every")
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise SolverError(f"{name} must be at least 1, not {getattr(self, name)}")
        if not 0 <= self.greedy_games <= self.parallel_games:
            raise SolverError(f"greedy_games must be in [0, parallel_games], not {self.greedy_games}")
        if self.td_steps < 1:
            raise SolverError(f"td_steps must be at least 1, not {self.td_steps}")
        if not 0.0 < self.discount <= 1.0:
            raise SolverError(f"discount must be in (0, 1], not {self.discount}")
        if self.support_size < 3 or self.support_max <= 0 or self.value_scale <= 0:
            raise SolverError("support_size must be >= 3 and support_max, value_scale positive")
        if self.q_scale <= 0 or self.q_scale_per_buffer < 0:
            raise SolverError("q_scale must be positive and q_scale_per_buffer non-negative")
        if self.learning_rate <= 0 or self.weight_decay < 0:
            raise SolverError("learning_rate must be positive and weight_decay non-negative")
        if not 0.0 <= self.reanalyse_fraction < 1.0:
            raise SolverError(f"reanalyse_fraction must be in [0, 1), not {self.reanalyse_fraction}")
        if not 0.0 <= self.restart_fraction <= 1.0:
            raise SolverError(f"restart_fraction must be in [0, 1], not {self.restart_fraction}")
        if not 0.0 <= self.imitation <= 1.0:
            raise SolverError(f"imitation must be in [0, 1], not {self.imitation}")
        if not 0.0 < self.es_share < 1.0 or self.es_games < 1 or self.es_workers < 1:
            raise SolverError("es_share must be in (0, 1), es_games and es_workers at least 1")
        for name in self.demonstration_sources:
            if name not in DEMONSTRATION_SOURCES:
                raise SolverError(f"unknown demonstration '{name}' (have: {', '.join(DEMONSTRATION_SOURCES)})")

    @property
    def demonstration_sources(self) -> tuple[str, ...]:
        """``demonstrations`` as a tuple of names (empty when none). Demonstrations are
        trained on only through Reanalyse: with ``reanalyse_fraction`` 0 none is built."""
        return tuple(n.strip() for n in self.demonstrations.split(",") if n.strip())

    def search_q_scale(self, num_buffers: int) -> float:
        """The ``c_scale`` of Gumbel MuZero's ``sigma(Q)`` for a program of ``num_buffers``."""
        if self.q_scale_per_buffer > 0:
            return self.q_scale_per_buffer * num_buffers
        return self.q_scale


def coerce_option(value: Any, like: Any, name: str) -> Any:
    """``value`` (often a command-line string) converted to the type of ``like``."""
    if isinstance(like, bool):
        if isinstance(value, str):
            if value.lower() in ("1", "true", "yes"):
                return True
            if value.lower() in ("0", "false", "no"):
                return False
            raise SolverError(f"option {name}: expected true/false, not {value!r}")
        return bool(value)
    try:
        if isinstance(like, int):
            return int(value)
        if isinstance(like, float):
            return float(value)
        if isinstance(like, tuple):
            items = value.split(",") if isinstance(value, str) else (
                [value] if isinstance(value, int) else value)
            return tuple(int(v) for v in items)
    except (TypeError, ValueError):
        raise SolverError(f"option {name}: cannot use {value!r} as {type(like).__name__}") from None
    return str(value)


def config_from_options(options: Mapping[str, Any], base: MuZeroConfig | None = None) -> MuZeroConfig:
    """``base`` (default: the defaults) with ``options`` applied by field name.

    Observation fields are given with an ``obs_`` prefix (``obs_grid_steps=16``).
    Unknown names raise :class:`SolverError` listing the known ones.
    """
    base = base or MuZeroConfig()
    top = {f.name: f for f in fields(MuZeroConfig) if f.name != "observation"}
    obs_fields = {f.name for f in fields(ObservationConfig)}
    changes: dict[str, Any] = {}
    obs_changes: dict[str, Any] = {}
    for key, value in options.items():
        if key.startswith("obs_") and key[4:] in obs_fields:
            obs_changes[key[4:]] = coerce_option(value, getattr(base.observation, key[4:]), key)
        elif key in top:
            changes[key] = coerce_option(value, getattr(base, key), key)
        else:
            known = ", ".join(sorted([*top, *(f"obs_{n}" for n in obs_fields)]))
            raise SolverError(f"unknown muzero option '{key}' (known: {known})")
    if obs_changes:
        try:
            changes["observation"] = dataclasses.replace(base.observation, **obs_changes)
        except ValueError as exc:
            raise SolverError(f"observation options: {exc}") from None
    return dataclasses.replace(base, **changes)
