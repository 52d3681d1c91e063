"""EGRL's mixed population: graph policies and Boltzmann chromosomes, and how it evolves.

Two encodings of an individual (EGRL section 3; MARL section 4.2):

* :class:`PolicyGenes`: a graph policy, its flax parameters as one flat float32
  vector (``jax.flatten_util.ravel_pytree`` order); its proposal comes from the GNN.
* :class:`Chromosome`: a Boltzmann chromosome: prior logits ``[U, 3]`` and a
  temperature ``[U]`` per decision unit (MARL: "a set of prior probabilities and
  associated temperature for each node"); a proposal samples each unit from
  ``softmax(prior / T)`` (:func:`sample_chromosome`), with no network: fast.

The operators (MARL Algorithm 1; :func:`next_generation` puts them together):
ranking by fitness, ``e`` elites kept unchanged, tournament selection with
replacement, single-point crossover between two individuals of one encoding (over the
unit order for chromosomes, over the flat weight vector for policies), crossover
across encodings by seeding a chromosome's priors from a policy's output
(:func:`seed_chromosome`), and Gaussian mutation (:func:`mutate_policy`,
:func:`mutate_chromosome`). All randomness comes from the ``numpy`` generator passed
in; nothing here imports JAX (the policy's output probabilities are passed in).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PolicyGenes",
    "Chromosome",
    "Individual",
    "Offspring",
    "initial_chromosome",
    "sample_chromosome",
    "seed_chromosome",
    "crossover_chromosomes",
    "crossover_policies",
    "mutate_policy",
    "mutate_chromosome",
    "rank",
    "tournament",
    "next_generation",
    "PRIOR_FLOOR",
]

PRIOR_FLOOR = 1e-4
"""Smallest probability a seeded chromosome's prior keeps (``log`` of it bounds the logits)."""


@dataclass(frozen=True, eq=False)
class PolicyGenes:
    """A graph-policy individual: its network parameters, flat float32 ``[P]``."""

    theta: np.ndarray


@dataclass(frozen=True, eq=False)
class Chromosome:
    """A Boltzmann chromosome: ``prior`` float32 ``[U, 3]`` logits, ``temperature``
    float32 ``[U]`` (> 0)."""

    prior: np.ndarray
    temperature: np.ndarray


Individual = PolicyGenes | Chromosome


def initial_chromosome(
    num_units: int, bias: float, scale: float, temperature: float, rng: np.random.Generator
) -> Chromosome:
    """Priors ``bias · (1, 1/2, 0) + N(0, scale²)`` per unit, every temperature ``temperature``."""
    prior = bias * np.array([1.0, 0.5, 0.0]) + scale * rng.standard_normal((num_units, 3))
    return Chromosome(prior.astype(np.float32), np.full(num_units, temperature, dtype=np.float32))


def sample_chromosome(chromosome: Chromosome, rng: np.random.Generator) -> np.ndarray:
    """One proposal: per unit an action drawn from ``softmax(prior / T)`` (Gumbel-max):
    int8 ``[U]``."""
    gumbel = rng.gumbel(size=chromosome.prior.shape)
    return np.argmax(chromosome.prior / chromosome.temperature[:, None] + gumbel, axis=1).astype(
        np.int8
    )


def seed_chromosome(probs: np.ndarray, temperature: np.ndarray) -> Chromosome:
    """A chromosome whose prior encodes a policy's action probabilities ``probs``
    ``[U, 3]`` (MARL Algorithm 1: "use a to encode the prior of the Boltzmann
    chromosome"): ``prior = log max(probs, PRIOR_FLOOR)``; at temperature 1 it samples
    the policy's distribution."""
    prior = np.log(np.maximum(np.asarray(probs, dtype=np.float64), PRIOR_FLOOR))
    return Chromosome(prior.astype(np.float32), np.asarray(temperature, dtype=np.float32).copy())


def crossover_chromosomes(a: Chromosome, b: Chromosome, rng: np.random.Generator) -> Chromosome:
    """Single-point crossover over the unit order: ``a``'s units before a random point,
    ``b``'s from it on (priors and temperatures alike)."""
    n = a.prior.shape[0]
    point = int(rng.integers(1, n)) if n > 1 else 0
    return Chromosome(
        np.concatenate([a.prior[:point], b.prior[point:]]),
        np.concatenate([a.temperature[:point], b.temperature[point:]]),
    )


def crossover_policies(a: PolicyGenes, b: PolicyGenes, rng: np.random.Generator) -> PolicyGenes:
    """Single-point crossover over the flat weight vector."""
    n = a.theta.shape[0]
    point = int(rng.integers(1, n)) if n > 1 else 0
    return PolicyGenes(np.concatenate([a.theta[:point], b.theta[point:]]))


def mutate_policy(
    genes: PolicyGenes, sigma: float, rate: float, rng: np.random.Generator
) -> PolicyGenes:
    """Gaussian mutation of a share ``rate`` of the weights (each chosen independently):
    ``w += sigma · (|w| + 0.01) · N(0, 1)`` (CERL's noise relative to the weight's size)."""
    theta = genes.theta
    chosen = rng.random(theta.shape[0]) < rate
    noise = rng.standard_normal(theta.shape[0]) * sigma * (np.abs(theta) + 0.01)
    return PolicyGenes(np.where(chosen, theta + noise, theta).astype(np.float32))


