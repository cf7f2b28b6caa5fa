"""Percentiles and the bootstrap interval for a ratio of means."""

from __future__ import annotations

import random

import pytest

from orchestrator.bench.stats import Distribution, percentile, ratio_of_means


def test_percentile_interpolates() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 99) == 5.0
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 100) == 3.0


def test_distribution() -> None:
    d = Distribution.of([float(i) for i in range(1, 101)])
    assert d.mean == pytest.approx(50.5)
    assert d.p50 == pytest.approx(50.5)
    assert d.p99 == pytest.approx(99.01)


def test_ratio_interval_brackets_the_truth_and_is_reproducible() -> None:
    rng = random.Random(1)
    fast = [rng.gauss(150.0, 10.0) for _ in range(40)]
    slow = [rng.gauss(100.0, 10.0) for _ in range(40)]
    ratio = ratio_of_means(fast, slow)
    assert ratio is not None
    assert ratio.low < 1.5 < ratio.high
    assert ratio.low <= ratio.value <= ratio.high
    assert ratio.low > 1.3 and ratio.high < 1.7
    assert ratio_of_means(fast, slow) == ratio


def test_ratio_needs_both_sides() -> None:
    assert ratio_of_means([], [1.0]) is None
    assert ratio_of_means([1.0], []) is None
