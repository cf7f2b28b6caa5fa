"""Small statistics for the bench: percentiles and bootstrap intervals for ratios of means and
of rates.

Pure Python and seeded, so a report is reproducible from its raw samples.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

_T = TypeVar("_T")

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
    return ratio_of_rates(
        [(x, 1.0) for x in numerator],
        [(y, 1.0) for y in denominator],
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )


def ratio_of_rates(
    numerator: Sequence[tuple[float, float]],
    denominator: Sequence[tuple[float, float]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = _SEED,
    confidence: float = CONFIDENCE,
) -> Ratio | None:
    """One sample's rate over the other's, each rate the sum of its amounts over the sum of its
    times (pairs `(amount, time)`, e.g. a request's output tokens and its latency), with a
    percentile bootstrap interval that resamples the pairs of both arms independently. A rate of
    sums, unlike a mean of per-pair rates, cannot rise because some pairs got faster at the
    others' expense. None when either side is empty or has no time."""
    if not numerator or not denominator or not 0 < _rate(denominator) < math.inf:
        return None
    point = _quotient(numerator, denominator)
    rng = random.Random(seed)
    draws = sorted(
        _quotient(_resample(numerator, rng), _resample(denominator, rng)) for _ in range(resamples)
    )
    tail = (1.0 - confidence) / 2.0
    low = percentile(draws, 100.0 * tail)
    high = percentile(draws, 100.0 * (1.0 - tail))
    assert low is not None and high is not None
    return Ratio(point, low, high, confidence)


def mean_with_interval(values: Sequence[float]) -> Ratio | None:
    """The mean of `values` with its percentile bootstrap interval (as a Ratio over 1)."""
    return ratio_of_means(values, [1.0])


def _rate(pairs: Sequence[tuple[float, float]]) -> float:
    time = sum(t for _, t in pairs)
    return sum(a for a, _ in pairs) / time if time > 0 else math.inf


def _quotient(
    numerator: Sequence[tuple[float, float]], denominator: Sequence[tuple[float, float]]
) -> float:
    bottom = _rate(denominator)
    return _rate(numerator) / bottom if 0 < bottom < math.inf else math.inf


def _resample(values: Sequence[_T], rng: random.Random) -> list[_T]:
    return rng.choices(values, k=len(values))