def mutate_chromosome(
    chromosome: Chromosome, sigma: float, rate: float, rng: np.random.Generator
) -> Chromosome:
    """Gaussian mutation of a share ``rate`` of the units: their prior logits
    ``+= N(0, sigma²)`` and their log temperature ``+= N(0, sigma²)`` (clipped to
    ``[1e-2, 1e2]``)."""
    n = int(chromosome.prior.shape[0])
    chosen = rng.random(n) < rate
    prior = chromosome.prior + np.where(chosen[:, None], sigma * rng.standard_normal((n, 3)), 0.0)
    log_t = np.log(chromosome.temperature) + np.where(chosen, sigma * rng.standard_normal(n), 0.0)
    return Chromosome(
        prior.astype(np.float32), np.clip(np.exp(log_t), 1e-2, 1e2).astype(np.float32)
    )


def rank(fitness: Sequence[float]) -> np.ndarray:
    """Indices from the fittest to the weakest (ties: the lower index first)."""
    return np.argsort(-np.asarray(fitness, dtype=np.float64), kind="stable")


def tournament(
    candidates: Sequence[int], fitness: Sequence[float], size: int, rng: np.random.Generator
) -> int:
    """The fittest of ``size`` candidates drawn with replacement (ties: first drawn)."""
    drawn = rng.integers(0, len(candidates), size=size)
    best = int(candidates[int(drawn[0])])
    for i in drawn[1:]:
        if fitness[candidates[int(i)]] > fitness[best]:
            best = int(candidates[int(i)])
    return best


@dataclass(frozen=True)
class Offspring:
    """The next generation and how it was made.

    ``population``: the individuals, elites first, then the policies, then the
    chromosomes; ``None`` at ``reserved`` (if not ``None``), the slot the caller fills
    with the learner's actor. ``elites``: the elites' indices in the old population;
    ``kinds``: per new individual, ``"elite"``, ``"crossover"``, ``"seeded"`` (a
    chromosome seeded from a policy), ``"copy"`` or ``"reserved"``, with ``"+mutated"``
    appended when mutated.
    """

    population: list[Individual | None]
    elites: list[int]
    kinds: list[str]
    reserved: int | None


def next_generation(
    population: Sequence[Individual],
    fitness: Sequence[float],
    *,
    num_elites: int,
    tournament_size: int,
    crossover: float,
    mutation: float,
    mutation_rate: float,
    sigma: float,
    prior_sigma: float,
    policy_probs: Callable[[PolicyGenes], np.ndarray],
    rng: np.random.Generator,
    reserve: bool = False,
) -> Offspring:
    """One step of MARL Algorithm 1's evolution, keeping the population's composition.

    Rank by ``fitness``; the top ``num_elites`` (of either encoding) pass unchanged.
    Every other slot keeps the old population's count of each encoding: for a slot of
    encoding ``E`` (policies first, then chromosomes), parent ``b`` is the winner of a
    tournament among the old individuals of encoding ``E``; with probability
    ``crossover`` it is crossed with a random elite ``a``: single-point crossover if
    ``a`` has encoding ``E``; if ``a`` is a policy and ``E`` a chromosome, the child is
    a chromosome seeded from ``a``'s action probabilities (``policy_probs(a)``, [U, 3])
    at ``b``'s temperatures; a policy slot with a chromosome elite takes ``b`` as is
    (there is no chromosome-to-network transfer in EGRL). Each child is then mutated
    with probability ``mutation``.

    ``reserve``: leave one slot empty for the learner's actor (MARL Algorithm 1: it is
    copied "into the population for the weakest"): the last policy slot, or the last
    chromosome slot when every policy is an elite (the caller then seeds a chromosome
    from the actor).
    """
    order = rank(fitness)
    elites = [int(i) for i in order[:num_elites]]
    new: list[Individual] = [population[i] for i in elites]
    kinds = ["elite"] * len(elites)
    by_kind = {
        PolicyGenes: [i for i, ind in enumerate(population) if isinstance(ind, PolicyGenes)],
        Chromosome: [i for i, ind in enumerate(population) if isinstance(ind, Chromosome)],
    }
    slots = {
        encoding: len(by_kind[encoding]) - sum(isinstance(population[i], encoding) for i in elites)
        for encoding in (PolicyGenes, Chromosome)
    }
    reserved_kind = None
    if reserve:
        reserved_kind = PolicyGenes if slots[PolicyGenes] > 0 else Chromosome
        slots[reserved_kind] -= 1
    new_population: list[Individual | None] = list(new)
    reserved: int | None = None
    for encoding in (PolicyGenes, Chromosome):
        for _ in range(slots[encoding]):
            b = population[tournament(by_kind[encoding], fitness, tournament_size, rng)]
            child: Individual = b
            kind = "copy"
            if elites and rng.random() < crossover:
                a = population[elites[int(rng.integers(0, len(elites)))]]
                if isinstance(a, PolicyGenes) and isinstance(b, PolicyGenes):
                    child, kind = crossover_policies(a, b, rng), "crossover"
                elif isinstance(a, Chromosome) and isinstance(b, Chromosome):
                    child, kind = crossover_chromosomes(a, b, rng), "crossover"
                elif isinstance(a, PolicyGenes) and isinstance(b, Chromosome):
                    child, kind = seed_chromosome(policy_probs(a), b.temperature), "seeded"
            if rng.random() < mutation:
                if isinstance(child, PolicyGenes):
                    child = mutate_policy(child, sigma, mutation_rate, rng)
                else:
                    child = mutate_chromosome(child, prior_sigma, mutation_rate, rng)
                kind += "+mutated"
            new_population.append(child)
            kinds.append(kind)
        if encoding is reserved_kind:
            reserved = len(new_population)
            new_population.append(None)
            kinds.append("reserved")
    return Offspring(new_population, elites, kinds, reserved)
