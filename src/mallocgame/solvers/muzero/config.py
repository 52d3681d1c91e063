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

from dataclasses import dataclass
from typing import Literal

from mallocgame.game.observe import ObservationConfig
from mallocgame.options import setting

__all__ = ["MuZeroConfig", "DEMONSTRATION_SOURCES", "WHERE_FIELDS"]

DEMONSTRATION_SOURCES = ("heuristic", "greedy", "es")
"""Solvers whose trajectories can be demonstrations (see ``reanalyse.py``)."""

WHERE_FIELDS = ("checkpoint_dir", "progress", "checkpoint_seconds", "progress_seconds")
"""Settings of where and how often a run saves and reports, not of what it computes: a
checkpoint resumes under other values of these, and a sweep record leaves them out."""


@dataclass(frozen=True)
class MuZeroConfig:
    """Everything that shapes an MMap-MuZero run (paper Table 6; docs/muzero.md)."""

    # --- self-play and search
    parallel_games: int = setting(16, "games played in one batch (one search call per move)")
    search: Literal["gumbel", "muzero"] = setting(
        "gumbel", "the search: mctx.gumbel_muzero_policy or mctx.muzero_policy")
    num_simulations: int = setting(16, "search simulations per move (paper: 400)")
    discount: float = setting(0.9999, "reward discount per move")
    init_temperature: float = setting(1.0, "muzero search: visit-count temperature at the start")
    final_temperature: float = setting(0.2, "muzero search: visit-count temperature after the decay")
    temperature_decay_steps: int = setting(400_000, "learner steps from the initial to the final temperature")
    noise_fraction: float = setting(0.25, "muzero search: share of Dirichlet noise in the root prior")
    noise_alpha: float = setting(0.03, "muzero search: Dirichlet concentration of the root noise")
    gumbel_scale: float = setting(1.0, "gumbel search: scale of the Gumbel noise (0: the top action)")
    rescale_q: bool = setting(False, "gumbel search: min-max normalize Q before sigma (mctx's default: true)")
    greedy_games: int = setting(2, "games a batch that play the improved policy's argmax (no sampling)")
    q_scale: float = setting(0.1, "gumbel search: c_scale of sigma(Q) = (50 + max N) c_scale Q")
    q_scale_per_buffer: float = setting(0.0, "> 0: c_scale is this times the program's buffers (replaces q_scale)")
    restart_fraction: float = setting(0.0, "share of sampled games started at a random state of the best game")
    # --- targets
    value_scale: float = setting(10.0, "a whole game's return, in units of the reward normalizer, times this")
    td_steps: int = setting(100, "n of the n-step value targets, moves")
    unroll_steps: int = setting(5, "K of the learned model's unroll, moves")
    support_size: int = setting(41, "atoms of the categorical value and reward heads")
    support_max: float = setting(20.0, "largest |scaled value| the atoms cover (before MuZero's transform)")
    # --- networks (the representation of paper Figure 4, CPU-sized)
    latent_size: int = setting(64, "width of the latent state")
    width: int = setting(128, "width of the hidden layers")
    conv_channels: tuple[int, ...] = setting((8, 16), "channels of the memory-map image's convolutions")
    policy_init_bias: float = setting(0.0, "initial policy logits' bias: this times (1, 1/2, 0) for Copy, NoCopy, Drop")
    observation: ObservationConfig = setting(factory=ObservationConfig, doc="sizes of the observation")
    # --- learner
    batch_size: int = setting(64, "positions per learner step (paper: 512)")
    learning_rate: float = setting(1e-3, "AdamW learning rate (paper: 2e-4)")
    weight_decay: float = setting(1e-4, "AdamW decoupled weight decay")
    value_loss_weight: float = setting(0.25, "weight of the value loss")
    replay_size: int = setting(20_000, "positions kept in the replay buffer")
    min_replay: int = setting(512, "positions in the replay buffer before the learner starts")
    train_every: int = setting(4, "self-play batch moves per learner step")
    # --- Reanalyse (paper section 3, Table 6; see reanalyse.py)
    reanalyse_fraction: float = setting(0.5, "share of each batch drawn from the kept, reanalysed games (0: off)")
    demonstrations: tuple[str, ...] = setting(
        ("heuristic", "greedy", "es"), "solvers whose games are kept and reanalysed, never answers (empty: none)")
    reanalyse_best: bool = setting(True, "keep and reanalyse the best self-play game")
    imitation: float = setting(0.5, "share of a kept game's policy target on the kept game's own action")
    es_share: float = setting(0.25, "demonstration es: its share of a wall-clock budget (played first)")
    es_games: int = setting(2000, "demonstration es: its games when the run has no wall-clock budget")
    es_workers: int = setting(2, "demonstration es: processes it plays on")
    # --- run control (never part of the compiled functions)
    checkpoint_seconds: float = setting(60.0, "seconds between checkpoints (and one at the end)")
    progress_seconds: float = setting(10.0, "seconds between progress lines")
    eval_every: int = setting(200, "learner steps between no-search evaluation games (policy answer)")
    checkpoint_dir: str | None = setting(None, "folder of checkpoints and best.solution.json; a run resumes from it")
    progress: bool = setting(False, "print progress lines on stderr")

    def __post_init__(self) -> None:
        if self.search not in ("gumbel", "muzero"):
            raise ValueError(f"search must be 'gumbel' or 'muzero', not {self.search!r}")
        positive = ("parallel_games", "num_simulations", "unroll_steps", "support_size", "latent_size",
                    "width", "batch_size", "replay_size", "train_every", "eval_every")
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if not 0 <= self.greedy_games <= self.parallel_games:
            raise ValueError(f"greedy_games must be in [0, parallel_games], not {self.greedy_games}")
        if self.td_steps < 1:
            raise ValueError(f"td_steps must be at least 1, not {self.td_steps}")
        if not 0.0 < self.discount <= 1.0:
            raise ValueError(f"discount must be in (0, 1], not {self.discount}")
        if self.support_size < 3 or self.support_max <= 0 or self.value_scale <= 0:
            raise ValueError("support_size must be >= 3 and support_max, value_scale positive")
        if self.q_scale <= 0 or self.q_scale_per_buffer < 0:
            raise ValueError("q_scale must be positive and q_scale_per_buffer non-negative")
        if self.learning_rate <= 0 or self.weight_decay < 0:
            raise ValueError("learning_rate must be positive and weight_decay non-negative")
        if not 0.0 <= self.reanalyse_fraction < 1.0:
            raise ValueError(f"reanalyse_fraction must be in [0, 1), not {self.reanalyse_fraction}")
        if not 0.0 <= self.restart_fraction <= 1.0:
            raise ValueError(f"restart_fraction must be in [0, 1], not {self.restart_fraction}")
        if not 0.0 <= self.imitation <= 1.0:
            raise ValueError(f"imitation must be in [0, 1], not {self.imitation}")
        if not 0.0 < self.es_share < 1.0 or self.es_games < 1 or self.es_workers < 1:
            raise ValueError("es_share must be in (0, 1), es_games and es_workers at least 1")
        for name in self.demonstration_sources:
            if name not in DEMONSTRATION_SOURCES:
                raise ValueError(f"unknown demonstration '{name}' (have: {', '.join(DEMONSTRATION_SOURCES)})")

    @property
    def demonstration_sources(self) -> tuple[str, ...]:
        """``demonstrations`` (empty when none). Demonstrations are trained on only
        through Reanalyse: with ``reanalyse_fraction`` 0 none is built."""
        return self.demonstrations

    def search_q_scale(self, num_buffers: int) -> float:
        """The ``c_scale`` of Gumbel MuZero's ``sigma(Q)`` for a program of ``num_buffers``."""
        if self.q_scale_per_buffer > 0:
            return self.q_scale_per_buffer * num_buffers
        return self.q_scale
