"""``egrl``'s population: chromosome sampling, crossover, mutation, selection, generations."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.solvers.egrl.population import (
    PRIOR_FLOOR,
    Chromosome,
    PolicyGenes,
    crossover_chromosomes,
    crossover_policies,
    initial_chromosome,
    mutate_chromosome,
    mutate_policy,
    next_generation,
    rank,
    sample_chromosome,
    seed_chromosome,
    tournament,
)


def _chromosome(units: int, seed: int, temperature: float = 1.0) -> Chromosome:
    return initial_chromosome(units, 1.0, 1.0, temperature, np.random.default_rng(seed))


def test_sampling_follows_softmax_of_prior_over_temperature() -> None:
    units = 20_000
    prior = np.tile(np.log(np.array([0.6, 0.3, 0.1], dtype=np.float32)), (units, 1))
    frequencies = (
        np.bincount(
            sample_chromosome(
                Chromosome(prior, np.ones(units, np.float32)), np.random.default_rng(0)
            ),
            minlength=3,
        )
        / units
    )
    assert frequencies == pytest.approx([0.6, 0.3, 0.1], abs=0.015)
    # Temperature 0.5 squares the probabilities (renormalized): 0.36, 0.09, 0.01 over 0.46.
    hot = sample_chromosome(
        Chromosome(prior, np.full(units, 0.5, np.float32)), np.random.default_rng(1)
    )
    assert np.bincount(hot, minlength=3) / units == pytest.approx(
        np.array([0.36, 0.09, 0.01]) / 0.46, abs=0.015
    )
    cold = sample_chromosome(
        Chromosome(prior, np.full(units, 0.01, np.float32)), np.random.default_rng(2)
    )
    assert (cold == 0).all() and cold.dtype == np.int8


def test_sampling_is_reproducible_per_generator() -> None:
    ch = _chromosome(500, 0)
    a = sample_chromosome(ch, np.random.default_rng([7, 1, 2]))
    assert (a == sample_chromosome(ch, np.random.default_rng([7, 1, 2]))).all()
    assert (a != sample_chromosome(ch, np.random.default_rng([7, 1, 3]))).any()


def test_initial_chromosome() -> None:
    ch = initial_chromosome(1000, 2.0, 0.0, 0.5, np.random.default_rng(0))
    assert ch.prior.shape == (1000, 3) and ch.prior.dtype == np.float32
    assert np.allclose(ch.prior, [2.0, 1.0, 0.0]) and np.allclose(ch.temperature, 0.5)


def test_single_point_crossover_of_chromosomes() -> None:
    a, b = _chromosome(50, 0, 0.5), _chromosome(50, 1, 2.0)
    child = crossover_chromosomes(a, b, np.random.default_rng(3))
    from_a = np.all(child.prior == a.prior, axis=1)
    from_b = np.all(child.prior == b.prior, axis=1)
    point = int(np.argmin(from_a))
    assert 0 < point < 50 and from_a[:point].all() and from_b[point:].all()
    assert (child.temperature[:point] == 0.5).all() and (child.temperature[point:] == 2.0).all()


def test_single_point_crossover_of_policies() -> None:
    a, b = PolicyGenes(np.zeros(100, np.float32)), PolicyGenes(np.ones(100, np.float32))
    theta = crossover_policies(a, b, np.random.default_rng(0)).theta
    point = int(np.argmax(theta))
    assert 0 < point < 100 and not theta[:point].any() and theta[point:].all()


def test_seeding_a_chromosome_from_a_policy() -> None:
    probs = np.array([[0.7, 0.2, 0.1], [0.0, 1.0, 0.0]])
    ch = seed_chromosome(probs, np.ones(2, np.float32))
    assert np.allclose(ch.prior[0], np.log([0.7, 0.2, 0.1]))
    assert np.allclose(ch.prior[1], np.log([PRIOR_FLOOR, 1.0, PRIOR_FLOOR]))


def test_mutation_changes_a_share_of_genes() -> None:
    rng = np.random.default_rng(0)
    ch = _chromosome(10_000, 0)
    mutated = mutate_chromosome(ch, 1.0, 0.1, rng)
    changed = np.any(mutated.prior != ch.prior, axis=1)
    assert changed.mean() == pytest.approx(0.1, abs=0.015)
    assert (mutated.temperature[~changed] == ch.temperature[~changed]).all()
    assert (mutated.temperature[changed] != ch.temperature[changed]).all()
    assert (mutated.temperature >= 1e-2).all() and (mutated.temperature <= 1e2).all()
    assert not np.may_share_memory(mutated.prior, ch.prior)  # the parent is left as it was
    genes = PolicyGenes(np.linspace(-1, 1, 10_000).astype(np.float32))
    theta = mutate_policy(genes, 0.1, 0.2, rng).theta
    moved = theta != genes.theta
    assert moved.mean() == pytest.approx(0.2, abs=0.02) and theta.dtype == np.float32
    relative = np.abs(theta - genes.theta)[moved] / (np.abs(genes.theta[moved]) + 0.01)
    assert relative.std() == pytest.approx(
        0.1 * np.sqrt(1 - 2 / np.pi), rel=0.1
    )  # half-normal of sigma 0.1
    assert (mutate_policy(genes, 0.1, 1.0, rng).theta != genes.theta).all()


def test_rank_and_tournament() -> None:
    assert rank([0.1, 0.5, 0.5, -1.0]).tolist() == [1, 2, 0, 3]
    fitness = [0.0, 3.0, 1.0, 2.0]
    rng = np.random.default_rng(0)
    assert (
        tournament([0, 2, 3], fitness, 50, rng) == 3
    )  # a large tournament finds the best candidate
    assert tournament([2], fitness, 3, rng) == 2
    wins = [tournament([0, 1, 2, 3], fitness, 1, rng) for _ in range(400)]
    assert set(wins) == {0, 1, 2, 3}  # size 1: uniform


def _population():
    rng = np.random.default_rng(0)
    policies = [PolicyGenes(rng.standard_normal(20).astype(np.float32)) for _ in range(3)]
    chromosomes = [_chromosome(30, i) for i in range(5)]
    return policies + chromosomes


@pytest.mark.parametrize("reserve", [False, True])
def test_next_generation_keeps_elites_and_the_composition(reserve: bool) -> None:
    population = _population()
    fitness = [0.1, 0.9, 0.2, 0.3, 0.8, 0.4, 0.5, 0.6]
    asked: list[PolicyGenes] = []

    def policy_probs(genes: PolicyGenes) -> np.ndarray:
        asked.append(genes)
        return np.full((30, 3), 1.0 / 3.0)

    out = next_generation(
        population,
        fitness,
        num_elites=2,
        tournament_size=2,
        crossover=1.0,
        mutation=1.0,
        mutation_rate=0.5,
        sigma=0.1,
        prior_sigma=1.0,
        policy_probs=policy_probs,
        rng=np.random.default_rng(4),
        reserve=reserve,
    )
    assert (
        out.elites == [1, 4]
        and out.population[0] is population[1]
        and out.population[1] is population[4]
    )
    assert out.kinds[:2] == ["elite", "elite"] and len(out.population) == 8
    others = out.population[2:]
    assert sum(isinstance(x, PolicyGenes) for x in out.population) == 3 - reserve
    assert sum(isinstance(x, Chromosome) for x in out.population) == 5
    if reserve:
        assert out.reserved == 3 and out.population[3] is None and out.kinds[3] == "reserved"
    else:
        assert out.reserved is None and None not in out.population
    assert all(k.endswith("+mutated") for k in out.kinds[2:] if k != "reserved")
    assert all(x is not population[i] for x in others for i in range(8))  # every child is new
    seeded = [k for k in out.kinds if k.startswith("seeded")]
    assert len(asked) == len(seeded)  # a policy elite crossed with a chromosome seeds it


def test_reserved_slot_is_a_chromosome_when_every_policy_is_an_elite() -> None:
    population = _population()
    fitness = [0.9, 0.8, 0.7, 0.1, 0.1, 0.1, 0.1, 0.1]
    out = next_generation(
        population,
        fitness,
        num_elites=3,
        tournament_size=2,
        crossover=0.0,
        mutation=0.0,
        mutation_rate=0.1,
        sigma=0.1,
        prior_sigma=1.0,
        policy_probs=lambda g: np.zeros((30, 3)),
        rng=np.random.default_rng(0),
        reserve=True,
    )
    assert out.population[:3] == population[:3] and out.reserved == 7 and out.population[7] is None
    assert out.kinds[3:7] == ["copy"] * 4 and all(
        isinstance(x, Chromosome) for x in out.population[3:7]
    )
