"""Reward against simulated latency."""

from __future__ import annotations

from mallocgame.bench.correlation import format_correlation, reward_latency_correlation


def test_reward_and_latency_are_negatively_correlated() -> None:
    row = reward_latency_correlation("xla-v1/resnet_infer", random_games=8)
    assert row.solutions == 10
    assert row.pearson < -0.5  # more reward, less latency
    assert 1.0 < row.min_speedup <= row.max_speedup
    assert "xla-v1/resnet_infer | 10 |" in format_correlation([row])
