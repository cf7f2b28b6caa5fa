"""What engines report on /metrics, in engine-neutral types: speculative acceptance and the time
requests spend in each phase over the interval between two scrapes. Each engine module reads its
own metric names into these (`Engine.metrics`); `orchestrator.bench.metrics` scrapes and asks the
engines in turn."""

from __future__ import annotations

import math
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
    """What one server did between two scrapes: how long its finished requests took per output
    token, and how busy it was."""

    tpot_s: float | None
    """Mean time per output token of the requests that finished in the interval, as the engine
    times it: from the first token on, so without the time a request waited or prefilled."""
    finished: float
    """Requests that finished in the interval."""
    busy_s: float
    """Sum of the end-to-end latencies of those requests: over the interval's length it is the
    mean number of requests in the server (Little's law)."""
    running: float
    waiting: float
    output_tokens: float | None = None
    """Output tokens of the requests that finished in the interval (None: not reported)."""

    @property
    def seconds_per_token(self) -> float | None:
        """Request time per output token: the finished requests' end-to-end latencies (queue,
        prefill and decode) over their output tokens. A server that admits fewer requests at
        once decodes those faster (a lower TPOT) while the rest wait; this counts the wait. At a
        given load it is the inverse of the output tokens per second of request time that
        `bench` compares (Σ tokens / Σ latency). None without a finished token, or when the
        counters make no finite figure (a tenant's /metrics may claim 1e-300 tokens)."""
        if self.output_tokens is None or self.finished <= 0:
            return None
        return _per(self.busy_s, self.output_tokens)


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
    before: Samples, after: Samples, prefix: str, names: ServingNames
) -> Serving | None:
    """`Serving` from the per-request histograms `<prefix>e2e_request_latency_seconds` and
    `<prefix>request_time_per_output_token_seconds`, which vLLM and SGLang name alike, and the
    engine's count of the finished requests' output tokens; None when the scrape has no
    end-to-end histogram."""
    latency = f"{prefix}e2e_request_latency_seconds"
    if f"{latency}_count" not in after:
        return None
    tpot = f"{prefix}request_time_per_output_token_seconds"
    return Serving(
        tpot_s=_per(delta(before, after, f"{tpot}_sum"), delta(before, after, f"{tpot}_count")),
        finished=delta(before, after, f"{latency}_count"),
        busy_s=delta(before, after, f"{latency}_sum"),
        running=after.get(names.running, 0.0),
        waiting=after.get(names.waiting, 0.0),
        output_tokens=delta(before, after, names.output_tokens)
        if names.output_tokens in after
        else None,
    )


@dataclass(frozen=True)
class ServingNames:
    """An engine's names for what `serving_window` reads besides the two histograms."""

    running: str
    waiting: str
    output_tokens: str
    """A counter of the output tokens of finished requests, grown as each finishes (so it counts
    the same requests as the end-to-end histogram)."""


def _per(total: float, count: float) -> float | None:
    """total / count for a count of at least one (requests, tokens), when finite and not negative;
    None otherwise: what a server reports cannot put Inf or NaN into a status."""
    if count < 1:
        return None
    value = total / count
    return value if math.isfinite(value) and value >= 0 else None


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
