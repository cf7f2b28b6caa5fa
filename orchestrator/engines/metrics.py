"""What engines report on /metrics, in engine-neutral types: speculative acceptance and the time
requests spend in each phase over the interval between two scrapes. Each engine module reads its
own metric names into these (`Engine.metrics`); `orchestrator.bench.metrics` scrapes and asks the
engines in turn."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.engines.names import EngineName

Samples = Mapping[str, float]
"""Metric name (without labels) -> value summed over all label sets."""


@dataclass(frozen=True)
class Acceptance:
    """Speculative acceptance over one level, as the engine reports it."""

    engine: EngineName
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None


@dataclass(frozen=True)
class PhaseTimes:
    """Server-side mean seconds per request in each phase over one level."""

    queue_s: float | None
    prefill_s: float | None
    decode_s: float | None


def delta(before: Samples, after: Samples, name: str) -> float:
    """How much a counter grew between two scrapes."""
    return after.get(name, 0.0) - before.get(name, 0.0)


class NoPhaseTimes:
    """For engines that expose no per-phase request histograms."""

    def phase_times(self, before: Samples, after: Samples) -> PhaseTimes | None:
        del before, after
        return None
