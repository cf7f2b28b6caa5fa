"""What engines report on /metrics, in engine-neutral types: speculative acceptance and the time
requests spend in each phase over the interval between two scrapes. Each engine module reads its
own metric names into these (`Engine.metrics`); `orchestrator.bench.metrics` scrapes and asks the
engines in turn."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

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
    per_position: tuple[float, ...] | None = None
    """Share of drafts whose token at each position (0 = first) was accepted; only engines that
    count acceptance per position (vLLM)."""
    last_batch: bool = False
    """The values are the last batch's (gauges), not the interval's: smooth them over time."""


@dataclass(frozen=True)
class Serving:
    """What one server did between two scrapes: how fast its finished requests decoded, and how
    busy it was."""

    tpot_s: float | None
    """Mean time per output token of the requests that finished in the interval."""
    finished: float
    """Requests that finished in the interval."""
    busy_s: float
    """Sum of the end-to-end latencies of those requests: over the interval's length it is the
    mean number of requests in the server (Little's law)."""
    running: float
    waiting: float


@dataclass(frozen=True)
class PhaseTimes:
    """Server-side mean seconds per request in each phase over one level."""

    queue_s: float | None
    prefill_s: float | None
    decode_s: float | None


def labelled(name: str, label: str, value: object) -> str:
    """The Samples key of one labelled series, as `parse_prometheus(..., by_label=label)` keeps
    it beside the sum over all label sets."""
    return f'{name}{{{label}="{value}"}}'


def serving_window(
    before: Samples, after: Samples, prefix: str, running: str, waiting: str
) -> Serving | None:
    """`Serving` from the per-request histograms `<prefix>request_time_per_output_token_seconds`
    and `<prefix>e2e_request_latency_seconds`, which vLLM and SGLang name alike."""
    tpot = f"{prefix}request_time_per_output_token_seconds"
    if f"{tpot}_count" not in after:
        return None
    count = delta(before, after, f"{tpot}_count")
    latency = f"{prefix}e2e_request_latency_seconds"
    return Serving(
        tpot_s=delta(before, after, f"{tpot}_sum") / count if count > 0 else None,
        finished=delta(before, after, f"{latency}_count"),
        busy_s=delta(before, after, f"{latency}_sum"),
        running=after.get(running, 0.0),
        waiting=after.get(waiting, 0.0),
    )


def delta(before: Samples, after: Samples, name: str) -> float:
    """How much a counter grew between two scrapes."""
    return after.get(name, 0.0) - before.get(name, 0.0)


class NoServing:
    """For engines whose /metrics have no per-request time-per-output-token histogram."""

    times_requests: ClassVar[bool] = False

    def serving(self, before: Samples, after: Samples) -> Serving | None:
        del before, after
        return None


class NoPhaseTimes:
    """For engines that expose no per-phase request histograms."""

    def phase_times(self, before: Samples, after: Samples) -> PhaseTimes | None:
        del before, after
        return None
