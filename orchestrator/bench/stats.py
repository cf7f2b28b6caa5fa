"""Small statistics for the bench: percentiles and a bootstrap interval for a ratio of means.

Pure Python and seeded, so a report is reproducible from its raw samples.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

BOOTSTRAP_RESAMPLES: Final = 2000
CONFIDENCE: Final = 0.95
_SEED: Final = 7


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between order statistics."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Distribution:
    """Mean and p50/p90/p99 of one quantity."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        return cls(
            mean(values), percentile(values, 50), percentile(values, 90), percentile(values, 99)
        )


@dataclass(frozen=True)
class Ratio:
    """A ratio of means with its bootstrap percentile interval."""

    value: float
    low: float
    high: float
    confidence: float = CONFIDENCE


def ratio_of_means(
    numerator: Sequence[float],
    denominator: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = _SEED,
    confidence: float = CONFIDENCE,
) -> Ratio | None:
    """mean(numerator) / mean(denominator), with a percentile bootstrap interval that resamples
    both arms independently (they are separate servers). None when either side is empty."""
    if not numerator or not denominator or sum(denominator) <= 0:
        return None
    point = _ratio(numerator, denominator)
    rng = random.Random(seed)
    draws = sorted(
        _ratio(_resample(numerator, rng), _resample(denominator, rng)) for _ in range(resamples)
    )
    tail = (1.0 - confidence) / 2.0
    low = percentile(draws, 100.0 * tail)
    high = percentile(draws, 100.0 * (1.0 - tail))
    assert low is not None and high is not None
    return Ratio(point, low, high, confidence)


def mean_with_interval(values: Sequence[float]) -> Ratio | None:
    """The mean of `values` with its percentile bootstrap interval (as a Ratio over 1)."""
    return ratio_of_means(values, [1.0])


def _ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    bottom = sum(denominator) / len(denominator)
    return (sum(numerator) / len(numerator)) / bottom if bottom > 0 else math.inf


def _resample(values: Sequence[float], rng: random.Random) -> list[float]:
    return rng.choices(values, k=len(values))
